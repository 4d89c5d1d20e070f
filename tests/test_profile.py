"""The simulated-CPU-time breakdown by kernel function (core/profile.py, Result.profile): every
charge lands on the function and entity that did the work, by hand-counted cases."""
from __future__ import annotations

import numpy as np
import pytest

from simkit import machine
from tierlab import Kernel
from tierlab.api import Simulation
from tierlab.workloads import make_workload

COSTS = {"pagecache_lookup_ns": 7.0, "activate_ns": 11.0, "page_alloc_ns": 13.0, "bio_ns": 17.0,
         "syscall_ns": 150.0, "fma_ns": 3.0}


@pytest.fixture(scope="module")
def fill():
    """One io_uring job reading a file twice the memory at random with repeats (norandommap): the
    page cache fills, kswapd reclaims, hits activate."""
    w = make_workload("fio", {"rw": "randread", "size": "64MiB", "numjobs": 1, "ioengine": "io_uring",
                              "iodepth": 16, "norandommap": 1, "time_based": 1, "runtime": "60ms"})
    sim = Simulation(machine((8192, 2, 576)), Kernel(init_on_alloc=1), w, costs=COSTS)
    return sim.run().result()


def ns(res, entity, fn):
    d = res.profile
    v = d[(d.entity == entity) & (d.function == fn)].ns
    return float(v.iloc[0]) if len(v) else 0.0


def test_per_call_costs_are_charged_once_per_call(fill):
    res = fill
    c = res.counters
    ios = res.summary["aggregate"]["read"]["total_ios"]
    misses = int(res.devices.iloc[0].rd_ios)        # FADV_RANDOM: one request per miss
    assert 0 < misses < ios
    assert ns(res, "task0", "do_syscall_64") == 150.0 * ios
    assert ns(res, "task0", "xas_load") == 7.0 * (ios + misses)      # a miss looks up twice
    assert ns(res, "task0", "mark_page_accessed") == 3.0 * ios
    assert ns(res, "task0", "get_page_from_freelist") == 13.0 * misses
    assert ns(res, "task0", "submit_bio") == 17.0 * misses
    assert ns(res, "task0", "__filemap_add_folio") == 400.0 * misses
    assert ns(res, "task0", "clear_page_erms") == 250.0 * misses       # init_on_alloc=1
    assert ns(res, "task0", "__activate_page") == 11.0 * c["pgactivate"]


def test_reclaim_is_charged_to_kswapd(fill):
    res = fill
    c = res.counters
    assert c["pgsteal_direct"] == 0 and c["pgsteal_kswapd"] > 0
    from tierlab.core.costs import COSTS
    scan, free = COSTS["reclaim_scan_ns"][0], COSTS["reclaim_free_ns"][0]
    assert ns(res, "kswapd0", "__remove_mapping") == free * c["pgsteal_kswapd"]
    assert ns(res, "kswapd0", "shrink_active_list") == scan * c["pgdeactivate"]
    assert ns(res, "kswapd0", "shrink_folio_list") == scan * c["pgscan_kswapd"]
    assert ns(res, "task0", "__remove_mapping") == 0.0


def test_shares_add_up_to_the_runtime(fill):
    res = fill
    d = res.profile
    for ent, g in d.groupby("entity"):
        run = float(res.tasks.set_index("name").runtime_s[ent]) * 1e9
        assert g.ns.sum() == pytest.approx(run, rel=1e-6)
        cpu = g[g.function != "io_wait"]
        assert cpu.cpu_pct.sum() == pytest.approx(100.0, rel=1e-6)
        assert (cpu[cpu.function != "other"].ns >= 0).all()
    # the task charges every ns it spends to some function but for whole-ns rounding of the clock
    other = d[(d.entity == "task0") & (d.function == "other")].ns.iloc[0]
    assert abs(other) < 1e-3 * float(res.tasks.set_index("name").runtime_s["task0"]) * 1e9
    assert np.isfinite(d.ns).all()


def test_shootdowns_are_charged_to_their_sender_and_receipts_to_the_receiving_task():
    """kswapd demoting a file the task maps: each shootdown sent to the task's CPU costs kswapd
    tlb_shootdown_ns plus tlb_ipi_ns for its one target (native_flush_tlb_multi), and nothing
    when that CPU was lazy (the task asleep in a major fault's read); each receipt costs the task
    tlb_flush_recv_ns (flush_tlb_func) at its next access, so at most one receipt is unpaid."""
    w = make_workload("random-read", {"file_size": "2GiB", "accesses": "100000", "io": "mmap",
                                      "policy": "bind:0"}, scale=64)
    from tierlab.machine import Machine
    res = Simulation(Machine.load("qemu-2node").scaled(64), Kernel(demotion_enabled=1), w, seed=1).run().result()
    c = res.counters
    assert c["nr_tlb_remote_flush"] > 0
    assert 0 < c["nr_tlb_remote_flush_received"] < c["nr_tlb_remote_flush"]
    assert ns(res, "kswapd0", "native_flush_tlb_multi") == (2500.0 + 200.0) * c["nr_tlb_remote_flush_received"]
    paid = ns(res, "task0", "flush_tlb_func") / 1000.0
    assert c["nr_tlb_remote_flush_received"] - 1 <= paid <= c["nr_tlb_remote_flush_received"]
