"""Per-node memory accounting: watermarks, free pages, kswapd wake-ups.

Models mm/page_alloc.c __setup_per_zone_wmarks() (min from min_free_kbytes, low/high/promo spaced by
max(min/4, managed * watermark_scale_factor / 10000)) and calculate_min_free_kbytes(), the
zone_watermark_ok() test, allocation and freeing of a folio's pages, and mm/vmscan.c
wakeup_kswapd()/pgdat_balanced(). These sit below both the allocator (page_alloc.py) and reclaim
(reclaim.py), which use them, so the two can call each other's entry points without an import cycle
(numba needs an acyclic import graph).

With the run's page allocator the buddy (buddy.py) a folio gets frames from it and the
watermark check of an order > 0 allocation also needs a free block of that order; otherwise a
node's memory is a count of free pages, handed out in allocation order.

Simplifications: one zone per node; no lowmem_reserve.
"""
from __future__ import annotations

import math

import numpy as np
from ._jit import jit, jit_inline

from .params import NUMA_BALANCING_MEMORY_TIERING, P
from .buddy import alloc_frames, buddy_high_order_ok, buddy_on, free_folio_frames, rmqueue_can_serve
from .state import F2_CONTIG, WMARK_HIGH, WMARK_PROMO, folio_nr_pages
from .tlb import current_cpu, migrc_flush_free_folios
from .vmstat import Vm

MAX_RECLAIM_RETRIES = 16   # mm/internal.h: kswapd failures before it gives up; direct reclaim rounds


def default_min_free_kbytes(total_managed_pages: int) -> int:
    """calculate_min_free_kbytes(): sqrt(16 * lowmem_kbytes), clamped to [128, 262144]."""
    lowmem_kb = total_managed_pages * 4
    return int(min(max(int(math.isqrt(lowmem_kb * 16)), 128), 262144))


