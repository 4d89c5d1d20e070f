"""task_numa_fault() -> task_numa_placement() -> update_task_scan_period() for promoted folios,
hand-worked from kernel/sched/fair.c:

- do_numa_page() passes the target node after a successful promotion, so the fault is on a top-tier
  node and task_numa_fault() records it (it returns early only for a fault left on the slow tier);
  the folio was on another node at the fault (remote) and had no last cpupid (private);
- the placement runs once jiffies are past numa_migrate_retry and the mm's numa_scan_seq has moved
  since the task's last placement; it first sets numa_scan_period_max = task_scan_max() for the RSS;
- update_task_scan_period()'s "no faults recorded" test is local + shared == 0 (or a failed
  migration): it doubles the period, capped at numa_scan_period_max, and moves mm->numa_next_scan to
  now + the new period. A promoted fault is remote and private, so in mode 2 every placement doubles;
- otherwise ps_ratio = 10 * private / (private + shared) >= 7 slows the scan by
  (ps_ratio - 7) * DIV_ROUND_UP(period, 10), and with neither ratio at 7 it speeds up by
  (7 - max(lr, ps)) tenths, clamped to [task_scan_min, task_scan_max];
- numa_migrate_preferred() then sets the next retry min(HZ, msecs_to_jiffies(period) / 16) jiffies
  on, once a preferred node is set (the first placement that sees a buffered fault).
"""
from __future__ import annotations

import numpy as np

from simkit import CXL, DRAM, STORE, machine, make_sim, run, seq
from tierlab.core.numa_balancing import task_numa_fault, task_scan_max_ms, task_scan_min_ms
from tierlab.workloads.base import Region

GIB = 1 << 18          # pages


def _sim():
    m = machine((4096, 1, DRAM), (4096, 0, CXL))
    sim = make_sim(m, [Region("a", "anon", 64)], numa_balancing=2)
    run(sim, seq(range(64), STORE))
    return sim


def test_scan_period_bounds_follow_the_rss():
    p = _sim().p
    # 256 MB windows: the floor is 1000 / (2560 / 256) = 100 ms
    assert (task_scan_min_ms(p, 0), task_scan_max_ms(p, 0)) == (1000, 60000)           # one window
    assert (task_scan_min_ms(p, 98304), task_scan_max_ms(p, 98304)) == (500, 30000)    # 384 MiB: 2
    # 192 GiB: 768 windows; 1000 / 768 and 60000 / 768 = 78 are both under the floor
    assert (task_scan_min_ms(p, 192 * GIB), task_scan_max_ms(p, 192 * GIB)) == (100, 100)
    # 20 GiB: 80 windows, 60000 / 80 = 750
    assert (task_scan_min_ms(p, 20 * GIB), task_scan_max_ms(p, 20 * GIB)) == (100, 750)


def _fault(sim, j, nr=1, local=False, priv=True):
    # a promoted fault by default: remote and private (jiffy j, HZ 250)
    task_numa_fault(sim.state, sim.p, 0, nr, local, priv, np.int64(j) * 4_000_000)


def test_promoted_faults_double_the_period_each_pass():
    sim = _sim()
    s = sim.state
    t, mm = s.task[0], s.mm[0]
    mm["rss_anon"], mm["rss_file"] = 98304, 0       # 384 MiB: task_scan_min 500, task_scan_max 30000
    t["numa_scan_period"] = 1000
    mm["numa_scan_seq"] = 1
    _fault(sim, 1000)
    # first placement: nothing recorded yet -> doubled, next scan 2000 ms = 500 jiffies on
    assert int(t["numa_scan_seq"]) == 1 and int(t["numa_scan_period_max"]) == 30000
    assert int(t["numa_scan_period"]) == 2000 and int(mm["numa_next_scan"]) == 1500
    assert int(t["numa_preferred_nid"]) == -1 and int(t["numa_migrate_retry"]) == 0
    assert (int(t["numa_faults_remote"]), int(t["numa_faults_local"])) == (1, 0)
    assert (int(t["numa_faults_private"]), int(t["numa_faults_shared"])) == (1, 0)
    _fault(sim, 1001, nr=4)                         # same pass: no placement, counts only
    assert int(t["numa_scan_period"]) == 2000 and int(t["numa_faults_remote"]) == 5
    mm["numa_scan_seq"] = 2
    _fault(sim, 1100)
    # 5 remote private faults: local + shared = 0 -> doubled again, next scan 1000 jiffies on; the
    # preferred node is set and the retry is min(250, msecs_to_jiffies(4000) / 16 = 62) jiffies on;
    # the doubling branch leaves the locality counts as they are
    assert int(t["numa_scan_period"]) == 4000 and int(mm["numa_next_scan"]) == 2100
    assert int(t["numa_preferred_nid"]) == 0 and int(t["numa_migrate_retry"]) == 1162
    assert (int(t["numa_faults_remote"]), int(t["numa_faults_private"])) == (6, 1)
    mm["numa_scan_seq"] = 3
    _fault(sim, 1162)                               # not after the retry jiffy: no placement
    assert int(t["numa_scan_seq"]) == 2 and int(t["numa_scan_period"]) == 4000
    _fault(sim, 1163)
    assert int(t["numa_scan_seq"]) == 3 and int(t["numa_scan_period"]) == 8000
    # a large RSS caps it at task_scan_max (here also task_scan_min): 100 ms
    mm["rss_anon"] = 192 * GIB
    mm["numa_scan_seq"] = 4
    _fault(sim, 2000)
    assert int(t["numa_scan_period"]) == 100 and int(t["numa_scan_period_max"]) == 100
    assert int(mm["numa_next_scan"]) == 2025


