"""Reclaim: kswapd and direct reclaim over the classic LRU, with demotion instead of eviction.

Models mm/vmscan.c: balance_pgdat()/kswapd (wake below LOW, work until pgdat_balanced(): HIGH, or
PROMO in tiering mode), get_scan_count() (anon/file split), shrink_active_list(),
shrink_inactive_list(), folio_check_references(), shrink_folio_list() with its demotion pass
(can_demote(), demote_folio_list(), next_demotion_node() from mm/memory-tiers.c), and the
workingset shadow left by eviction (mm/workingset.c).

The unit of work is one SWAP_CLUSTER_MAX batch: `reclaim_batch` picks the inactive list to scan,
shrinks 32 folios from its tail, then ages that type's active list in proportion, as below. kswapd
runs one batch per scheduler step on its CPU's clock
(sched.py: a CPU of its own when one is idle, else time-shared with the tasks there, so its reclaim
time delays them), so allocation and reclaim race in virtual time as they do on a real machine;
direct reclaim runs batches on the allocating task's clock until 32 pages are reclaimed.

A large anon folio goes to swap whole when add_to_swap() finds room for all its pages; otherwise
shrink_folio_list() splits it onto its own list (split_folio_to_list: huge_memory.py) and swaps the
pages one by one, activating those that find no entry (per size swpout / swpout_fallback).

Isolation and putback take the node's lru_lock, and dropping a file folio takes its mapping's
xa_lock (__remove_mapping): locks.py; waiting for them adds to the reclaimer's time.

With lru_gen on (the node's lruvec.lru_gen_enabled) a step is lru_gen_shrink_node(): aging when
mglru.should_run_aging() asks for it, then one evict_folios() (mglru.isolate_folios, then the
shrink_folio_list() the classic shrink_inactive_list() uses too, with MGLRU's reference check:
lru_gen_look_around on a young mapped folio); kswapd also checks min_ttl_ms (lru_gen_age_node) and
never counts failures (lru_gen_shrink_node resets them). mglru.py describes the model.

Active/inactive balance of the classic LRU, as mm/vmscan.c (6.12) does it:
- Each shrink_node() pass starts with prepare_scan_control(), which sets a may_deactivate bit per
  type when the lruvec's workingset_activate_{anon,file} differ from the lruvec's refaults[]
  snapshot, or when inactive_is_low() finds the inactive list below 1/int_sqrt(10 x GiB of that
  type's lists) of the active one (1:1 under 1 GiB). The snapshot is taken by snapshot_refaults()
  only when a whole reclaim run ends: at the end of balance_pgdat() for kswapd, and for every node
  of the zonelist at the end of do_try_to_free_pages() for direct reclaim. So while refaults keep
  arriving during a run, deactivation stays allowed for the whole run; refault activations only
  decide whether the active list is aged, not how much.
- How much: get_scan_count() gives every list lru_size >> priority, scaled by the type's share
  (SCAN_FRACT) or all-or-nothing (SCAN_FILE / SCAN_ANON); the active and inactive lists of one type
  get the same factor. shrink_lruvec() then takes up to SWAP_CLUSTER_MAX from each list in turn
  (inactive anon, active anon, inactive file, active file) until the targets are used up, and
  shrink_list() passes an active list to shrink_active_list() only if its may_deactivate bit is
  set. A pass therefore deactivates active/inactive times as many pages as it scans from the
  inactive list of the same type. At the end of shrink_lruvec() (and in kswapd_age_node() at the
  start of each balance_pgdat() priority loop) the active anon list is also aged by
  SWAP_CLUSTER_MAX when inactive anon is low and anon can be aged.
  kswapd's pass ends as soon as it has reclaimed its goal (file only: at once; with anon too, the
  other type's targets are cut back in proportion); direct reclaim runs its whole pass only at
  DEF_PRIORITY.
Here: may_deactivate is evaluated per batch against the run-end snapshot; a batch is one round:
after it scans n pages of an inactive list whose type may deactivate, n x active/inactive pages
(list sizes at the batch's start; the fraction carried in lruvec.deact_acc), at most
SWAP_CLUSTER_MAX, of its active list are deactivated (active_scan_size); an empty inactive file list
with a non-empty active one costs one round of the active list (its scan target is not zero); the
anon aging for a low inactive anon list (SWAP_CLUSTER_MAX) runs in a batch that did not age the anon
active list by its round already.

Simplifications, and why:
- No scan priority: the kernel scans lru_size >> priority per pass and raises the pressure when a
  pass falls short; here each batch scans the 32 oldest folios of the chosen list, which keeps the
  same order of victims and differs only in how scanning is spread over passes. An active list
  smaller than its inactive one is scanned at the ratio a pass gives it (its target runs out first,
  so a pass cut short at its goal has still done it); a larger one gets one round's
  SWAP_CLUSTER_MAX per batch, as when the pass ends at its goal with the inactive target done. A
  pass that falls short of its goal and goes on scanning the active list alone (little is
  reclaimable) deactivates more than that here; and the kernel's first rounds of a pass give a
  smaller active list 32 too before its target runs out, which the per-batch ratio evens out.
  may_deactivate is read per batch, not once per pass (it can switch on mid-pass), and the
  per-pass anon aging (inactive anon low) can run in every batch that scanned file pages: the
  model has no pass boundaries to run it once per pass.
- get_scan_count's SCAN_FRACT ignores the anon/file reclaim costs (anon_cost/file_cost) and splits
  batches by swappiness alone (anon : file = swappiness : 200 - swappiness).
- A folio being read is locked, and its reader then holds a reference until it has copied the
  data, so shrink_folio_list keeps it (folio_trylock fails, or __remove_mapping's refcount freeze
  does). Held here (folio_held_for_read): the folios a readahead is adding while a later one's
  allocation reclaims, and the folio a task sleeps for until it has taken its access; the other
  folios of a window whose read is in flight can be reclaimed (a per-folio completion time would
  need page state the model does not keep).
- Dirty file folios are written back and reclaimed in the same pass (the kernel tags them
  PG_reclaim and reclaims them after the flusher); the write-back is pgpgout and a write request on
  the block device (blkdev.py), which takes device capacity from readers but no reclaim time.
"""
from __future__ import annotations