def setup_watermarks(managed: np.ndarray, min_free_kbytes: int, watermark_scale_factor: int) -> np.ndarray:
    """__setup_per_zone_wmarks() with one zone per node: min is the node's share of min_free_kbytes."""
    total = int(managed.sum())
    pages_min = min_free_kbytes >> 2
    wm = np.zeros((managed.shape[0], 4), dtype=np.int64)
    for nid, m in enumerate(managed):
        m = int(m)
        wmin = pages_min * m // total if total else 0
        tmp = max(wmin // 4, m * watermark_scale_factor // 10000)
        wm[nid] = (wmin, wmin + tmp, wmin + 2 * tmp, wmin + 3 * tmp)
    return wm


@jit_inline
def jiffies_ms(p, clock_ns):
    """The kernel's clock in ms at virtual time clock_ns (times the scale: full-size ms, as the kernel's
    clock runs F times faster under --scale F; docs/scaling.md)."""
    if p[P.SCALE] == 1.0:
        return np.int64(clock_ns // 1_000_000)
    return np.int64(clock_ns * p[P.SCALE] / 1e6)


@jit_inline
def tiering_mode(p):
    return (np.int64(p[P.NUMA_BALANCING]) & NUMA_BALANCING_MEMORY_TIERING) != 0


@jit_inline
def pgdat_balanced(s, p, nid):
    """kswapd's goal: free >= WMARK_PROMO in tiering mode (5.18+), else WMARK_HIGH."""
    mark = WMARK_PROMO if tiering_mode(p) else WMARK_HIGH
    return zone_free_pages(s, nid) >= s.pgdat[nid].wmark[mark]


@jit_inline
def wakeup_kswapd(s, p, nid, now):
    """wakeup_kswapd(): no-op if the node is balanced or kswapd gave up on it (MAX_RECLAIM_RETRIES)."""
    if s.pgdat[nid].kswapd_awake or s.pgdat[nid].kswapd_failures >= MAX_RECLAIM_RETRIES or pgdat_balanced(s, p, nid):
        return
    s.pgdat[nid].kswapd_awake = 1
    s.counters[nid, Vm.PAGEOUTRUN] += 1
    s.sys[0].wakeups += 1
    if s.pgdat[nid].kswapd_clock < now:
        s.pgdat[nid].kswapd_clock = now


@jit_inline
def zone_free_pages(s, nid):
    """The free pages the watermark checks see (__zone_watermark_ok, zone_watermark_fast):
    NR_FREE_PAGES plus, under MIGRC, the source folios it holds (tlb.py), which it frees on demand."""
    return s.pgdat[nid].free + s.pgdat[nid].migrc_pending_nr


@jit_inline
def zone_watermark_ok(s, nid, nr, mark):
    """__zone_watermark_ok() for an allocation of nr = 2**order pages: free pages beyond the mark,
    and with the buddy a free block of the order."""
    if zone_free_pages(s, nid) - nr < s.pgdat[nid].wmark[mark]:
        return False
    return buddy_high_order_ok(s, nid, folio_order_of_nr(nr))


@jit_inline
def folio_order_of_nr(nr):
    order = 0
    while (np.int64(1) << order) < nr:
        order += 1
    return order


@jit_inline
def zone_alloc_ok(s, nid, nr, mark):
    """get_page_from_freelist()'s check of one zone: its watermark, and under MIGRC, when that
    fails in a zone holding source folios, migrc_flush_free_folios() and the check again."""
    if zone_watermark_ok(s, nid, nr, mark):
        return True
    if s.pgdat[nid].migrc_pending_nr > 0:
        migrc_flush_free_folios(s, current_cpu(s))
        return zone_watermark_ok(s, nid, nr, mark)
    return False


@jit
def free_lists_short(s, cpu, nid, nr):
    """rmqueue() on CPU `cpu` would find nothing for a folio of nr pages on node nid: with the buddy,
    the CPU's list and the free lists hold no block of its order (buddy.rmqueue_can_serve);
    without it, fewer than nr free pages. A watermark check that passed rules this out, except
    under MIGRC, whose held sources the checks count as free (zone_free_pages); so it is asked
    only then, out of line."""
    if buddy_on(s):
        return not rmqueue_can_serve(s, cpu, nid, folio_order_of_nr(nr))
    return s.pgdat[nid].free < nr


@jit_inline
def alloc_nowait_ok(s, nid, nr, mark):
    """Whether an allocation that may not reclaim gets a folio of nr pages on node nid -- the gfp
    of alloc_misplaced_dst_folio() (a NUMA-balancing promotion: __GFP_THISNODE, __GFP_RECLAIM
    cleared) -- from the current task's CPU: get_page_from_freelist()'s check of the zone
    (zone_alloc_ok, `mark`), then rmqueue() (free_lists_short).

    Under MIGRC the check can pass on held sources while the free lists are short. rmqueue() then
    fails, and so do the slow path's two get_page_from_freelist() calls, for the same reason; the
    slow path's migrc pause (MIGRC v8 8/8, __alloc_pages_slowpath(): migrc_pause() and
    migrc_flush_free_folios() once, just before `if (!can_direct_reclaim) goto nopage`) flushes
    and frees every held source, and the allocation fails all the same: the freed pages serve the
    next one. A failed check reaches the same pause (a no-op when zone_alloc_ok has just released
    everything). The pause's effect on other migrations (do_migrc off while paused) lasts only
    until this allocation returns, and is not modelled."""
    cpu = current_cpu(s)
    if zone_alloc_ok(s, nid, nr, mark) and (s.pgdat[nid].migrc_pending_nr == 0
                                            or not free_lists_short(s, cpu, nid, nr)):
        return True
    migrc_flush_free_folios(s, cpu)
    return False


@jit_inline
def take_pages(s, nid, head, nr):
    """Account an allocation of the folio at page `head` (nr pages) on node `nid`: its frames from
    the buddy (buddy.alloc_frames), or without the buddy frames handed out in allocation order.

    An allocation whose watermark check passed on MIGRC's held sources may find the free lists
    short (free_lists_short). Its slow path's migrc pause then flushes and frees them, and the
    allocation goes on and gets a folio: the callers here may reclaim (a fault's allocation, a
    move_pages target: the kernel's direct reclaim round that follows the pause, before the retry
    that succeeds, is not modelled), or retry (alloc_demote_folio's second attempt, without
    __GFP_THISNODE, finds the freed pages). A promotion may not; its allocation fails instead
    (alloc_nowait_ok, checked before it gets here).

    F2_CONTIG records whether the folio's first frame follows page head-1's last one (the model of
    destination locality that list_add vs list_add_tail changes). Without the buddy a folio is
    physically adjacent to the previous one allocated on the node."""
    if s.pgdat[nid].migrc_pending_nr > 0 and free_lists_short(s, current_cpu(s), nid, nr):
        migrc_flush_free_folios(s, current_cpu(s))
    for i in range(nr):
        s.pages.node[head + i] = nid
    if buddy_on(s):
        alloc_frames(s, current_cpu(s), nid, head, folio_order_of_nr(nr))
        contig = head > 0 and s.buddy.pfn[head - 1] >= 0 and s.buddy.pfn[head - 1] + 1 == s.buddy.pfn[head]
    else:
        s.pgdat[nid].free -= nr
        contig = s.pgdat[nid].last_alloc == head - 1
        s.pgdat[nid].last_alloc = head + nr - 1
    if contig:
        s.pages.flags2[head] |= F2_CONTIG
    else:
        s.pages.flags2[head] &= ~F2_CONTIG
    s.counters[nid, Vm.PGALLOC] += nr


@jit_inline
def free_folio(s, head):
    """Return a folio's pages to its node (the page itself keeps its node as history): its frames
    to the buddy (free_unref_folio), or to the node's count."""
    nid = s.pages.node[head]
    nr = folio_nr_pages(s, head)
    if buddy_on(s):
        free_folio_frames(s, current_cpu(s), head)
    else:
        s.pgdat[nid].free += nr
    s.counters[nid, Vm.PGFREE] += nr
