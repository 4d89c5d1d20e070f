"""Watermarks, kswapd, demotion, eviction and direct reclaim, hand-worked from the kernel's logic
(kernel-mechanisms.md §3 and §4.3).

Machines are tiny (hundreds of pages) so every watermark is a small number computed in the test from
__setup_per_zone_wmarks():

    pages_min = min_free_kbytes / 4;  min = pages_min * managed / total_managed
    tmp = max(min / 4, managed * watermark_scale_factor / 10000)
    low = min + tmp;  high = low + tmp;  promo = high + tmp

An allocation is served by the first zonelist node with free - nr >= LOW; only when every node is
below LOW does the slow path wake the kswapds of the zonelist and retry at MIN; below MIN the
allocating task reclaims directly (allocstall).
"""
from __future__ import annotations

import math

import pytest

import simkit
from simkit import CXL, DRAM, LOAD, READ, STORE, counters, has2, machine, node_counter, present, run, seq
from tierlab.core import state as st
from tierlab.errors import ConfigError
from tierlab.workloads.base import Region


def make_sim(*args, **knobs):
    """simkit.make_sim with readahead off: a read() miss adds one page, as these hand-worked
    reclaim cases count (readahead has its own tests, test_blkdev.py)."""
    knobs.setdefault("read_ahead_kb", 0)
    return simkit.make_sim(*args, **knobs)


