"""The fault-count hint-fault latency RFC (seed 002; core/numa_balancing.py), hand-worked from its
patches: patch 1's arithmetic (folio_xchg_fault_count stores count >> 16 in the access-time field
and reads it back << 16 in 32 bits; latency = count now - that, as an unsigned int), the per-mm
count and where it starts, patch 2's restamping of already-PROT_NONE PTEs (neither a PTE update
nor scan budget), the instrumentation counters and the latency log."""
from __future__ import annotations

import numpy as np
import pytest

from simkit import CXL, DRAM, LOAD, STORE, counters, machine, make_sim, run, seq
from tierlab.core import state as st
from tierlab.core.numa_balancing import (
    HINT_LATENCY_TIME, fault_count_stamp, hint_latency_log, mm_fault_count,
    numa_hint_fault_count_latency, task_numa_work,
)
from tierlab.core.params import P
from tierlab.workloads.base import Process, Region

from test_pte import tiering


def _sim(**knobs):
    return make_sim(machine((64, 1, DRAM), (512, 0, CXL)), [Region("a", "anon", 128)], **knobs)


def _latency(sim, head, stamp_count, now_count):
    s, p = sim.state, sim.p
    s.pages.stamp[head] = fault_count_stamp(p, np.int64(stamp_count))
    return int(numa_hint_fault_count_latency(s, p, head, np.int64(now_count)))


def test_fault_count_is_kept_in_buckets_of_65536():
    sim = _sim()
    # 200000 >> 16 = 3: the stamp reads back as 3 << 16 = 196608
    assert int(fault_count_stamp(sim.p, np.int64(200_000))) == 3
    assert _latency(sim, 5, 200_000, 200_000) == 200_000 - 196_608
    assert _latency(sim, 5, 200_000, 1_196_607) == 999_999       # still hot at the default threshold
    assert _latency(sim, 5, 65_535, 65_535) == 65_535            # the whole first bucket reads as 0
    # the fault re-stamps the folio with its own count (xchg)
    assert int(sim.state.pages.stamp[5]) == 65_535 >> 16


def test_fault_count_latency_wraps_with_the_32_bit_count():
    sim = _sim()
    before = 2**32 - 100_000                    # stored (>> 16, 21-bit field) = 0xfffe
    assert int(fault_count_stamp(sim.p, np.int64(before))) == 0xFFFE
    after = (before + 150_000) % 2**32          # 50000: the atomic_t wrapped
    # 0xfffe << 16 = 4294836224; 50000 - that mod 2**32 = 150000 faults + the 31072 the bucket lost
    assert _latency(sim, 7, before, after) == 150_000 + 31_072


def test_a_narrow_field_loses_the_high_bits_of_the_count():
    sim = _sim(access_time_bits=12)
    count = 2**28 + 5 * 65_536                  # >> 16 = 4096 + 5; a 12-bit field keeps 5
    assert int(fault_count_stamp(sim.p, np.int64(count))) == 5
    assert _latency(sim, 3, count, count + 10) == 2**28 + 10


def test_the_count_is_read_in_full_size_faults_under_scale():
    sim = _sim()
    sim.state.mm[0]["hint_faults"] = 1000
    assert int(mm_fault_count(sim.state, sim.p, 0)) == 1000
    sim.p[P.SCALE] = 16.0
    assert int(mm_fault_count(sim.state, sim.p, 0)) == 16_000
    sim.state.mm[0]["hint_faults"] = 2**32 // 16 + 3       # 2**32 + 48 full-size faults: a 32-bit count
    assert int(mm_fault_count(sim.state, sim.p, 0)) == 48