import numpy as np
from ._jit import jit, jit_inline

from .locks import i_pages_lock, lru_lock, lru_lock_hold
from .huge_memory import count_mthp_stat, split_isolated_folio
from .lru import (
    can_swap, inactive_is_low, lruvec_add_folio, lruvec_del_folio, node_lru_pages,
    swap_has_room, workingset_eviction,
)
from .mglru import (
    MIN_LRU_BATCH, get_nr_gens, isolate_folios, lru_gen_look_around, lru_gen_putback_flags,
    lruvec_is_reclaimable, should_run_aging, try_to_inc_max_seq, try_to_inc_min_seq,
)
from .blkdev import FILE_DEV, blk_submit
from .migrate import batch_cost, move_isolated_folio
from .mm import folio_unmapped_rss
from .mmzone import free_folio, pgdat_balanced, wakeup_kswapd, zone_alloc_ok, zone_watermark_ok
from .params import P
from .profile import K, charge
from .state import (
    F2_ANON, F2_MAPPED, F2_PRESENT, F2_PTE_WRITE, LRU_ACTIVE_ANON, LRU_ACTIVE_FILE, LRU_GEN_ANON, LRU_GEN_FILE,
    LRU_INACTIVE_ANON, LRU_INACTIVE_FILE, MIN_NR_GENS, PG_ACTIVE, PG_DIRTY, PG_ISOLATED, PG_REFERENCED,
    PG_WORKINGSET, PG_YOUNG, WMARK_MIN, WMARK_LOW, WMARK_HIGH, folio_nr_pages, folio_order, lru_sentinel,
    rng_next,
)
from .tlb import (
    TLB_UBC, current_cpu, shootdown_ns, folio_tlb_mm, migrc_batch_flush, migrc_can_defer, migrc_flush_free_folios,
    tlbbatch_add, try_to_migrate_tlb,
)
from .vmstat import MthpStat, Vm

SWAP_CLUSTER_MAX = 32
MAX_RECLAIM_RETRIES = 16

# folio_check_references() verdicts
FOLIOREF_RECLAIM = 0
FOLIOREF_RECLAIM_CLEAN = 1
FOLIOREF_KEEP = 2
FOLIOREF_ACTIVATE = 3


@jit_inline
def next_demotion_node(s, nid):
    """A random node among the preferred targets in the next lower tier, or -1 (memory-tiers.c)."""
    k = 0
    while k < s.demote_target.shape[1] and s.demote_target[nid, k] >= 0:
        k += 1
    if k == 0:
        return -1
    return s.demote_target[nid, np.int64(rng_next(s) % np.uint64(k))]


