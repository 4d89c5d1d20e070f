"""One virtual time: where a workload's stream is cut into chunks reaches neither the schedule nor
the results (feed.py, engine.run's STATUS_NEED_INPUT).

A task that runs out of input within its quantum stops there, the caller appends its next ops and
the quantum goes on as if it never had; a task waiting for input stays on its runqueue, so no task,
kswapd or timer runs on while another waits. So the same per-task streams cut into chunks of any
size give the same counters and the same state, bit for bit: over every golden run (chunks of 2^12
and 2^22 accesses per task) and over generated multi-task scenarios (2-16 tasks on 1-2 CPUs per
node, reclaim, demotion, hint faults, mixed loads, stores, read()s and write()s).
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs

from golden import CONFIG_RUNS
from simkit import DRAM, counters, machine, make_sim
from test_properties import accesses, chunks_of, scenarios, state_snapshot
from tierlab.api import build
from tierlab.core.params import P
from tierlab.core.time_rules import MAX_STEP_NS
from tierlab.errors import ConfigError


# seed 004's shape with the TLB hardware model: iTLB misses per whole flush followed the chunk size
# (0.79 / 1.55 / 1.84 at 1/8, 1 and 4 times the default chunk) while chunk ends let threads drift
RUNS = {**CONFIG_RUNS, "xsbench-migrc-tlb": {**CONFIG_RUNS["xsbench-migrc"], "tlb_model": "set_assoc",
                                             "params": {"particles": "200000", "cpunodebind": "0"}}}


def golden_run(name, per_task):
    sim = build(RUNS[name])
    sim.workload.chunk_accesses = per_task * sim.workload.nr_tasks
    res = sim.run().result()
    # each task is given a part only below the low-water mark (workloads.base.low_water): the feed
    # never holds more than two parts per task, whatever the tasks' pace
    assert sim._feed.input.peak_ops <= 2 * sim.workload.chunk_accesses
    # no calendar was outrun: every lock and bandwidth booking inside its ring (#28), which is at
    # least 4x the lead the time rules allowed (a quantum and the longest step)
    assert int(sim.state.locks["nr_beyond"].sum()) == 0 and int(sim.state.membw["nr_beyond"].sum()) == 0
    lock_ring = (1 << int(sim.state.locks["bin_shift"][0])) * sim.state.locks["bin_tag"].shape[1]
    assert sim.state.sys[0]["max_step_ns"] <= MAX_STEP_NS          # the step the time rules state
    assert 4 * (sim.p[P.QUANTUM_NS] + MAX_STEP_NS) <= lock_ring
    return float(res.sim_time_s), {k: int(v) for k, v in res.counters.items()}, res.marks_s.time_s.tolist()


@pytest.mark.parametrize("name", sorted(RUNS))
def test_golden_runs_do_not_depend_on_the_chunk_size(name):
    small, large = golden_run(name, 1 << 12), golden_run(name, 1 << 22)
    assert small[0] == large[0]
    assert small[1] == large[1]
    assert small[2] == large[2]


def run_cut(scn, tasks, parts):
    """The scenario's machine and knobs with `tasks` tasks, each task's accesses cut into `parts`
    chunks, all in one Simulation.run. Returns (finished without OOM, counters, state)."""
    nodes, regions, knobs, _, lengths, mix, sim_seed = scn
    acc = accesses(regions, [lengths[i % len(lengths)] for i in range(tasks)], mix)
    sim = make_sim(machine(*nodes), regions, nr_tasks=tasks, seed=sim_seed, **knobs)
    try:
        sim.run(chunks=chunks_of(acc, parts))
    except ConfigError as e:
        if "out of memory" not in str(e):
            raise
        return False, counters(sim), None
    return True, counters(sim), state_snapshot(sim)


@settings(deadline=None, max_examples=30)
@given(scenarios(), hs.integers(2, 16), hs.integers(2, 9))
def test_where_the_input_is_cut_changes_nothing(scn, tasks, parts):
    ok1, c1, s1 = run_cut(scn, tasks, 1)
    ok2, c2, s2 = run_cut(scn, tasks, parts)
    assert ok1 == ok2
    assert c1 == c2
    if ok1:
        for k in s1:
            assert np.array_equal(s1[k], s2[k]), k


def test_a_stamp_from_a_thread_ahead_is_a_latency_of_zero():
    """A folio stamped by a thread whose clock is ahead (within the lead the run loop allows) gives
    a hint-fault latency of 0, not (now - stamp) wrapped to nearly the field's range, which would
    class the hottest folio cold; older stamps give their age, and a stamp beyond the lead wraps
    as the kernel's would."""
    from simkit import CXL, DRAM
    from tierlab.core.numa_balancing import access_time_mask, numa_hint_fault_latency, stamp_lead_ms
    from tierlab.workloads.base import Region
    sim = make_sim(machine((64, 2, DRAM), (64, 0, CXL)), [Region("a", "anon", 8)], nr_tasks=2, numa_balancing=2)
    s, p = sim.state, sim.p
    lead, mask = int(stamp_lead_ms(p)), int(access_time_mask(p))
    assert lead >= 1
    now = 100_000
    for stamp, want in ((now + 3, 0), (now + lead, 0), (now, 0), (now - 7, 7),
                        (now + lead + 1, mask - lead)):
        s.pages.stamp[0] = stamp & mask
        assert numa_hint_fault_latency(s, p, 0, now) == want, stamp
        assert int(s.pages.stamp[0]) == now & mask          # re-stamped with now
    # under --scale F the kernel's clock runs F x faster: the lead covers a quantum and the longest
    # step in kernel ms (at 64: (20 + 500) us x 64 = 33.3 ms, on the jiffies grid, plus a jiffy)
    for scale in (1.0, 64.0):
        q = p.copy()
        q[P.SCALE] = scale
        assert stamp_lead_ms(q) * 1e6 >= (q[P.QUANTUM_NS] + MAX_STEP_NS) * scale


