"""Page allocation: the policy's zonelist walk and the allocation slow path.

Models mm/page_alloc.c get_page_from_freelist() (walk the policy's zonelist, take the first node
above the LOW watermark) and __alloc_pages_slowpath() (wake every kswapd of the zonelist, retry at
the MIN watermark, drain the per-CPU lru_add batch, direct reclaim up to MAX_RECLAIM_RETRIES
rounds, then OOM), with mm/mempolicy.c's choice of zonelist for a VMA's policy. The watermarks
and the free-page accounting are in mmzone.py.

Simplifications: no compaction, no high-order retries, no OOM killer victim selection (an OOM
stops the run); one zone per node. The buddy's per-CPU lists are drained once when direct reclaim's
allocation fails (drain_all_pages).
"""
from __future__ import annotations

import numpy as np
from ._jit import jit, jit_inline

from .buddy import buddy_on, drain_all_pages
from .locks import i_pages_lock
from .lru import folio_add_lru, lru_add_drain_cpu, node_lru_pages, workingset_refault
from .params import P
from .profile import K, charge
from .mmzone import MAX_RECLAIM_RETRIES, take_pages, wakeup_kswapd, zone_alloc_ok
from .reclaim import SWAP_CLUSTER_MAX, direct_reclaim_batch
from .tlb import migrc_flush_free_folios
from .state import (
    F2_ANON, F2_CONTIG, F2_MAPPED, F2_PRESENT, F2_SHADOW, F2_SWAPPED, MPOL_BIND, MPOL_INTERLEAVE,
    MPOL_PREFERRED, PG_WORKINGSET, REGION_ANON, STAMP_NONE, WMARK_LOW, WMARK_MIN, DR_AFTER_ALLOC, DR_AFTER_NONE,
    DR_AFTER_OOM, DR_NONE, DR_RECLAIM, DR_ROUND,
)
from .vmstat import Vm


# how hard an allocation may try (the gfp mask's reclaim bits)
GFP_KERNEL = 0              # wake kswapd, retry at MIN, direct reclaim, then OOM
GFP_TRANSHUGE_LIGHT = 1     # LOW, then MIN; no kswapd, no reclaim, no compaction: fail and fall back


@jit_inline
def policy_nodes(s, region, cpu_nid, index, out):
    """The zonelist an allocation walks for a region's memory policy; returns its length.

    default: the local node's fallback list; preferred: the preferred node's list; bind: the local
    node's list restricted to the policy's nodes; interleave: the list of the node picked by the
    page's index (alloc_page_interleave, any node as fallback)."""
    nn = s.zonelist.shape[0]
    pol = s.regions.policy[region]
    start = cpu_nid
    if pol == MPOL_PREFERRED:
        start = s.regions.nodes[region, 0]
    elif pol == MPOL_INTERLEAVE:
        k = 0
        while k < nn and s.regions.nodes[region, k] >= 0:
            k += 1
        start = s.regions.nodes[region, index % k]
    n = 0
    for i in range(nn):
        nid = s.zonelist[start, i]
        if nid < 0:
            break
        if pol == MPOL_BIND:
            allowed = False
            for j in range(nn):
                if s.regions.nodes[region, j] == nid:
                    allowed = True
            if not allowed:
                continue
        out[n] = nid
        n += 1
    return n


@jit_inline
def get_page_from_freelist(s, cands, n, nr, mark):
    """First node of the zonelist whose free pages stay above `mark` after the allocation, or -1."""
    for i in range(n):
        nid = cands[i]
        if zone_alloc_ok(s, nid, nr, mark):
            return nid
    return -1


@jit_inline
def start_direct_reclaim(s, t):
    """Task t's allocation failed at MIN: its direct reclaim starts (direct_reclaim_step)."""
    s.task[t].dr_state = DR_ROUND
    s.task[t].dr_retries = 0
    s.task[t].dr_drained = 0


