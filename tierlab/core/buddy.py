"""The buddy allocator: physical frames per node, free lists per order, per-CPU page lists.

Models mm/page_alloc.c's free_area (one zone per node, one migratetype):
- __rmqueue_smallest() takes the first block of the smallest order >= the request from its free list
  and expand() gives the halves it splits off back to the lists of their orders (at the head);
- __free_one_page() merges a freed block with its buddy (pfn ^ (1 << order)) while the buddy is a
  free block of the same order, up to MAX_PAGE_ORDER, then adds it at the head of its list -- or
  at the tail when buddy_merge_likely() (the buddy of the merged block one order up is free: keep
  this one unused, it may merge soon). Boot (memblock_free_all) frees every frame in
  MAX_PAGE_ORDER blocks, in address order, to the tail (FPI_TO_TAIL);
- the per-CPU lists (struct per_cpu_pages, one per CPU and zone) for the orders pcp_allowed_order()
  accepts (0..PAGE_ALLOC_COSTLY_ORDER and the PMD order): rmqueue_pcplist() takes from the head,
  refilling an empty list with rmqueue_bulk() (max(batch >> order, 2) blocks, each to the tail);
  free_unref_folio() adds at the head and, once the CPU's count reaches `high`, free_pcppages_bulk()
  returns `batch` pages from the lists' tails, list after list starting with the one after the list
  just freed to. batch as zone_batchsize() (min(managed / 1024, 256) / 4, rounded down to 2^n - 1)
  and high as zone_highsize() (the low watermark split over the node's CPUs, at least 4 x batch);
- NR_FREE_PAGES (pgdat.free) counts the pages in the free lists only: pages on per-CPU lists are
  allocated as far as the watermarks are concerned, as in the kernel;
- __zone_watermark_ok()'s high-order part: an order > 0 allocation also needs a free block of at
  least that order (buddy_high_order_ok).
- MIGRC's held source folios (tlb.py) keep their frames on a per-node list until a flush frees them.

Simplified: one migratetype, so no pageblock stealing or fragmentation avoidance between movable and
unmovable allocations (every simulated page is movable user memory); no compaction; batch and high
fixed (no pcp->high auto-tuning, alloc_factor or free_factor); no page shuffling. Frames exist only
when the run's page allocator is the buddy (`page_alloc_model="buddy"`); otherwise the parts are
empty and a node's memory is a count (mmzone.take_pages).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ._jit import jit, jit_inline
from .state import ORDER_MASK, links_add, links_add_tail, links_del

MAX_PAGE_ORDER = 10                 # x86-64: blocks of up to 4 MiB
NR_PAGE_ORDERS = MAX_PAGE_ORDER + 1
PAGE_ALLOC_COSTLY_ORDER = 3
HPAGE_PMD_ORDER = 9
NR_PCP_LISTS = PAGE_ALLOC_COSTLY_ORDER + 2    # orders 0..3, then the PMD order
NR_HELD_LISTS = 2                   # per node: MIGRC's sources of the batch being migrated, and the held ones
HELD_BATCH = 0
HELD_PENDING = 1

# where a block's first frame is (buddy.where)
FRAME_USED = 0                      # allocated (or past the node's end)
FRAME_BUDDY = 1                     # in a free list (PageBuddy)
FRAME_PCP = 2                       # on a per-CPU list
FRAME_HELD = 3                      # a MIGRC source kept until a flush


class Buddy(NamedTuple):
    """The frames and their lists; every array empty when the buddy is off (buddy_on)."""
    base: np.ndarray        # int64[N] first frame of node nid (aligned to a MAX_PAGE_ORDER block)
    spanned: np.ndarray     # int64[N] frames of node nid (its managed pages)
    pfn: np.ndarray         # int64[P] frame of each present page (a folio's frames are contiguous), -1
    order: np.ndarray       # int8[F] at a block's first frame: its order while free, on a pcp or held
    where: np.ndarray       # int8[F] at a block's first frame: FRAME_*
    prev: np.ndarray        # int32[F + sentinels] list links: free lists, pcp lists, held lists
    next: np.ndarray
    nr_free: np.ndarray     # int64[N, NR_PAGE_ORDERS] free_area[order].nr_free
    pcp_count: np.ndarray   # int64[C, N] pages on the CPU's lists of the node's zone
    batch: np.ndarray       # int64[N] pcp->batch
    high: np.ndarray        # int64[N] pcp->high


def zone_batchsize(managed: int) -> int:
    batch = min(managed >> 10, (1 << 20) // 4096) // 4
    batch = max(batch, 1)
    b = batch + batch // 2
    return (1 << (b.bit_length() - 1)) - 1


def zone_highsize(low_wmark: int, batch: int, nr_local_cpus: int) -> int:
    return max(low_wmark // max(nr_local_cpus, 1), 4 * batch)


def buddy_arrays(managed, low_wmark, node_cpus, nr_cpu_slots: int, nr_pages: int, on: bool) -> Buddy:
    """The buddy after boot: every node's frames free in MAX_PAGE_ORDER blocks (the last ones
    smaller), in address order; empty arrays when `on` is False."""
    N = len(managed)
    if not on:
        z = np.zeros(0, np.int64)
        return Buddy(base=np.zeros(N, np.int64), spanned=np.zeros(N, np.int64), pfn=z, order=np.zeros(0, np.int8),
                     where=np.zeros(0, np.int8), prev=np.zeros(0, np.int32), next=np.zeros(0, np.int32),
                     nr_free=np.zeros((N, NR_PAGE_ORDERS), np.int64), pcp_count=np.zeros((nr_cpu_slots, N), np.int64),
                     batch=np.zeros(N, np.int64), high=np.zeros(N, np.int64))
    block = 1 << MAX_PAGE_ORDER
    spanned = np.asarray(managed, np.int64)
    base = np.zeros(N, np.int64)
    for nid in range(1, N):
        base[nid] = base[nid - 1] + -(-int(spanned[nid - 1]) // block) * block
    F = int(base[-1] + -(-int(spanned[-1]) // block) * block) if N else 0
    nsent = N * NR_PAGE_ORDERS + nr_cpu_slots * N * NR_PCP_LISTS + N * NR_HELD_LISTS
    if F + nsent >= 1 << 31:
        raise ValueError(f"the buddy's frames ({F}) do not fit 32-bit links")
    prev = np.arange(F + nsent, dtype=np.int32)
    nxt = prev.copy()
    prev[:F] = -1
    nxt[:F] = -1
    # a zone under 4 MiB gets batch 0 (the kernel then runs its per-CPU lists as the boot pageset
    # does: one page at a time); here at least 1, so a drain always moves pages
    batch = np.array([max(zone_batchsize(int(m)), 1) for m in spanned], np.int64)
    b = Buddy(base=base, spanned=spanned, pfn=np.full(nr_pages, -1, np.int64), order=np.full(F, -1, np.int8),
              where=np.zeros(F, np.int8), prev=prev, next=nxt, nr_free=np.zeros((N, NR_PAGE_ORDERS), np.int64),
              pcp_count=np.zeros((nr_cpu_slots, N), np.int64), batch=batch,
              high=np.array([zone_highsize(int(low_wmark[i]), int(batch[i]), int(node_cpus[i])) for i in range(N)],
                            np.int64))
    for nid in range(N):
        boot_free(b, nid)
    return b


def boot_free(b: Buddy, nid: int) -> None:
    """memblock_free_all(): the node's frames to the free lists' tails, largest aligned blocks first."""
    f = int(b.base[nid])
    end = f + int(b.spanned[nid])
    while f < end:
        order = MAX_PAGE_ORDER
        while order > 0 and ((f - b.base[nid]) & ((1 << order) - 1) or f + (1 << order) > end):
            order -= 1
        head = free_list_sentinel_of(b, nid, order)
        links_add_tail(b.prev, b.next, head, f)
        b.order[f] = order
        b.where[f] = FRAME_BUDDY
        b.nr_free[nid, order] += 1
        f += 1 << order


# ---- lists ----------------------------------------------------------------------------------------

@jit_inline
def free_list_sentinel_of(b, nid, order):
    return b.order.shape[0] + np.int64(nid) * NR_PAGE_ORDERS + order


@jit_inline
def pcp_sentinel(b, cpu, nid, pindex):
    N = b.base.shape[0]
    return b.order.shape[0] + N * NR_PAGE_ORDERS + (np.int64(cpu) * N + nid) * NR_PCP_LISTS + pindex


@jit_inline
def held_sentinel(b, nid, which):
    N = b.base.shape[0]
    C = b.pcp_count.shape[0]
    return b.order.shape[0] + N * NR_PAGE_ORDERS + C * N * NR_PCP_LISTS + np.int64(nid) * NR_HELD_LISTS + which


@jit_inline
def buddy_on(s):
    return s.buddy.order.shape[0] > 0


@jit_inline
def pcp_allowed_order(order):
    return order <= PAGE_ALLOC_COSTLY_ORDER or order == HPAGE_PMD_ORDER


@jit_inline
def order_to_pindex(order):
    return np.int64(order) if order <= PAGE_ALLOC_COSTLY_ORDER else np.int64(NR_PCP_LISTS - 1)


@jit_inline
def pindex_to_order(pindex):
    return np.int64(pindex) if pindex < NR_PCP_LISTS - 1 else np.int64(HPAGE_PMD_ORDER)


@jit_inline
def frame_node(s, frame):
    """The node whose frames hold `frame` (pfn_to_nid)."""
    b = s.buddy
    nid = 0
    for i in range(1, b.base.shape[0]):
        if frame >= b.base[i]:
            nid = i
    return nid


# ---- the free lists -------------------------------------------------------------------------------

@jit_inline
def add_to_free_list(s, nid, frame, order, tail):
    b = s.buddy
    head = free_list_sentinel_of(b, nid, order)
    if tail:
        links_add_tail(b.prev, b.next, head, frame)
    else:
        links_add(b.prev, b.next, head, frame)
    b.order[frame] = order
    b.where[frame] = FRAME_BUDDY
    b.nr_free[nid, order] += 1
    s.pgdat[nid].free += np.int64(1) << order


@jit_inline
def del_from_free_list(s, nid, frame, order):
    b = s.buddy
    links_del(b.prev, b.next, frame)
    b.order[frame] = -1
    b.where[frame] = FRAME_USED
    b.nr_free[nid, order] -= 1
    s.pgdat[nid].free -= np.int64(1) << order


@jit_inline
def page_is_buddy(s, nid, frame, order):
    """The block at `frame` is a free block of `order` inside node nid's frames."""
    b = s.buddy
    return (frame < b.base[nid] + b.spanned[nid] and b.where[frame] == FRAME_BUDDY
            and b.order[frame] == order)


