"""The NUMA scanner (task_numa_work / change_prot_numa), hand-worked from the kernel's rules:

- a pass walks the scannable VMAs from the mm's cursor in ranges of scan_size_mb, each range's end
  aligned up to a 2 MiB huge page (512 pages) and cut at the VMA's end;
- a range that updated any PTE uses up its whole length of the scan_size_mb budget; every range
  uses up its length of the 8x virtual budget;
- the pass ends when a budget is gone (the cursor stays there) or past the last VMA (the cursor
  resets to the start: reset_ptenuma_scan);
- in tiering-only mode (numa_balancing=2) top-tier folios are never made PROT_NONE; lower-tier
  folios get their access time stamped; read()-only page cache has no VMA, and a read-only file
  mapping (VM_READ without VM_WRITE) is skipped.
"""
from __future__ import annotations

import numpy as np

from simkit import CXL, DRAM, LOAD, READ, STORE, counters, machine, make_sim, run, seq
from tierlab.core import state as st
from tierlab.core.numa_balancing import task_numa_work
from tierlab.core.params import P
from tierlab.workloads.base import Region

FILE = 1000      # page-cache pages before the anon VMA (no VMA of their own)
ANON = 2048


def _sim(numa_balancing=2, dram_pages=64):
    # node 0 is tiny, so the anon region spills to the CXL node 1 (zonelist fallback below LOW)
    m = machine((dram_pages, 1, DRAM), (16384, 0, CXL))
    sim = make_sim(m, [Region("f", "file", FILE, "bind", (1,)), Region("a", "anon", ANON)],
                   lru_batch_size=1, numa_balancing=0, scan_size_mb=1)
    run(sim, seq(range(FILE), READ))
    run(sim, seq(range(FILE, FILE + ANON), STORE))
    sim.set_knobs(numa_balancing=numa_balancing)
    return sim


def _pass(sim, now_ms):
    before = counters(sim)["numa_pte_updates"]
    cost = task_numa_work(sim.state, sim.p, 0, np.int64(now_ms) * 1_000_000)
    return counters(sim)["numa_pte_updates"] - before, cost


def test_ranges_are_huge_page_aligned_and_an_updating_range_uses_the_budget():
    sim = _sim()
    s = sim.state
    on_cxl = np.flatnonzero(s.pages.node[FILE:FILE + ANON] == 1) + FILE
    assert 0 < len(on_cxl) < ANON and on_cxl[-1] == FILE + ANON - 1   # the first pages stayed on node 0
    pte_ns, upd_ns = sim.p[P.NUMA_SCAN_PTE_NS], sim.p[P.NUMA_SCAN_UPDATE_NS]
    # scan_size_mb=1: 256 pages; the first range ends at align_up(256, 512) = 512 pages into the VMA,
    # it updates every CXL page in it, so its 512 pages exhaust the 256-page budget: one range a pass
    for k in range(4):
        lo, hi = FILE + 512 * k, FILE + 512 * (k + 1)
        expect = int(((on_cxl >= lo) & (on_cxl < hi)).sum())
        n, cost = _pass(sim, 1000 + k)
        assert n == expect
        assert cost == 512 * pte_ns + expect * upd_ns
        assert s.mm[0]["numa_scan_offset"] == hi
        for x in range(lo, hi):
            want = bool(s.pages.node[x] == 1)
            assert bool(s.pages.flags[x] & st.PG_PROTNONE) == want
            if want:
                assert int(s.pages.stamp[x]) == 1000 + k            # access time stamped (ms)
    # cursor at the end of the last VMA: find_vma() finds nothing, so the next pass starts over;
    # everything is PROT_NONE already, so no range updates and the pass walks the 8 x 256 = 2048-page
    # virtual budget, which runs out exactly at the VMA's end: the cursor stays there
    n, cost = _pass(sim, 2000)
    assert n == 0 and cost == ANON * pte_ns
    assert s.mm[0]["numa_scan_offset"] == FILE + ANON
    # a larger budget runs past the last VMA: reset_ptenuma_scan() puts the cursor at the start
    sim.set_knobs(scan_size_mb=2)
    n, cost = _pass(sim, 3000)
    assert n == 0 and cost == ANON * pte_ns
    assert s.mm[0]["numa_scan_offset"] == 0


def test_top_tier_is_walked_but_never_marked_in_tiering_mode():
    sim = _sim(dram_pages=8192)                                  # everything fits on DRAM
    s = sim.state
    assert (s.pages.node[FILE:FILE + ANON] == 0).all()
    pte_ns = sim.p[P.NUMA_SCAN_PTE_NS]
    n, cost = _pass(sim, 1000)
    assert n == 0 and cost == ANON * pte_ns                      # virtual budget = the whole VMA
    assert not (s.pages.flags[:FILE + ANON] & st.PG_PROTNONE).any()
    # NORMAL mode (1) marks top-tier folios too, without stamping an access time
    sim.set_knobs(numa_balancing=1)
    n, _ = _pass(sim, 1000)
    assert n == 512
    assert (s.pages.flags[FILE:FILE + 512] & st.PG_PROTNONE).all()
    assert (s.pages.stamp[FILE:FILE + 512] == st.STAMP_NONE).all()


def test_page_cache_without_a_vma_is_never_scanned():
    sim = _sim()
    for k in range(6):
        _pass(sim, 1000 + k)
    assert not (sim.state.pages.flags[:FILE] & st.PG_PROTNONE).any()


def test_a_read_only_file_mapping_is_skipped():
    """task_numa_work skips a VMA of a file mapped without PROT_WRITE (vm_file set, VM_READ without
    VM_WRITE: shared libraries, fio's mmap reads); a writable mapping of the same kind is scanned.
    Both files were read through their mappings and sit on the CXL node (bound there); NORMAL mode
    marks every present PTE, so the first pass walks the writable file's 512 pages, marks them all,
    and walks nothing of the read-only one."""
    m = machine((64, 1, DRAM), (4096, 0, CXL))
    sim = make_sim(m, [Region("ro", "file", 512, "bind|numa_balancing", (1,), mapped=True, prot="r"),
                       Region("rw", "file", 512, "bind|numa_balancing", (1,), mapped=True)],
                   lru_batch_size=1, numa_balancing=0, scan_size_mb=1)
    run(sim, seq(range(1024), LOAD))
    s = sim.state
    assert (s.pages.node[:1024] == 1).all()
    sim.set_knobs(numa_balancing=1)
    pte_ns, upd_ns = sim.p[P.NUMA_SCAN_PTE_NS], sim.p[P.NUMA_SCAN_UPDATE_NS]
    n, cost = _pass(sim, 1000)
    assert n == 512 and cost == 512 * (pte_ns + upd_ns)
    assert (s.pages.flags[512:1024] & st.PG_PROTNONE).all()
    for k in range(3):
        _pass(sim, 2000 + k)
    assert not (s.pages.flags[:512] & st.PG_PROTNONE).any()
