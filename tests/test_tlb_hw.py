"""The CPUs' TLBs (core/tlb_hw.py), hand-worked on a tiny geometry: a dTLB of 2 sets x 2 ways, an
iTLB of 1 set x 2 ways, an STLB of 4 sets x 2 ways (a page's set is its id modulo the sets).

- a translation looks in the dTLB, then the STLB, then walks and fills both; LRU within a set;
- a whole flush makes every entry of the CPU invalid at once (its generation), a ranged one
  invalidates those pages;
- a store hitting an entry without the write permission walks again;
- a lazy CPU a shootdown skipped flushes whole before its next translation;
- the iTLB: the mm's text pages fetched round robin, missed only when a flush took them;
- MIGRC: the translations left stale by deferred flushes are hit while the sources are held,
  never written through, never after the sources are freed; without MIGRC none is stale.
"""
from __future__ import annotations

import pytest

from simkit import CXL, DRAM, LOAD, STORE, counters, make_sim, run, seq
from tierlab.api import Simulation
from tierlab.core.tlb import flush_tlb_mm_range
from tierlab.core.tlb_hw import tlb_access
from tierlab.errors import ConfigError
from tierlab.kernel import Kernel
from tierlab.machine import Machine
from tierlab.workloads import make_workload
from tierlab.workloads.base import Region

TINY = {"dtlb_entries": 4, "dtlb_ways": 2, "itlb_entries": 2, "itlb_ways": 2, "stlb_entries": 8,
        "stlb_ways": 2, "pti": True}
HW = ("dtlb_load_misses", "dtlb_store_misses", "itlb_load_misses", "tlb_cpu_flush_all", "tlb_cpu_flush_one")


def _machine(tlb=TINY):
    return Machine.from_dict({"name": "tiny", "tlb": tlb, "nodes": [
        {"name": f"n{i}", "capacity": "4096pages", "cpus": cpus, "adistance": ad, "seq_4k_ns": 200.0,
         "rand_line_ns": 100.0, "write_line_ns": 110.0, "bandwidth_GBps": 100.0}
        for i, (cpus, ad) in enumerate(((2, DRAM), (0, CXL)))]})


def _sim(regions=(Region("a", "anon", 64),), **knobs):
    return make_sim(_machine(), list(regions), tlb_model="set_assoc", **knobs)


def _delta(sim, before):
    c = counters(sim)
    return tuple(c[n] - before[n] for n in HW)


def _stored(pages=range(4)):
    sim = _sim()
    run(sim, seq(pages, STORE))          # faults, then the stores' translations: one walk each
    return sim


def test_two_levels_and_lru():
    sim = _stored([0, 1, 2, 3, 4, 8])
    assert _delta(sim, dict.fromkeys(HW, 0)) == (0, 6, 0, 0, 0)
    flush_tlb_mm_range(sim.state, 0, 0, 0, 100)     # start from empty TLBs
    before = counters(sim)
    run(sim, seq([0, 1, 2, 3], LOAD))    # four walks: dTLB set 0 = {0, 2}, set 1 = {1, 3}
    assert _delta(sim, before)[0] == 4
    run(sim, seq([0, 1, 2, 3], LOAD))    # all hit
    assert _delta(sim, before)[0] == 4
    run(sim, seq([4], LOAD))             # dTLB set 0 evicts 0 (LRU); STLB set 0 = {0, 4}: a walk
    assert _delta(sim, before)[0] == 5
    run(sim, seq([0, 2], LOAD))          # dTLB misses, STLB hits: no walk
    assert _delta(sim, before)[0] == 5
    run(sim, seq([8], LOAD))             # STLB set 0 = {0, 4}: 4 is older (0 was used since): evicted
    assert _delta(sim, before)[0] == 6
    run(sim, seq([4], LOAD))             # gone from both levels: a walk
    assert _delta(sim, before)[0] == 7
    run(sim, seq([0], LOAD))             # 4's walk evicted 0 from STLB set 0 (LRU of {0, 8})
    assert _delta(sim, before) == (8, 0, 0, 0, 0)