@jit
def __rmqueue_smallest(s, nid, order):
    """The first block of the smallest free order >= `order`, split down to `order` (expand());
    returns its first frame, or -1."""
    b = s.buddy
    for o in range(order, NR_PAGE_ORDERS):
        head = free_list_sentinel_of(b, nid, o)
        frame = b.next[head]
        if frame == head:
            continue
        frame = np.int64(frame)
        del_from_free_list(s, nid, frame, o)
        while o > order:          # expand(): the upper halves go back, smaller and smaller
            o -= 1
            add_to_free_list(s, nid, frame + (np.int64(1) << o), o, False)
        return frame
    return np.int64(-1)


@jit
def __free_one_page(s, nid, frame, order, to_tail):
    """Free a block: merge with free buddies up to MAX_PAGE_ORDER, then to its free list -- at the
    tail if `to_tail` (FPI_TO_TAIL) or buddy_merge_likely()."""
    b = s.buddy
    base = b.base[nid]
    pfn = frame - base
    buddy_pfn = pfn
    while order < MAX_PAGE_ORDER:
        buddy_pfn = pfn ^ (np.int64(1) << order)
        if not page_is_buddy(s, nid, base + buddy_pfn, order):
            break
        del_from_free_list(s, nid, base + buddy_pfn, order)
        pfn &= buddy_pfn
        order += 1
    if not to_tail and order < MAX_PAGE_ORDER - 1:
        # buddy_merge_likely(): is the buddy of the block this one would form with its buddy free?
        higher = buddy_pfn & pfn
        higher_buddy = higher ^ (np.int64(1) << (order + 1))
        to_tail = page_is_buddy(s, nid, base + higher_buddy, order + 1)
    add_to_free_list(s, nid, base + pfn, order, to_tail)