def wmarks(managed, min_free_kbytes, wsf):
    total = sum(managed)
    pages_min = min_free_kbytes >> 2
    out = []
    for m in managed:
        mn = pages_min * m // total
        tmp = max(mn // 4, m * wsf // 10000)
        out.append([mn, mn + tmp, mn + 2 * tmp, mn + 3 * tmp])
    return out


def on_node(s, pages, nid):
    return [p for p in pages if present(s, p) and int(s.pages.node[p]) == nid]


def two_tier():
    """node 0: 256-page DRAM with a CPU; node 1: 1024-page CPU-less CXL (a lower tier)."""
    return machine((256, 1, DRAM), (1024, 0, CXL))


# min_free_kbytes = 640 -> pages_min 160: node 0 gets 32 (tmp 8), node 1 gets 128 (tmp 32)
WM0 = [32, 40, 48, 56]
WM1 = [128, 160, 192, 224]
FITS0 = 256 - 40        # pages node 0 serves before it is below LOW
FITS1 = 1024 - 160


# --------------------------------------------------------------------------------------------
# watermarks
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("mfk,wsf,expect", [
    # node 0: min = 256*3000//4000 = 192, tmp = max(48, 3) ; node 1: min = 64, tmp = max(16, 1)
    (1024, 10, [[192, 240, 288, 336], [64, 80, 96, 112]]),
    # watermark_scale_factor 1000: tmp = max(48, 300) and max(16, 100)
    (1024, 1000, [[192, 492, 792, 1092], [64, 164, 264, 364]]),
    # small reserve: min = 96 and 32, tmp = max(24, 3) and max(8, 1)
    (512, 10, [[96, 120, 144, 168], [32, 40, 48, 56]]),
])
def test_watermarks(mfk, wsf, expect):
    m = machine((3000, 1, DRAM), (1000, 0, CXL))
    assert wmarks([3000, 1000], mfk, wsf) == expect
    sim = make_sim(m, [Region("a", "anon", 8)], min_free_kbytes=mfk, watermark_scale_factor=wsf)
    assert sim.state.pgdat["wmark"].tolist() == expect


def test_default_min_free_kbytes():
    # calculate_min_free_kbytes(): int_sqrt(16 * lowmem KiB) clamped to [128, 262144]
    m = machine((3000, 1, DRAM), (1000, 0, CXL))          # 16000 KiB -> int_sqrt(256000) = 505 KiB
    assert math.isqrt(16 * 16000) == 505
    sim = make_sim(m, [Region("a", "anon", 8)])
    assert sim.state.pgdat["wmark"].tolist() == wmarks([3000, 1000], 505, 10)
    assert sim.state.pgdat["wmark"][0, st.WMARK_MIN] == (505 >> 2) * 3000 // 4000
    # 64 pages = 256 KiB -> int_sqrt(4096) = 64 KiB, clamped up to 128 KiB = 32 pages
    small = make_sim(machine((64, 1, DRAM)), [Region("a", "anon", 8)])
    assert small.state.pgdat["wmark"][0].tolist() == [32, 40, 48, 56]


def test_set_knobs_recomputes_watermarks():
    sim = make_sim(machine((3000, 1, DRAM), (1000, 0, CXL)), [Region("a", "anon", 8)], min_free_kbytes=1024)
    sim.set_knobs(watermark_scale_factor=1000)
    assert sim.state.pgdat["wmark"].tolist() == wmarks([3000, 1000], 1024, 1000)
    sim.set_knobs(min_free_kbytes=512)
    assert sim.state.pgdat["wmark"].tolist() == wmarks([3000, 1000], 512, 1000)


def test_two_tier_geometry():
    sim = make_sim(two_tier(), [Region("a", "anon", 8)], min_free_kbytes=640)
    assert sim.state.pgdat["wmark"].tolist() == [WM0, WM1]
    assert sim.state.pgdat["tier"].tolist() == [0, 1]
    assert sim.state.zonelist[0].tolist() == [0, 1]


# --------------------------------------------------------------------------------------------
# the zonelist walk and kswapd wake-ups
# --------------------------------------------------------------------------------------------

def test_allocation_spills_to_the_next_node_without_waking_kswapd():
    sim = make_sim(two_tier(), [Region("a", "anon", 2000)], lru_batch_size=1, min_free_kbytes=640,
                   swap_size=4096)
    s = sim.state
    run(sim, seq(range(400), STORE))
    assert len(on_node(s, range(400), 0)) == FITS0               # node 0 serves until LOW ...
    assert on_node(s, range(400), 0) == list(range(FITS0))
    assert len(on_node(s, range(400), 1)) == 400 - FITS0         # ... then the zonelist falls back
    assert s.pgdat["free"].tolist() == [WM0[1], 1024 - (400 - FITS0)]
    c = counters(sim)
    assert c["pageoutrun"] == 0 and c["pgscan_kswapd"] == 0 and c["allocstall"] == 0
    assert s.pgdat["kswapd_awake"].tolist() == [0, 0]


def test_kswapd_wakes_only_when_every_zonelist_node_is_below_low():
    sim = make_sim(two_tier(), [Region("a", "anon", 2000)], lru_batch_size=1, min_free_kbytes=640,
                   swap_size=4096)
    s = sim.state
    n = FITS0 + FITS1
    run(sim, seq(range(n), STORE))                  # both nodes exactly at LOW, nobody woken
    assert s.pgdat["free"].tolist() == [WM0[1], WM1[1]]
    assert counters(sim)["pageoutrun"] == 0
    run(sim, [(n, STORE)])                          # below LOW everywhere: wake_all_kswapds()
    assert int(s.pages.node[n]) == 0                      # served by node 0 at the MIN watermark
    assert node_counter(sim, 0, "pageoutrun") == 1
    assert node_counter(sim, 1, "pageoutrun") == 1
    assert node_counter(sim, 0, "pgscan_kswapd") > 0 and node_counter(sim, 1, "pgscan_kswapd") > 0
    assert counters(sim)["pswpout"] > 0             # no demotion: anon goes to swap
    assert counters(sim)["pgdemote_kswapd"] == 0
    for nid, wm in enumerate((WM0, WM1)):
        assert int(s.pgdat["free"][nid]) >= wm[st.WMARK_HIGH]


def test_bind_policy_wakes_kswapd_on_the_bound_node():
    sim = make_sim(two_tier(), [Region("a", "anon", 400, "bind", (0,))], lru_batch_size=1,
                   min_free_kbytes=640, swap_size=4096)
    s = sim.state
    run(sim, seq(range(FITS0), STORE))
    assert counters(sim)["pageoutrun"] == 0
    run(sim, seq(range(FITS0, 400), STORE))
    assert node_counter(sim, 0, "pageoutrun") >= 1
    assert node_counter(sim, 1, "pageoutrun") == 0
    assert int(s.pgdat["free"][1]) == 1024                   # nothing allocated outside the policy
    assert on_node(s, range(400), 1) == []
    assert counters(sim)["pswpout"] > 0


@pytest.mark.parametrize("numa_balancing,target", [(0, "high"), (1, "high"), (2, "promo"), (3, "promo")])
def test_kswapd_stops_at_high_or_promo(numa_balancing, target):
    """pgdat_balanced(): free >= HIGH, or >= PROMO when the MEMORY_TIERING bit is set. wsf 1500
    on 256 pages: tmp = max(8, 38) = 38, so the watermarks are 32/70/108/146, more than a
    SWAP_CLUSTER_MAX batch apart."""
    sim = make_sim(machine((256, 1, DRAM)), [Region("f", "file", 400)], lru_batch_size=1,
                   watermark_scale_factor=1500, numa_balancing=numa_balancing)
    s = sim.state
    assert s.pgdat["wmark"][0].tolist() == [32, 70, 108, 146]
    fits = 256 - 70
    run(sim, seq(range(fits), READ))
    assert counters(sim)["pageoutrun"] == 0 and int(s.pgdat["free"][0]) == 70
    run(sim, [(fits, READ)])                        # the only allocation below LOW; then idle
    c = counters(sim)
    assert c["pageoutrun"] == 1 and c["allocstall"] == 0
    assert s.pgdat["kswapd_awake"][0] == 0
    free = int(s.pgdat["free"][0])
    if target == "high":
        assert 108 <= free < 146                    # balanced at HIGH: no reclaim towards PROMO
    else:
        assert free >= 146
    assert free - 32 < (108 if target == "high" else 146)    # stopped within one batch of its goal
    assert c["pgsteal_kswapd"] == free - (256 - fits - 1)


# --------------------------------------------------------------------------------------------
# demotion
# --------------------------------------------------------------------------------------------

def test_demotion_instead_of_swap_for_anon():
    sim = make_sim(two_tier(), [Region("a", "anon", 400, "bind", (0,))], lru_batch_size=1,
                   min_free_kbytes=640, demotion_enabled=1)
    s = sim.state
    run(sim, seq(range(400), STORE))
    c = counters(sim)
    demoted = c["pgdemote_kswapd"] + c["pgdemote_direct"]
    assert c["pgdemote_kswapd"] > 0
    assert c["pswpout"] == 0 and c["oom_kill"] == 0
    assert all(present(s, p) for p in range(400))                 # nothing lost, nothing swapped
    assert not any(has2(s, p, st.F2_SWAPPED) for p in range(400))
    assert len(on_node(s, range(400), 1)) == demoted              # demoted folios live on node 1
    assert int(s.pgdat["free"][1]) == 1024 - demoted
    assert c["pgmigrate_success"] >= demoted
    assert c["pgmigrate_success"] == demoted                      # no other migration ran
    # demotion counts as reclaim; with no swap it is the only reclaim there is
    for kind in ("kswapd", "direct"):
        assert node_counter(sim, 0, f"pgsteal_{kind}") == node_counter(sim, 0, f"pgdemote_{kind}")
    assert node_counter(sim, 1, "pgdemote_kswapd") == 0           # node 1 has no lower tier
    assert s.lruvec["lru_size"][1].sum() == demoted
    assert s.lruvec["lru_size"][0].sum() + s.lruvec["lru_size"][1].sum() == 400


def test_demotion_of_page_cache_leaves_no_shadow():
    sim = make_sim(two_tier(), [Region("f", "file", 400, "bind", (0,))], lru_batch_size=1,
                   min_free_kbytes=640, demotion_enabled=1)
    s = sim.state
    run(sim, seq(range(400), READ))
    c = counters(sim)
    assert c["pgdemote_kswapd"] > 0
    assert c["pgsteal_kswapd"] >= c["pgdemote_kswapd"]
    assert all(present(s, p) for p in range(400))
    assert not any(has2(s, p, st.F2_SHADOW) for p in range(400))
    lower = on_node(s, range(400), 1)
    assert lower and lower == list(range(len(lower)))             # the oldest went down first
    run(sim, [(lower[0], READ)])                    # a hit on node 1, not a refault
    c = counters(sim)
    assert c["workingset_refault_file"] == 0 and c["pgmajfault"] == 0
    assert int(s.pages.node[lower[0]]) == 1


def test_demotion_cascades_to_the_lower_kswapd():
    """A demotion target that goes below LOW wakes its own kswapd, which (bottom tier) evicts."""
    m = machine((256, 1, DRAM), (300, 0, CXL))
    sim = make_sim(m, [Region("f", "file", 1500, "bind", (0,))], lru_batch_size=1, demotion_enabled=1)
    s = sim.state
    run(sim, seq(range(1500), READ))
    assert node_counter(sim, 0, "pgdemote_kswapd") > 0
    assert node_counter(sim, 1, "pageoutrun") >= 1
    assert node_counter(sim, 1, "pgsteal_kswapd") > 0
    assert node_counter(sim, 1, "pgdemote_kswapd") == 0
    ev = [p for p in range(1500) if has2(s, p, st.F2_SHADOW)]
    from_lower = [p for p in ev if int(s.pages.node[p]) == 1]
    from_top = [p for p in ev if int(s.pages.node[p]) == 0]
    assert len(from_lower) == node_counter(sim, 1, "pgsteal_kswapd")   # the bottom tier evicts
    # a folio node 0 could not demote (node 1 at MIN) is retried without demotion: evicted
    assert len(from_top) == node_counter(sim, 0, "pgmigrate_fail")
    assert node_counter(sim, 0, "pgsteal_kswapd") == node_counter(sim, 0, "pgdemote_kswapd") + len(from_top)
    assert int(s.pgdat["free"][1]) >= s.pgdat["wmark"][1, st.WMARK_MIN]


def test_demotion_disabled_evicts_page_cache_with_shadows():
    sim = make_sim(two_tier(), [Region("f", "file", 400, "bind", (0,))], lru_batch_size=1,
                   min_free_kbytes=640, demotion_enabled=0)
    s = sim.state
    run(sim, seq(range(400), READ))
    c = counters(sim)
    assert c["pgdemote_kswapd"] == 0 and c["pgmigrate_success"] == 0
    ev = [p for p in range(400) if has2(s, p, st.F2_SHADOW)]
    assert len(ev) == c["pgsteal_file"] > 0
    assert all(not present(s, p) for p in ev)
    assert ev == list(range(len(ev)))
    assert int(s.pgdat["free"][1]) == 1024
    run(sim, [(ev[0], READ)])
    assert counters(sim)["workingset_refault_file"] == 1


# --------------------------------------------------------------------------------------------
# anon: swap, or nothing
# --------------------------------------------------------------------------------------------

def test_anon_goes_to_swap():
    sim = make_sim(machine((256, 1, DRAM)), [Region("a", "anon", 400)], lru_batch_size=1, swap_size=1024)
    s = sim.state
    run(sim, seq(range(400), STORE))
    c = counters(sim)
    swapped = [p for p in range(400) if has2(s, p, st.F2_SWAPPED)]
    assert c["pswpout"] > 0
    assert len(swapped) == c["pswpout"] == int(s.sys[0]["nr_swap_used"])
    assert c["pgsteal_anon"] == c["pswpout"]
    assert all(not present(s, p) for p in swapped)
    run(sim, [(swapped[0], LOAD)])                  # swap-in: a major fault
    c2 = counters(sim)
    assert c2["pswpin"] == 1 and c2["pgmajfault"] == c["pgmajfault"] + 1
    assert c2["workingset_refault_anon"] == 1
    assert present(s, swapped[0]) and not has2(s, swapped[0], st.F2_SWAPPED)


@pytest.mark.parametrize("two_nodes", [False, True])
def test_anon_not_reclaimed_without_swap_or_demotion(two_nodes):
    if two_nodes:       # a lower tier exists, but demotion_enabled = 0
        m, regions = two_tier(), [Region("a", "anon", 100, "bind", (0,)), Region("f", "file", 800, "bind", (0,))]
    else:
        m, regions = machine((256, 1, DRAM)), [Region("a", "anon", 100), Region("f", "file", 800)]
    sim = make_sim(m, regions, lru_batch_size=1, swap_size=0, demotion_enabled=0)
    s = sim.state
    run(sim, seq(range(100), STORE) + seq(range(100, 900), READ))
    c = counters(sim)
    assert c["pgsteal_file"] > 0
    assert c["pgscan_anon"] == 0 and c["pgsteal_anon"] == 0 and c["pswpout"] == 0
    assert c["pgdemote_kswapd"] == 0 and c["pgdemote_direct"] == 0
    assert all(present(s, p) and int(s.pages.node[p]) == 0 for p in range(100))
    assert s.lruvec["lru_size"][0, 0] + s.lruvec["lru_size"][0, 1] == 100


def test_anon_beyond_memory_without_swap_is_out_of_memory():
    sim = make_sim(machine((256, 1, DRAM)), [Region("a", "anon", 400)], lru_batch_size=1)
    with pytest.raises(ConfigError, match="out of memory"):
        run(sim, seq(range(400), STORE))
    s = sim.state
    c = counters(sim)
    assert c["pswpout"] == 0 and c["pgsteal_anon"] == 0
    assert c["allocstall"] > 0 and c["oom_kill"] == 1
    resident = sum(present(s, p) for p in range(400))
    assert resident + int(s.pgdat["free"][0]) == 256
    assert int(s.pgdat["free"][0]) >= s.pgdat["wmark"][0, st.WMARK_MIN]


# --------------------------------------------------------------------------------------------
# direct reclaim
# --------------------------------------------------------------------------------------------

def test_direct_reclaim_when_kswapd_cannot_keep_up():
    """Zero-fill faults (~1 us) outrun kswapd writing anon pages to swap (10 us a page), so
    allocations reach MIN and the task reclaims itself."""
    sim = make_sim(machine((256, 1, DRAM)), [Region("a", "anon", 2000)], lru_batch_size=1, swap_size=4096)
    s = sim.state
    run(sim, seq(range(1000), STORE))
    c = counters(sim)
    assert c["allocstall"] > 0
    assert c["pgscan_direct"] > 0 and c["pgsteal_direct"] > 0
    assert c["pgsteal_kswapd"] > 0
    assert c["pgsteal_kswapd"] + c["pgsteal_direct"] == c["pswpout"]
    assert int(s.pgdat["free"][0]) >= s.pgdat["wmark"][0, st.WMARK_MIN]
    assert sum(present(s, p) for p in range(1000)) + int(s.pgdat["free"][0]) == 256


def test_no_direct_reclaim_when_kswapd_keeps_up():
    """Page-cache misses cost a random read from the SSD (80 us): kswapd easily keeps ahead."""
    sim = make_sim(machine((256, 1, DRAM)), [Region("f", "file", 2000)], lru_batch_size=1)
    run(sim, seq(range(2000), READ))
    c = counters(sim)
    assert c["pgsteal_kswapd"] > 0
    assert c["allocstall"] == 0 and c["pgscan_direct"] == 0


@pytest.mark.parametrize("demotion", [False, True])
def test_streaming_mmap_read_larger_than_memory_does_not_oom(demotion):
    from tierlab.core.ops import OP_STREAM
    if demotion:
        m, kn, region = (machine((1024, 1, DRAM), (4096, 0, CXL)), {"demotion_enabled": 1},
                         Region("m", "file", 3072, "bind", (0,), mapped=True))
    else:
        m, kn, region = machine((1024, 1, DRAM)), {}, Region("m", "file", 3072, mapped=True)
    sim = make_sim(m, [region], lru_batch_size=1, **kn)
    run(sim, seq(range(3072), LOAD | OP_STREAM))
    c = counters(sim)
    assert c["oom_kill"] == 0
    assert c["pgsteal_kswapd"] + c["pgsteal_direct"] >= 3072 - 1024


def test_large_folios_never_overcommit_swap():
    sim = make_sim(machine((256, 1, DRAM)), [Region("a", "anon", 400, order=2)], lru_batch_size=1, swap_size=6)
    with pytest.raises(ConfigError, match="out of memory"):
        run(sim, seq(range(400), STORE))
    s = sim.state
    assert int(s.sys[0]["nr_swap_used"]) <= 6
    assert counters(sim)["pswpout"] <= 6


def test_reclaim_costs_are_the_sourced_conversion():
    """core/costs.py's reclaim_scan_ns and reclaim_free_ns by hand from their sources: Dave Chinner's
    kswapd call graph (2021-04-13, % of all samples) gives the ratios, the 118.4-ns free of a 4 KiB
    folio (free_folio_ns, Hildenbrand 2024-01-29) the scale, 118.4 / 0.82 ns per 1 %: the scan is
    isolation+putback 0.69 and shrink_page_list's checks 0.89 (1.58 % -> 228 ns), the free is
    __remove_mapping's own 1.01, the deletion 1.56, the unlock's native part 0.09 and the free 0.82
    (3.48 % -> 502 ns)."""
    from tierlab.core.costs import COSTS
    per_pct = COSTS["free_folio_ns"][0] / 0.82
    assert COSTS["reclaim_scan_ns"][0] == round((0.69 + 0.89) * per_pct)
    assert COSTS["reclaim_free_ns"][0] == round((1.01 + 1.56 + 0.09 + 0.82) * per_pct)


def test_kswapd_pays_the_per_page_costs_for_clean_page_cache():
    """Random reads of a file twice node 0 (no swap, no demotion), the lock holds at 0 so that no
    lock time mixes in: kswapd's time is, folio by folio, what shrink_inactive_list and
    shrink_active_list charge -- reclaim_scan_ns for each folio isolated and checked
    (shrink_folio_list) and for each folio deactivated (shrink_active_list), reclaim_free_ns for
    each clean folio dropped from the page cache (__remove_mapping). Unmapped page cache needs no
    rmap walk and no TLB flush, so there is nothing else."""
    from tierlab.api import run_config
    from tierlab.core.costs import COSTS
    res = run_config({"machine": "qemu-2node", "workload": "random-read", "scale": 16,
                      "params": {"file_size": "2GiB", "policy": "bind:0", "accesses": 30_000, "io": "read"},
                      "knobs": {}, "seed": 3,
                      "costs": {"lru_lock_ns": 0.0, "lru_lock_folio_ns": 0.0, "xa_lock_ns": 0.0}})
    c = res.counters
    prof = res.profile[res.profile.entity == "kswapd0"].set_index("function").ns
    scan, free = COSTS["reclaim_scan_ns"][0], COSTS["reclaim_free_ns"][0]
    assert c["pgsteal_kswapd"] > 1000 and c["pgsteal_direct"] == 0 and c["pswpout"] == 0
    assert c["pgscan_kswapd"] == c["pgsteal_kswapd"]        # every isolated folio was clean and unmapped
    assert prof["shrink_folio_list"] == scan * c["pgscan_kswapd"]
    assert prof["shrink_active_list"] == scan * c["pgdeactivate"]
    assert prof["__remove_mapping"] == free * c["pgsteal_kswapd"]
    assert prof.get("other", 0.0) == 0.0


def test_direct_reclaim_round_end_snapshots_every_zonelist_node():
    """do_try_to_free_pages() ends with snapshot_refaults() for each node of the zonelist: a round
    that has its SWAP_CLUSTER_MAX pages is over, and from then on prepare_scan_control() compares
    each node's refault activations with the counts at that moment (kernel-mechanisms.md §4.3)."""
    import numpy as np
    from tierlab.core.reclaim import SWAP_CLUSTER_MAX, direct_reclaim_batch, may_deactivate
    from tierlab.core.vmstat import Vm
    sim = make_sim(two_tier(), [Region("f", "file", 64)])
    s = sim.state
    for nid in (0, 1):
        s.lruvec["lru_size"][nid, 2:] = (100, 100)               # file lists 100:100: not low
    s.counters[0, Vm.WORKINGSET_ACTIVATE_FILE] += 5
    s.counters[1, Vm.WORKINGSET_ACTIVATE_ANON] += 2
    assert may_deactivate(s, sim.p, 0, True) and may_deactivate(s, sim.p, 1, False)
    s.task["dr_i"][0] = 0
    s.task["dr_total"][0] = SWAP_CLUSTER_MAX                       # the round has its pages
    over, _ = direct_reclaim_batch(s, sim.p, 0, np.array([0, 1], dtype=np.int64), 2,
                                   np.zeros(4 * SWAP_CLUSTER_MAX, dtype=np.int64))
    assert over
    assert s.lruvec["refaults"][0].tolist() == [0, 5] and s.lruvec["refaults"][1].tolist() == [2, 0]
    assert not may_deactivate(s, sim.p, 0, True) and not may_deactivate(s, sim.p, 1, False)