def test_a_whole_flush_takes_every_entry_and_a_ranged_one_its_pages():
    sim = _stored()
    s = sim.state
    before = counters(sim)
    flush_tlb_mm_range(s, 0, 0, 0, 100)           # beyond the ceiling: whole, on the task's CPU 0
    run(sim, seq([0, 1, 2, 3], LOAD))
    assert _delta(sim, before) == (4, 0, 0, 1, 0)
    before = counters(sim)
    flush_tlb_mm_range(s, 0, 0, 1, 2)             # pages 1 and 2: INVLPG in the dTLB and the STLB
    run(sim, seq([0, 1, 2, 3], LOAD))
    assert _delta(sim, before) == (2, 0, 0, 0, 2)


def test_a_pmd_mapped_folio_is_one_entry_and_invlpg_of_any_page_removes_it():
    sim = _sim(regions=(Region("thp", "anon", 512, order=9),))
    run(sim, seq([0], STORE))                     # one 2 MiB folio, one translation
    before = counters(sim)
    run(sim, seq([5, 300, 511], LOAD))
    assert _delta(sim, before) == (0, 0, 0, 0, 0)
    flush_tlb_mm_range(sim.state, 0, 0, 100, 1)   # INVLPG of an address in its middle
    run(sim, seq([5, 300], LOAD))
    assert _delta(sim, before) == (1, 0, 0, 0, 1)


def test_a_store_to_a_read_only_entry_walks_again():
    sim = _sim(regions=(Region("f", "file", 16, mapped=True),))
    run(sim, seq([0], LOAD))                      # a read fault maps the file page read-only
    before = counters(sim)
    run(sim, seq([0], LOAD))
    assert _delta(sim, before) == (0, 0, 0, 0, 0)
    run(sim, seq([0], STORE))                     # write-protect fault, then a walk for the write
    assert _delta(sim, before) == (0, 1, 0, 0, 0)
    run(sim, seq([0], STORE))
    assert _delta(sim, before) == (0, 1, 0, 0, 0)


def test_a_lazy_cpu_skipped_by_a_shootdown_flushes_before_its_next_translation():
    sim = _stored()
    s = sim.state
    s.mm[0]["cpumask"][0] |= 0b10                 # the mm also ran on CPU 1
    s.cpu["curr"][0] = s.task.shape[0]            # CPU 0 runs a kswapd now: lazy
    before = counters(sim)
    flush_tlb_mm_range(s, 0, 1, 0, 100)           # from CPU 1: CPU 0 is skipped, no receipt
    assert counters(sim)["nr_tlb_remote_flush_received"] == before["nr_tlb_remote_flush_received"]
    assert s.tlbs.need_flush[0] == 1
    s.cpu["curr"][0] = -1
    run(sim, seq([0, 1, 2, 3], LOAD))             # back to the task: the flush it owes, then walks
    assert _delta(sim, before) == (4, 0, 0, 1, 0)
    assert s.tlbs.need_flush[0] == 0


def test_the_itlb_misses_the_text_only_after_a_flush():
    w = make_workload("xsbench", {"size": "small", "particles": 64, "lookups": 2, "threads": 1}, scale=64)
    sim = Simulation(_machine(), Kernel(), w, tlb_model="set_assoc")
    res = sim.run().result()
    # two text pages, one iTLB set of two ways: each page walks once, at its first fetch; no flush
    assert int(res.counters["tlb_cpu_flush_all"]) == 0
    assert int(res.counters["itlb_load_misses"]) == 2
    s = sim.state
    flush_tlb_mm_range(s, 0, 0, 0, 100)
    # the next access after the flush: its text page and its data page both walk
    assert tlb_access(s, 0, 0, int(s.cpu.node[0]), 0, int(s.pages.node[0]),
                      True, False) == 2
    assert counters(sim)["itlb_load_misses"] == 3


