"""posix_fadvise() (core/fadvise.py) as a control op, against readahead's hand-worked windows
(mm/readahead.c page_cache_sync_ra with read_ahead_kb = 128: ra_pages 32), and random-read's use of
it (the file's random phase runs under POSIX_FADV_RANDOM, as fio and the guest program do)."""
from __future__ import annotations

import numpy as np
import pytest

from simkit import DRAM, READ, counters, machine, make_sim, run
from tierlab.api import check_control_ops
from tierlab.core.ops import CTRL_FADVISE, CTRL_KIND_MASK, OP_CTRL, OP_MARK
from tierlab.core.state import FADV_NORMAL, FADV_RANDOM
from tierlab.errors import ConfigError
from tierlab.workloads import make_workload
from tierlab.workloads.base import Chunk, Region, fadvise_op


def test_fadvise_switches_readahead_off_and_on():
    """A read() miss at the file's start opens a window of get_init_ra_size(1, 32) = 4 pages under
    NORMAL; under RANDOM (FMODE_RANDOM) force_page_cache_ra reads the request only. Back to NORMAL,
    a read right after the previous one (index - prev_index <= 1) opens a new 4-page window."""
    regs = [Region("f", "file", 64)]
    normal = run(make_sim(machine((512, 1, DRAM)), regs), [(0, READ)])
    assert counters(normal)["pgalloc"] == 4
    sim = make_sim(machine((512, 1, DRAM)), regs)
    run(sim, [fadvise_op(0, "random"), (0, READ)])
    assert counters(sim)["pgalloc"] == 1 and int(sim.state.regions.advice[0]) == FADV_RANDOM
    run(sim, [fadvise_op(0, "normal"), (1, READ)])
    assert counters(sim)["pgalloc"] == 1 + 4 and int(sim.state.regions.advice[0]) == FADV_NORMAL


def test_fadvise_op_is_checked_before_the_run():
    regs = [Region("f", "file", 64), Region("a", "anon", 8)]

    def chunk_of(page, op):
        return Chunk(np.array([0, 1], np.int64), np.array([page], np.int64), np.array([op], np.uint8))

    check_control_ops(chunk_of(*fadvise_op(0, "sequential")), regs, None)
    with pytest.raises(ConfigError, match="not a file region; accepted: 0"):
        check_control_ops(chunk_of(*fadvise_op(1, "random")), regs, None)
    with pytest.raises(ConfigError, match="advice 7; accepted: normal"):
        check_control_ops(chunk_of((7 << 32) | 0, OP_CTRL | CTRL_FADVISE), regs, None)
    with pytest.raises(ConfigError, match="advice 'willneed'"):
        fadvise_op(0, "willneed")


def test_random_read_runs_its_random_phase_under_fadv_random():
    """Without prefault the file is opened with the advice; with prefault task 0 calls fadvise right
    after its sequential pass (the prefault phase, ending with the MARK), as the first op of the
    random phase, before its first random read."""
    w = make_workload("random-read", {"target": "file", "io": "read", "file_size": "64KiB", "accesses": 5})
    assert [r.advice for r in w.regions()] == ["random"] and not w.control_ops
    w = make_workload("random-read", {"target": "file", "io": "read", "file_size": "64KiB", "accesses": 5,
                                      "prefault": 1, "tasks": 2})
    assert [r.advice for r in w.regions()] == ["normal"] and w.control_ops
    prefault, rand = list(w.chunks(0))
    assert not prefault.start_phase and rand.start_phase
    assert np.diff(prefault.offsets).tolist() == [16, 0] and prefault.ops[-1] & OP_MARK
    assert not (prefault.ops & OP_CTRL).any()
    t0 = rand.ops[rand.offsets[0]:rand.offsets[1]]
    assert len(t0) == 1 + 5 and 16 + 1 + 5 == w.nr_accesses() - 5
    ctrl = np.flatnonzero(t0 & OP_CTRL)
    assert ctrl.tolist() == [0] and t0[0] & CTRL_KIND_MASK == CTRL_FADVISE
    assert rand.pages[rand.offsets[0]] == fadvise_op(0, "random")[0]
    assert not (rand.ops[rand.offsets[1]:rand.offsets[2]] & OP_CTRL).any()     # task 1 reads at random only
    anon = make_workload("random-read", {"target": "anon", "file_size": "64KiB", "accesses": 5})
    assert [r.advice for r in anon.regions()] == ["normal"] and not anon.control_ops


@pytest.mark.parametrize("lru_gen", [0, 7])
def test_uniform_preads_miss_as_often_as_exact_lru(lru_gen):
    """Under uniform random reads every policy that cannot see the future hits with the share of the
    file it caches, so the model's misses (pgalloc: one page per miss under POSIX_FADV_RANDOM) must
    match exact LRU's over the same page stream at the node's page-cache size. Before random-read
    ran under FADV_RANDOM, context readahead made the model miss ~50 % more (docs/oracle.md)."""
    from tierlab import Kernel, simulate
    from tierlab.core.reference import simulate_lru
    w = make_workload("random-read", {"target": "file", "io": "read", "file_size": "32MiB", "accesses": 60_000})
    r = simulate(machine((4096, 1, DRAM)), Kernel(lru_gen=lru_gen), w)
    last = r.timeseries.iloc[-1]
    cached = int(last["node0_nr_inactive_file"] + last["node0_nr_active_file"])
    assert 3500 < cached < 4096
    pages = np.concatenate([c.pages for c in w.chunks(0)])
    exact = simulate_lru(pages, cached)
    assert abs(int(r.counters["pgalloc"]) / exact - 1) < 0.05, (int(r.counters["pgalloc"]), exact)


def test_normal_dist_is_a_gaussian_hot_set_around_the_middle():
    """dist=normal: pages ~ N(size / 2, (normal_sigma * size)^2) wrapped into the file; with sigma
    5 % about 68 % of the reads fall within one sigma of the middle and 95 % within two."""
    w = make_workload("random-read", {"target": "file", "io": "read", "file_size": "40MiB", "accesses": 40_000,
                                      "dist": "normal", "normal_sigma": 0.05})
    n = w.pages
    pages = np.concatenate([c.pages for c in w.chunks(1)])
    off = np.abs(pages - n / 2) / n
    assert 0.66 < (off <= 0.05).mean() < 0.70 and 0.94 < (off <= 0.10).mean() < 0.96
    assert pages.min() >= 0 and pages.max() < n
    again = np.concatenate([c.pages for c in w.chunks(1)])
    assert np.array_equal(pages, again)