def test_hint_faults_count_in_the_mm_and_in_pgfault_and_are_decided_by_fault_count():
    # DRAM at its LOW watermark: no free-space shortcut; a promotion then fails in prepare (DRAM
    # below HIGH), so the folio stays on CXL and the count of decisions is all we watch
    sim, x = tiering()
    sim.set_knobs(numa_balancing=2, hint_fault_latency="fault_count", fault_count_threshold=1000)
    run(sim, seq([0] * 20000, LOAD) + seq([1] * 30000, LOAD))
    assert sim.state.pages.flags[x] & st.PG_PROTNONE
    s = sim.state
    mm0 = int(s.mm[0]["hint_faults"])
    assert mm0 == counters(sim)["numa_hint_faults"]          # every hint fault so far is this mm's
    # pretend the mm took 1,000,000 hint faults since the scan stamped x with its count 0
    s.pages.stamp[x] = fault_count_stamp(sim.p, np.int64(0))
    s.mm[0]["hint_faults"] = 1_000_000
    c0 = counters(sim)
    run(sim, [(x, LOAD)])
    c1 = counters(sim)
    d = {k: c1[k] - c0[k] for k in c1}
    assert int(s.mm[0]["hint_faults"]) == 1_000_001          # counted before the decision reads it
    assert d["numa_hint_faults"] == 1 and d["pgfault"] == 1 and d["numa_should_migrate_calls"] == 1
    assert d["numa_latency_rejects"] == 1 and d["pgpromote_candidate"] == 0    # 1000001 >= 1000
    # the fault re-stamped it with 1000001 >> 16 = 15; a fault 500 later is below the threshold
    assert int(s.pages.stamp[x]) == 15
    s.pages.flags[x] |= st.PG_PROTNONE
    s.mm[0]["hint_faults"] = 15 * 65_536 + 499
    c0 = counters(sim)
    run(sim, [(x, LOAD)])
    d = {k: counters(sim)[k] - c0[k] for k in c0}
    assert d["numa_should_migrate_calls"] == 1 and d["numa_latency_rejects"] == 0
    assert d["pgpromote_candidate"] == 1
    # the candidate stops at migrate_balanced_pgdat (DRAM below HIGH): counted as no room
    assert d["misplaced_no_room_pages"] == 1 and d["pgpromote_success"] == 0
    assert d["promote_rate_limited_pages"] == 0 and d["misplaced_isolate_failed_pages"] == 0


def test_each_refused_promotion_is_counted_by_its_reason():
    """Where a promotion stops, in pages on the node it was for: numa_promotion_rate_limit() past
    rate_limit candidates in its 1 s window (the kernel counts the throttled candidate too), and
    migrate_misplaced_folio_prepare()'s two refusals: no room (DRAM would fall below WMARK_HIGH)
    and folio_isolate_lru() failing (a folio already isolated)."""
    from tierlab.core.migrate import migrate_misplaced_folio_prepare
    from tierlab.core.numa_balancing import numa_promotion_rate_limit
    from tierlab.core.vmstat import Vm
    sim, x = tiering()
    s = sim.state
    c0 = s.counters.copy()
    ms = np.int64(5_000)
    # the window opens at the first candidate, counting it: the 4th and 5th are 3 past its start
    assert [bool(numa_promotion_rate_limit(s, 0, 3, 1, ms)) for _ in range(5)] == [False, False, False, True, True]
    d = s.counters - c0
    assert d[0, Vm.PGPROMOTE_CANDIDATE] == 5 and d[0, Vm.PROMOTE_RATE_LIMITED_PAGES] == 2
    # room: DRAM's free pages against WMARK_HIGH + the folio
    s.pgdat[0]["free"] = s.pgdat[0]["wmark"][st.WMARK_HIGH]
    assert not migrate_misplaced_folio_prepare(s, sim.p, x, 0, 1, np.int64(0))
    assert (s.counters - c0)[0, Vm.MISPLACED_NO_ROOM_PAGES] == 1
    s.pgdat[0]["free"] = s.pgdat[0]["managed"]
    s.pages.flags[x] |= st.PG_ISOLATED
    assert not migrate_misplaced_folio_prepare(s, sim.p, x, 0, 1, np.int64(0))
    assert (s.counters - c0)[0, Vm.MISPLACED_ISOLATE_FAILED_PAGES] == 1
    s.pages.flags[x] &= ~st.PG_ISOLATED
    assert migrate_misplaced_folio_prepare(s, sim.p, x, 0, 1, np.int64(0))          # room and on its LRU
    d = s.counters - c0
    assert d[0, Vm.MISPLACED_NO_ROOM_PAGES] == 1 and d[0, Vm.MISPLACED_ISOLATE_FAILED_PAGES] == 1


