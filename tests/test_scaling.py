"""--scale keeps the answer (docs/scaling.md): the seed 000 table and a hint-fault promotion case
give the same ratios at two scales."""
from __future__ import annotations

import pytest

from tierlab.api import run_config
from tierlab.reproduce import run_reproduction

FULL_ACCESSES = 64 * 200_000          # random reads of the full-size run


def promotion_shares(scale):
    """A 2 GiB file mmap'd on qemu-2node (1 GiB DRAM + 8 GiB CXL) and read at random in tiering mode
    with the kernel's default timers: shares of the file's pages that took a hint fault and that
    were promoted, and the run's length in full-size seconds."""
    res = run_config({"machine": "qemu-2node", "workload": "random-read", "scale": scale, "seed": 5,
                      "params": {"file_size": "2GiB", "accesses": str(int(FULL_ACCESSES / scale)),
                                 "io": "mmap", "prefault": "1"},
                      "knobs": {"numa_balancing": 2, "demotion_enabled": 1}})
    pages = (2 << 30) // 4096 / scale
    c = res.counters
    return c["numa_hint_faults"] / pages, c["pgpromote_success"] / pages, res.sim_time_s * scale


def test_hint_fault_promotion_is_the_same_share_at_scales_32_and_64():
    hint32, promo32, t32 = promotion_shares(32)
    hint64, promo64, t64 = promotion_shares(64)
    assert t64 == pytest.approx(t32, rel=0.01)         # the same full-size duration (a few s)
    assert promo32 > 0.1                               # promotion happens, at both scales
    assert hint64 == pytest.approx(hint32, rel=0.03)
    assert promo64 == pytest.approx(promo32, rel=0.10)


def test_hint_fault_promotion_drifts_as_documented_from_scale_8_to_64():
    """docs/scaling.md: on a 1 GiB DRAM node kswapd's round outlasts the scaled watermark gap, so
    promotions are refused more often per page at larger scales; the drift stays within the
    documented bounds (docs/scaling.md's second table: time 3.1 % from 8 to 64; with the adapting
    scan period, hint faults -2.2 %, time -1.4 %, promotions -18.5 %)."""
    hint8, promo8, t8 = promotion_shares(8)
    hint64, promo64, t64 = promotion_shares(64)
    assert promo64 < promo8
    assert hint64 == pytest.approx(hint8, rel=0.08)
    assert t64 == pytest.approx(t8, rel=0.035)


@pytest.fixture(scope="module")
def seed000_two_scales():
    return [run_reproduction("pagecache-promotion-128g", scale=f, steady_cycles=2, cycles=12).set_index(
        ["experiment", "metric"]) for f in (32, 64)]


def test_seed000_predicted_columns_agree_at_scales_32_and_64(seed000_two_scales):
    a, b = seed000_two_scales
    pred = a.role == "predicted"
    counts = [m for m in a.index if m[1].endswith("_rounds")]
    for key in a.index[pred]:
        if key in counts:
            assert a.simulated[key] == b.simulated[key], key
        else:
            assert b.simulated[key] == pytest.approx(a.simulated[key], rel=0.01), key


def hit_rate_gbps(scale, tasks=4):
    """4 tasks pread() a cached 1 GiB file on qemu-2node at random, 16 reads per page after the
    prefault phase: the read phase's throughput (bytes per simulated second, which --scale keeps)."""
    from tierlab.api import build
    pages = (1 << 30) // 4096 // scale
    acc = pages * 16 // tasks
    sim = build({"machine": "qemu-2node", "workload": "random-read", "scale": scale, "seed": 1,
                 "params": {"file_size": "1GiB", "accesses": str(acc), "io": "read", "prefault": "1",
                            "tasks": str(tasks)}})
    res = sim.run().result()
    return acc * tasks * 4096 / (res.sim_time_s - sim.phase_start_ns / 1e9) / 1e9


def test_page_cache_hit_rate_is_the_same_at_scales_64_and_256():
    """Issue #33 measured uniform random-read throughput 31.5 GB/s at scale 256 and 54.6 at 64 (its
    config not recorded); measured here (docs/scaling.md) the hit phase keeps its rate."""
    assert hit_rate_gbps(256) == pytest.approx(hit_rate_gbps(64), rel=0.01)
