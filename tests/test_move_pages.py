"""Page movement system calls, hand-worked from mm/migrate.c and mm/mempolicy.c (core/migrate.py
do_pages_move, core/mempolicy.py do_migrate_pages and do_mbind): each page's move_pages status,
the pgmigrate counters (NUMA balancing's untouched), policy changes during a run, and refusals."""
from __future__ import annotations

import numpy as np
import pytest

from simkit import CXL, DRAM, LOAD, STORE, chunk, machine
from test_processes import make
from test_properties import check_invariants

from tierlab.api import check_control_ops
from tierlab.core import state as st
from tierlab.core.ops import OP_CPU
from tierlab.core.vmstat import Vm
from tierlab.errors import ConfigError
from tierlab.workloads.base import (
    Process, Region, drop_caches_op, mbind_op, migrate_pages_op, move_pages_op, set_mempolicy_op,
)


def two_tier():
    return machine((256, 1, DRAM), (256, 0, CXL))


def sim_with(regions, **knobs):
    return make(two_tier(), regions, [Process("p", vmas=tuple(r.name for r in regions if not r.is_file),
                                              files=tuple(r.name for r in regions if r.is_file))], **knobs)


def counter(sim, vm):
    return int(sim.state.counters[:, vm].sum())


def test_move_pages_status_of_each_page_and_the_counters():
    """16 anon pages: 0-7 written (on node 0), 8 loaded (the zero page), 9-15 untouched. move_pages
    of the slot to node 1: 8 moved, -EFAULT for the zero page, -ENOENT for the 7 untouched; then
    again: 8 already there. pgmigrate_success counts 8 on node 1; numa_pages_migrated and
    pgpromote/pgdemote stay 0."""
    sim = sim_with([Region("a", "anon", 16)])
    ops = [(x, STORE) for x in range(8)] + [(8, LOAD), move_pages_op(0, 1), move_pages_op(0, 1)]
    sim.run(chunks=[chunk(ops)])
    s = sim.state
    assert s.pages.node[:8].tolist() == [1] * 8
    assert sim.move_pages_status().loc[0].to_dict() == {
        "moved": 8, "on_node": 8, "enoent": 14, "efault": 2, "ebusy": 0, "not_migrated": 0}
    assert int(s.counters[1, Vm.PGMIGRATE_SUCCESS]) == 8 and counter(sim, Vm.PGMIGRATE_FAIL) == 0
    for vm in (Vm.NUMA_PAGES_MIGRATED, Vm.PGPROMOTE_SUCCESS, Vm.PGDEMOTE_KSWAPD, Vm.PGDEMOTE_DIRECT):
        assert counter(sim, vm) == 0
    # the pages are still mapped and writable: a second pass of stores takes no fault
    faults = counter(sim, Vm.PGFAULT)
    sim.run(chunks=[chunk([(x, STORE) for x in range(8)])])
    assert counter(sim, Vm.PGFAULT) == faults
    check_invariants(sim)


def test_move_pages_of_a_large_folio_moves_it_whole_and_its_other_pages_are_busy():
    """An order-2 anon region: one store faults a 4-page folio. move_pages of its 4 pages: the first
    queues the folio, the next three find it isolated (-EBUSY, as folio_isolate_lru fails in the
    kernel); the folio's 4 pages move."""
    sim = sim_with([Region("a", "anon", 4, order=2)])
    sim.run(chunks=[chunk([(0, STORE), move_pages_op(0, 1, 4)])])
    st_ = sim.move_pages_status().loc[0]
    assert (st_["moved"], st_["ebusy"]) == (1, 3)
    assert int(sim.state.counters[1, Vm.PGMIGRATE_SUCCESS]) == 4
    assert sim.state.pages.node[0] == 1


def test_move_pages_to_a_full_node_leaves_the_pages_and_counts_them():
    """Node 1 has 24 pages, of which its watermarks keep some: moving 32 written pages there
    migrates what fits above WMARK_MIN and fails the rest (pgmigrate_fail, "not migrated")."""
    mach = machine((256, 1, DRAM), (24, 0, CXL))
    sim = make(mach, [Region("a", "anon", 32)], [Process("p", vmas=("a",))])
    sim.run(chunks=[chunk([(x, STORE) for x in range(32)] + [move_pages_op(0, 1)])])
    s = sim.state
    moved = int((s.pages.node[:32] == 1).sum())
    room = int(s.pgdat[1]["managed"]) - int(s.pgdat[1]["wmark"][st.WMARK_MIN])
    assert 0 < moved <= room
    stat = sim.move_pages_status().loc[0]
    assert stat["moved"] == moved and stat["not_migrated"] == 32 - moved
    assert int(s.counters[:, Vm.PGMIGRATE_FAIL].sum()) == 32 - moved
    check_invariants(sim)


