"""Folio migration between nodes: moving an isolated folio, and migrating a misplaced one.

Models mm/migrate.c migrate_pages()/migrate_pages_batch() for its callers: demotion from reclaim
(MR_DEMOTION, alloc_demote_folio), promotion (MR_NUMA_MISPLACED, alloc_misplaced_dst_folio,
migrate_misplaced_folio_batch of the page-cache RFC), and the system calls (MR_SYSCALL,
alloc_migration_target): move_pages(2)'s do_pages_move() here, migrate_pages(2) and mbind(2)'s
MPOL_MF_MOVE in mempolicy.py. A batch costs one
migrate_pages() set-up and TLB shootdown plus, per folio, the fixed migration work and the copy
(cost.py). The destination folio inherits the source's flags (folio_migrate_flags) and goes to the
head of the destination node's LRU list; its PTE is rebuilt as remove_migration_pte() does (memory.py
describes the PTE state).

The NUMA-balancing side (MR_NUMA_MISPLACED): migrate_balanced_pgdat(),
migrate_misplaced_folio_prepare() (the destination check that wakes its kswapd, and isolation) and
migrate_misplaced_folio() (alloc_misplaced_dst_folio: no reclaim), used by hint faults
(memory.py do_numa_page) and the page-cache promotion task work.

move_pages(2) (do_pages_move, add_page_for_migration, do_move_pages_to_node): the per-CPU
lru_add batches are drained first (lru_cache_disable); then page by page, the page's status is
-EFAULT outside a VMA of the caller's mm or on the zero page (FOLL_DUMP), -ENOENT where no page is
mapped (never touched, swapped out, page cache this mm has no PTE for), the target node when the
folio is there already, -EBUSY when it cannot be isolated (already isolated -- by this call too: a
large folio's pages after the first, as folio_isolate_lru() fails for them in the kernel); an
isolated folio is queued and the queue migrated in batches (migrate_folio_list). A folio the target
cannot take stays where it was; the kernel then returns the number not migrated and leaves their
statuses alone, which is counted here as "not migrated". The outcomes are counted per task
(task.move_status, MP_*), the migrations in pgmigrate_success/fail; NUMA balancing's counters
(numa_pages_migrated, pgpromote_*, pgdemote_*) are not touched, as in the kernel.

Simplifications: migration of an isolated folio succeeds whenever the destination allocation does
(no -EAGAIN from elevated refcounts, no writeback waits); the destination folio is put straight on
the LRU instead of through the per-CPU lru_add batch. alloc_migration_target() for a system call
(GFP_HIGHUSER_MOVABLE | __GFP_THISNODE) may reclaim on the target node in the kernel; here it
takes the folio while the target stays above its MIN watermark (waking its kswapd below LOW) and
fails otherwise. A folio mapped by more than one process (-EACCES without MPOL_MF_MOVE_ALL)
cannot occur: a model page has one mapping. The per-page lookup of move_pages is inside
migrate_folio_ns (measured through move_pages); a page not moved costs nothing beyond the call.
"""
from __future__ import annotations

import numpy as np

from ._jit import jit, jit_inline

from .cost import migrate_batch_ns, migrate_folio_ns
from .lru import drain_or_resume, lruvec_add_folio, lruvec_del_folio
from .buddy import buddy_on, hold_folio_frames
from .mmzone import (
    alloc_nowait_ok, free_folio, take_pages, wakeup_kswapd, zone_alloc_ok, zone_free_pages, zone_watermark_ok,
)
from .params import P
from .profile import K, charge
from .state import (
    F2_ANON, F2_MAPPED, F2_PRESENT, PG_DIRTY, PG_ISOLATED, PG_LRU, PG_PROTNONE, REGION_ANON, WMARK_HIGH, WMARK_LOW,
    WMARK_MIN, NR_MP_STATUS, folio_head, folio_nr_pages,
)
from .tlb import (
    TLB_UBC, current_cpu, folio_tlb_mm, migrc_batch_flush, migrc_can_defer, shootdown_ns, try_to_migrate_tlb,
)
from .vmstat import Vm

NR_MAX_BATCHED_MIGRATION = 512   # mm/migrate.c: pages per migrate_pages_batch() (one TLB flush each)

