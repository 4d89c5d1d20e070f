"""Reclaim: kswapd and direct reclaim over the classic LRU, with demotion instead of eviction.

Models mm/vmscan.c: balance_pgdat()/kswapd (wake below LOW, work until pgdat_balanced(): HIGH, or
PROMO in tiering mode), get_scan_count() (anon/file split), shrink_active_list(),
shrink_inactive_list(), folio_check_references(), shrink_folio_list() with its demotion pass
(can_demote(), demote_folio_list(), next_demotion_node() from mm/memory-tiers.c), and the
workingset shadow left by eviction (mm/workingset.c).

The unit of work is one SWAP_CLUSTER_MAX batch: `reclaim_batch` ages the active lists if their
inactive list is low (or new refault activations were seen), picks the inactive list to scan, and
shrinks 32 folios from its tail. kswapd runs one batch per scheduler step on its CPU's clock
(sched.py: a CPU of its own when one is idle, else time-shared with the tasks there, so its reclaim
time delays them), so allocation and reclaim race in virtual time as they do on a real machine;
direct reclaim runs batches on the allocating task's clock until 32 pages are reclaimed.

Isolation and putback take the node's lru_lock, and dropping a file folio takes its mapping's
xa_lock (__remove_mapping): locks.py; waiting for them adds to the reclaimer's time.

Simplifications, and why:
- No scan priority: the kernel scans lru_size >> priority per pass and raises the pressure when a
  pass falls short; here each batch scans the 32 oldest folios of the chosen list, which keeps the
  same order of victims and differs only in how scanning is spread over passes.
- get_scan_count's SCAN_FRACT ignores the anon/file reclaim costs (anon_cost/file_cost) and splits
  batches by swappiness alone (anon : file = swappiness : 200 - swappiness).
- Dirty file folios are written back and reclaimed in the same pass (the kernel tags them
  PG_reclaim and reclaims them after the flusher); the write-back is pgpgout and a write request on
  the block device (blkdev.py), which takes device capacity from readers but no reclaim time.
"""
from __future__ import annotations

import numpy as np
from ._jit import jit, jit_inline