def test_time_mode_counts_calls_and_latency_rejects():
    # test_pte's cases: a hot fault (latency ~1 ms < 1000 ms) and a cold one (hot_threshold_ms=1)
    sim, x = tiering()
    sim.set_knobs(numa_balancing=2, hot_threshold_ms=1)
    run(sim, seq([0] * 20000, LOAD) + seq([1] * 30000, LOAD))
    c0 = counters(sim)
    run(sim, [(x, LOAD)])
    d = {k: counters(sim)[k] - c0[k] for k in c0}
    assert d["numa_hint_faults"] == 1 and d["numa_should_migrate_calls"] == 1
    assert d["numa_latency_rejects"] == 1 and d["pgpromote_candidate"] == 0
    c = counters(sim)
    assert c["numa_should_migrate_calls"] == c["numa_hint_faults"]       # every fault here is on CXL
    assert c["numa_latency_rejects"] + c["pgpromote_candidate"] <= c["numa_should_migrate_calls"]
    log = sim.result().hint_latency
    assert len(log) == c["numa_should_migrate_calls"] and (log.unit == "ms").all()
    # each test names its folio and the region holding it
    regions = {r.name: i for i, r in enumerate(sim.workload.regions())}
    start = sim.state.regions.start
    for page, name in zip(log.page, log.region):
        r = regions[name]
        assert start[r] <= page < start[r + 1]
    assert (log.threshold == 1).all() and int(log.latency.iloc[-1]) >= 1


def test_patch2_restamps_prot_none_ptes_without_counting_them():
    # scan_size_mb=1: 256 pages a window, ranges of 512 pages; 2048 anon pages, mostly on CXL
    def sim_and_first_pass(restamp):
        m = machine((64, 1, DRAM), (16384, 0, CXL))
        sim = make_sim(m, [Region("a", "anon", 2048)], lru_batch_size=1, numa_balancing=0, scan_size_mb=1)
        run(sim, seq(range(2048), STORE))
        sim.set_knobs(numa_balancing=2, scan_restamp_protnone=restamp)
        for k in range(4):                      # one 512-page range a pass: every CXL page PROT_NONE
            task_numa_work(sim.state, sim.p, 0, np.int64(1000 + k) * 1_000_000)
        return sim

    for restamp in (0, 1):
        sim = sim_and_first_pass(restamp)
        s = sim.state
        cxl = np.flatnonzero(s.pages.node == 1)
        assert len(cxl) > 1900 and all(s.pages.flags[cxl] & st.PG_PROTNONE)
        assert s.mm[0]["numa_scan_offset"] == 0 or s.mm[0]["numa_scan_offset"] == 2048
        before = counters(sim)["numa_pte_updates"]
        old = s.pages.stamp[cxl].copy()
        cost = task_numa_work(s, sim.p, 0, np.int64(5000) * 1_000_000)
        # nothing to update: each 512-page range uses only the 8 x 256-page virtual budget, so the
        # pass walks 2048 pages (the whole VMA, back to the start) in both cases
        assert counters(sim)["numa_pte_updates"] == before
        assert cost == 2048 * sim.p[P.NUMA_SCAN_PTE_NS]
        if restamp:
            assert (s.pages.stamp[cxl] == 5000).all()            # the kernel's ms at the scan
        else:
            assert (s.pages.stamp[cxl] == old).all()
        # top-tier pages are never stamped, restamp or not
        dram = np.flatnonzero(s.pages.node == 0)
        assert (s.pages.stamp[dram] == st.STAMP_NONE).all()


def test_patch2_restamps_with_the_fault_count():
    sim, x = tiering()
    sim.set_knobs(numa_balancing=2, hint_fault_latency="fault_count", scan_restamp_protnone=1)
    s = sim.state
    s.pages.flags[x] |= st.PG_PROTNONE
    s.mm[0]["hint_faults"] = 3 * 65_536 + 7
    s.mm[0]["numa_scan_offset"] = 0
    task_numa_work(s, sim.p, 0, np.int64(10**9))
    assert int(s.pages.stamp[x]) == 3