@pytest.mark.parametrize("name", ["xsbench-migrc", "multi-task-pread", "anon-zipf-hint-fault-promotion"])
def test_no_live_entity_runs_more_than_a_quantum_and_a_step_ahead(name):
    """At every sample (every 0.1 ms here) the most advanced live entity is at most a quantum plus
    the longest single step (a quantum's last access past its limit, or a kswapd batch) ahead of
    the next to run: the 16 xsbench threads and kswapd within 20 + ~40 us, where chunk ends let
    them spread by 20-31 ms (#14's note)."""
    sim = build({**CONFIG_RUNS[name], "sample_interval_ms": 0.1})
    sim.run()
    sys_ = sim.state.sys[0]
    assert len(sim.result().timeseries) > 1000
    assert 0 < sys_["max_clock_spread"] <= sim.p[P.QUANTUM_NS] + sys_["max_step_ns"]


def test_a_fault_that_stalls_reclaims_a_batch_per_step():
    """anon-swap's faults stall in direct reclaim (swap-outs at 10 us a page): the task reclaims a
    SWAP_CLUSTER_MAX batch per step (memory.fault_stalls), so the longest step is one batch (32
    swap-outs, ~330 us), where the whole reclaim ran as one access of 2.28 ms before; the kswapd
    then does more of the reclaim, as it runs meanwhile."""
    sim = build(CONFIG_RUNS["anon-swap-single-node"])
    res = sim.run().result()
    assert res.counters["allocstall"] > 50 and res.counters["pgsteal_direct"] > 0
    step = int(sim.state.sys[0]["max_step_ns"])
    assert step < 32 * sim.p[P.SWAP_OUT_4K_NS] + 50_000
    assert (sim.state.task["dr_state"] == 0).all() and (sim.state.task["dr_after"] == 0).all()


def test_a_stalled_fault_whose_page_another_task_brought_in_leaves_nothing_pending():
    """Two tasks fault the same pages of one process's anon region under swap pressure: whichever
    stalls, its retried access may find the page already in; no task ends with a pending
    after-reclaim allocation (task.dr_after) or a reclaim in progress, and every fault either
    allocated or found its page."""
    cfg = {**CONFIG_RUNS["anon-swap-single-node"], "params": {**CONFIG_RUNS["anon-swap-single-node"]["params"],
                                                             "tasks": "2", "accesses": "100000"}}
    sim = build(cfg)
    res = sim.run().result()
    assert res.counters["allocstall"] > 0
    assert (sim.state.task["dr_after"] == 0).all() and (sim.state.task["dr_state"] == 0).all()