def test_local_or_shared_faults_move_the_period_by_tenths():
    """The other branch, reached by local or shared faults (mode 1/3's, not recorded by the model's
    hint-fault path, but the function is the kernel's): private local faults slow the scan by
    3/10, mostly remote shared ones speed it up, clamped to task_scan_min."""
    sim = _sim()
    s = sim.state
    t, mm = s.task[0], s.mm[0]
    mm["rss_anon"], mm["rss_file"] = 98304, 0       # min 500, max 30000
    t["numa_scan_period"] = 1000
    mm["numa_scan_seq"] = 1
    _fault(sim, 1000, local=True)                   # first placement: nothing recorded -> 2000
    assert int(t["numa_scan_period"]) == 2000
    mm["numa_scan_seq"] = 2
    _fault(sim, 1100, local=True)
    # local 1 private 1: ps_ratio 10 -> +3 x DIV_ROUND_UP(2000, 10) = 2600; the locality restarts
    assert int(t["numa_scan_period"]) == 2600
    assert (int(t["numa_faults_local"]), int(t["numa_faults_remote"])) == (1, 0)   # this fault, after
    _fault(sim, 1300, nr=3, priv=False)             # same pass: 3 remote shared faults are buffered
    mm["numa_scan_seq"] = 3
    _fault(sim, 1500, priv=False)
    # local 1 of 4 (lr 2), private 1 of 4 (ps 2): -(7 - 2) x DIV_ROUND_UP(2600, 10) = -1300 -> 1300
    assert int(t["numa_scan_period"]) == 1300
    t["numa_scan_period"] = 600
    mm["numa_scan_seq"] = 4
    _fault(sim, 1600, priv=False)
    # remote shared only (lr 0, ps 0): -7 x 60 = -420 -> 180, clamped to task_scan_min 500
    assert int(t["numa_scan_period"]) == 500


def test_a_run_with_promotions_adapts_the_period():
    """End to end: the hot-chunks benchmark (192 GiB at --scale 1024) starts at task_scan_start()'s
    100 ms; with scan_period_max_ms raised tenfold task_scan_max() is 600000 / 768 windows = 781 ms,
    so the promotions it records double the period at each placement: 100 -> 200 -> 400 -> 781, and
    the task's preferred node becomes its own (node 1)."""
    from tierlab.api import Simulation
    from tierlab.kernel import Kernel
    from tierlab.machine import Machine
    from tierlab.workloads import make_workload
    scale = 1024
    w = make_workload("hot-chunks", {"policy": "bind|numa_balancing:1,2", "cpunodebind": "1", "visits": 24,
                                     "iterations": 64}, scale=scale)
    sim = Simulation(Machine.load("bergamo-cxl").scaled(scale),
                     Kernel(numa_balancing=2, demotion_enabled=1, scan_period_max_ms=600000), w).run()
    s = sim.state
    assert sim.result().counters["pgpromote_success"] > 0
    assert task_scan_max_ms(sim.p, int(s.mm[0]["rss_anon"])) == 781
    chain = [100, 200, 400, 781]
    t = s.task[0]
    assert int(t["numa_scan_period"]) in chain[1:]
    assert int(t["numa_scan_period_max"]) == 781 and int(t["numa_preferred_nid"]) == 1
    assert 0 < int(t["numa_scan_seq"]) <= int(s.mm[0]["numa_scan_seq"])