@jit_inline
def buddy_high_order_ok(s, nid, order):
    """__zone_watermark_ok()'s test for order > 0: a free block of at least `order`."""
    if order == 0 or not buddy_on(s):
        return True
    for o in range(order, NR_PAGE_ORDERS):
        if s.buddy.nr_free[nid, o] > 0:
            return True
    return False


@jit
def rmqueue_can_serve(s, cpu, nid, order):
    """Whether rmqueue() would find a block of `order` for CPU `cpu` on node nid: on the CPU's list
    (a pcp order; an empty list refills from the free lists), else in the free lists (a block of
    that order or more). Changes nothing. Out of line: asked only under MIGRC, with sources held."""
    b = s.buddy
    if pcp_allowed_order(order):
        head = pcp_sentinel(b, cpu, nid, order_to_pindex(order))
        if b.next[head] != head:
            return True
    for o in range(order, NR_PAGE_ORDERS):
        if b.nr_free[nid, o] > 0:
            return True
    return False


@jit_inline
def free_pages_from_order(s, nid, order):
    """Free pages of node `nid` in blocks of `order` or more (/proc/buddyinfo's columns from `order`
    on, in pages): what an allocation of that order can be served from. 0 with the buddy off."""
    if not buddy_on(s):
        return np.int64(0)
    n = np.int64(0)
    for o in range(order, NR_PAGE_ORDERS):
        n += s.buddy.nr_free[nid, o] << o
    return n


