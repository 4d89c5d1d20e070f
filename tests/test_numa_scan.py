"""The NUMA scanner (task_numa_work / change_prot_numa), hand-worked from the kernel's rules:

- a pass walks the scannable VMAs from the mm's cursor in ranges of scan_size_mb, each range's end
  aligned up to a 2 MiB huge page (512 pages) and cut at the VMA's end;
- a range that updated any PTE uses up its whole length of the scan_size_mb budget; every range
  uses up its length of the 8x virtual budget;
- the pass ends when a budget is gone (the cursor stays there) or past the last VMA (the cursor
  resets to the start: reset_ptenuma_scan);
- in tiering-only mode (numa_balancing=2) top-tier folios are never made PROT_NONE; lower-tier
  folios get their access time stamped; read()-only page cache has no VMA, and a read-only file
  mapping (VM_READ without VM_WRITE) is skipped;
- v6.12's per-VMA filters (vma_numab_state): a new VMA waits scan_delay after the mm's first pass,
  a VMA scanned to its end is not rescanned in the same pass, and vma_is_accessed() skips a VMA
  whose PID windows lack the scanning task (after its first two passes, unless the cursor is inside
  it or more passes than threads went by), with one skipped VMA forced per call when nothing else
  is left.
"""
from __future__ import annotations

import numpy as np

from simkit import CXL, DRAM, LOAD, READ, STORE, counters, machine, make_sim, run, seq
from tierlab.core import state as st
from tierlab.core.numa_balancing import task_numa_work, task_pid_bit
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


WALK = ("numa_scan_calls", "numa_scan_walked_pages", "numa_scan_ranges", "numa_scan_ranges_updated")


def _pass(sim, now_ms):
    before = counters(sim)["numa_pte_updates"]
    cost = task_numa_work(sim.state, sim.p, 0, np.int64(now_ms) * 1_000_000)
    return counters(sim)["numa_pte_updates"] - before, cost


def _walk(sim):
    c = counters(sim)
    return tuple(int(c[k]) for k in WALK)


def test_a_scan_after_an_unmap_batch_first_flushes_the_whole_mm():
    """change_pte_range() calls flush_tlb_batched_pending() on entering a page table: a PTE of the
    mm batched by reclaim since the last walk (mm->tlb_flush_batched) makes the scan's CPU flush the
    whole mm once before it changes anything; its cost is the scan's (tlb_flush_ns with no other
    CPU in the mask). A second scan finds nothing pending."""
    sim = _sim()
    s = sim.state
    pte_ns, upd_ns = sim.p[P.NUMA_SCAN_PTE_NS], sim.p[P.NUMA_SCAN_UPDATE_NS]
    s.mm[0]["tlb_flush_batched"] += 3                  # three PTEs batched, not yet met
    c0 = counters(sim)
    n, cost = _pass(sim, 1000)
    c1 = counters(sim)
    # two full local flushes: the pending batch's and the range's own (tlb_finish_mmu, > 33 pages)
    assert n > 33 and c1["nr_tlb_local_flush_all"] - c0["nr_tlb_local_flush_all"] == 2
    assert cost == 512 * pte_ns + n * upd_ns + sim.p[P.TLB_FLUSH_NS]
    assert s.mm[0]["tlb_flush_batched_done"] == s.mm[0]["tlb_flush_batched"]
    n, cost = _pass(sim, 1001)
    assert n > 33 and counters(sim)["nr_tlb_local_flush_all"] - c1["nr_tlb_local_flush_all"] == 1
    assert cost == 512 * pte_ns + n * upd_ns


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
        assert expect > 0
        n, cost = _pass(sim, 1000 + k)
        assert n == expect
        # tierlab's walk counters: one call, one range of 512 pages, and it updated
        assert _walk(sim) == (k + 1, 512 * (k + 1), k + 1, k + 1)
        # mm->tlb_flush_pending is raised while the walk runs (tlb.mm_tlb_flush_pending)
        t0 = (1000 + k) * 1_000_000
        assert (s.mm[0]["flush_pending_start"], s.mm[0]["flush_pending_end"]) == (t0, t0 + int(cost))
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
    assert _walk(sim) == (5, 4 * 512 + ANON, 4 + 4, 4)          # four 512-page ranges, none updated
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
    # NORMAL mode (1) marks top-tier folios too, without stamping an access time; the next pass
    # comes after scan_delay (1 s: a VMA is new until then once the mm's first pass is done)
    sim.set_knobs(numa_balancing=1)
    n, _ = _pass(sim, 2100)
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