@jit_inline
def can_demote(s, p, nid):
    return p[P.DEMOTION_ENABLED] != 0 and s.demote_target[nid, 0] >= 0


@jit_inline
def can_reclaim_anon(s, p, nid):
    """Anon is reclaimable with free swap, or without swap when the node can demote."""
    return can_swap(s, p) or can_demote(s, p, nid)


@jit
def shrink_active_list(s, p, nid, lru, nr_to_scan, now):
    """Deactivate up to nr_to_scan folios from the tail of an active list. folio_referenced() clears
    the young bits it finds; only executable file folios would stay active, and tierlab has none,
    so every scanned folio moves to the inactive list with PG_workingset set. The folios are
    isolated under the node's lru_lock (isolate_lru_folios) and put back under it again
    (move_folios_to_lru). Returns the cost."""
    head = lru_sentinel(s, nid, lru)
    scanned = 0
    n = 0
    cost = 0.0
    while scanned < nr_to_scan and s.pages.prev[head] != head:
        x = s.pages.prev[head]
        lruvec_del_folio(s, x)
        nr = folio_nr_pages(s, x)
        scanned += nr
        n += 1
        s.pages.flags[x] &= ~(PG_ACTIVE | PG_YOUNG)
        s.pages.flags[x] |= PG_WORKINGSET
        lruvec_add_folio(s, x)
        s.counters[nid, Vm.PGDEACTIVATE] += nr
        cost += charge(s, K.SHRINK_ACTIVE_LIST, p[P.RECLAIM_SCAN_NS])
    s.counters[nid, Vm.PGREFILL] += scanned
    if n > 0:
        # isolate_lru_folios at the start of the work, move_folios_to_lru at its end
        wait = lru_lock(s, p, nid, now, n)
        cost += wait
        cost += lru_lock(s, p, nid, now + np.int64(max(0.0, cost - lru_lock_hold(p, n))), n)
    return cost


@jit_inline
def folio_check_references(s, x):
    """Young PTEs found (and cleared) plus PG_referenced decide: activate, keep, or reclaim."""
    f = s.pages.flags[x]
    young = (f & PG_YOUNG) != 0 and (s.pages.flags2[x] & F2_MAPPED) != 0
    ref = (f & PG_REFERENCED) != 0
    f &= ~(PG_YOUNG | PG_REFERENCED)
    if young:
        f |= PG_REFERENCED
        s.pages.flags[x] = f
        if ref:
            return FOLIOREF_ACTIVATE
        return FOLIOREF_KEEP
    s.pages.flags[x] = f
    if ref and not (s.pages.flags2[x] & F2_ANON):
        return FOLIOREF_RECLAIM_CLEAN
    return FOLIOREF_RECLAIM


@jit
def reclaim_folio(s, p, nid, x, now):
    """Evict one isolated folio (no demotion): swap out anon, drop file with a shadow entry (under
    the mapping's xa_lock: __remove_mapping; a dirty one written to the block device first:
    pageout(), asynchronous, so only the device's capacity is used, not reclaim's time). Returns
    (pages reclaimed, cost); 0 pages means the folio must be kept: add_to_swap() found no room for
    all its pages (shrink_folio_list then splits a large one)."""
    nr = folio_nr_pages(s, x)
    anon = (s.pages.flags2[x] & F2_ANON) != 0
    if anon and not swap_has_room(s, p, nr):
        return 0, 0.0
    cost = charge(s, K.SHRINK_FOLIO_LIST if anon else K.REMOVE_MAPPING, p[P.RECLAIM_FREE_NS])
    if anon:
        s.sys[0].nr_swap_used += nr
        s.counters[nid, Vm.PSWPOUT] += nr
        count_mthp_stat(s, nid, folio_order(s, x), MthpStat.SWPOUT, Vm.THP_SWPOUT)
        cost += charge(s, K.SWAP_WRITEPAGE, p[P.SWAP_OUT_4K_NS] * nr)
    else:
        if s.pages.flags[x] & PG_DIRTY:
            s.counters[nid, Vm.PGPGOUT] += nr * 4
            blk_submit(s, FILE_DEV, now, nr, True)
        cost += i_pages_lock(s, p, x, now)
    if s.pages.flags2[x] & F2_MAPPED:
        folio_unmapped_rss(s, x, nr)       # try_to_unmap(): the mm's RSS drops (anon: a swap entry)
    free_folio(s, x)
    s.pages.flags2[x] &= ~(F2_PRESENT | F2_MAPPED | F2_PTE_WRITE)
    workingset_eviction(s, x)     # leaves shadows/swap entries; keeps only the workingset bit
    return nr, cost


