"""The buddy allocator (core/buddy.py), hand-worked on small nodes: boot's blocks, split and merge,
buddy_merge_likely's tail placement, the per-CPU lists' batches and drain, the high-order
watermark test, and runs with frames against runs with counts."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs

from simkit import CXL, DRAM, LOAD, STORE, counters, machine, make_sim, run, seq
from tierlab.core import buddy as bd
from tierlab.core.mmzone import zone_watermark_ok
from tierlab.core.state import WMARK_MIN
from tierlab.errors import ConfigError
from tierlab.workloads.base import Region


def sim_of(*pages_per_node, cpus=1, regions=(Region("a", "anon", 64),), **knobs):
    nodes = [(n, cpus if i == 0 else 0, DRAM if i == 0 else CXL) for i, n in enumerate(pages_per_node)]
    return make_sim(machine(*nodes), list(regions), page_alloc_model="buddy", **knobs)


def free_list(s, nid, order):
    b = s.buddy
    head = bd.free_list_sentinel_of(b, nid, order)
    out, x = [], int(b.next[head])
    while x != head:
        out.append(x - int(b.base[nid]))
        x = int(b.next[x])
    return out


def pcp_list(s, cpu, nid, order):
    b = s.buddy
    head = bd.pcp_sentinel(b, cpu, nid, bd.order_to_pindex(order))
    out, x = [], int(b.next[head])
    while x != head:
        out.append(x - int(b.base[nid]))
        x = int(b.next[x])
    return out


def lists(s, nid):
    return {o: free_list(s, nid, o) for o in range(bd.NR_PAGE_ORDERS) if free_list(s, nid, o)}


def empty_node(s, nid):
    """Take every free block off node nid's lists (as if all of it were allocated)."""
    for o in range(bd.NR_PAGE_ORDERS):
        for f in free_list(s, nid, o):
            bd.del_from_free_list(s, nid, int(s.buddy.base[nid]) + f, o)


def owned_by_lists(s, nid):
    """Per frame of node nid: 1 if a free or pcp block holds it."""
    b = s.buddy
    own = np.zeros(int(b.spanned[nid]), np.int64)
    for o in range(bd.NR_PAGE_ORDERS):
        for f in free_list(s, nid, o):
            own[f:f + (1 << o)] += 1
    for cpu in range(b.pcp_count.shape[0]):
        for pi in range(bd.NR_PCP_LISTS):
            o = bd.pindex_to_order(pi)
            for f in pcp_list(s, cpu, nid, o):
                own[f:f + (1 << o)] += 1
    return own


def check_buddy(s):
    """Every frame of every node is in exactly one place: a free block, a pcp block, a held block
    or a present page; free counts and nr_free agree with the lists; no free block has a free buddy
    of its order (it would have merged)."""
    b = s.buddy
    N = b.base.shape[0]
    owner = np.zeros(b.order.shape[0], np.int64)
    for nid in range(N):
        free = 0
        for o in range(bd.NR_PAGE_ORDERS):
            fl = free_list(s, nid, o)
            assert len(fl) == b.nr_free[nid, o]
            for f in fl:
                g = int(b.base[nid]) + f
                assert f % (1 << o) == 0 and f + (1 << o) <= b.spanned[nid]
                owner[g:g + (1 << o)] += 1
                assert b.where[g] == bd.FRAME_BUDDY and b.order[g] == o
                if o < bd.MAX_PAGE_ORDER:
                    assert not bd.page_is_buddy(s, nid, int(b.base[nid]) + (f ^ (1 << o)), o)
            free += len(fl) << o
        assert free == s.pgdat[nid].free
        for cpu in range(b.pcp_count.shape[0]):
            n = 0
            for pi in range(bd.NR_PCP_LISTS):
                o = bd.pindex_to_order(pi)
                for f in pcp_list(s, cpu, nid, o):
                    g = int(b.base[nid]) + f
                    owner[g:g + (1 << o)] += 1
                    n += 1 << o
            assert n == b.pcp_count[cpu, nid]
        for which in range(bd.NR_HELD_LISTS):
            head = bd.held_sentinel(b, nid, which)
            x = int(b.next[head])
            while x != head:
                owner[x:x + (1 << int(b.order[x]))] += 1
                x = int(b.next[x])
    present = np.flatnonzero(b.pfn >= 0)
    np.add.at(owner, b.pfn[present], 1)
    for nid in range(N):
        lo, hi = int(b.base[nid]), int(b.base[nid] + b.spanned[nid])
        assert (owner[lo:hi] == 1).all(), "a frame lost or in two places"
    assert len(np.unique(b.pfn[present])) == len(present)