def _demotion(migrc):
    w = make_workload("random-read", {"file_size": "2GiB", "accesses": "100000", "io": "mmap",
                                      "policy": "bind:0"}, scale=64)
    sim = Simulation(Machine.load("qemu-2node").scaled(64), Kernel(demotion_enabled=1, migrc=migrc), w, seed=1,
                     tlb_model="set_assoc")
    return sim.run().result().counters


def test_migrc_stale_translations_are_read_only_and_backed_by_held_sources():
    """kswapd demoting a file the task maps read-only: MIGRC removes whole flushes from the task's
    CPU, and nothing is read through a freed source or written through a stale translation. (No
    stale hit at all here: a folio is demoted when it is cold, long after its translation left a
    1536-entry STLB; the hand-worked case below makes one.)"""
    off, on = _demotion("off"), _demotion("on")
    for c in (off, on):
        assert int(c["tlb_stale_write_hits"]) == 0 and int(c["tlb_stale_freed_hits"]) == 0
    assert int(off["tlb_stale_hits"]) == 0
    assert int(on["tlb_cpu_flush_all"]) < int(off["tlb_cpu_flush_all"])


def test_a_stale_translation_reads_the_held_source_until_a_write_protect_fault_flushes_it():
    from tierlab.core import state as st
    from tierlab.core.tlb import MIGRC_UBC
    sim = _stored()                               # pages 0-3 stored: writable translations on CPU 0
    s = sim.state
    s.pages.flags2[0] &= ~st.F2_PTE_WRITE         # a read-only, clean PTE, as after a promotion
    s.pages.flags[0] &= ~st.PG_DIRTY
    flush_tlb_mm_range(s, 0, 0, 0, 1)
    run(sim, seq([0], LOAD))                      # a read-only translation to node 0
    # MIGRC moved page 0 to node 1 without a flush: the source is held, CPU 0 in migrc_ubc
    s.pages.node[0] = 1
    s.pgdat["migrc_pending_nr"][0] = 1
    s.pgdat["free"][0] -= 1
    s.tlb_ubc[MIGRC_UBC][0] = 0b1
    before = counters(sim)
    run(sim, seq([0], LOAD))
    c = counters(sim)
    assert (c["tlb_stale_hits"] - before["tlb_stale_hits"], c["tlb_stale_freed_hits"]) == (1, 0)
    run(sim, seq([0], STORE))                     # do_wp_page gives MIGRC up first: flush, free
    c = counters(sim)
    assert c["tlb_stale_hits"] - before["tlb_stale_hits"] == 1 and c["tlb_stale_write_hits"] == 0
    assert int(s.pgdat["migrc_pending_nr"][0]) == 0 and c["dtlb_store_misses"] - before["dtlb_store_misses"] == 1
    # the check itself: a translation left stale with no source held is reported
    run(sim, seq([1], LOAD))                      # the flush took page 1's translation too: refilled
    s.pages.node[1] = 1
    run(sim, seq([1], LOAD))
    assert counters(sim)["tlb_stale_freed_hits"] == 1


def test_the_model_off_counts_nothing_and_bad_geometry_is_refused():
    sim = make_sim(_machine(), [Region("a", "anon", 64)])
    run(sim, seq(range(8), STORE))
    assert all(counters(sim)[n] == 0 for n in HW)
    with pytest.raises(ConfigError, match="stlb_entries"):
        _machine(dict(TINY, stlb_entries=12))            # 6 sets: not a power of two
    with pytest.raises(ConfigError, match="pti"):
        _machine(dict(TINY, pti="yes"))
    with pytest.raises(ConfigError, match="tlb_model"):
        make_sim(_machine(), [Region("a", "anon", 64)], tlb_model="full")
