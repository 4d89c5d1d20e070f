"""Folio migration between nodes: moving an isolated folio, and migrating a misplaced one.

Models mm/migrate.c migrate_pages()/migrate_pages_batch() for the callers tierlab has so far:
demotion from reclaim (MR_DEMOTION, alloc_demote_folio) and promotion (MR_NUMA_MISPLACED,
alloc_misplaced_dst_folio, migrate_misplaced_folio_batch of the page-cache RFC). A batch costs one
migrate_pages() set-up and TLB shootdown plus, per folio, the fixed migration work and the copy
(cost.py). The destination folio inherits the source's flags (folio_migrate_flags) and goes to the
head of the destination node's LRU list; its PTE is rebuilt as remove_migration_pte() does (memory.py
describes the PTE state).

The NUMA-balancing side (MR_NUMA_MISPLACED): migrate_balanced_pgdat(),
migrate_misplaced_folio_prepare() (the destination check that wakes its kswapd, and isolation) and
migrate_misplaced_folio() (alloc_misplaced_dst_folio: no reclaim), used by hint faults
(memory.py do_numa_page) and the page-cache promotion task work.

Simplifications: migration of an isolated folio succeeds whenever the destination allocation does
(no -EAGAIN from elevated refcounts, no writeback waits); the destination folio is put straight on
the LRU instead of through the per-CPU lru_add batch.
"""
from __future__ import annotations

from ._jit import jit, jit_inline

from .cost import migrate_batch_ns, migrate_folio_ns
from .lru import lruvec_add_folio, lruvec_del_folio
from .buddy import buddy_on, hold_folio_frames
from .mmzone import free_folio, take_pages, wakeup_kswapd, zone_alloc_ok, zone_free_pages
from .params import P
from .state import F2_ANON, PG_DIRTY, PG_ISOLATED, PG_LRU, PG_PROTNONE, WMARK_HIGH, WMARK_MIN, folio_nr_pages
from .tlb import current_cpu, migrc_flush_free_folios
from .vmstat import Vm


@jit_inline
def move_isolated_folio(s, p, head, dst, keep_src, now):
    """Migrate an isolated folio (off the LRU) to `dst` and put it on dst's LRU. Returns the cost in ns.
    The caller has checked that `dst` can take it. `keep_src`: MIGRC deferred the folio's flush, so
    its source stays allocated (migrc_keep_folio) until a flush frees it (tlb.py)."""
    src = s.pages.node[head]
    nr = folio_nr_pages(s, head)
    cost = migrate_folio_ns(s, p, src, dst, nr, now)
    if keep_src:
        s.pgdat[src].migrc_batch_nr += nr
        if buddy_on(s):
            hold_folio_frames(s, head)
    else:
        free_folio(s, head)
    take_pages(s, dst, head, nr)
    # remove_migration_pte(): the new PTE keeps writable and young but is built from the VMA's
    # protection, so a PROT_NONE (hint-fault) PTE comes back accessible -- and read-only, since
    # change_prot_numa() dropped its write bit (memory.py). It keeps dirty only where migration
    # entries carry it (swap_migration_ad_supported); for anon the folio bit is the PTE's here
    # (file folios keep PG_dirty: it is their write-back state too)
    s.pages.flags[head] &= ~(PG_ISOLATED | PG_PROTNONE)
    if p[P.MIGRATION_ENTRY_AD] == 0 and (s.pages.flags2[head] & F2_ANON):
        s.pages.flags[head] &= ~PG_DIRTY
    lruvec_add_folio(s, head)
    s.counters[dst, Vm.PGMIGRATE_SUCCESS] += nr
    return cost


@jit_inline
def batch_cost(p, nr_folios):
    """One migrate_pages() call per NR_MAX_BATCHED_MIGRATION (512) pages."""
    if nr_folios == 0:
        return 0.0
    return migrate_batch_ns(p) * ((nr_folios + 511) // 512)


@jit_inline
def migrate_balanced_pgdat(s, dst, nr):
    """Room for nr more pages on dst while staying at or above WMARK_HIGH."""
    return zone_free_pages(s, dst) >= s.pgdat[dst].wmark[WMARK_HIGH] + nr


@jit_inline
def migrate_misplaced_folio_prepare(s, p, head, dst, nr, now):
    """Refuse unless dst keeps WMARK_HIGH after taking the folio (then wake its kswapd: in tiering
    mode that is how promotion makes demotion happen), and isolate the folio from its LRU
    (folio_isolate_lru fails for a folio still in an lru_add batch or already isolated)."""
    if not migrate_balanced_pgdat(s, dst, nr):
        wakeup_kswapd(s, p, dst, now)
        return False
    if not (s.pages.flags[head] & PG_LRU) or (s.pages.flags[head] & PG_ISOLATED):
        return False
    lruvec_del_folio(s, head)
    s.pages.flags[head] |= PG_ISOLATED
    s.pgdat[s.pages.node[head]].nr_isolated += nr
    return True


@jit
def migrate_misplaced_folio(s, p, head, dst, nr, keep_src, now):
    """Migrate an isolated folio to dst (alloc_misplaced_dst_folio: no reclaim, so dst must stay
    above WMARK_MIN; a failed allocation passes MIGRC's pause), or put it back on its LRU. Counts
    numa_pages_migrated, and pgpromote_success for a move from a lower tier into the top tier.
    `keep_src` as for move_isolated_folio. Returns (migrated, cost)."""
    src = s.pages.node[head]
    s.pgdat[src].nr_isolated -= nr
    if not zone_alloc_ok(s, dst, nr, WMARK_MIN):
        migrc_flush_free_folios(s, current_cpu(s))
        s.pages.flags[head] &= ~PG_ISOLATED
        lruvec_add_folio(s, head)
        s.counters[src, Vm.PGMIGRATE_FAIL] += nr
        return False, 0.0
    cost = move_isolated_folio(s, p, head, dst, keep_src, now)
    s.counters[dst, Vm.NUMA_PAGES_MIGRATED] += nr
    if s.pgdat[dst].tier == 0 and s.pgdat[src].tier != 0:
        s.counters[dst, Vm.PGPROMOTE_SUCCESS] += nr
    return True, cost