def _two_vmas():
    """Two anon VMAs A = [0, 2048) and B = [2048, 4096) on the CXL node, already populated, and a
    64 MiB scan window (16384 pages: both VMAs fit in one pass)."""
    m = machine((64, 1, DRAM), (16384, 0, CXL))
    sim = make_sim(m, [Region("a", "anon", 2048), Region("b", "anon", 2048)], lru_batch_size=1,
                   numa_balancing=0, scan_size_mb=64)
    run(sim, seq(range(4096), STORE))
    sim.set_knobs(numa_balancing=2)
    return sim


def test_vma_pid_filter_hand_worked():
    """scan_delay_ms 1000 (250 jiffies), VMA_PID_RESET_PERIOD 4000 ms; one thread (nr_threads 1)."""
    sim = _two_vmas()
    s = sim.state
    nb = s.regions.numab
    pte = sim.p[P.NUMA_SCAN_PTE_NS]
    upd = sim.p[P.NUMA_SCAN_UPDATE_NS]
    # pass 0 at 1000 ms: both VMAs get numab_state (next_scan 2000 ms, PID reset at 6000 ms) and are
    # scanned (every PTE updated); past the last VMA: seq 1, cursor 0
    cxl = int((s.pages.node[:4096] == 1).sum())            # the few on the DRAM node are not marked
    assert cxl > 4000 and s.pages.node[2048 + 5] == 1
    cost = task_numa_work(s, sim.p, 0, np.int64(1000) * 1_000_000)
    assert cost == 4096 * pte + cxl * upd and int(s.mm[0]["numa_scan_seq"]) == 1
    assert nb.allocated.tolist() == [1, 1] and nb.prev_scan_seq.tolist() == [0, 0]
    assert nb.next_scan.tolist() == [500, 500] and nb.pids_active_reset.tolist() == [1500, 1500]

    def walk(now_ms, updates=0):
        before = counters(sim)["numa_pte_updates"]
        c = task_numa_work(s, sim.p, 0, np.int64(now_ms) * 1_000_000)
        assert counters(sim)["numa_pte_updates"] - before == updates
        return int(round((c - updates * upd) / pte)), int(s.mm[0]["numa_scan_seq"]), int(s.mm[0]["numa_scan_offset"])

    # 1500 ms: both VMAs are still new (scan_delay): nothing walked, but the pass ends past the last
    assert walk(1500) == (0, 2, 0)
    # 2100 ms, seq 2: no longer new; the first two passes since start_scan_seq 0 are over and no PID
    # bit is set, but 2 > prev_scan_seq 0 + 1 thread: both forced in by the starvation rule
    assert walk(2100) == (4096, 3, 0)
    assert nb.prev_scan_seq.tolist() == [2, 2]
    # 2200 ms, seq 3: 3 > 2 + 1 fails, no PID, cursor 0 is not inside A (> vm_start): both skipped
    # (pid_inactive); nothing left, so the retry forces the first one, A, and stops after it
    assert walk(2200) == (2048, 3, 2048)
    # 2300 ms: from the cursor, B is skipped (the cursor is at its start, not inside), then forced
    assert walk(2300) == (2048, 3, 4096)
    # 2400 ms: nothing past the cursor: reset (seq 4) and start over: A skipped then forced
    assert walk(2400) == (2048, 4, 2048)
    assert nb.prev_scan_seq.tolist() == [4, 3]
    # a hint fault in B (its page is PROT_NONE): the task's PID bit goes into B's current window
    sim.set_knobs(numa_balancing=0)
    run(sim, [(2048 + 5, LOAD)])
    sim.set_knobs(numa_balancing=2)
    bit = np.uint64(1) << task_pid_bit(0)
    assert nb.pids_active[:, 1].tolist() == [0, int(bit)] and nb.pids_active[:, 0].tolist() == [0, 0]
    # 2500 ms: B is accessed by this task: scanned without forcing (the faulted page, restored by
    # the fault, is made PROT_NONE again); past the last VMA: seq 5
    assert walk(2500, updates=1) == (2048, 5, 0)
    # 6100 ms (> 6000: both windows rotate): A skipped, B still accessed through the previous
    # window and scanned, then A forced from the cursor
    assert walk(6100) == (4096, 5, 2048)
    assert nb.pids_active[:, 0].tolist() == [0, int(bit)] and nb.pids_active[:, 1].tolist() == [0, 0]
    assert nb.pids_active_reset.tolist() == [2500, 2500]
    # 10100 ms (> 10000: rotate again, B's bit is gone): B was scanned to its end in pass 5 already
    # (seq_completed: the cursor moves past it); nothing else: seq 6
    assert walk(10100) == (0, 6, 0)
    assert nb.pids_active.tolist() == [[0, 0], [0, 0]]