# ---- the per-CPU lists ----------------------------------------------------------------------------

@jit
def rmqueue_bulk(s, cpu, nid, order, count):
    """Move up to `count` blocks of `order` from the free lists to the CPU's list (each to its tail)."""
    b = s.buddy
    head = pcp_sentinel(b, cpu, nid, order_to_pindex(order))
    n = 0
    for _ in range(count):
        frame = __rmqueue_smallest(s, nid, order)
        if frame < 0:
            break
        links_add_tail(b.prev, b.next, head, frame)
        b.order[frame] = order
        b.where[frame] = FRAME_PCP
        n += 1
    b.pcp_count[cpu, nid] += n << order
    return n


@jit
def free_pcppages_bulk(s, cpu, nid, count, pindex):
    """Return `count` pages of the CPU's lists to the free lists, oldest (tail) first, list after
    list starting with the one after `pindex`."""
    b = s.buddy
    while count > 0 and b.pcp_count[cpu, nid] > 0:
        pindex += 1
        if pindex >= NR_PCP_LISTS:
            pindex = 0
        head = pcp_sentinel(b, cpu, nid, pindex)
        order = pindex_to_order(pindex)
        while count > 0 and b.prev[head] != head:
            frame = np.int64(b.prev[head])
            links_del(b.prev, b.next, frame)
            b.where[frame] = FRAME_USED
            b.order[frame] = -1
            b.pcp_count[cpu, nid] -= np.int64(1) << order
            count -= np.int64(1) << order
            __free_one_page(s, nid, frame, order, False)


@jit
def rmqueue(s, cpu, nid, order):
    """A block of `order` on node nid for CPU `cpu`: from the per-CPU list when the order has one
    (rmqueue_pcplist), else from the free lists (rmqueue_buddy). Returns its first frame, or -1."""
    b = s.buddy
    if not pcp_allowed_order(order):
        return __rmqueue_smallest(s, nid, order)
    head = pcp_sentinel(b, cpu, nid, order_to_pindex(order))
    if b.next[head] == head:
        if rmqueue_bulk(s, cpu, nid, order, max(b.batch[nid] >> order, 2)) == 0:
            return np.int64(-1)
    frame = np.int64(b.next[head])
    links_del(b.prev, b.next, frame)
    b.where[frame] = FRAME_USED
    b.order[frame] = -1
    b.pcp_count[cpu, nid] -= np.int64(1) << order
    return frame


