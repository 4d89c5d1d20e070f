"""One access path: `engine.access_present()` is written once and used by both the fast case (which
stops before any side effect at a fault, a hint fault, a write-protect fault or a promotion
candidate) and the general case
(`access_fault`, then `access_present` again). Running every access through the general case (Simulation(fast_case=False)) must
end in bit-identical state: every per-page, per-node, per-CPU, per-task and per-mm value, every
counter, clock, mark and time-series row. Four seed-shaped scenarios, then hypothesis-built ones
with large folios, writes, mmap'd files, several tasks and every mechanism switched on or off."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as hs

import simkit as sk
from tierlab.api import Simulation
from tierlab.core.ops import OP_PAGE, OP_READ, OP_STREAM
from tierlab.core.state import state_arrays
from tierlab.core.vmstat import VMSTAT_NAMES
from tierlab.kernel import Kernel
from tierlab.machine import Machine
from tierlab.workloads import make_workload
from tierlab.workloads.base import Region

SCENARIOS = {
    # seed 000's shape: page cache on CXL, v3 promotion with its per-task cap, then list_add and the
    # unlimited list, with the NUMA scanner walking the buffer
    "file-read promotion v3": ("dram-cxl-1tb", 256, "file-read",
                               {"file_size": "128GiB", "read_size": "16MiB", "cycles": 5, "file_policy": "bind:1"},
                               {"numa_balancing": 2, "pagecache_promotion_enabled": 1,
                                "promote_rate_limit_MBps": 1000}),     # the cap binds: deferred pages
    "file-read list_add unlimited": ("dram-cxl-1tb", 256, "file-read",
                                     {"file_size": "128GiB", "read_size": "16MiB", "cycles": 4, "file_policy": "bind:1"},
                                     {"numa_balancing": 2, "pagecache_promotion_enabled": 1,
                                      "pagecache_promotion_order": "add", "pagecache_promotion_cap": "unlimited"}),
    # mmap'd random reads under memory pressure: faults, kswapd demotion, hint faults and promotion
    "random-read mmap tiering": ("qemu-2node", 32, "random-read",
                                 {"file_size": "4GiB", "accesses": 400_000},
                                 {"numa_balancing": 2, "demotion_enabled": 1, "scan_delay_ms": 0}),
    # anon memory, zipf, NORMAL + tiering mode
    "random-read anon zipf": ("qemu-2node", 32, "random-read",
                              {"file_size": "3GiB", "accesses": 400_000, "target": "anon", "dist": "zipf"},
                              {"numa_balancing": 3, "demotion_enabled": 1, "scan_delay_ms": 0,
                               "scan_period_min_ms": 1, "scan_size_mb": 4}),
}


def assert_same_run(fast, slow, what):
    for (name, a), (_, b) in zip(state_arrays(fast.state), state_arrays(slow.state)):
        assert np.array_equal(a, b), f"{what}: {name} differs between the fast and the general case"
    ts_fast = np.concatenate(fast._ts_rows) if fast._ts_rows else np.zeros(0)
    ts_slow = np.concatenate(slow._ts_rows) if slow._ts_rows else np.zeros(0)
    assert np.array_equal(ts_fast, ts_slow), f"{what}: time series differ"


def _run(machine, scale, workload, params, knobs, fast_case):
    m = Machine.load(machine).scaled(scale)
    w = make_workload(workload, params, scale=scale)
    return Simulation(m, Kernel(**knobs), w, seed=3, sample_interval_ms=50, fast_case=fast_case).run()


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_fast_and_general_case_agree(name):
    fast = _run(*SCENARIOS[name], fast_case=True)
    slow = _run(*SCENARIOS[name], fast_case=False)
    assert_same_run(fast, slow, name)
    assert fast.state.counters.sum() > 0
    if "promotion v3" in name:
        c = dict(zip(VMSTAT_NAMES, fast.state.counters.sum(axis=0)))
        assert c["promote_deferred_pages"] > 0 and c["pgpromote_success"] > 0


OPS = {"anon": [sk.LOAD, sk.STORE, sk.LOAD | OP_PAGE],
       "file": [sk.READ, sk.WRITE, OP_READ, OP_READ | OP_STREAM],
       "mapped": [sk.LOAD, sk.STORE, sk.READ]}


@hs.composite
def scenarios(draw):
    """A small machine (a DRAM node with CPUs and one or two CPU-less lower nodes), regions of
    every kind with folio orders 0-3, 1-3 tasks, an access stream mixing every op, and knobs. The
    mechanisms that make the fast case stop come first in each choice (hypothesis favours and
    shrinks towards the first), so most examples reach hint faults, write-protect faults (stores
    to read-only PTEs of mmap'd files, of swapped-in and of promoted anon folios) and promotion
    candidates."""
    nodes = [(draw(hs.integers(96, 400)), draw(hs.integers(1, 3)), sk.DRAM)]
    nodes += [(draw(hs.integers(64, 600)), 0, sk.CXL) for _ in range(draw(hs.integers(1, 2)))]
    regions = []
    for i in range(draw(hs.integers(1, 4))):
        # mmap'd files first: loads then stores of the same pages are write-protect faults
        kind = draw(hs.sampled_from(["mapped", "anon", "file"]))
        pages = draw(hs.integers(8, 300))
        order = draw(hs.integers(0, 3))
        policy = draw(hs.sampled_from(["default", "default", "bind", "preferred", "interleave"]))
        nds = (0,) if policy == "default" else tuple(sorted(draw(hs.sets(hs.integers(0, len(nodes) - 1), min_size=1))))
        if i == 0 and draw(hs.sampled_from([True, False])):
            # page cache on a lower node: what makes page-cache promotion candidates
            kind, policy, nds = "file", "bind", (len(nodes) - 1,)
        regions.append(Region(f"r{i}", "anon" if kind == "anon" else "file", pages, order=order,
                              mapped=kind == "mapped", policy=policy, nodes=() if policy == "default" else nds))
    tasks = draw(hs.integers(1, 3))
    knobs = {
        "numa_balancing": draw(hs.sampled_from([2, 3, 0])),
        "demotion_enabled": draw(hs.sampled_from([1, 0])),
        "pagecache_promotion_enabled": draw(hs.sampled_from([1, 0])),
        "promote_rate_limit_MBps": draw(hs.sampled_from([65536, 4, 0])),
        "lru_batch_size": draw(hs.sampled_from([1, 4, 31])),
        "swap_size": draw(hs.sampled_from([0, 64, 4096])),
        "scan_delay_ms": 0, "scan_period_min_ms": 1, "scan_size_mb": 1,
        "hot_threshold_ms": draw(hs.sampled_from([1, 1000])),
    }
    seed = draw(hs.integers(0, 2**16))
    n = draw(hs.integers(50, 1500))
    return nodes, regions, tasks, knobs, seed, n


def _scripted(nodes, regions, tasks, knobs, seed, n, fast_case):
    sim = Simulation(sk.machine(*nodes), Kernel(**knobs), sk.Scripted(regions, tasks), seed=seed,
                     sample_interval_ms=1, fast_case=fast_case)
    rng = np.random.default_rng(seed)
    starts = np.cumsum([0] + [r.pages for r in regions])
    kinds = ["anon" if r.kind == "anon" else ("mapped" if r.mapped else "file") for r in regions]
    per = []
    for _ in range(tasks):
        r = rng.integers(0, len(regions), n)
        off = rng.zipf(1.2, n) % np.array([x.pages for x in regions])[r]
        ops = [OPS[kinds[ri]][rng.integers(0, len(OPS[kinds[ri]]))] for ri in r]
        per.append(list(zip((starts[r] + off).tolist(), ops)))
    try:
        sk.run(sim, *per)
    except Exception as e:   # an OOM must happen the same way both ways
        return sim, type(e).__name__
    return sim, None


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_fast_and_general_case_agree_on_any_scenario(sc):
    fast, err_fast = _scripted(*sc, fast_case=True)
    slow, err_slow = _scripted(*sc, fast_case=False)
    assert err_fast == err_slow
    assert_same_run(fast, slow, "scenario")


def test_fast_and_general_case_agree_on_write_protect_faults():
    """Stores to read-only PTEs: an mmap'd file read then written, and anon folios promoted by hint
    faults (remove_migration_pte leaves them read-only) then written."""
    nodes = [(96, 1, sk.DRAM), (400, 0, sk.CXL)]
    regions = [Region("m", "file", 64, mapped=True), Region("a", "anon", 160)]
    knobs = {"numa_balancing": 2, "swap_size": 64, "scan_delay_ms": 0, "scan_period_min_ms": 1,
             "scan_size_mb": 1, "lru_batch_size": 1}
    runs = []
    for fast_case in (True, False):
        sim = Simulation(sk.machine(*nodes), Kernel(**knobs), sk.Scripted(regions, 1), seed=1,
                         sample_interval_ms=1, fast_case=fast_case)
        per = sk.seq(range(64), sk.LOAD) + sk.seq(range(64), sk.STORE) + sk.seq(range(64, 224), sk.STORE)
        # ~5 ms of the file's faults, then ~20 ms of loads: NUMA scans (at scheduler ticks, every
        # 8-12 ms with the 2-tick node_stamp push) and hint faults
        per += sk.seq(list(range(64, 224)) * 600, sk.LOAD) + sk.seq(range(64, 224), sk.STORE)
        sk.run(sim, per)
        runs.append(sim)
    assert_same_run(runs[0], runs[1], "write-protect faults")
    c = sk.counters(runs[0])
    # 64 file read faults + 64 write-protect faults, one fault per anon page, and more
    # write-protect faults after promotions
    assert c["pgfault"] > 64 + 64 + 160
    assert c["pgpromote_success"] > 0