@jit
def demote_folio(s, p, nid, x, keep_src, now):
    """Migrate one isolated folio to a lower tier (alloc_demote_folio: no direct reclaim, may wake
    the target's kswapd, succeeds while the target stays above its MIN watermark; a failure passes
    MIGRC's pause). Tries the preferred target, then any lower node. `keep_src`: MIGRC holds the
    source (migrate.move_isolated_folio). Returns (pages demoted, cost)."""
    nr = folio_nr_pages(s, x)
    dst = next_demotion_node(s, nid)
    if dst < 0:
        return 0, 0.0
    if not zone_alloc_ok(s, dst, nr, WMARK_MIN):
        wakeup_kswapd(s, p, dst, now)
        dst = -1
        for cand in range(s.pgdat.shape[0]):
            if s.pgdat[cand].tier > s.pgdat[nid].tier and zone_alloc_ok(s, cand, nr, WMARK_MIN):
                dst = cand
                break
        if dst < 0:
            migrc_flush_free_folios(s, current_cpu(s))
            s.counters[nid, Vm.PGMIGRATE_FAIL] += nr
            return 0, 0.0
    elif not zone_watermark_ok(s, dst, nr, WMARK_LOW):
        wakeup_kswapd(s, p, dst, now)
    s.pages.flags[x] |= PG_ISOLATED
    return nr, charge(s, K.MIGRATE_PAGES, move_isolated_folio(s, p, x, dst, keep_src, now))


@jit_inline
def folio_putback_lru(s, x, lru_gen):
    """A folio shrink_folio_list keeps goes back on the LRU (move_folios_to_lru); under MGLRU with
    PG_active, refs cleared (evict_folios)."""
    if lru_gen:
        lru_gen_putback_flags(s, x)
    lruvec_add_folio(s, x)


@jit
def lru_gen_check_references(s, p, nid, x, kswapd, now):
    """shrink_folio_list's reference check with lru_gen on: a mapped folio a look-around marked
    PG_referenced is kept ("folio_update_gen() tried to promote this page?"); a young mapped one
    runs lru_gen_look_around() (which marks it PG_referenced) and folio_check_references() then
    finds it referenced twice: activate. Returns (verdict, cost)."""
    f = s.pages.flags[x]
    mapped = (s.pages.flags2[x] & F2_MAPPED) != 0
    if mapped and (f & PG_REFERENCED):
        return FOLIOREF_KEEP, 0.0
    if mapped and (f & PG_YOUNG):
        cost = lru_gen_look_around(s, p, nid, x, kswapd, now)
        s.pages.flags[x] |= PG_REFERENCED
        return FOLIOREF_ACTIVATE, cost
    s.pages.flags[x] &= ~PG_REFERENCED
    return FOLIOREF_RECLAIM, 0.0


@jit_inline
def folio_held_for_read(s, x):
    """Folio x is locked for its read or referenced by its reader, so shrink_folio_list keeps it:
    added by the readahead under way (a later folio's allocation is reclaiming: sys.ra_add_*), or
    the one a task sleeps for while it is read and after, until the task has taken its access
    (task.io_folio)."""
    if s.sys[0].ra_add_start <= x < s.sys[0].ra_add_end:
        return True
    if s.sys[0].nr_io_folios == 0:
        return False
    for t in range(s.task.shape[0]):
        if s.task[t].io_folio == x:
            return True
    return False