def test_a_phase_starts_when_its_last_task_is_through_before_kswapd_runs_on():
    """anon-swap's populate phase ends with kswapd reclaiming: the read phase starts when the last
    task got through its input (engine.run returns STATUS_PHASE there, Simulation._start_phase),
    so no CPU is further ahead of the phase's start than the time rules allow (a quantum and a
    step), where kswapd used to run on alone until it slept and every task then started at its
    clock."""
    sim = build(CONFIG_RUNS["anon-swap-single-node"])
    seen = []
    start_phase = sim._start_phase

    def record(ch):
        last = int(sim.state.task["end"].max())
        start_phase(ch)
        seen.append((last, sim.phase_start_ns, int(sim.state.cpu["clock"].max())))
    sim._start_phase = record
    sim.run()
    seen = [x for x in seen if x[0] > 0]                  # the read phase (the populate's starts at 0)
    assert seen
    for last, t0, ahead in seen:
        assert t0 == last                                  # the last task to get through releases it
        assert 0 < ahead - t0 <= sim.p[P.QUANTUM_NS] + MAX_STEP_NS   # kswapd's CPU, at work meanwhile


def test_a_lock_outrun_by_a_step_past_the_bound_warns_and_otherwise_is_an_error():
    """A lock booking behind its calendar's ring after a step longer than the time rules' bound
    (only costs set far above their defaults, or a huge NUMA scan, make one) is warned about, naming
    the step; without such a step, and for memory bandwidth always, it is an engine bug and stops
    the run."""
    from tierlab.errors import TimeRulesWarning
    sim = build(CONFIG_RUNS["multi-task-pread"])
    sim.run()
    s = sim.state
    s.locks["nr_beyond"][0] = 1
    s.sys[0]["max_step_ns"] = 3 * MAX_STEP_NS
    with pytest.warns(TimeRulesWarning, match=r"lru_lock of .*longest step was 1,500 us"):
        sim._check_horizons()
    s.sys[0]["max_step_ns"] = MAX_STEP_NS
    with pytest.raises(RuntimeError, match="engine bug"):
        sim._check_horizons()
    s.locks["nr_beyond"][0] = 0
    s.membw["nr_beyond"][0] = 1
    s.sys[0]["max_step_ns"] = 3 * MAX_STEP_NS
    with pytest.raises(RuntimeError, match="memory bandwidth"):
        sim._check_horizons()


def test_each_task_is_topped_up_below_a_low_water_mark():
    """Two tasks through stream_chunks in parts of 1,000 ops, on CPUs of their own: task 0 stores to
    2,000 pages, task 1 to 100,000 (made 500 at a time). Task 0's stream ends (Chunk.ended) and it
    leaves its runqueue without task 1's stream being read ahead for it (that took all 98,000 of
    its ops before); a task is given ops only below 1,000 buffered, so the feed never holds more
    than 2 x 1,000 per task; the counters and state equal those of one part of everything."""
    from tierlab.core.ops import OP_STORE
    from tierlab.workloads.base import OpStream, Region, stream_chunks

    def streams():
        def blocks(base, n):
            left = n

            def make():
                nonlocal left
                if left == 0:
                    return None
                k = min(500, left)
                left -= k
                return base + (n - left - k + np.arange(k, dtype=np.int64)) % 4096, np.full(k, OP_STORE, np.uint8)
            return OpStream(make)
        return [blocks(0, 2_000), blocks(4096, 100_000)]

    out = []
    for per_task in (1_000, 1 << 20):
        sim = make_sim(machine((16384, 2, DRAM)), [Region("a", "anon", 4096), Region("b", "anon", 4096)], nr_tasks=2)
        sim.run(chunks=stream_chunks(streams(), per_task))
        out.append((counters(sim), state_snapshot(sim), sim._feed.input.peak_ops))
    assert out[0][0] == out[1][0] and out[0][1].keys() == out[1][1].keys()
    for k in out[0][1]:
        a, b = out[0][1][k], out[1][1][k]
        if k == "sys":        # but the feed's bookkeeping: the last quantum that waited for input
            keep = [n for n in a.dtype.names if not n.startswith("resume_") and n != "need_input"]
            a, b = a[keep], b[keep]
        assert np.array_equal(a, b), k
    assert out[0][2] <= 2 * 2 * 1_000 and out[1][2] == 102_000