# ---- boot, split, merge ---------------------------------------------------------------------------

def test_boot_frees_the_largest_aligned_blocks():
    s = sim_of(1024 + 512 + 3, 16).state
    assert lists(s, 0) == {10: [0], 9: [1024], 1: [1536], 0: [1538]}
    assert lists(s, 1) == {4: [0]}
    assert s.pgdat[0].free == 1539 and s.buddy.base[1] == 2048      # node 1 starts on a 4 MiB boundary
    check_buddy(s)


def test_rmqueue_smallest_splits_and_free_merges_back():
    s = sim_of(2048, 8).state
    f = bd.__rmqueue_smallest(s, 1, 0)
    base = int(s.buddy.base[1])
    assert f == base                                  # the head of the order-3 block
    assert lists(s, 1) == {2: [4], 1: [2], 0: [1]}    # expand(): the upper halves, one per order
    assert s.pgdat[1].free == 7
    assert bd.__rmqueue_smallest(s, 1, 1) == base + 2
    assert lists(s, 1) == {2: [4], 0: [1]}
    bd.__free_one_page(s, 1, base, 0, False)          # buddy 1 is free: order 1 at 0; its buddy 2 is not
    assert lists(s, 1) == {2: [4], 1: [0]}
    bd.__free_one_page(s, 1, base + 2, 1, False)      # 2 merges with 0, then with 4: order 3 again
    assert lists(s, 1) == {3: [0]} and s.pgdat[1].free == 8
    check_buddy(s)


def test_a_block_likely_to_merge_goes_to_the_tail():
    s = sim_of(2048, 16).state
    empty_node(s, 1)
    base = int(s.buddy.base[1])
    bd.add_to_free_list(s, 1, base + 2, 1, False)     # frames 2-3 free
    bd.__free_one_page(s, 1, base + 5, 0, False)      # buddy 4 busy; order-1 buddy 6 busy: head
    bd.__free_one_page(s, 1, base + 0, 0, False)      # buddy 1 busy, but order-1 buddy 2 is free: tail
    assert free_list(s, 1, 0) == [5, 0]
    bd.__free_one_page(s, 1, base + 9, 0, False)      # nothing free near 8-11: head
    assert free_list(s, 1, 0) == [9, 5, 0]
    bd.__free_one_page(s, 1, base + 1, 0, False)      # 1 + 0 -> order 1, + 2 -> order 2 at 0
    assert lists(s, 1) == {2: [0], 0: [9, 5]}


# ---- per-CPU lists --------------------------------------------------------------------------------

def test_batch_and_high_follow_zone_batchsize_and_zone_highsize():
    # min(managed / 1024, 256) / 4, then rounddown_pow_of_two(b + b / 2) - 1
    assert bd.zone_batchsize(1 << 18) == 63           # 1 GiB: 64 -> 96 -> 64 - 1
    assert bd.zone_batchsize(1 << 17) == 31           # 512 MiB: 32 -> 48 -> 32 - 1
    assert bd.zone_batchsize(16384) == 3              # 64 MiB: 4 -> 6 -> 4 - 1
    assert bd.zone_batchsize(1000) == 0               # 0 -> 1 -> 1 - 1 (the kernel's boot pageset is 0 too)
    assert bd.zone_highsize(1000, 63, 4) == 252 and bd.zone_highsize(4000, 63, 4) == 1000


def test_pcp_refills_in_batches_and_drains_past_high():
    s = sim_of(16384, cpus=1).state
    b = s.buddy
    assert b.batch[0] == 3
    high = int(b.high[0])
    f = bd.rmqueue(s, 0, 0, 0)                        # empty list: rmqueue_bulk takes 3 frames
    assert f == 0 and pcp_list(s, 0, 0, 0) == [1, 2] and b.pcp_count[0, 0] == 2
    assert s.pgdat[0].free == 16384 - 3              # pages on the pcp are not free for the watermarks
    taken = [f] + [bd.rmqueue(s, 0, 0, 0) for _ in range(high + 5)]
    assert taken == list(range(high + 6))            # refills come in address order
    for x in taken:
        bd.free_frames(s, 0, 0, x, 0)                # each to the head
        assert b.pcp_count[0, 0] < high              # at high, 3 pages go back to the buddy
    assert (owned_by_lists(s, 0) == 1).all()
    bd.drain_all_pages(s)
    assert b.pcp_count[0, 0] == 0 and s.pgdat[0].free == 16384
    assert lists(s, 0) == {10: list(range(0, 16384, 1024))}
    check_buddy(s)


