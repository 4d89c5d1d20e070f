"""The order of a new anonymous folio: multi-size THP and the variable-order series it grew from.

The `anon_folio_orders` knob picks the policy of a write fault on unpopulated anonymous memory
(do_anonymous_page's allocation):
- `region` (tierlab's default): the region's declared order, lowered to fit (page_alloc.folio_order_for),
  allocated like an order-0 page (reclaim until it succeeds, no fallback, no per-size counts);
  every run before seed 001's policies.
- `baseline-4k`: order 0 (the series' baseline kernel).
- `v1`: the preferred order (`arch_wants_pte_order`, 64 KiB by default: arm64's contiguous-PTE
  size), else the highest lower order >= 2 whose naturally aligned range lies inside the VMA and
  has only none PTEs; when the allocation fails, the next lower order (the v1 retry loop).
- `v2` (seed 001, "variable-order, large folios for anonymous memory" v2, Ryan Roberts,
  2023-07-03): the same choice of order (calc_anon_folio_order_alloc); an allocation failure
  falls straight to order 0.
- `v2-simple-order`: the preferred order if its range fits and is unpopulated, else order 0 (Yu
  Zhao's suggestion the cover letter measures).
- `mthp` (merged in 6.8, mm/memory.c alloc_anon_folio(), include/linux/huge_mm.h
  thp_vma_allowable_orders / thp_vma_suitable_order): the orders enabled in
  `huge_anon_orders_always` (the sysfs hugepages-<size>kB/enabled = always), the highest one whose
  range fits and is unpopulated, then on allocation failure each lower enabled one. The PMD order
  is do_huge_pmd_anonymous_page() (thp_fault_alloc / thp_fault_fallback).
Order 1 is never used for anon (THP_ORDERS_ALL_ANON). Large allocations use GFP_TRANSHUGE_LIGHT
(defrag = madvise, the default, for a VMA without MADV_HUGEPAGE): no kswapd wake-up, no reclaim,
no compaction -- with the buddy allocator (buddy.py) they fail when no free block of the order is
left; with page counts only when the node is below its MIN watermark.

Counters: per size `anon_fault_alloc` and `anon_fault_fallback` (/sys/kernel/mm/transparent_hugepage/
hugepages-<size>kB/stats, MthpStat) and vmstat thp_fault_alloc / thp_fault_fallback; `split`,
`split_deferred`, `swpout` and `swpout_fallback` (reclaim.py: a large anon folio goes to swap whole
when add_to_swap() finds room for all its pages, else it is split and its pages go one by one).

Simplified: no userfaultfd, no memcg (so no anon_fault_fallback_charge), top-level THP `always`
and every other size `never` (no madvise or inherit masks); the PTEs are checked once, before the
allocation (no race with another fault under the PTL); the PMD fault's own test is pmd_none here
approximated by every PTE of the range being none, and 6.12 tries the PMD order apart from the
smaller ones (do_huge_pmd_anonymous_page before alloc_anon_folio), here in the same loop; no huge
zero page (a read fault maps the 4 KiB zero page, page by page); a folio an unmap cuts is split at
once and counted in `split_deferred` and `split` together, where the kernel queues it and its
deferred-split shrinker splits it only under memory pressure (docs/oracle.md compares the two).
"""
from __future__ import annotations

import numpy as np

from ._jit import jit_inline
from .buddy import HPAGE_PMD_ORDER
from .params import P
from .state import F2_CONTIG, F2_MAPPED, F2_PRESENT, F2_SWAPPED, ORDER_MASK, PG_LRU, folio_order, list_add_tail
from .vmstat import MthpStat, Vm

# the anon_folio_orders knob (its names: tierlab.kernel.KNOBS)
ANON_FOLIO_REGION = 0
ANON_FOLIO_BASELINE_4K = 1
ANON_FOLIO_V1 = 2
ANON_FOLIO_V2_SIMPLE_ORDER = 3
ANON_FOLIO_V2 = 4
ANON_FOLIO_MTHP = 5

THP_ORDERS_ALL_ANON = ((1 << (HPAGE_PMD_ORDER + 1)) - 1) & ~3     # orders 2..PMD


@jit_inline
def anon_orders(p):
    """The orders a fault may try (bit n: order n), order 0 always among them."""
    pol = np.int64(p[P.ANON_FOLIO_ORDERS])
    pref = np.int64(p[P.ARCH_WANTS_PTE_ORDER])
    if pol == ANON_FOLIO_V1 or pol == ANON_FOLIO_V2:
        return (((np.int64(1) << (pref + 1)) - 1) & THP_ORDERS_ALL_ANON) | 1
    if pol == ANON_FOLIO_V2_SIMPLE_ORDER:
        return (np.int64(1) << pref) | 1
    if pol == ANON_FOLIO_MTHP:
        return (np.int64(p[P.HUGE_ANON_ORDERS_ALWAYS]) & THP_ORDERS_ALL_ANON) | 1
    return np.int64(1)


@jit_inline
def next_order(orders, order):
    """The highest order in the mask below `order` (next_order() of huge_mm.h); 0 at the end."""
    o = order - 1
    while o > 0 and not (orders >> o) & 1:
        o -= 1
    return max(o, 0)


@jit_inline
def highest_order(orders):
    o = np.int64(HPAGE_PMD_ORDER)
    while o > 0 and not (orders >> o) & 1:
        o -= 1
    return o


