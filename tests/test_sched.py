"""CPUs as a resource (core/sched.py): where each kswapd runs, CFS sharing of a CPU between tasks and
kswapd, wake-up preemption, a task that starts within the run, and the CPU times Result.tasks
reports. Hand-worked from kernel/sched/fair.c (CFS, v5.x-6.5) and mm/vmscan.c kswapd()."""
from __future__ import annotations

import json

import numpy as np

from simkit import CXL, DRAM, LOAD, STORE, machine, make_sim, run, seq
from tierlab.core.sched import place_kswapds, sched_exit_task, sched_init_chunk, sched_resched, sched_wake_task
from tierlab.machine import Machine
from tierlab.workloads.base import Region

MS = 1_000_000


def test_kswapd_gets_an_idle_cpu_of_its_node_when_there_is_one():
    m = Machine.load("qemu-2node")       # 16 CPUs on node 0, CPU-less node 1
    cpus = m.cpu_nodes()
    # one task on CPU 0: kswapd0 takes idle CPU 1 of node 0; node 1's kswapd is unbound and takes
    # the next idle CPU of the nearest node with CPUs (node 0)
    assert place_kswapds(cpus, [0], [0], [16, 0], m.zonelists()) == ([1, 2], [0, 0, 0])
    # 16 tasks, one per CPU: no idle CPU; kswapds share the least loaded CPUs, highest first
    assert place_kswapds(cpus, list(range(16)), list(range(16)), [16, 0], m.zonelists()) == ([15, 14], [0] * 16)


def test_kswapd_of_a_node_with_cpus_stays_on_its_node():
    # nodes 0 and 1 have 2 CPUs each, node 2 none; 3 tasks fill CPUs 0, 1 (node 0) and 2 (node 1)
    cpus = [0, 0, 1, 1]
    zl = [[0, 1, 2], [1, 0, 2], [2, 1, 0]]     # node 2 is nearest to node 1
    kcpu, sim_nodes = place_kswapds(cpus, [0, 1, 2], [0, 1, 2], [2, 2, 0], zl)
    assert kcpu[0] == 1                        # node 0 has no idle CPU: shares its CPU 1 (on a tie the highest)
    assert kcpu[1] == 3 and sim_nodes[3] == 1  # node 1's idle CPU 3 becomes simulated CPU 3
    assert sim_nodes[kcpu[2]] in (0, 1)        # node 2 (unbound): no idle CPU left, shares a task CPU
    assert kcpu[2] == 2                        # the least loaded: CPU 2 (one task) rather than CPU 1 (task + kswapd0)


def two_task_sim(**knobs):
    # one CPU, two tasks loading their own resident page again and again
    return make_sim(machine((256, 1, DRAM)), [Region("a", "anon", 8)], nr_tasks=2, **knobs)


def test_two_tasks_share_one_cpu_in_cfs_slices():
    sim = two_task_sim()
    n = 60_000
    run(sim, seq([0] * n, LOAD), seq([4] * n, LOAD))
    t = sim.state.task
    r0, r1 = int(t[0]["runtime"]), int(t[1]["runtime"])
    assert abs(r0 - r1) < 0.01 * r0                       # the same work, the same CPU time
    # 1 CPU: update_sysctl's factor is 1 + ilog2(1) = 1; two runnable: slice = 6 ms / 2 = 3 ms.
    # Each task needs ~r0 of CPU; they alternate in 3 ms slices, so the one that finishes first
    # (task 0, which ran first) ends about one slice before the other; the CPU never idles
    # Each needs r0 (a bit over 6 ms: 60000 loads of 100 ns and the first fault): task 0 runs
    # 0-3 ms, task 1 3-6, task 0 6-9, task 1 9-12 (each slice ends at the first access past it),
    # then the one with the smaller vruntime (which overran its slices less) its rest, then the other
    assert 6 * MS < r0 < 9 * MS
    (e_first, r_first), (e_last, _) = sorted(((int(t[i]["end"]), int(t[i]["runtime"])) for i in (0, 1)))
    assert 12 * MS <= e_first - (r_first - 6 * MS) < 12 * MS + 4 * 110      # four slices, each overrun < 1 load
    assert e_last == r0 + r1 == int(sim.state.cpu[0]["clock"])      # the CPU never idles
    # a longer latency: 16 ms / 2 = 8 ms slices, longer than either task's work: one after the other
    sim = two_task_sim(sched_latency_ns=16 * MS)
    run(sim, seq([0] * n, LOAD), seq([4] * n, LOAD))
    t = sim.state.task
    assert int(t[0]["end"]) == r0 and int(t[1]["end"]) == r0 + r1


def reclaiming_sim(cpus):
    # a 256-page DRAM node, a CXL node below it; 400 pages of anon stores bound to node 0: kswapd demotes
    return make_sim(machine((256, cpus, DRAM), (1024, 0, CXL)), [Region("a", "anon", 400, "bind", (0,))],
                    min_free_kbytes=640, demotion_enabled=1, lru_batch_size=1)