@jit
def shrink_folio_list(s, p, nid, scratch, n, file, kswapd, now, cost):
    """shrink_folio_list() over the n isolated folios in scratch (all of one type): check references,
    demote what can be demoted (counted as reclaimed), evict the rest, put back what stays.
    `cost` is the work so far (the isolation). Returns (pages reclaimed, cost)."""
    putback = 0
    demote = can_demote(s, p, nid)
    lru_gen = s.lruvec[nid].lru_gen_enabled != 0
    reclaimed = 0
    demoted = 0
    nr_demote_folios = 0
    # current->tlb_ubc (tlb.py): try_to_unmap's evictions fill it in the loop, and demote_folio_list's
    # migrate_pages_batch after it, whose flush covers both; MIGRC may defer a demoted folio's flush
    sender = current_cpu(s)
    batch = s.tlb_ubc[TLB_UBC]
    for i in range(n):
        x = scratch[i]
        nr = folio_nr_pages(s, x)
        s.pgdat[nid].nr_isolated -= nr
        if folio_held_for_read(s, x):
            folio_putback_lru(s, x, lru_gen)           # keep: its reader has it
            putback += 1
            continue
        if lru_gen:
            verdict, c = lru_gen_check_references(s, p, nid, x, kswapd, now + np.int64(cost))
            cost += c
        else:
            verdict = folio_check_references(s, x)
        if verdict == FOLIOREF_ACTIVATE:
            s.pages.flags[x] |= PG_ACTIVE
            s.counters[nid, Vm.PGACTIVATE] += nr
            folio_putback_lru(s, x, lru_gen)
            putback += 1
            continue
        if verdict == FOLIOREF_KEEP:
            folio_putback_lru(s, x, lru_gen)
            putback += 1
            continue
        t_unmap = now + np.int64(cost)
        tlb_mm = folio_tlb_mm(s, x, t_unmap)   # before unmapping or migration changes the PTE
        if demote:
            # a dirty or mapped folio is demoted as is: migration keeps it dirty and mapped
            keep = migrc_can_defer(s, p, x, tlb_mm, nr, sender)
            got, c = demote_folio(s, p, nid, x, keep, t_unmap)
            cost += c
            if got > 0:
                cost += try_to_migrate_tlb(s, p, batch, tlb_mm, x, nr, sender, keep, t_unmap)
                demoted += got
                reclaimed += got
                nr_demote_folios += 1
                continue
        order = folio_order(s, x)
        if order > 0 and (s.pages.flags2[x] & F2_ANON) and not swap_has_room(s, p, nr) and swap_has_room(s, p, 1):
            # add_to_swap() has no room for the whole folio: split it onto the list and swap its
            # pages one by one (those that find no entry are activated, activate_locked_split)
            count_mthp_stat(s, nid, order, MthpStat.SWPOUT_FALLBACK, Vm.THP_SWPOUT_FALLBACK)
            split_isolated_folio(s, x)
        for y in range(x, x + nr, folio_nr_pages(s, x)):        # the folio, or its pages after a split
            got, c = reclaim_folio(s, p, nid, y, now + np.int64(cost))
            cost += c
            if got > 0:
                tlbbatch_add(s, p, batch, tlb_mm, y, got, sender, t_unmap)
                reclaimed += got
                continue
            # anon without swap space: add_to_swap() fails and the folio is activated
            s.pages.flags[y] |= PG_ACTIVE
            s.counters[nid, Vm.PGACTIVATE] += folio_nr_pages(s, y)
            folio_putback_lru(s, y, lru_gen)
            putback += 1
    cost += shootdown_ns(s, p, migrc_batch_flush(s, batch, sender))
    cost += charge(s, K.MIGRATE_PAGES, batch_cost(p, nr_demote_folios))
    if putback > 0:                                                     # move_folios_to_lru, at the end
        cost += lru_lock(s, p, nid, now + np.int64(max(0.0, cost - lru_lock_hold(p, putback))), putback)
    s.counters[nid, Vm.PGSTEAL_KSWAPD if kswapd else Vm.PGSTEAL_DIRECT] += reclaimed
    s.counters[nid, Vm.PGSTEAL_FILE if file else Vm.PGSTEAL_ANON] += reclaimed
    s.counters[nid, Vm.PGDEMOTE_KSWAPD if kswapd else Vm.PGDEMOTE_DIRECT] += demoted
    return reclaimed, cost


@jit
def shrink_inactive_list(s, p, nid, lru, nr_to_scan, kswapd, now, scratch):
    """Isolate up to nr_to_scan folios from the tail of an inactive list and run shrink_folio_list on
    them. Returns (pages reclaimed, cost)."""
    head = lru_sentinel(s, nid, lru)
    n = 0
    scanned = 0
    while scanned < nr_to_scan and s.pages.prev[head] != head:
        x = s.pages.prev[head]
        lruvec_del_folio(s, x)
        s.pgdat[nid].nr_isolated += folio_nr_pages(s, x)
        scanned += folio_nr_pages(s, x)
        scratch[n] = x
        n += 1
    file = lru == LRU_INACTIVE_FILE
    s.counters[nid, Vm.PGSCAN_KSWAPD if kswapd else Vm.PGSCAN_DIRECT] += scanned
    s.counters[nid, Vm.PGSCAN_FILE if file else Vm.PGSCAN_ANON] += scanned
    cost = lru_lock(s, p, nid, now, n) if n > 0 else 0.0            # isolate_lru_folios
    cost += charge(s, K.SHRINK_FOLIO_LIST, p[P.RECLAIM_SCAN_NS] * n)
    return shrink_folio_list(s, p, nid, scratch, n, file, kswapd, now, cost)