def test_migrate_pages_moves_the_process_pages_from_a_node_set():
    """migrate_pages(2) of the process from {0} to 1 moves its mapped pages, anon and mmap'd file,
    and leaves page cache it has not mapped (a read()-only file) where it is."""
    regions = [Region("a", "anon", 8), Region("m", "file", 8, mapped=True), Region("f", "file", 8)]
    sim = sim_with(regions)
    s = sim.state
    a, m, f = (int(s.regions.start[i]) for i in range(3))
    ops = [(a + x, STORE) for x in range(8)] + [(m + x, LOAD) for x in range(4)] + \
          [(f + x, 2 | 8) for x in range(4)] + [migrate_pages_op([0], 1)]
    sim.run(chunks=[chunk(ops)])
    assert s.pages.node[a:a + 8].tolist() == [1] * 8
    mapped = [int(s.pages.node[m + x]) for x in range(4)]
    assert mapped == [1] * 4
    assert all(int(s.pages.node[f + x]) == 0 for x in range(4))
    assert int(s.counters[1, Vm.PGMIGRATE_SUCCESS]) == 12 + int(
        sum(1 for x in range(4, 8) if s.pages.flags2[m + x] & st.F2_MAPPED and s.pages.node[m + x] == 1))


def test_mbind_with_move_and_then_default_lets_numa_balancing_promote_them():
    """The tiering experiment the interface could not express: populate on DRAM, mbind(bind:1,
    MPOL_MF_MOVE) moves the pages to CXL, mbind(default) gives the VMA back to the default policy,
    and NUMA balancing in tiering mode promotes them with no memory pressure."""
    sim = sim_with([Region("a", "anon", 64)], numa_balancing=2, scan_delay_ms=0, scan_period_min_ms=10,
                   hot_threshold_ms=1000)
    s = sim.state
    ops = [(x, STORE) for x in range(64)] + [mbind_op(0, "bind", [1], move=True)]
    sim.run(chunks=[chunk(ops)])
    assert s.pages.node[:64].tolist() == [1] * 64
    assert s.regions.policy[0] == st.MPOL_BIND and s.regions.vma_policy[0] == 1
    # 64 loads, then 1 ms of the task's own work, 300 times: the scanner's passes come every 10 ms
    sim.run(chunks=[chunk([mbind_op(0, "default")] + ([(x, LOAD) for x in range(64)] + [(10**6, OP_CPU)]) * 300)])
    assert s.regions.policy[0] == st.MPOL_DEFAULT
    assert counter(sim, Vm.PGPROMOTE_SUCCESS) > 0
    assert counter(sim, Vm.PGPROMOTE_SUCCESS) == int((s.pages.node[:64] == 0).sum())
    check_invariants(sim)


def test_bad_page_movement_ops_are_refused_naming_the_op():
    regions = [Region("a", "anon", 16)]
    with pytest.raises(ConfigError, match="move_pages target node"):
        check_control_ops(chunk([move_pages_op(0, 5)]), regions, None, 2)
    with pytest.raises(ConfigError, match="slot 3 does not exist"):
        check_control_ops(chunk([move_pages_op(3, 1)]), regions, None, 2)
    with pytest.raises(ConfigError, match="migrate_pages to"):
        check_control_ops(chunk([migrate_pages_op([0], 7)]), regions, None, 2)
    with pytest.raises(ConfigError, match="mbind node"):
        check_control_ops(chunk([mbind_op(0, "bind", [4])]), regions, None, 2)
    with pytest.raises(ConfigError, match="needs nodes"):
        mbind_op(0, "bind")
    check_control_ops(chunk([move_pages_op(0, 1), migrate_pages_op([0], 1), mbind_op(0, "preferred", [1], True)]),
                      regions, None, 2)