def test_orders_above_costly_skip_the_pcp_and_pmd_has_its_own_list():
    s = sim_of(4096, cpus=1).state
    assert bd.rmqueue(s, 0, 0, 4) == 0 and s.buddy.pcp_count[0, 0] == 0
    f = bd.rmqueue(s, 0, 0, 9)                        # a THP: the PMD list, refilled with 2 blocks
    assert f == 512 and pcp_list(s, 0, 0, 9) == [1024] and s.buddy.pcp_count[0, 0] == 512
    assert lists(s, 0) == {4: [16], 5: [32], 6: [64], 7: [128], 8: [256], 9: [1536], 10: [2048, 3072]}


def test_the_high_order_watermark_needs_a_block():
    s = sim_of(2048, 16).state
    s.pgdat.wmark[1, :] = 0
    empty_node(s, 1)
    base = int(s.buddy.base[1])
    for f in (0, 2, 4, 6, 8, 10, 12, 14):              # 8 free pages, no two of them buddies
        bd.add_to_free_list(s, 1, base + f, 0, False)
    assert zone_watermark_ok(s, 1, 1, WMARK_MIN)
    assert not zone_watermark_ok(s, 1, 2, WMARK_MIN)
    bd.__free_one_page(s, 1, base + 1, 0, False)       # 0-1 now an order-1 block
    assert zone_watermark_ok(s, 1, 2, WMARK_MIN) and not zone_watermark_ok(s, 1, 4, WMARK_MIN)


@settings(max_examples=30, deadline=None)
@given(hs.lists(hs.tuples(hs.booleans(), hs.integers(0, 10), hs.integers(0, 1)), max_size=60))
def test_random_allocations_and_frees_keep_every_frame_in_one_place(script):
    s = sim_of(3000, cpus=2).state
    held = []
    for alloc, order, cpu in script:
        if alloc or not held:
            f = bd.rmqueue(s, cpu, 0, order)
            if f >= 0:
                held.append((f, order))
        else:
            f, o = held.pop(len(held) // 2)
            bd.free_frames(s, cpu, 0, f, o)
    used = np.zeros(s.buddy.order.shape[0], np.int64)
    for f, o in held:
        used[f:f + (1 << o)] += 1
    assert used.max(initial=0) <= 1
    assert (used[:3000] + owned_by_lists(s, 0) == 1).all()
    for f, o in held:
        bd.free_frames(s, 0, 0, f, o)
    bd.drain_all_pages(s)
    assert lists(s, 0) == {10: [0, 1024], 9: [2048], 8: [2560], 7: [2816], 5: [2944], 4: [2976], 3: [2992]}


# ---- runs -----------------------------------------------------------------------------------------

def test_a_run_without_pressure_counts_the_same_with_frames():
    regions = [Region("a", "anon", 256), Region("f", "file", 256)]
    out = []
    for model in ("counts", "buddy"):
        sim = make_sim(machine((4096, 1, DRAM), (4096, 0, CXL)), regions, page_alloc_model=model)
        run(sim, seq(range(256), STORE) + seq(range(256, 512), LOAD) + seq(range(0, 256, 3), LOAD))
        out.append(counters(sim))
    assert out[0] == out[1]
    check_buddy(sim.state)
    pfn = sim.state.buddy.pfn
    assert (pfn[:256] >= 0).all() and len(np.unique(pfn[:256])) == 256


@pytest.mark.parametrize("migrc", [0, 1])
def test_frames_survive_reclaim_and_demotion(migrc):
    """Demotion (each source's frames freed, or under MIGRC held until a flush) and eviction of
    page cache: every frame stays in exactly one place."""
    sim = make_sim(machine((1024, 1, DRAM), (1024, 0, CXL)),
                   [Region("a", "anon", 900, "bind", (0,)), Region("f", "file", 1500, "bind", (0,))],
                   page_alloc_model="buddy", demotion_enabled=1, migrc=migrc, lru_batch_size=1)
    run(sim, seq(range(900), STORE) + seq(range(900), LOAD) + seq(range(900, 2400), LOAD)
        + seq(range(0, 900, 2), LOAD))
    c = counters(sim)
    assert c["pgdemote_kswapd"] + c["pgdemote_direct"] > 0 and c["pgsteal_kswapd"] > c["pgdemote_kswapd"]
    check_buddy(sim.state)


def test_page_alloc_model_is_checked_and_recorded():
    with pytest.raises(ConfigError, match="page_alloc_model"):
        make_sim(machine((1024, 1, DRAM)), [Region("a", "anon", 8)], page_alloc_model="slab")
    sim = sim_of(1024)
    assert sim.config()["page_alloc_model"] == "buddy"