@jit_inline
def get_swappiness(s, p, nid):
    """get_swappiness(): 0 (file only) when the node can neither demote nor swap MIN_LRU_BATCH pages."""
    if not can_demote(s, p, nid) and p[P.SWAP_SIZE] - s.sys[0].nr_swap_used < MIN_LRU_BATCH:
        return 0
    return np.int64(p[P.SWAPPINESS])


@jit
def evict_folios(s, p, nid, swappiness, kswapd, now, scratch):
    """evict_folios(): isolate_folios() (sort or isolate from the oldest generation) and
    try_to_inc_min_seq() under lru_lock, then shrink_folio_list. Returns (pages scanned, pages
    reclaimed, cost)."""
    scanned, type, n, nr_sorted = isolate_folios(s, nid, swappiness, kswapd, scratch)
    if try_to_inc_min_seq(s, nid, swappiness != 0):
        scanned += 1
    if get_nr_gens(s, nid, LRU_GEN_FILE if swappiness == 0 else LRU_GEN_ANON) == MIN_NR_GENS:
        scanned = 0
    cost = 0.0
    if n + nr_sorted > 0:
        cost = lru_lock(s, p, nid, now, n + nr_sorted) + charge(s, K.EVICT_FOLIOS, p[P.LRU_GEN_SORT_NS] * nr_sorted)
    cost += charge(s, K.SHRINK_FOLIO_LIST, p[P.RECLAIM_SCAN_NS] * n)
    if n == 0:
        return scanned, 0, cost
    reclaimed, cost = shrink_folio_list(s, p, nid, scratch, n, type == LRU_GEN_FILE, kswapd, now, cost)
    return scanned, reclaimed, cost


@jit
def lru_gen_shrink_node(s, p, nid, kswapd, now, scratch):
    """One step of lru_gen_shrink_node()/try_to_shrink_lruvec() on the node's lruvec: aging first
    when should_run_aging() asks for it (try_to_inc_max_seq), then one evict_folios(). Returns
    (pages reclaimed, pages scanned, cost) as reclaim_batch."""
    swappiness = get_swappiness(s, p, nid)
    cost = 0.0
    if should_run_aging(s, nid, swappiness != 0):
        cost += try_to_inc_max_seq(s, p, nid, swappiness != 0, now)
    scanned, reclaimed, c = evict_folios(s, p, nid, swappiness, kswapd, now + np.int64(cost), scratch)
    return reclaimed, scanned, cost + c


@jit_inline
def snapshot_refaults(s, nid):
    """snapshot_refaults(): remember the node's refault activations, at the end of a reclaim run
    (balance_pgdat, do_try_to_free_pages); may_deactivate compares with them."""
    s.lruvec[nid].refaults[0] = s.counters[nid, Vm.WORKINGSET_ACTIVATE_ANON]
    s.lruvec[nid].refaults[1] = s.counters[nid, Vm.WORKINGSET_ACTIVATE_FILE]


@jit_inline
def may_deactivate(s, p, nid, file):
    """prepare_scan_control()'s sc->may_deactivate bit for one type: refault activations since the
    snapshot of the last reclaim run, or inactive_is_low()."""
    act = s.counters[nid, Vm.WORKINGSET_ACTIVATE_FILE if file else Vm.WORKINGSET_ACTIVATE_ANON]
    return act != s.lruvec[nid].refaults[1 if file else 0] or inactive_is_low(s, p, nid, file)