@jit
def free_frames(s, cpu, nid, frame, order):
    """free_unref_folio() for a pcp order (to the CPU's list, drained past `high`), else
    __free_pages_ok() (straight to the free lists)."""
    b = s.buddy
    if not pcp_allowed_order(order):
        __free_one_page(s, nid, frame, order, False)
        return
    pindex = order_to_pindex(order)
    links_add(b.prev, b.next, pcp_sentinel(b, cpu, nid, pindex), frame)
    b.order[frame] = order
    b.where[frame] = FRAME_PCP
    b.pcp_count[cpu, nid] += np.int64(1) << order
    if b.pcp_count[cpu, nid] >= b.high[nid]:
        free_pcppages_bulk(s, cpu, nid, b.batch[nid], pindex)


@jit
def drain_all_pages(s):
    """Every CPU's lists back to the free lists (drain_all_pages(NULL): direct reclaim's retry)."""
    b = s.buddy
    for cpu in range(b.pcp_count.shape[0]):
        for nid in range(b.base.shape[0]):
            if b.pcp_count[cpu, nid] > 0:
                free_pcppages_bulk(s, cpu, nid, b.pcp_count[cpu, nid], NR_PCP_LISTS - 1)


# ---- a folio's frames -----------------------------------------------------------------------------

@jit
def alloc_frames(s, cpu, nid, head, order):
    """Frames for the folio at page `head` on node nid: its pages get contiguous frames. Returns
    False when the node has no block of the order (the caller's watermark check rules that out)."""
    frame = rmqueue(s, cpu, nid, order)
    if frame < 0:
        return False
    for i in range(np.int64(1) << order):
        s.buddy.pfn[head + i] = frame + i
    return True


@jit_inline
def folio_frame(s, head):
    """The folio's first frame, now unmapped from its pages."""
    frame = s.buddy.pfn[head]
    n = np.int64(1) << (s.pages.order[head] & ORDER_MASK)
    for i in range(n):
        s.buddy.pfn[head + i] = -1
    return frame


@jit
def free_folio_frames(s, cpu, head):
    """The folio's frames back to the allocator (free_unref_folio / __free_pages_ok)."""
    order = np.int64(s.pages.order[head] & ORDER_MASK)
    frame = folio_frame(s, head)
    free_frames(s, cpu, frame_node(s, frame), frame, order)


@jit
def hold_folio_frames(s, head):
    """MIGRC keeps a migrated folio's source: its frames wait on the node's batch list."""
    b = s.buddy
    order = np.int64(s.pages.order[head] & ORDER_MASK)
    frame = folio_frame(s, head)
    links_add_tail(b.prev, b.next, held_sentinel(b, frame_node(s, frame), HELD_BATCH), frame)
    b.order[frame] = order
    b.where[frame] = FRAME_HELD


@jit
def held_batch_done(s):
    """migrc_add_pending_folios(): the batch's kept sources join the held ones."""
    b = s.buddy
    for nid in range(b.base.shape[0]):
        src = held_sentinel(b, nid, HELD_BATCH)
        dst = held_sentinel(b, nid, HELD_PENDING)
        while b.next[src] != src:
            frame = b.next[src]
            links_del(b.prev, b.next, frame)
            links_add_tail(b.prev, b.next, dst, frame)


@jit
def release_held(s, nid):
    """Free node nid's held sources (migrc_release_folio: straight to the buddy, no pcp)."""
    b = s.buddy
    head = held_sentinel(b, nid, HELD_PENDING)
    while b.next[head] != head:
        frame = np.int64(b.next[head])
        order = np.int64(b.order[frame])
        links_del(b.prev, b.next, frame)
        b.where[frame] = FRAME_USED
        b.order[frame] = -1
        __free_one_page(s, nid, frame, order, False)