# move_pages(2)'s outcome per page (the status it stores), counted per task in task.move_status
MP_MOVED = 0       # status = the target node: migrated there by this call
MP_ON_NODE = 1     # status = the target node: the folio was there already
MP_ENOENT = 2      # -ENOENT: no page mapped there (never touched, swapped out, page cache not mapped)
MP_EFAULT = 3      # -EFAULT: outside every VMA of the caller's mm, or the zero page
MP_EBUSY = 4       # -EBUSY: the folio could not be isolated (already isolated)
MP_NOT_MIGRATED = 5  # isolated, but the target could not take it: counted in the call's return value
assert NR_MP_STATUS == 6
MP_NAMES = ("moved", "on_node", "enoent", "efault", "ebusy", "not_migrated")


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
    return migrate_batch_ns(p) * ((nr_folios + NR_MAX_BATCHED_MIGRATION - 1) // NR_MAX_BATCHED_MIGRATION)


@jit_inline
def folio_isolate_lru(s, head):
    """folio_isolate_lru(): off its LRU and marked isolated, counted in the node's nr_isolated;
    False for a folio not on an LRU (still in an lru_add batch) or isolated already."""
    if not (s.pages.flags[head] & PG_LRU) or (s.pages.flags[head] & PG_ISOLATED):
        return False
    lruvec_del_folio(s, head)
    s.pages.flags[head] |= PG_ISOLATED
    s.pgdat[s.pages.node[head]].nr_isolated += folio_nr_pages(s, head)
    return True


@jit_inline
def putback_failed_folio(s, head, nr):
    """A folio whose migration failed goes back on its LRU (putback_movable_pages), pgmigrate_fail."""
    s.pages.flags[head] &= ~PG_ISOLATED
    lruvec_add_folio(s, head)
    s.counters[s.pages.node[head], Vm.PGMIGRATE_FAIL] += nr


@jit_inline
def migrate_balanced_pgdat(s, dst, nr):
    """Room for nr more pages on dst while staying at or above WMARK_HIGH."""
    return zone_free_pages(s, dst) >= s.pgdat[dst].wmark[WMARK_HIGH] + nr


@jit_inline
def migrate_misplaced_folio_prepare(s, p, head, dst, nr, now):
    """Refuse unless dst keeps WMARK_HIGH after taking the folio (then wake its kswapd: in tiering
    mode that is how promotion makes demotion happen), and isolate the folio from its LRU
    (folio_isolate_lru fails for a folio still in an lru_add batch or already isolated); each
    refusal counted in pages on dst (misplaced_no_room_pages, misplaced_isolate_failed_pages)."""
    if not migrate_balanced_pgdat(s, dst, nr):
        s.counters[dst, Vm.MISPLACED_NO_ROOM_PAGES] += nr
        wakeup_kswapd(s, p, dst, now)
        return False
    if not folio_isolate_lru(s, head):
        s.counters[dst, Vm.MISPLACED_ISOLATE_FAILED_PAGES] += nr
        return False
    return True


@jit
def migrate_misplaced_folio(s, p, head, dst, nr, batch, sender, now):
    """Migrate an isolated folio to dst from CPU `sender`, or put it back on its LRU when its
    allocation fails (alloc_misplaced_dst_folio: no reclaim, so dst must stay above WMARK_MIN and
    have the pages on its free lists; a failure passes MIGRC's pause, which frees the held sources:
    mmzone.alloc_nowait_ok). The unmap's TLB side goes into migrate_pages_batch()'s `batch` (or
    MIGRC's read-only one, migrc_can_defer, which keeps the source), for the mm that maps the
    folio accessibly when it is unmapped (folio_tlb_mm; the caller flushes the batch at its end).
    Counts numa_pages_migrated, and pgpromote_success for a move from a lower tier into the top
    tier. Returns (migrated, cost, that mm or NO_MM)."""
    tlb_mm = folio_tlb_mm(s, head, now)
    keep = migrc_can_defer(s, p, head, tlb_mm, nr, sender)
    src = s.pages.node[head]
    s.pgdat[src].nr_isolated -= nr
    if not alloc_nowait_ok(s, dst, nr, WMARK_MIN):
        putback_failed_folio(s, head, nr)
        return False, 0.0, tlb_mm
    cost = move_isolated_folio(s, p, head, dst, keep, now)
    s.counters[dst, Vm.NUMA_PAGES_MIGRATED] += nr
    if s.pgdat[dst].tier == 0 and s.pgdat[src].tier != 0:
        s.counters[dst, Vm.PGPROMOTE_SUCCESS] += nr
    cost += try_to_migrate_tlb(s, p, batch, tlb_mm, head, nr, sender, keep, now)
    return True, cost, tlb_mm


@jit
def migrate_folio_list(s, p, folios, n, dst, now):
    """migrate_pages(MR_SYSCALL, alloc_migration_target) of the n isolated folios in `folios` to
    node dst, one migrate_pages_batch() -- one batched TLB flush -- per NR_MAX_BATCHED_MIGRATION
    pages or per `folios` full. A folio the target cannot take (see the module docstring) goes
    back on its LRU (pgmigrate_fail). Returns (folios not migrated, cost in ns)."""
    sender = current_cpu(s)
    batch = s.tlb_ubc[TLB_UBC]
    cost = 0.0
    failed = 0
    for i in range(n):
        x = folios[i]
        nr = folio_nr_pages(s, x)
        src = s.pages.node[x]
        s.pgdat[src].nr_isolated -= nr
        ok = zone_watermark_ok(s, dst, nr, WMARK_LOW)
        if not ok:
            wakeup_kswapd(s, p, dst, now + np.int64(cost))
            ok = zone_alloc_ok(s, dst, nr, WMARK_MIN)
        if not ok:
            putback_failed_folio(s, x, nr)
            failed += 1
            continue
        t_unmap = now + np.int64(cost)
        tlb_mm = folio_tlb_mm(s, x, t_unmap)
        cost += move_isolated_folio(s, p, x, dst, False, t_unmap)
        cost += try_to_migrate_tlb(s, p, batch, tlb_mm, x, nr, sender, False, t_unmap)
    cost += shootdown_ns(s, p, migrc_batch_flush(s, batch, sender)) + batch_cost(p, n)
    return failed, charge(s, K.MIGRATE_PAGES, cost)


@jit_inline
def queue_folio(s, p, folios, n, queued, head, dst, now):
    """Put an isolated folio on a system call's migration list; a full list (NR_MAX_BATCHED_MIGRATION
    pages, or `folios` full) is migrated to dst at once. Returns (n, queued, folios not migrated,
    cost)."""
    folios[n] = head
    n += 1
    queued += folio_nr_pages(s, head)
    if n == folios.shape[0] or queued >= NR_MAX_BATCHED_MIGRATION:
        failed, cost = migrate_folio_list(s, p, folios, n, dst, now)
        return np.int64(0), np.int64(0), failed, cost
    return n, queued, np.int64(0), 0.0


@jit
def do_pages_move(s, p, task, r, npages, dst, now, folios):
    """move_pages(2) by `task` of the first npages pages of slot r (0: the whole slot) to node dst
    (the module docstring says what each page's status is), one migration batch per call: after a
    batch it returns with task.ctrl_next at 1 + the page to go on from, and the engine calls it again
    in the task's next step, so a large move does not run ahead of the other entities as one
    step. Returns the cost in ns."""
    t = s.task[task]
    st = t.move_status
    mm = s.task[task].mm
    lo = s.regions.start[r]
    hi = s.regions.start[r + 1] if npages <= 0 else min(lo + npages, s.regions.start[r + 1])
    anon = s.regions.kind[r] == REGION_ANON
    ours = s.regions.mm[r] == mm
    n = 0
    queued = 0
    cost, first = drain_or_resume(s, p, t, lo, now)
    for x in range(first, hi):
        if t.ctrl_next != 0:
            break
        if not ours or x >= s.regions.end[r]:
            st[MP_EFAULT] += 1
            continue
        head = folio_head(s, x)
        f2 = s.pages.flags2[head]
        if not (f2 & F2_PRESENT):
            st[MP_EFAULT if anon and (s.pages.flags2[x] & F2_MAPPED) else MP_ENOENT] += 1   # the zero page
        elif not (f2 & F2_MAPPED):
            st[MP_ENOENT] += 1
        elif s.pages.node[head] == dst:
            st[MP_ON_NODE] += 1
        elif not folio_isolate_lru(s, head):
            st[MP_EBUSY] += 1
        else:
            st[MP_MOVED] += 1
            n, queued, failed, c = queue_folio(s, p, folios, n, queued, head, dst, now + np.int64(cost))
            st[MP_MOVED] -= failed
            st[MP_NOT_MIGRATED] += failed
            cost += c
            if n == 0 and x + 1 < hi:
                t.ctrl_next = x + 2              # a batch went: the rest (from x + 1) in the next step
    if n > 0:
        failed, c = migrate_folio_list(s, p, folios, n, dst, now + np.int64(cost))
        st[MP_MOVED] -= failed
        st[MP_NOT_MIGRATED] += failed
        cost += c
    return cost
