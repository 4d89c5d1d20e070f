"""engine.hit_path is the common case of engine.access written against fewer arrays: the two must
have the same semantics. Each scenario runs twice, once with the hit path and once with every
access on the general path (Simulation(hit_path=False)), and must end in bit-identical state:
every per-page, per-node and per-task array, every counter, every clock and mark."""
from __future__ import annotations

import numpy as np
import pytest

from tierlab.api import Simulation
from tierlab.kernel import Kernel
from tierlab.machine import Machine
from tierlab.core.vmstat import VMSTAT_NAMES
from tierlab.workloads import make_workload

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


def _run(machine, scale, workload, params, knobs, hit_path):
    m = Machine.load(machine).scaled(scale)
    w = make_workload(workload, params, scale=scale)
    return Simulation(m, Kernel(**knobs), w, seed=3, sample_interval_ms=50, hit_path=hit_path).run()


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_hit_path_and_general_path_agree(name):
    fast = _run(*SCENARIOS[name], hit_path=True)
    slow = _run(*SCENARIOS[name], hit_path=False)
    for field, a, b in zip(fast.state._fields, fast.state, slow.state):
        assert np.array_equal(a, b), f"{name}: {field} differs between the hit path and the general path"
    ts_fast = np.concatenate(fast._ts_rows) if fast._ts_rows else np.zeros(0)
    ts_slow = np.concatenate(slow._ts_rows) if slow._ts_rows else np.zeros(0)
    assert np.array_equal(ts_fast, ts_slow)
    assert fast.state.counters.sum() > 0
    if "promotion v3" in name:
        c = dict(zip(VMSTAT_NAMES, fast.state.counters.sum(axis=0)))
        assert c["promote_deferred_pages"] > 0 and c["pgpromote_success"] > 0