@jit_inline
def active_scan_size(s, nid, file, scanned, inactive, active):
    """Active pages to scan after `scanned` pages of the type's inactive list, whose lists held
    `inactive` and `active` pages when the batch began. get_scan_count() gives both lists of a type
    lru_size >> priority (the same scan fraction), so a whole pass scans the active list
    active/inactive times as much as the inactive one; the fraction is carried (lruvec.deact_acc).
    One batch is one round of shrink_lruvec(), which takes at most SWAP_CLUSTER_MAX from each list:
    when active/inactive is above 1 the round's 32 is all the active list gets, and what the pass
    would owe beyond it is dropped (reclaim reaching its goal ends the pass after the inactive
    target, before the larger active one). An empty inactive list still has its active list
    scanned, one round."""
    t = 1 if file else 0
    if active <= 0:
        s.lruvec[nid].deact_acc[t] = 0.0
        return np.int64(0)
    if inactive <= 0:
        return np.int64(min(active, SWAP_CLUSTER_MAX))
    acc = s.lruvec[nid].deact_acc[t] + scanned * (active / inactive)
    n = np.int64(acc)
    if n >= SWAP_CLUSTER_MAX or n >= active:
        s.lruvec[nid].deact_acc[t] = 0.0
        return np.int64(min(n, SWAP_CLUSTER_MAX, active))
    s.lruvec[nid].deact_acc[t] = acc - n
    return n


@jit
def reclaim_batch(s, p, nid, kswapd, now, scratch):
    """One SWAP_CLUSTER_MAX step of shrink_lruvec(): shrink the inactive list get_scan_count()
    picks, then, if may_deactivate allows it for that type, its active list in proportion
    (active_scan_size); the anon active list also when inactive anon is low (shrink_lruvec's end,
    kswapd_age_node). With lru_gen on, lru_gen_shrink_node instead. Returns (pages reclaimed,
    pages scanned, cost)."""
    if s.lruvec[nid].lru_gen_enabled:
        return lru_gen_shrink_node(s, p, nid, kswapd, now, scratch)
    cost = 0.0
    anon_ok = can_reclaim_anon(s, p, nid)
    deact_file = may_deactivate(s, p, nid, True)
    deact_anon = anon_ok and may_deactivate(s, p, nid, False)

    inact_file = s.lruvec[nid].lru_size[LRU_INACTIVE_FILE]
    inact_anon = s.lruvec[nid].lru_size[LRU_INACTIVE_ANON]
    act_file = s.lruvec[nid].lru_size[LRU_ACTIVE_FILE]
    act_anon = s.lruvec[nid].lru_size[LRU_ACTIVE_ANON]
    file_total = inact_file + act_file
    anon_total = inact_anon + act_anon
    if not anon_ok or anon_total == 0:
        scan_file = True
    elif file_total == 0:
        scan_file = False
    elif inact_file > 0 and not deact_file:
        scan_file = True                                   # cache_trim_mode
    elif file_total + s.pgdat[nid].free <= s.pgdat[nid].wmark[WMARK_HIGH]:
        scan_file = False                                  # file is tiny: go for anon
    else:
        sw = p[P.SWAPPINESS]
        s.lruvec[nid].scan_acc += sw
        if s.lruvec[nid].scan_acc >= 200.0:
            s.lruvec[nid].scan_acc -= 200.0
            scan_file = False
        else:
            scan_file = True

    reclaimed = 0
    scanned = 0
    scanned_file = 0
    scanned_anon = 0
    for attempt in range(2):
        lru = LRU_INACTIVE_FILE if scan_file else LRU_INACTIVE_ANON
        before = s.lruvec[nid].lru_size[lru]
        if before > 0:
            r, c = shrink_inactive_list(s, p, nid, lru, SWAP_CLUSTER_MAX, kswapd, now + np.int64(cost), scratch)
            reclaimed += r
            n = min(before, SWAP_CLUSTER_MAX)
            scanned += n
            if scan_file:
                scanned_file += n
            else:
                scanned_anon += n
            cost += c
        if scanned > 0 or not anon_ok:
            break
        scan_file = not scan_file

    # the active lists of the types scanned, after their inactive lists (for_each_evictable_lru's order)
    aged_anon = deact_anon and scanned_anon > 0
    if aged_anon:
        nr = active_scan_size(s, nid, False, scanned_anon, inact_anon, act_anon)
        cost += shrink_active_list(s, p, nid, LRU_ACTIVE_ANON, nr, now + np.int64(cost))
    if deact_file and (scanned_file > 0 or inact_file == 0):
        nr = active_scan_size(s, nid, True, scanned_file, inact_file, act_file)
        cost += shrink_active_list(s, p, nid, LRU_ACTIVE_FILE, nr, now + np.int64(cost))
        if scanned == 0 and nr > 0:
            scanned += 1
    if anon_ok and not aged_anon and inactive_is_low(s, p, nid, False):
        # shrink_lruvec()'s end / kswapd_age_node(): once per pass, here in a batch whose round did not
        # age the anon active list already
        cost += shrink_active_list(s, p, nid, LRU_ACTIVE_ANON, SWAP_CLUSTER_MAX, now + np.int64(cost))
    return reclaimed, scanned, cost