def test_munmap_frees_the_numab_state():
    from tierlab.core.mm import do_munmap
    sim = _two_vmas()
    s = sim.state
    task_numa_work(s, sim.p, 0, np.int64(1000) * 1_000_000)
    assert s.regions.numab.allocated.tolist() == [1, 1]
    calls = 0
    while True:                   # a page table per call until done
        ok, _ = do_munmap(s, sim.p, 0, 1, np.int64(2_000_000_000))
        assert ok
        calls += 1
        if s.task["ctrl_next"][0] == 0:
            break
        assert s.regions.numab.allocated.tolist() == [1, 1]
    assert calls >= 1
    assert s.regions.numab.allocated.tolist() == [1, 0]


def test_pid_bits_follow_the_kernels_hash():
    """hash_32(pid, 6) = (pid * 0x61C88647 mod 2**32) >> 26, with pid = 1000 + task."""
    for t in (0, 1, 7, 63):
        assert int(task_pid_bit(t)) == (((1000 + t) * 0x61C88647) & 0xFFFFFFFF) >> 26


def test_a_large_folio_counts_every_pte_it_marks():
    """change_pte_range() makes every PTE of a PTE-mapped 64 KiB folio PROT_NONE: numa_pte_updates
    (and the scan's update cost) count its 16 PTEs, not one."""
    m = machine((64, 1, DRAM), (16384, 0, CXL))
    sim = make_sim(m, [Region("a", "anon", 1024)], lru_batch_size=1, numa_balancing=0, scan_size_mb=4,
                   anon_folio_orders="mthp", huge_anon_orders_always="64K")
    run(sim, seq(range(1024), STORE))
    sim.set_knobs(numa_balancing=2)
    s = sim.state
    heads = [x for x in range(1024) if s.pages.flags2[x] & st.F2_PRESENT]
    assert all(st.folio_nr_pages(s, h) == 16 for h in heads) and len(heads) == 64
    cxl_ptes = 16 * sum(1 for h in heads if s.pages.node[h] == 1)
    assert cxl_ptes > 512
    n, cost = _pass(sim, 1000)
    assert n == cxl_ptes
    assert cost == 1024 * sim.p[P.NUMA_SCAN_PTE_NS] + cxl_ptes * sim.p[P.NUMA_SCAN_UPDATE_NS]
    assert all(bool(s.pages.flags[h] & st.PG_PROTNONE) == (s.pages.node[h] == 1) for h in heads)