@jit
def direct_reclaim_step(s, p, t, cpu, cands, n, nr, clock, scratch):
    """__alloc_pages_slowpath() after the MIN watermark retry failed, one reclaim batch at a time on
    task t's state (task.dr_*), for an allocation of nr pages from the zonelist cands[:n]: a round
    drains the lru_add batch (the first) and counts an allocstall, then reclaims (reclaim.
    direct_reclaim_batch) until SWAP_CLUSTER_MAX pages or the zonelist is scanned out; at its end
    the allocation retries at MIN (the buddy's per-CPU lists drained once if that fails). Rounds go
    on while they reclaim something, up to MAX_RECLAIM_RETRIES, else OOM. `clock` is when the step
    runs (a round's batches follow one another from its start). Returns (done, node or -1 on OOM,
    cost in ns)."""
    d = s.task[t]
    cost = 0.0
    if d.dr_state == DR_ROUND:
        if d.dr_retries == 0:
            migrc_flush_free_folios(s, cpu)          # MIGRC's pause at high memory pressure
            cost += lru_add_drain_cpu(s, p, cpu, clock)
        s.counters[s.cpu[cpu].node, Vm.ALLOCSTALL] += 1
        d.dr_total = 0
        d.dr_i = 0
        d.dr_scanned = 0
        d.dr_budget = 2 * node_lru_pages(s, cands[0]) + SWAP_CLUSTER_MAX if n > 0 else 0
        d.dr_now = clock + np.int64(cost)
        d.dr_cost = 0.0
        d.dr_state = DR_RECLAIM
    over, c = direct_reclaim_batch(s, p, t, cands, n, scratch)
    cost += c
    if not over:
        return False, np.int64(-1), cost
    nid = get_page_from_freelist(s, cands, n, nr, WMARK_MIN)
    if nid < 0 and not d.dr_drained and buddy_on(s):
        # __alloc_pages_direct_reclaim(): once, the per-CPU lists go back and it retries
        drain_all_pages(s)
        d.dr_drained = 1
        nid = get_page_from_freelist(s, cands, n, nr, WMARK_MIN)
    if nid >= 0 or d.dr_total == 0 or d.dr_retries + 1 >= MAX_RECLAIM_RETRIES:
        d.dr_state = DR_NONE                 # allocated, or a full round freed nothing / too many rounds
        if nid < 0:
            s.counters[s.cpu[cpu].node, Vm.OOM_KILL] += 1
        return True, nid, cost
    d.dr_retries += 1
    d.dr_state = DR_ROUND
    return False, np.int64(-1), cost


@jit
def alloc_pages_direct_reclaim(s, p, cpu, cands, n, nr, clock, scratch):
    """The allocating task's direct reclaim, all its steps at once (direct_reclaim_step). Out of
    line (the rest of the allocation is inlined into the fault): it is rare, and inlined it doubled
    the engine's compile time. Returns (node or -1 on OOM, cost in ns)."""
    t = s.sys[0].current
    start_direct_reclaim(s, t)
    cost = 0.0
    while True:
        done, nid, c = direct_reclaim_step(s, p, t, cpu, cands, n, nr, clock + np.int64(cost), scratch)
        cost += c
        if done:
            return nid, cost


@jit
def direct_reclaim_resume(s, p, t, cpu, clock, scratch, cands):
    """One step of task t's direct reclaim for the fault that stalled (memory.fault_stalls), run by
    the engine as a step of its own: the zonelist again from the fault's region and page, then
    direct_reclaim_step. When it is done the fault is retried, its allocation going on as
    task.dr_after says. Returns (done, cost)."""
    d = s.task[t]
    n = policy_nodes(s, d.dr_region, s.cpu[cpu].node, d.dr_index, cands)
    done, nid, cost = direct_reclaim_step(s, p, t, cpu, cands, n, d.dr_nr, clock, scratch)
    if done:
        d.dr_after = DR_AFTER_ALLOC if nid >= 0 else DR_AFTER_OOM
    return done, cost


@jit_inline
def alloc_folio(s, p, region, cpu, page, nr, clock, scratch, cands, gfp):
    """Pick the node for a new folio of `nr` pages at `page` of `region` as __alloc_pages() would.
    gfp GFP_TRANSHUGE_LIGHT (an anon large folio of a VMA not madvised, defrag=madvise): after
    the LOW attempt only a retry at MIN, no kswapd wake-up, no reclaim. A fault retried after its
    direct reclaim ran as steps (task.dr_after) goes on where the slow path was: its light attempts
    had failed, its allocation is at MIN. Returns (node or -1 on OOM or a failed light
    allocation, cost of the slow path in ns)."""
    cpu_nid = s.cpu[cpu].node
    n = policy_nodes(s, region, cpu_nid, page - s.regions.start[region], cands)
    t = s.sys[0].current
    after = s.task[t].dr_after
    if after != DR_AFTER_NONE:
        if gfp == GFP_TRANSHUGE_LIGHT:
            return np.int64(-1), 0.0
        s.task[t].dr_after = DR_AFTER_NONE
        if after == DR_AFTER_OOM:
            return np.int64(-1), 0.0
        nid = get_page_from_freelist(s, cands, n, nr, WMARK_MIN)
        if nid >= 0:
            return nid, 0.0
    nid = get_page_from_freelist(s, cands, n, nr, WMARK_LOW)
    if nid >= 0:
        return nid, 0.0
    if gfp == GFP_TRANSHUGE_LIGHT:
        return get_page_from_freelist(s, cands, n, nr, WMARK_MIN), 0.0
    nid = alloc_slowpath_min(s, p, cands, n, nr, clock)
    if nid >= 0:
        return nid, 0.0
    return alloc_pages_direct_reclaim(s, p, cpu, cands, n, nr, clock, scratch)