@jit
def kswapd_step(s, p, nid, scratch):
    """One step of balance_pgdat() on kswapd's own clock. kswapd sleeps once the node is balanced.
    A balance_pgdat() run that reclaims nothing after scanning the node's LRU twice over (the
    equivalent of a full DEF_PRIORITY..1 sweep) counts one kswapd failure and kswapd sleeps; after
    MAX_RECLAIM_RETRIES failures wakeup_kswapd() leaves the node to direct reclaim. Whenever kswapd
    goes to sleep its run (balance_pgdat) is over: snapshot_refaults()."""
    now = s.pgdat[nid].kswapd_clock
    if pgdat_balanced(s, p, nid):
        s.pgdat[nid].kswapd_awake = 0
        snapshot_refaults(s, nid)           # balance_pgdat()'s end
        return
    lru_gen = s.lruvec[nid].lru_gen_enabled != 0
    if lru_gen and p[P.MIN_TTL_MS] > 0 and not lruvec_is_reclaimable(s, p, nid, now):
        # lru_gen_age_node(): the working set of the last min_ttl_ms is protected -- out_of_memory()
        s.counters[nid, Vm.OOM_KILL] += 1
        s.sys[0].oom_min_ttl_node = nid
        s.pgdat[nid].kswapd_awake = 0
        snapshot_refaults(s, nid)
        return
    reclaimed, scanned, cost = reclaim_batch(s, p, nid, True, now, scratch)
    if lru_gen:
        s.pgdat[nid].kswapd_failures = 0     # lru_gen_shrink_node(): "kswapd should never fail"
    if reclaimed > 0:
        s.pgdat[nid].kswapd_failures = 0
        s.pgdat[nid].kswapd_scanned = 0
    else:
        s.pgdat[nid].kswapd_scanned += max(scanned, 1)
        if s.pgdat[nid].kswapd_scanned > 2 * node_lru_pages(s, nid) + SWAP_CLUSTER_MAX:
            s.pgdat[nid].kswapd_failures += 1
            s.pgdat[nid].kswapd_scanned = 0
            s.pgdat[nid].kswapd_awake = 0
    s.pgdat[nid].kswapd_clock = now + np.int64(max(cost, 100.0))
    if pgdat_balanced(s, p, nid):
        s.pgdat[nid].kswapd_awake = 0
    if s.pgdat[nid].kswapd_awake == 0:
        snapshot_refaults(s, nid)           # balance_pgdat()'s end: kswapd goes to sleep


@jit
def direct_reclaim_batch(s, p, t, cands, n, scratch):
    """One reclaim batch of try_to_free_pages() for task t's round (task.dr_*): shrink the
    zonelist's nodes in order until SWAP_CLUSTER_MAX pages are reclaimed; like
    do_try_to_free_pages() raising the priority down to 0, a node is given up only after its whole
    LRU was scanned twice over without reaching the goal. The batch runs at the round's start plus
    its work so far. At the round's end (do_try_to_free_pages) every zonelist node's refault
    activations are snapshot. Returns (the round is over, cost)."""
    d = s.task[t]
    i = d.dr_i
    cost = 0.0
    node_done = True
    if i < n and d.dr_total < SWAP_CLUSTER_MAX and d.dr_scanned < d.dr_budget:
        nid = cands[i]
        r, sc, c = reclaim_batch(s, p, nid, False, d.dr_now + np.int64(d.dr_cost), scratch)
        d.dr_total += r
        d.dr_cost += c
        cost = c
        if sc != 0 or r != 0:
            d.dr_scanned += max(sc, 1)
            if r > 0:
                s.pgdat[nid].kswapd_failures = 0
            node_done = d.dr_total >= SWAP_CLUSTER_MAX or d.dr_scanned >= d.dr_budget
    if not node_done:
        return False, cost
    if d.dr_total >= SWAP_CLUSTER_MAX or i + 1 >= n:
        for j in range(n):                  # do_try_to_free_pages()'s end: every zonelist node
            snapshot_refaults(s, cands[j])
        return True, cost
    d.dr_i = i + 1
    d.dr_scanned = 0
    d.dr_budget = 2 * node_lru_pages(s, cands[i + 1]) + SWAP_CLUSTER_MAX
    return False, cost
