"""Page allocation: watermarks, the zonelist walk, kswapd wake-ups, freeing.

Models mm/page_alloc.c: __setup_per_zone_wmarks() (min from min_free_kbytes, low/high/promo spaced
by max(min/4, managed * watermark_scale_factor / 10000)), get_page_from_freelist() (walk the
policy's zonelist, take the first node above the LOW watermark), and the slow path's first steps
(wake every kswapd of the zonelist, retry at the MIN watermark). Direct reclaim and the retry loop
live with the caller (engine.py), which owns the task's clock.

Simplifications: one zone per node; no per-CPU page lists, no fragmentation or buddy orders (a
later issue adds the buddy allocator); watermark checks compare free pages only.
"""
from __future__ import annotations

import math

import numpy as np
from ._jit import jit_inline

from .params import P_NUMA_BALANCING
from .state import (
    F2_CONTIG, MISC_WAKEUPS, MPOL_BIND, MPOL_INTERLEAVE, MPOL_PREFERRED, WMARK_HIGH, WMARK_LOW, WMARK_MIN,
    WMARK_PROMO, folio_nr_pages,
)
from .vmstat import PAGEOUTRUN, PGALLOC, PGFREE

NUMA_BALANCING_MEMORY_TIERING = 2


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
def tiering_mode(p):
    return (np.int64(p[P_NUMA_BALANCING]) & NUMA_BALANCING_MEMORY_TIERING) != 0


@jit_inline
def pgdat_balanced(s, p, nid):
    """kswapd's goal: free >= WMARK_PROMO in tiering mode (5.18+), else WMARK_HIGH."""
    mark = WMARK_PROMO if tiering_mode(p) else WMARK_HIGH
    return s.free[nid] >= s.wmark[nid, mark]


@jit_inline
def wakeup_kswapd(s, p, nid, now):
    """wakeup_kswapd(): no-op if the node is balanced or kswapd gave up on it (MAX_RECLAIM_RETRIES)."""
    if s.kswapd_awake[nid] or s.kswapd_failures[nid] >= 16 or pgdat_balanced(s, p, nid):
        return
    s.kswapd_awake[nid] = 1
    s.counters[nid, PAGEOUTRUN] += 1
    s.misc[MISC_WAKEUPS] += 1
    if s.kswapd_clock[nid] < now:
        s.kswapd_clock[nid] = now


@jit_inline
def policy_nodes(s, region, cpu_nid, index, out):
    """The zonelist an allocation walks for a region's memory policy; returns its length.

    default: the local node's fallback list; preferred: the preferred node's list; bind: the local
    node's list restricted to the policy's nodes; interleave: the list of the node picked by the
    page's index (alloc_page_interleave, any node as fallback)."""
    nn = s.zonelist.shape[0]
    pol = s.region_policy[region]
    start = cpu_nid
    if pol == MPOL_PREFERRED:
        start = s.region_nodes[region, 0]
    elif pol == MPOL_INTERLEAVE:
        k = 0
        while k < nn and s.region_nodes[region, k] >= 0:
            k += 1
        start = s.region_nodes[region, index % k]
    n = 0
    for i in range(nn):
        nid = s.zonelist[start, i]
        if nid < 0:
            break
        if pol == MPOL_BIND:
            allowed = False
            for j in range(nn):
                if s.region_nodes[region, j] == nid:
                    allowed = True
            if not allowed:
                continue
        out[n] = nid
        n += 1
    return n


@jit_inline
def zone_watermark_ok(s, nid, nr, mark):
    return s.free[nid] - nr >= s.wmark[nid, mark]


@jit_inline
def get_page_from_freelist(s, cands, n, nr, mark):
    """First node of the zonelist whose free pages stay above `mark` after the allocation, or -1."""
    for i in range(n):
        nid = cands[i]
        if zone_watermark_ok(s, nid, nr, mark):
            return nid
    return -1


@jit_inline
def take_pages(s, nid, head, nr):
    """Account an allocation of the folio at page `head` (nr pages) on node `nid`.

    Frames on a node are handed out in allocation order, so a folio is physically adjacent to the
    previous one allocated on the node: F2_CONTIG records whether that previous one was page head-1
    (the model of destination locality that list_add vs list_add_tail changes)."""
    s.free[nid] -= nr
    for i in range(nr):
        s.node[head + i] = nid
    if s.last_alloc[nid] == head - 1:
        s.flags2[head] |= F2_CONTIG
    else:
        s.flags2[head] &= ~F2_CONTIG
    s.last_alloc[nid] = head + nr - 1
    s.counters[nid, PGALLOC] += nr


@jit_inline
def free_folio(s, head):
    """Return a folio's pages to its node's free pool (the page itself keeps its node as history)."""
    nid = s.node[head]
    nr = folio_nr_pages(s, head)
    s.free[nid] += nr
    s.counters[nid, PGFREE] += nr


WMARKS = (WMARK_MIN, WMARK_LOW, WMARK_HIGH, WMARK_PROMO)