@jit_inline
def alloc_slowpath_min(s, p, cands, n, nr, clock):
    """__alloc_pages_slowpath()'s start: wake every kswapd of the zonelist, retry at MIN. The node,
    or -1 when only direct reclaim can help."""
    for i in range(n):
        wakeup_kswapd(s, p, cands[i], clock)
    return get_page_from_freelist(s, cands, n, nr, WMARK_MIN)


@jit_inline
def folio_order_for(s, r, page):
    """The region's folio order, lowered until the naturally aligned folio around `page` lies inside
    the region and none of its pages is present or mapped (thp_vma_suitable_order() and the
    all-PTEs-none test of alloc_anon_folio(); page-cache folios stop at EOF). Order 1 is skipped for
    anon memory, as the kernel does."""
    order = np.int64(s.regions.order[r])
    lo = s.regions.start[r]
    hi = s.regions.start[r + 1]
    anon = s.regions.kind[r] == REGION_ANON
    while order > 0:
        if not (anon and order == 1):
            nr = np.int64(1) << order
            head = page & ~(nr - 1)
            ok = head >= lo and head + nr <= hi
            if ok:
                for i in range(nr):
                    if s.pages.flags2[head + i] & (F2_PRESENT | F2_MAPPED):
                        ok = False
                        break
            if ok:
                return order
        order -= 1
    return np.int64(0)


@jit_inline
def folio_alloc_add(s, p, r, cpu, page, order, clock, scratch, cands, gfp):
    """A new folio of `order` holding `page` of region r: allocated (alloc_folio, with `gfp`),
    accounted on its node, present, with the flags its shadow or swap entry restores
    (workingset_refault) -- what a fault and filemap_add_folio() have in common, before the folio
    goes on the LRU. Returns (node or -1 on OOM or a failed light allocation, head, nr, pages that
    were in swap, cost in ns)."""
    pg = s.pages
    anon = s.regions.kind[r] == REGION_ANON
    nr = np.int64(1) << order
    head = page & ~(nr - 1)
    # the page's shadow entry (or swap entry) decides refault activation
    evict_nid = pg.node[page]
    refault = (pg.flags2[page] & (F2_SHADOW | F2_SWAPPED)) != 0
    shadow_age = pg.stamp[page]
    shadow_ws = pg.flags[page] & PG_WORKINGSET
    nid, cost = alloc_folio(s, p, r, cpu, head, nr, clock, scratch, cands, gfp)
    if nid < 0:
        return nid, head, nr, 0, cost
    cost += charge(s, K.GET_PAGE_FROM_FREELIST, p[P.PAGE_ALLOC_NS] * nr)
    if not anon and p[P.INIT_ON_ALLOC] != 0:
        cost += charge(s, K.CLEAR_PAGE_ERMS, p[P.ZERO_PAGE_NS] * nr)     # want_init_on_alloc(): __GFP_ZERO
    nr_swapped = 0
    for i in range(nr):
        pg.order[head + i] = order           # a new folio: no MGLRU generation or refs
        if pg.flags2[head + i] & F2_SWAPPED:
            nr_swapped += 1
        if i > 0:
            pg.flags2[head + i] = F2_ANON if anon else np.uint8(0)
            pg.flags[head + i] = 0
    take_pages(s, nid, head, nr)
    contig = pg.flags2[head] & F2_CONTIG
    pg.flags2[head] = F2_PRESENT | contig | (F2_ANON if anon else 0)
    pg.flags[head] = shadow_ws if refault else np.uint8(0)
    if refault:
        pg.stamp[head] = shadow_age
        workingset_refault(s, p, head, nid, evict_nid, s.cpu[cpu].in_lru_fault != 0)
    pg.stamp[head] = STAMP_NONE
    return nid, head, nr, nr_swapped, cost


@jit_inline
def filemap_add_folio(s, p, cpu, head, now):
    """mm/filemap.c filemap_add_folio() for a folio folio_alloc_add() made: the xarray store under
    the mapping's xa_lock (__filemap_add_folio), then folio_add_lru(). Returns the cost in ns: the
    insertion (pagecache_insert_ns, which includes the lock's hold) and the waits for both locks."""
    wait = i_pages_lock(s, p, head, now)
    cost = charge(s, K.FILEMAP_ADD_FOLIO, p[P.PAGECACHE_INSERT_NS]) + wait
    cost += folio_add_lru(s, p, cpu, head, now + np.int64(wait + p[P.XA_LOCK_NS]))
    return cost