def test_kswapd_time_delays_the_task_it_shares_a_cpu_with():
    alone = reclaiming_sim(4)          # idle CPUs: each kswapd has one of its own
    run(alone, seq(range(400), STORE))
    shared = reclaiming_sim(1)         # one CPU: kswapds share it with the task
    run(shared, seq(range(400), STORE))
    ra, rs = alone.result(), shared.result()
    assert ra.tasks.set_index("name").loc["kswapd0", "cpu"] != 0
    ts = rs.tasks.set_index("name")
    assert (ts.cpu == 0).all()
    k = ts.loc["kswapd0", "runtime_s"] + ts.loc["kswapd1", "runtime_s"]
    assert ts.loc["kswapd0", "runtime_s"] > 0 and rs.counters["pgdemote_kswapd"] > 0
    # the CPU never idles: its clock is exactly the CPU time of the task and both kswapds
    clock = int(shared.state.cpu[0]["clock"])
    assert clock == int(shared.state.task[0]["runtime"]) + int(shared.state.pgdat["kswapd_runtime"].sum())
    assert abs(ts.loc["task0", "cpu_share"] + k * 1e9 / clock - 1.0) < 1e-9
    # the task waits while kswapd runs: it ends later than with kswapd on a CPU of its own
    assert rs.sim_time_s > ra.sim_time_s


def test_woken_kswapd_preempts_the_task_with_its_sleeper_credit():
    sim = make_sim(machine((256, 1, DRAM), (1024, 0, CXL)), [Region("a", "anon", 8)])
    s, p = sim.state, sim.p
    run(sim, seq([0] * 20_000, LOAD))           # the task runs up vruntime (and min_vruntime)
    pos = np.zeros(1, np.int64)
    offsets = np.array([0, 1], np.int64)        # the task has one access left
    c = 0
    vr = int(s.task[0]["vruntime"])
    assert vr > 1 * MS and s.cpu[c]["curr"] == -1
    sched_init_chunk(s, pos, offsets)            # what engine.run does first
    sched_resched(s, p, c, int(s.cpu[c]["clock"]), pos, offsets)
    assert s.cpu[c]["curr"] == 0 and s.task[0]["on_rq"] == 1
    assert int(s.task[0]["vruntime"]) == vr      # re-entering: max(vr, min_vruntime - 3 ms) keeps vr
    # kswapd0 (on CPU 0, asleep since boot) wakes: place_entity gives min_vruntime - 3 ms, which is
    # more than the 1 ms wake-up granularity behind the task: it preempts
    g = s.pgdat[0]
    assert g["kswapd_cpu"] == c
    g["kswapd_awake"] = 1
    g["kswapd_clock"] = s.cpu[c]["clock"]
    sched_resched(s, p, c, int(s.cpu[c]["clock"]), pos, offsets)
    assert s.cpu[c]["curr"] == 1 + 0             # entity T + nid
    assert int(s.cpu[c]["min_vruntime"]) == vr and int(g["kswapd_vruntime"]) == vr - 3 * MS
    assert s.cpu[c]["nr_running"] == 2


def test_woken_kswapd_within_the_wakeup_granularity_waits_for_the_slice():
    sim = make_sim(machine((256, 1, DRAM), (1024, 0, CXL)), [Region("a", "anon", 8)])
    s, p = sim.state, sim.p
    run(sim, seq([0] * 20_000, LOAD))
    pos = np.zeros(1, np.int64)
    offsets = np.array([0, 1], np.int64)
    clock = int(s.cpu[0]["clock"])
    sched_init_chunk(s, pos, offsets)
    sched_resched(s, p, 0, clock, pos, offsets)
    vr = int(s.task[0]["vruntime"])
    g = s.pgdat[0]
    g["kswapd_vruntime"] = vr - MS // 2          # it ran recently: only 0.5 ms behind the task
    g["kswapd_awake"] = 1
    g["kswapd_clock"] = clock
    sched_resched(s, p, 0, clock, pos, offsets)
    assert s.cpu[0]["curr"] == 0                 # 0.5 ms < 1 ms wakeup_granularity: no preemption
    assert int(g["kswapd_vruntime"]) == vr - MS // 2
    assert s.cpu[0]["slice_ns"] == 3 * MS        # two runnable: 6 ms / 2


def test_task_that_starts_later_runs_from_its_start():
    sim = make_sim(machine((256, 2, DRAM)), [Region("a", "anon", 8)], nr_tasks=2)
    sim.state.task["start"][1] = 5 * MS
    run(sim, seq([0] * 1000, LOAD), seq([4] * 1000, LOAD))
    t = sim.state.task
    assert int(t[1]["end"]) - int(t[1]["runtime"]) == 5 * MS     # its CPU idled until the start
    assert int(t[0]["end"]) == int(t[0]["runtime"])


def test_result_tasks_round_trip_through_json():
    sim = reclaiming_sim(1)
    run(sim, seq(range(400), STORE))
    res = sim.result()
    assert list(res.tasks.columns) == ["name", "kind", "process", "cpu", "node", "runtime_s", "cpu_share"]
    assert res.tasks.name.tolist() == ["task0", "kswapd0", "kswapd1"]
    d = json.loads(json.dumps(res.to_dict()))
    assert d["tasks"] == res.tasks.to_dict(orient="records")


def test_exited_task_never_runs_again_and_a_woken_one_waits_for_its_time():
    sim = two_task_sim()
    run(sim, seq([0] * 100, LOAD), seq([4] * 100, LOAD))
    s = sim.state
    sched_exit_task(s, 1)                       # do_exit (the proc contract)
    assert s.task[1]["dead"] == 1 and s.task[1]["on_rq"] == 0
    r0, r1 = int(s.task[0]["runtime"]), int(s.task[1]["runtime"])
    run(sim, seq([0] * 100, LOAD), seq([4] * 100, LOAD))
    assert int(s.task[1]["runtime"]) == r1 and int(s.task[0]["runtime"]) > r0
    # a task made runnable from a later time (a process started within the run)
    sim = two_task_sim()
    at = 2 * MS
    sched_wake_task(sim.state, 1, at)
    run(sim, seq([0] * 100, LOAD), seq([4] * 100, LOAD))
    t = sim.state.task
    assert int(t[1]["end"]) - int(t[1]["runtime"]) == at