def test_latency_log_keeps_every_stride_th_test_and_doubles_the_stride_when_full():
    sim = _sim()
    s = sim.state
    rows = s.hintlog.shape[0]
    n = 2 * rows + 5
    for i in range(n):
        hint_latency_log(s, np.int64(i), np.int64(10 * i), np.int64(1000), np.int64(HINT_LATENCY_TIME), np.int64(i % 7))
    # full at `rows` tests (stride 1) -> every 2nd kept (stride 2), full again at test 2 * rows - 2
    # -> every 4th (stride 4); tests 0, 4, 8, ... up to n - 1 are in the log
    assert int(s.sys[0]["hintlog_stride"]) == 4
    nr = int(s.sys[0]["nr_hintlog"])
    got = s.hintlog[:nr, 0]
    assert got.tolist() == list(range(0, n, 4))
    assert (s.hintlog[:nr, 1] == 10 * got).all() and (s.hintlog[:nr, 2] == 1000).all()
    assert (s.hintlog[:nr, 4] == got % 7).all()                 # each row's folio kept with it
    df = sim.result().hint_latency
    assert df.attrs["stride"] == 4 and len(df) == nr and (df.unit == "ms").all()


def test_each_mm_counts_its_own_hint_faults_from_zero_at_its_start():
    from simkit import Scripted

    class Two(Scripted):
        def processes(self):
            return [Process("a", vmas=("a",)), Process("b", vmas=("b",), start_ms=5.0)]

    m = machine((64, 2, DRAM), (1024, 0, CXL))
    w = Two([Region("a", "anon", 128), Region("b", "anon", 128)], nr_tasks=2)
    from tierlab.api import Simulation
    from tierlab.kernel import Kernel
    sim = Simulation(m, Kernel(lru_batch_size=1, scan_delay_ms=0, scan_period_min_ms=1, scan_size_mb=1), w)
    s = sim.state
    assert s.mm["hint_faults"].tolist() == [0, 0]     # init_numa_balancing: every mm starts at 0
    run(sim, seq(range(128), STORE), seq(range(128, 256), STORE))
    sim.set_knobs(numa_balancing=2)
    for t, lo in ((0, 0), (1, 128)):
        c0 = counters(sim)["numa_hint_faults"]
        m0 = s.mm["hint_faults"].copy()
        loads = seq(list(range(lo, lo + 128)) * 800, LOAD)     # outlasts a scheduler tick (4 ms): a scan
        run(sim, *([loads, []] if t == 0 else [[], loads]))
        faults = counters(sim)["numa_hint_faults"] - c0
        assert faults > 0
        assert int(s.mm[t]["hint_faults"] - m0[t]) == faults and int(s.mm[1 - t]["hint_faults"] - m0[1 - t]) == 0
    assert sim.result().processes.hint_faults.tolist() == s.mm["hint_faults"].tolist()


@pytest.mark.parametrize("mode", ["time", "fault_count"])
def test_hot_chunks_small_run_counts_and_relations(mode):
    from tierlab.api import simulate
    from tierlab.kernel import Kernel
    from tierlab.machine import Machine
    from tierlab.workloads import make_workload
    scale = 1024
    w = make_workload("hot-chunks", {"policy": "bind|numa_balancing:1,2", "cpunodebind": "1", "visits": 24,
                                     "iterations": 64}, scale=scale)
    res = simulate(Machine.load("bergamo-cxl").scaled(scale),
                   Kernel(numa_balancing=2, demotion_enabled=1, hint_fault_latency=mode), w)
    c = res.counters
    assert c["numa_hint_faults"] > 0 and c["numa_hint_faults_local"] == 0
    assert c["numa_should_migrate_calls"] == c["numa_hint_faults"]
    assert (c["numa_latency_rejects"] + c["pgpromote_candidate"] + c["pgpromote_candidate_nrl"]
            == c["numa_should_migrate_calls"])
    assert c["pgpromote_success"] <= c["pgpromote_candidate"]
    assert c["pgfault"] >= w.pages + c["numa_hint_faults"]
    assert int(res.processes.hint_faults[0]) == c["numa_hint_faults"]
    assert res.summary["score_us"] > 0 and len(res.summary["visit_s"]) == 24
    # the task ran on node 1's CPUs and filled node 1 before the CXL node
    assert (res.tasks[res.tasks.kind == "task"].node == 1).all()
    assert res.node_counters.loc[0, "pgalloc"] == 0