@jit_inline
def anon_range_suitable(s, r, page, order):
    """thp_vma_suitable_order() and the pte_range_none() test: the naturally aligned range of
    2**order pages around `page` lies inside the VMA and no PTE in it is populated (present, the
    zero page, or a swap entry)."""
    nr = np.int64(1) << order
    head = page & ~(nr - 1)
    if head < s.regions.start[r] or head + nr > s.regions.end[r]:
        return False
    for i in range(nr):
        if s.pages.flags2[head + i] & (F2_PRESENT | F2_MAPPED | F2_SWAPPED):
            return False
    return True


@jit_inline
def anon_fault_order(s, p, r, page):
    """The order alloc_anon_folio() starts from: the highest allowed order whose range suits, then
    the orders it may fall back to (the mask from there down; `v2` and `v2-simple-order`: order 0
    only). Returns (order, orders)."""
    orders = anon_orders(p)
    order = highest_order(orders)
    while order > 0 and not anon_range_suitable(s, r, page, order):
        order = next_order(orders, order)
    pol = np.int64(p[P.ANON_FOLIO_ORDERS])
    if pol == ANON_FOLIO_V2 or pol == ANON_FOLIO_V2_SIMPLE_ORDER:
        orders = (np.int64(1) << order) | 1
    return order, orders


@jit_inline
def count_mthp_stat(s, nid, order, item, pmd_item):
    """count_mthp_stat() of a large folio's size, and the vmstat event of the PMD size (none for
    order 0)."""
    if order == 0:
        return
    s.mthp[order, item] += 1
    if order == HPAGE_PMD_ORDER:
        s.counters[nid, pmd_item] += 1


@jit_inline
def anon_orders_policy(p):
    """A seed-001 policy is on (not `region`, whose faults page_alloc.folio_order_for serves)."""
    return np.int64(p[P.ANON_FOLIO_ORDERS]) != ANON_FOLIO_REGION


@jit_inline
def zap_rmap_batched(p):
    """An unmap removes a large folio's rmap once per folio (zap_present_folio_ptes, 6.9+; seed
    001's v1 with its "batch zap" patches), or once per PTE (v2 and v2-simple-order, which dropped
    them: the cover letter's v1/v2 kernel-time gap)."""
    pol = np.int64(p[P.ANON_FOLIO_ORDERS])
    return pol != ANON_FOLIO_V2 and pol != ANON_FOLIO_V2_SIMPLE_ORDER


@jit_inline
def split_folio(s, head):
    """split_folio() of an anon folio on an LRU list into order-0 folios: every page keeps the
    folio's flags, PTE state, stamp and MGLRU generation, and goes on the list beside it
    (lru_add_split_folio: the tails before the head, the last one newest); the list sizes count
    pages, so they do not change. Counted in the size's `split` (thp_split_page for the PMD size).
    Returns False when the folio is off the LRU (in an lru_add batch or isolated), where the
    kernel's split would fail to freeze it: it stays whole."""
    pg = s.pages
    order = folio_order(s, head)
    if not (pg.flags[head] & PG_LRU):
        s.mthp[order, MthpStat.SPLIT_FAILED] += 1
        return False
    split_folio_pages(s, head, order)
    for i in range(order_nr(order) - 1, 0, -1):
        list_add_tail(s, head, head + i)
    return True


@jit_inline
def split_isolated_folio(s, head):
    """split_folio_to_list() of a folio reclaim has isolated, onto reclaim's own list: its pages
    become isolated order-0 folios that the caller (shrink_folio_list) goes on with. Counted as a
    split."""
    split_folio_pages(s, head, folio_order(s, head))


@jit_inline
def order_nr(order):
    return np.int64(1) << order


@jit_inline
def split_folio_pages(s, head, order):
    """__split_huge_page()'s per-page part: every tail gets the folio's flags, PTE state, stamp, node
    and MGLRU generation and becomes order 0 (frames head + i follow head + i - 1); counted in the
    size's `split` (thp_split_page for the PMD size)."""
    pg = s.pages
    gen_refs = pg.order[head] & ~ORDER_MASK
    for i in range(order_nr(order) - 1, 0, -1):
        x = head + i
        pg.order[x] = gen_refs
        pg.flags[x] = pg.flags[head]
        pg.flags2[x] = pg.flags2[head] | F2_CONTIG
        pg.stamp[x] = pg.stamp[head]
        pg.node[x] = pg.node[head]
    pg.order[head] = gen_refs
    count_mthp_stat(s, pg.node[head], order, MthpStat.SPLIT, Vm.THP_SPLIT_PAGE)


@jit_inline
def deferred_split_at(s, x):
    """An unmap whose range starts (or ends) at page x inside a large anon folio leaves it partly
    mapped: folio_remove_rmap_ptes() queues it for the deferred_split shrinker (split_deferred,
    thp_deferred_split_page), which here splits it at once (split_folio), so the unmap then frees
    only the pages it covers."""
    if x >= s.pages.order.shape[0]:
        return
    order = np.int64(s.pages.order[x] & ORDER_MASK)
    head = x & ~((np.int64(1) << order) - 1)
    if order == 0 or head == x or not (s.pages.flags2[head] & F2_PRESENT):
        return
    count_mthp_stat(s, s.pages.node[head], order, MthpStat.SPLIT_DEFERRED, Vm.THP_DEFERRED_SPLIT_PAGE)
    split_folio(s, head)