from .locks import i_pages_lock, lru_lock, lru_lock_hold
from .lru import (
    can_swap, inactive_is_low, lruvec_add_folio, lruvec_del_folio, node_lru_pages,
    workingset_eviction,
)
from .blkdev import FILE_DEV, blk_submit
from .migrate import batch_cost, move_isolated_folio
from .mm import folio_unmapped_rss
from .mmzone import free_folio, pgdat_balanced, wakeup_kswapd, zone_watermark_ok
from .params import P
from .profile import K, charge
from .state import (
    F2_ANON, F2_MAPPED, F2_PRESENT, F2_PTE_WRITE, LRU_ACTIVE_ANON, LRU_ACTIVE_FILE, LRU_INACTIVE_ANON,
    LRU_INACTIVE_FILE, PG_ACTIVE, PG_DIRTY, PG_ISOLATED, PG_REFERENCED, PG_WORKINGSET, PG_YOUNG,
    WMARK_MIN, WMARK_HIGH, folio_nr_pages, lru_sentinel, rng_next,
)
from .vmstat import Vm

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
    (pages reclaimed, cost); 0 pages means the folio must be kept (no swap space)."""
    nr = folio_nr_pages(s, x)
    anon = (s.pages.flags2[x] & F2_ANON) != 0
    if anon and s.sys[0].nr_swap_used + nr > p[P.SWAP_SIZE]:
        # add_to_swap() needs nr free entries; a large folio is not split here (simplified)
        return 0, 0.0
    cost = charge(s, K.SHRINK_FOLIO_LIST if anon else K.REMOVE_MAPPING, p[P.RECLAIM_FREE_NS])
    if anon:
        s.sys[0].nr_swap_used += nr
        s.counters[nid, Vm.PSWPOUT] += nr
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
def demote_folio(s, p, nid, x, now):
    """Migrate one isolated folio to a lower tier (alloc_demote_folio: no direct reclaim, may wake
    the target's kswapd, succeeds while the target stays above its MIN watermark). Tries the
    preferred target, then any lower node. Returns (pages demoted, cost)."""
    nr = folio_nr_pages(s, x)
    dst = next_demotion_node(s, nid)
    if dst < 0:
        return 0, 0.0
    if not zone_watermark_ok(s, dst, nr, WMARK_MIN):
        wakeup_kswapd(s, p, dst, now)
        dst = -1
        for cand in range(s.pgdat.shape[0]):
            if s.pgdat[cand].tier > s.pgdat[nid].tier and zone_watermark_ok(s, cand, nr, WMARK_MIN):
                dst = cand
                break
        if dst < 0:
            s.counters[nid, Vm.PGMIGRATE_FAIL] += nr
            return 0, 0.0
    elif s.pgdat[dst].free - nr < s.pgdat[dst].wmark[1]:
        wakeup_kswapd(s, p, dst, now)
    s.pages.flags[x] |= PG_ISOLATED
    return nr, charge(s, K.MIGRATE_PAGES, move_isolated_folio(s, p, x, dst, now))


@jit
def shrink_inactive_list(s, p, nid, lru, nr_to_scan, kswapd, now, scratch):
    """Isolate up to nr_to_scan folios from the tail of an inactive list and run shrink_folio_list on
    them: check references, demote what can be demoted (counted as reclaimed), evict the rest.
    Returns (pages reclaimed, cost)."""
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
    putback = 0
    demote = can_demote(s, p, nid)
    reclaimed = 0
    demoted = 0
    nr_demote_folios = 0
    for i in range(n):
        x = scratch[i]
        nr = folio_nr_pages(s, x)
        s.pgdat[nid].nr_isolated -= nr
        verdict = folio_check_references(s, x)
        if verdict == FOLIOREF_ACTIVATE:
            s.pages.flags[x] |= PG_ACTIVE
            s.counters[nid, Vm.PGACTIVATE] += nr
            lruvec_add_folio(s, x)
            putback += 1
            continue
        if verdict == FOLIOREF_KEEP:
            lruvec_add_folio(s, x)
            putback += 1
            continue
        if demote:
            # a dirty or mapped folio is demoted as is: migration keeps it dirty and mapped
            got, c = demote_folio(s, p, nid, x, now + np.int64(cost))
            cost += c
            if got > 0:
                demoted += got
                reclaimed += got
                nr_demote_folios += 1
                continue
        got, c = reclaim_folio(s, p, nid, x, now + np.int64(cost))
        cost += c
        if got == 0:
            # anon without swap space: add_to_swap() fails and the folio is activated
            s.pages.flags[x] |= PG_ACTIVE
            s.counters[nid, Vm.PGACTIVATE] += nr
            lruvec_add_folio(s, x)
            putback += 1
            continue
        reclaimed += got
    cost += charge(s, K.MIGRATE_PAGES, batch_cost(p, nr_demote_folios))
    if putback > 0:                                                     # move_folios_to_lru, at the end
        cost += lru_lock(s, p, nid, now + np.int64(max(0.0, cost - lru_lock_hold(p, putback))), putback)
    s.counters[nid, Vm.PGSTEAL_KSWAPD if kswapd else Vm.PGSTEAL_DIRECT] += reclaimed
    s.counters[nid, Vm.PGSTEAL_FILE if file else Vm.PGSTEAL_ANON] += reclaimed
    s.counters[nid, Vm.PGDEMOTE_KSWAPD if kswapd else Vm.PGDEMOTE_DIRECT] += demoted
    return reclaimed, cost


@jit
def reclaim_batch(s, p, nid, kswapd, now, scratch):
    """One SWAP_CLUSTER_MAX step of shrink_lruvec(): age active lists that need it, then shrink the
    inactive list get_scan_count() picks. Returns (pages reclaimed, pages scanned, cost)."""
    cost = 0.0
    anon_ok = can_reclaim_anon(s, p, nid)
    # may_deactivate: inactive list low, or refault activations since the last pass
    act_anon = s.counters[nid, Vm.WORKINGSET_ACTIVATE_ANON]
    act_file = s.counters[nid, Vm.WORKINGSET_ACTIVATE_FILE]
    deact_file = inactive_is_low(s, p, nid, True) or act_file != s.lruvec[nid].refaults[1]
    deact_anon = anon_ok and (inactive_is_low(s, p, nid, False) or act_anon != s.lruvec[nid].refaults[0])
    s.lruvec[nid].refaults[0] = act_anon
    s.lruvec[nid].refaults[1] = act_file
    if deact_file:
        cost += shrink_active_list(s, p, nid, LRU_ACTIVE_FILE, SWAP_CLUSTER_MAX, now)

    inact_file = s.lruvec[nid].lru_size[LRU_INACTIVE_FILE]
    inact_anon = s.lruvec[nid].lru_size[LRU_INACTIVE_ANON]
    file_total = inact_file + s.lruvec[nid].lru_size[LRU_ACTIVE_FILE]
    anon_total = inact_anon + s.lruvec[nid].lru_size[LRU_ACTIVE_ANON]
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
    for attempt in range(2):
        lru = LRU_INACTIVE_FILE if scan_file else LRU_INACTIVE_ANON
        before = s.lruvec[nid].lru_size[lru]
        if before > 0:
            r, c = shrink_inactive_list(s, p, nid, lru, SWAP_CLUSTER_MAX, kswapd, now + np.int64(cost), scratch)
            reclaimed += r
            scanned += min(before, SWAP_CLUSTER_MAX)
            cost += c
        if scanned > 0 or not anon_ok:
            break
        scan_file = not scan_file

    if anon_ok and (deact_anon or inactive_is_low(s, p, nid, False)):
        cost += shrink_active_list(s, p, nid, LRU_ACTIVE_ANON, SWAP_CLUSTER_MAX, now + np.int64(cost))
    elif scanned == 0 and s.lruvec[nid].lru_size[LRU_ACTIVE_FILE] > 0:
        cost += shrink_active_list(s, p, nid, LRU_ACTIVE_FILE, SWAP_CLUSTER_MAX, now + np.int64(cost))
        scanned += 1
    return reclaimed, scanned, cost


@jit
def kswapd_step(s, p, nid, scratch):
    """One step of balance_pgdat() on kswapd's own clock. kswapd sleeps once the node is balanced.
    A balance_pgdat() run that reclaims nothing after scanning the node's LRU twice over (the
    equivalent of a full DEF_PRIORITY..1 sweep) counts one kswapd failure and kswapd sleeps; after
    MAX_RECLAIM_RETRIES failures wakeup_kswapd() leaves the node to direct reclaim."""
    now = s.pgdat[nid].kswapd_clock
    if pgdat_balanced(s, p, nid):
        s.pgdat[nid].kswapd_awake = 0
        return
    reclaimed, scanned, cost = reclaim_batch(s, p, nid, True, now, scratch)
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


@jit
def direct_reclaim(s, p, cands, n, now, scratch):
    """try_to_free_pages(): shrink the zonelist's nodes in order until SWAP_CLUSTER_MAX pages are
    reclaimed. Like do_try_to_free_pages() raising the priority down to 0, a node is given up only
    after its whole LRU was scanned twice over without reaching the goal. Returns (pages
    reclaimed, cost)."""
    total = 0
    cost = 0.0
    for i in range(n):
        nid = cands[i]
        scanned = 0
        budget = 2 * node_lru_pages(s, nid) + SWAP_CLUSTER_MAX
        while total < SWAP_CLUSTER_MAX and scanned < budget:
            r, sc, c = reclaim_batch(s, p, nid, False, now + np.int64(cost), scratch)
            total += r
            cost += c
            if sc == 0 and r == 0:
                break
            scanned += max(sc, 1)
            if r > 0:
                s.pgdat[nid].kswapd_failures = 0
        if total >= SWAP_CLUSTER_MAX:
            break
    return total, cost