def test_set_mempolicy_sends_the_next_faults_of_vmas_without_their_own_policy():
    """set_mempolicy(bind:1): pages faulted after it land on node 1 in the slot without a VMA policy;
    the slot with its own (mbind) policy, and pages already placed, stay."""
    sim = sim_with([Region("a", "anon", 16), Region("b", "anon", 16)])
    s = sim.state
    b = int(s.regions.start[1])
    ops = [(x, STORE) for x in range(4)] + [mbind_op(1, "preferred", [0]), set_mempolicy_op("bind", [1])] + \
          [(x, STORE) for x in range(4, 8)] + [(b + x, STORE) for x in range(4)]
    sim.run(chunks=[chunk(ops)])
    assert s.pages.node[:8].tolist() == [0] * 4 + [1] * 4
    assert s.pages.node[b:b + 4].tolist() == [0] * 4
    assert s.mm[0]["policy"] == st.MPOL_BIND and s.regions.policy[0] == st.MPOL_BIND
    assert s.regions.policy[1] == st.MPOL_PREFERRED


def test_drop_caches_drops_clean_unmapped_page_cache_only():
    """A read() file (8 pages cached), a mmap'd file (4 pages mapped), an anon region: echo 1 >
    drop_caches frees the 8 read() pages, leaves the mapped ones and the anon memory; the next read
    of a dropped page is a first fault (no shadow: no refault)."""
    regions = [Region("f", "file", 8), Region("m", "file", 8, mapped=True), Region("a", "anon", 4)]
    sim = sim_with(regions)
    s = sim.state
    f, m, a = (int(s.regions.start[i]) for i in range(3))
    ops = [(f + x, 2 | 8) for x in range(8)] + [(m + x, LOAD) for x in range(4)] + \
          [(a + x, STORE) for x in range(4)] + [drop_caches_op(1)]
    sim.run(chunks=[chunk(ops)])
    present = lambda lo, n: [bool(s.pages.flags2[lo + x] & st.F2_PRESENT) for x in range(n)]
    assert present(f, 8) == [False] * 8
    assert present(m, 4) == [True] * 4 and present(a, 4) == [True] * 4
    free_before = int(s.pgdat[0]["free"])
    sim.run(chunks=[chunk([(f, 2 | 8)])])
    assert counter(sim, Vm.WORKINGSET_REFAULT_FILE) == 0
    assert int(s.pgdat[0]["free"]) < free_before
    check_invariants(sim)


@pytest.mark.parametrize("event", ["move_pages 0 1", "migratepages 0 1", "mbind 0 bind:1 move"])
def test_a_large_page_move_goes_a_migration_batch_per_step(event):
    """move_pages, migrate_pages and mbind(MPOL_MF_MOVE) of 3,072 pages while a second task runs:
    each call goes one migration batch (NR_MAX_BATCHED_MIGRATION pages) per step (task.ctrl_next),
    so no step is longer than the time rules' bound (move_pages was one step of 2.8 ms); every page
    is still moved once."""
    from tierlab.api import build
    from tierlab.core.time_rules import MAX_STEP_NS
    sim = build({"machine": "qemu-2node", "workload": "random-read", "scale": 64, "seed": 1,
                 "params": {"file_size": "768MiB", "accesses": "200000", "tasks": "2", "target": "anon",
                            "policy": "bind:0"},
                 "at": [f"phase:1:{event}"]})
    res = sim.run().result()
    assert res.events.applied.all()
    if event.startswith("move_pages"):
        assert int(sim.move_pages_status()["moved"].sum()) == 768 * 256 // 64
    assert int(sim.state.sys[0]["max_step_ns"]) <= MAX_STEP_NS
    assert (sim.state.task["ctrl_next"] == 0).all()
    assert int(res.counters["pgmigrate_success"]) == 768 * 256 // 64
    check_invariants(sim)


def test_drop_caches_goes_a_folio_batch_per_step():
    """echo 1 > drop_caches at 1 ms while two file readers run: ~4,000 clean page-cache pages are
    dropped one folio batch (31 entries) per call (it was one step of ~0.6 ms), and read again."""
    from tierlab.api import build
    from tierlab.core.time_rules import MAX_STEP_NS
    cfg = {"machine": "qemu-2node", "workload": "file-read", "scale": 64, "seed": 1,
           "params": {"file_size": "256MiB", "tasks": "2", "cycles": "4"}}
    base = build(cfg).run().result()
    sim = build({**cfg, "at": ["64ms:drop_caches 1"]})
    res = sim.run().result()
    assert res.events.applied.all()
    again = int(res.counters["pgpgin"]) - int(base.counters["pgpgin"])
    assert again > 3000
    assert int(res.counters["workingset_refault_file"]) == 0       # no shadow left
    # no step near the whole drop's work (> 450 us in one step before)
    assert int(sim.state.sys[0]["max_step_ns"]) < again * sim.costs["reclaim_free_ns"] / 10 <= MAX_STEP_NS
    check_invariants(sim)