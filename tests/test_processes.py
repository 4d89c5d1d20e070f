"""Processes (mm's) with lifecycles and placement, hand-worked from the kernel's rules (core/mm.py,
config.check_processes): exit frees anon memory and keeps the page cache, munmap/brk zap and
recycle page ids, RSS counters, the NUMA scan period at the first tick after scan_delay, CPU
placement, MPOL_F_NUMA_BALANCING, and refusals of bad processes and ops."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as hst

from simkit import CXL, DRAM, LOAD, READ, STORE, Scripted, chunk, machine
from test_properties import check_invariants

from tierlab.api import Simulation
from tierlab.core import state as st
from tierlab.core.mm import rss_pages
from tierlab.errors import ConfigError
from tierlab.kernel import Kernel
from tierlab.workloads.base import Process, Region, control_op


class Procs(Scripted):
    """Regions and processes given by the test; accesses by sim.run(chunks=...)."""
    name = "procs"
    control_ops = True

    def __init__(self, regions, processes):
        super().__init__(regions, sum(p.threads for p in processes))
        self._procs = list(processes)

    def processes(self):
        return self._procs


def make(mach, regions, processes, **knobs):
    return Simulation(mach, Kernel(**knobs), Procs(regions, processes))


def ctl(kind, slot=0, npages=0):
    return control_op(kind, slot, npages)


def mapped_rss(s):
    """Per mm, present folios with PTEs, counted from the pages (what the counters must equal)."""
    out = np.zeros(s.mm.shape[0], np.int64)
    for r in range(len(s.regions.kind)):
        mm = int(s.regions.mm[r])
        if mm < 0:
            continue
        for x in range(int(s.regions.start[r]), int(s.regions.end[r])):
            f2 = int(s.pages.flags2[x])
            if f2 & st.F2_PRESENT and f2 & st.F2_MAPPED:
                out[mm] += 1 << (int(s.pages.order[x]) & 15)
    return out


def test_exit_frees_anon_by_its_rss_and_keeps_the_page_cache():
    """Process A reads a file (page cache) and writes an anon buffer, then exits: the buffer's
    pages go back to the node (free rises by exactly A's RSS), the file stays cached; process B,
    started later, reads the file without a miss."""
    m = machine((256, 2, DRAM))
    regions = [Region("file", "file", 32), Region("abuf", "anon", 40, order=2), Region("bbuf", "anon", 8)]
    procs = [Process("a", vmas=("abuf",), files=("file",)), Process("b", vmas=("bbuf",), start_ms=1.0)]
    sim = make(m, regions, procs, lru_batch_size=1)
    s = sim.state
    a = [(p, READ) for p in range(32)] + [(32 + i, STORE) for i in range(40)]
    b = [(p, READ) for p in range(32)] + [(72, STORE), ctl("exit")]
    sim.run(chunks=[chunk(a, [])])
    assert s.mm[0]["rss_anon"] == 40 and s.mm[0]["rss_file"] == 0
    free_before = int(s.pgdat[0]["free"])
    rss = int(rss_pages(s)[0])
    sim.run(chunks=[chunk([ctl("exit")], [])])
    assert int(s.task[0]["dead"]) == 1 and s.mm[0]["users"] == 0
    assert int(s.pgdat[0]["free"]) == free_before + rss
    sim.run(chunks=[chunk([], b)])
    assert all(s.pages.flags2[x] & st.F2_PRESENT for x in range(32))       # page cache kept
    assert not any(s.pages.flags2[x] & st.F2_PRESENT for x in range(32, 72))
    assert int(s.regions.mm[1]) == st.NO_MM and int(s.regions.end[1]) == int(s.regions.start[1])
    r = sim.result()
    assert r.counters["pgpgin"] == 32 * 4          # B's reads all hit the cache A left
    assert int(s.task[1]["dead"]) == 1 and int(rss_pages(s)[1]) == 0
    check_invariants(sim)


def test_exit_frees_exactly_the_rss_on_its_node():
    m = machine((256, 2, DRAM))
    sim = make(m, [Region("buf", "anon", 64)], [Process("p", vmas=("buf",))], lru_batch_size=4)
    s = sim.state
    sim.run(chunks=[chunk([(i, STORE) for i in range(50)] + [(60, LOAD)])])   # the zero page is not RSS
    rss = int(rss_pages(s)[0])
    assert rss == 50 == int(mapped_rss(s)[0])
    free = int(s.pgdat[0]["free"])
    sim.run(chunks=[chunk([ctl("exit")])])
    assert int(s.pgdat[0]["free"]) == free + rss == int(s.pgdat[0]["managed"])
    assert s.lruvec["lru_size"].sum() == 0
    check_invariants(sim)


def test_munmap_zaps_and_the_slot_is_reused_by_another_process():
    """A slot unmapped by one process is mapped by the next: same page ids, fresh pages; swap
    entries of the old mapping are released."""
    m = machine((64, 2, DRAM))
    regions = [Region("slot", "anon", 48)]
    procs = [Process("a"), Process("b")]
    sim = make(m, regions, procs, swap_size=64, lru_batch_size=1)
    s = sim.state
    a = [ctl("mmap", 0)] + [(i, STORE) for i in range(48)] + [ctl("munmap", 0), ctl("exit")]
    sim.run(chunks=[chunk(a, [])])
    assert int(s.sys[0]["nr_swap_used"]) == 0 and int(s.mm[0]["swapents"]) == 0
    assert int(s.regions.mm[0]) == st.NO_MM
    b = [ctl("mmap", 0, 16)] + [(i, STORE) for i in range(16)]
    sim.run(chunks=[chunk([], b)])
    assert int(s.regions.mm[0]) == 1 and int(rss_pages(s)[1]) == 16
    check_invariants(sim)


def test_munmap_goes_a_page_table_per_call_with_the_vma_detached():
    """munmap of a 2,048-page VMA with 1,100 pages stored to (pages 0-999 and 1,948-2,047): four
    calls, one per page table (512 pages); after the first, the VMA is detached: a fault in it finds
    no VMA, while a present page not zapped yet is still mapped; the gather holds 1,100 pages (below
    MMU_GATHER_MAX_PAGES), so the only flush is tlb_finish_mmu's, of the cleared range [0, 2048):
    one full flush, as in one pass. A munmap touching 10 pages flushes those 10 pages one by one
    (the range is that of the PTEs cleared, not the VMA)."""
    from tierlab.core.mm import ZAP_STEP_PAGES, do_munmap, vma_covers
    from tierlab.core.vmstat import Vm
    m = machine((4096, 2, DRAM))
    sim = make(m, [Region("buf", "anon", 2048), Region("small", "anon", 2048)],
               [Process("p", vmas=("buf", "small"))], lru_batch_size=1)
    s = sim.state
    touched = list(range(1000)) + list(range(1948, 2048))
    sim.run(chunks=[chunk([(i, STORE) for i in touched] + [(2048 + i, STORE) for i in range(10)])])
    assert int(s.mm[0]["rss_anon"]) == 1110
    flushes = lambda: (int(s.counters[:, Vm.NR_TLB_LOCAL_FLUSH_ALL].sum()),
                       int(s.counters[:, Vm.NR_TLB_LOCAL_FLUSH_ONE].sum()))
    before = flushes()
    c = sim.costs
    per_page = c["zap_pte_ns"] + c["zap_rmap_ns"] + c["free_folio_ns"]
    calls = []
    while True:
        ok, cost = do_munmap(s, sim.p, 0, 0, np.int64(10**9))
        assert ok
        calls.append(cost)
        if int(s.task[0]["ctrl_next"]) == 0:
            break
        assert s.regions.vm_flags[0] & st.VMA_DETACHED
        assert not vma_covers(s, 0, 0, 0, True, False)                 # page 0 is zapped: no VMA
        assert s.pages.flags2[2000] & st.F2_MAPPED                      # not zapped yet: mapped
        assert flushes() == before
    assert len(calls) == 2048 // ZAP_STEP_PAGES
    assert max(calls) <= ZAP_STEP_PAGES * per_page + c["tlb_flush_ns"] + c["vma_op_ns"] + 5_000
    assert flushes() == (before[0] + 1, before[1])
    assert int(s.mm[0]["rss_anon"]) == 10 and int(s.regions.mm[0]) == st.NO_MM
    assert not s.regions.vm_flags[0] & st.VMA_DETACHED
    while True:
        assert do_munmap(s, sim.p, 0, 1, np.int64(10**9))[0]
        if int(s.task[0]["ctrl_next"]) == 0:
            break
    assert flushes() == (before[0] + 1, before[1] + 10)
    assert int(s.mm[0]["rss_anon"]) == 0
    check_invariants(sim)


def test_brk_shrink_frees_the_tail_and_grow_maps_more():
    m = machine((256, 2, DRAM))
    sim = make(m, [Region("heap", "anon", 64)], [Process("p")], lru_batch_size=1)
    s = sim.state
    ops = [ctl("mmap", 0, 16)] + [(i, STORE) for i in range(16)] + [ctl("brk", 0, 48)]
    ops += [(i, STORE) for i in range(16, 48)] + [ctl("brk", 0, 8)]
    sim.run(chunks=[chunk(ops)])
    assert int(rss_pages(s)[0]) == 8 and int(s.regions.end[0]) == 8
    assert int(s.pgdat[0]["free"]) == 256 - 8
    assert sim.result().counters["pgfree"] == 40
    check_invariants(sim)


def test_access_past_the_brk_end_is_a_segv():
    m = machine((256, 2, DRAM))
    sim = make(m, [Region("heap", "anon", 64)], [Process("p")])
    with pytest.raises(ConfigError, match="SIGSEGV"):
        sim.run(chunks=[chunk([ctl("mmap", 0, 8), (9, STORE)])])


def test_a_store_to_a_read_only_mapping_is_a_segv():
    """access_error(): a write fault on a VMA without VM_WRITE is a SIGSEGV, whether the page is
    not yet mapped or mapped read-only by an earlier load; loads are fine."""
    m = machine((256, 2, DRAM))
    for page in (12, 3):                         # not cached yet; mapped read-only by a load
        sim = make(m, [Region("f", "file", 16, mapped=True, prot="r")], [Process("p", vmas=("f",))])
        sim.run(chunks=[chunk([(i, LOAD) for i in range(8)])])
        with pytest.raises(ConfigError, match="SIGSEGV"):
            sim.run(chunks=[chunk([(page, STORE)])])
    with pytest.raises(ConfigError, match="prot"):
        Region("f", "file", 16, mapped=True, prot="w")


def test_reclaim_and_swap_keep_the_rss_counters():
    m = machine((64, 2, DRAM))
    sim = make(m, [Region("a", "anon", 96), Region("f", "file", 32, mapped=True)],
               [Process("p", vmas=("a", "f"))], swap_size=128, lru_batch_size=1)
    s = sim.state
    sim.run(chunks=[chunk([(96 + i, LOAD) for i in range(32)] + [(i, STORE) for i in range(96)]
                          + [(i, LOAD) for i in range(0, 96, 3)])])
    assert s.counters[:, 19].sum() > 0   # pswpout: reclaim ran
    assert int(rss_pages(s)[0]) == int(mapped_rss(s)[0])
    swapped = int(np.count_nonzero(s.pages.flags2[:96] & st.F2_SWAPPED))
    assert int(s.mm[0]["swapents"]) == swapped == int(s.sys[0]["nr_swap_used"])
    check_invariants(sim)


def scan_delay_run(**costs):
    """One task alone on its CPU from time 0 (runtime == clock) with 1024 resident anon pages on a
    DRAM node, scan_delay_ms=10, scan_size_mb=1, about 15 ms of loads."""
    m = machine((4096, 1, DRAM), (4096, 0, CXL))
    sim = Simulation(m, Kernel(numa_balancing=2, scan_delay_ms=10, scan_period_min_ms=1000, scan_size_mb=1),
                     Procs([Region("a", "anon", 1024)], [Process("p", vmas=("a",))]), costs=costs)
    s = sim.state
    # init_numa_balancing: the period is scan_delay (ms), the first scan msecs_to_jiffies(10) = 3
    # jiffies (12 ms at HZ=250) after the start
    assert int(s.task[0]["numa_scan_period"]) == 10 and int(s.task[0]["numa_scan_stamp"]) == 0
    assert int(s.mm[0]["numa_next_scan"]) == 3
    touch = [(i, STORE) for i in range(1024)]
    loads = [(i % 1024, LOAD) for i in range(150_000)]      # ~100 ns each: 15 ms of runtime
    sim.run(chunks=[chunk(touch + loads)])
    assert 13_000_000 < int(s.task[0]["runtime"]) < 100_000_000
    return s


def test_scan_period_is_computed_at_the_first_tick_after_scan_delay_for_the_resident_rss():
    """task_tick_numa runs at scheduler ticks (every 4 ms): the first tick at which the runtime is
    past node_stamp + 10 ms is tick 3 (12 ms). It computes task_scan_start() for the RSS then: 1024
    pages with scan_size_mb=1 (256 pages per window) are 4 windows, scan_period_min 1000 ms / 4 =
    250 ms (the floor, 1000 / (2560 / 1) = 0 ms, does not bind); node_stamp moves on by the old
    period to 10 ms. Jiffies 3 have reached numa_next_scan (3), so task_numa_work runs: the next
    scan msecs_to_jiffies(250) = 63 jiffies on (66), node_stamp 2 ticks on (18 ms); the pass walks
    all 1024 pages (top-tier pages are skipped in tiering mode, so only the 8x virtual budget of
    2048 pages bounds it) and wraps (numa_scan_seq 1). Its ~5 us end well before tick 4."""
    s = scan_delay_run()
    assert int(s.task[0]["numa_scan_period"]) == 250
    assert int(s.task[0]["numa_scan_stamp"]) == 18_000_000
    assert int(s.mm[0]["numa_next_scan"]) == 66
    assert int(s.mm[0]["numa_scan_seq"]) == 1


def test_a_scan_that_spans_a_tick_pushes_node_stamp_32_times_its_runtime():
    """task_numa_work's 3 % cap: the scan's runtime, as sum_exec_runtime sees it, moves node_stamp
    32 times as far. At 5 us per PTE walked the pass over 1024 pages takes 5.12 ms from just after
    tick 3 (12 ms): tick 4 (16 ms) falls within it, so sum_exec_runtime moved 4 ms and node_stamp
    goes 10 + 8 (two ticks) + 32 x 4 = 146 ms."""
    s = scan_delay_run(numa_scan_pte_ns=5000.0)
    assert int(s.task[0]["numa_scan_stamp"]) == 146_000_000
    assert int(s.mm[0]["numa_next_scan"]) == 66


def test_jiffies_grid_at_a_scale():
    """At --scale 64 the kernel's clock runs 64x faster: a tick every 62.5 us of virtual time;
    msecs_to_jiffies rounds up (HZ=250: 4 ms a jiffy)."""
    from tierlab.core.numa_balancing import jiffies_at, jiffy_start, mm_first_scan_jiffies, msecs_to_jiffies
    from tierlab.core.params import NR_PARAMS, P
    p = np.zeros(NR_PARAMS)
    p[P.SCALE] = 64.0
    assert jiffy_start(p, 1) == 62_500 and jiffies_at(p, 62_499) == 0 and jiffies_at(p, 62_500) == 1
    p[P.SCALE] = 1024.0                                   # 3906.25 ns a tick
    assert [jiffy_start(p, j) for j in (1, 2, 4)] == [3907, 7813, 15625]
    assert [jiffies_at(p, c) for c in (3906, 3907, 7812, 7813)] == [0, 1, 1, 2]
    p[P.SCALE] = 1.0
    assert jiffies_at(p, 3_999_999) == 0 and jiffy_start(p, 5) == 20_000_000
    assert [msecs_to_jiffies(m) for m in (0, 1, 4, 5, 125, 1000)] == [0, 1, 1, 2, 32, 250]
    # an mm started at 1 ms of virtual time at scale 64 (jiffies 16) with the default 1 s scan_delay
    assert mm_first_scan_jiffies(Kernel(), [1_000_000], 64.0) == [16 + 250]


def test_scan_period_floor_and_an_empty_mm():
    from tierlab.core.numa_balancing import task_scan_min_ms
    from tierlab.core.params import NR_PARAMS, P
    p = np.zeros(NR_PARAMS)
    p[P.SCALE] = 1.0
    p[P.SCAN_SIZE_MB] = 256
    p[P.SCAN_PERIOD_MIN_MS] = 1000
    assert task_scan_min_ms(p, 0) == 1000             # no RSS counts as one window
    assert task_scan_min_ms(p, 65536 * 4) == 250      # 1 GiB: 4 windows of 256 MB
    assert task_scan_min_ms(p, 65536 * 4 + 1) == 200  # rounded up to 5 windows
    assert task_scan_min_ms(p, 65536 * 64) == 100     # the 2560 MB/s floor: 1000 / (2560 / 256)


def test_later_threads_are_staggered_and_keep_scan_delay():
    """init_numa_balancing: thread k > 0 starts with node_stamp = min(task_scan_max ms read as ns,
    scan_delay * k ms) + 2 ticks = 60000 ns + 8 ms with the defaults, so it never recomputes its
    period at the first tick."""
    m = machine((4096, 2, DRAM))
    sim = make(m, [Region("a", "anon", 64)], [Process("p", threads=3)], numa_balancing=2)
    stamps = sim.state.task["numa_scan_stamp"].tolist()
    assert stamps == [0, 60_000 + 8_000_000, 60_000 + 8_000_000]


def test_placement_cpunodebind_cpus_and_default():
    m = machine((512, 2, DRAM), (512, 2, DRAM), (512, 0, CXL))
    regions = [Region("a", "anon", 8), Region("b", "anon", 8), Region("c", "anon", 8)]
    procs = [Process("a", threads=2, vmas=("a",), cpunodebind=(1,)), Process("b", vmas=("b",), cpus=(1,)),
             Process("c", threads=2, vmas=("c",))]
    sim = make(m, regions, procs)
    lay = sim._layout
    machine_cpu = [lay.cpu_ids[c] for c in lay.task_cpu]
    assert machine_cpu == [2, 3, 1, 0, 0]     # c: the least loaded CPU, lowest id first, each time
    assert [int(x) for x in sim.state.cpu["node"]] == [0, 0, 1, 1]
    assert sim.state.task["mm"].tolist() == [0, 0, 1, 2, 2]


def test_seed002_setup_bind_numa_balancing_promotes_into_the_bind_mask_only():
    """Seed 002: the task on DRAM node 0 of a 3-node machine, memory bound to node 0 and the CXL
    node with MPOL_F_NUMA_BALANCING: NUMA-scanned, CXL pages promoted to node 0. The same bind
    without the flag is never scanned."""
    m = machine((96, 1, DRAM), (512, 1, DRAM), (512, 0, CXL), distance=[[10, 32, 60], [32, 10, 50], [255, 255, 10]])
    knobs = dict(numa_balancing=2, demotion_enabled=1, scan_delay_ms=0, scan_period_min_ms=1, scan_size_mb=1,
                 lru_batch_size=1)
    counts = {}
    for pol in ("bind|numa_balancing", "bind"):
        sim = make(m, [Region("a", "anon", 256)],
                   [Process("p", vmas=("a",), cpunodebind=(0,), policy=pol, policy_nodes=(0, 2))], **knobs)
        s = sim.state
        assert int(s.regions.policy[0]) == st.MPOL_BIND
        ops = [(i, STORE) for i in range(256)] + [(i % 64 + 192, LOAD) for i in range(60_000)]
        sim.run(chunks=[chunk(ops)])
        r = sim.result()
        assert not s.pages.node[:256].tolist().count(1)          # never on node 1
        counts[pol] = (int(r.counters["numa_pte_updates"]), int(r.counters["pgpromote_success"]))
    assert counts["bind|numa_balancing"][0] > 0 and counts["bind|numa_balancing"][1] > 0
    assert counts["bind"] == (0, 0)


def test_a_task_policy_applies_to_vmas_without_their_own():
    m = machine((256, 2, DRAM), (256, 0, CXL))
    regions = [Region("own", "anon", 8, "bind", (0,)), Region("inherit", "anon", 8)]
    sim = make(m, regions, [Process("p", vmas=("own", "inherit"), policy="bind", policy_nodes=(1,))])
    sim.run(chunks=[chunk([(i, STORE) for i in range(16)])])
    assert sim.state.pages.node[:16].tolist() == [0] * 8 + [1] * 8


@pytest.mark.parametrize("proc, match", [
    (Process("p", vmas=("nope",)), "vma 'nope'"),
    (Process("p", cpus=(9,)), "CPU 9 does not exist"),
    (Process("p", cpunodebind=(1,)), "node 1 has no CPUs"),
    (Process("p", cpunodebind=(5,)), "node 5 does not exist"),
    (Process("p", policy="bind"), "needs nodes"),
    (Process("p", policy="weighted", policy_nodes=(0,)), "not a memory policy"),
    (Process("p", policy="interleave|numa_balancing", policy_nodes=(0,)), "bind only"),
    (Process("p", policy="bind", policy_nodes=(3,)), "node 3 does not exist"),
    (Process("p", after="q"), "after: 'q' is not an earlier process"),
])
def test_bad_processes_are_refused_naming_the_key(proc, match):
    m = machine((256, 2, DRAM), (256, 0, CXL))
    with pytest.raises(ConfigError, match=match):
        make(m, [Region("a", "anon", 8)], [proc])


@pytest.mark.parametrize("op, match", [
    (ctl("mmap", 5), "slot 5"),
    (ctl("brk", 0, 99), "do not fit"),
    ((0, 128 | 99), "not a control op"),
])
def test_bad_control_ops_are_refused_before_the_chunk_runs(op, match):
    m = machine((256, 2, DRAM))
    sim = make(m, [Region("a", "anon", 64)], [Process("p")])
    with pytest.raises(ConfigError, match=match):
        sim.run(chunks=[chunk([(0, STORE), op])])
    assert sim.state.sys[0]["now"] == 0       # nothing ran


def test_exit_must_be_last():
    m = machine((256, 2, DRAM))
    sim = make(m, [Region("a", "anon", 64)], [Process("p")])
    with pytest.raises(ConfigError, match="last op"):
        sim.run(chunks=[chunk([ctl("exit"), (0, STORE)])])


def test_a_process_starting_later_idles_its_cpu_until_then():
    m = machine((256, 1, DRAM))
    sim = make(m, [Region("a", "anon", 8), Region("b", "anon", 8)],
               [Process("a", vmas=("a",)), Process("b", vmas=("b",), start_ms=5.0)])
    sim.run(chunks=[chunk([(0, STORE)], [(8, STORE)])])
    r = sim.result()
    assert r.task_times_s[1] > 0.005 and r.task_times_s[0] < 0.001


def test_a_process_after_another_starts_at_its_exit():
    """Process.after (a parent waiting for one child and forking the next): b is not runnable
    until a has exited, and starts then on its own CPU, whatever the chunks say."""
    m = machine((256, 2, DRAM))
    sim = make(m, [Region("a", "anon", 8), Region("b", "anon", 8)],
               [Process("a", vmas=("a",)), Process("b", vmas=("b",), after="a")])
    assert sim.state.task["start"][1] == st.NO_START
    sim.run(chunks=[chunk([(i, STORE) for i in range(8)] + [ctl("exit")], [(8, STORE)])])
    task = sim.state.task
    assert task["dead"][0] and task["end"][0] > 0
    assert task["start"][1] == task["end"][0]           # woken at a's exit
    assert task["end"][1] > task["end"][0] and task["runtime"][1] > 0


def run_lifecycles(script, seed, fast_case=True, check=True):
    """Processes one after another, each mapping a slot from a pool of 3 (one of order-2 folios),
    touching it, reading a shared file, maybe growing/shrinking it with brk or unmapping it, and
    exiting; after every process the invariants hold (when `check`)."""
    m = machine((48, 1, DRAM), (64, 0, CXL))
    regions = [Region(f"s{i}", "anon", 16, order=(2 if i == 2 else 0)) for i in range(3)] + [Region("f", "file", 16)]
    n = len(script)
    sim = Simulation(m, Kernel(swap_size=16, demotion_enabled=1, lru_batch_size=3),
                     Procs(regions, [Process(f"p{i}") for i in range(n)]), fast_case=fast_case)
    s = sim.state
    rng = np.random.default_rng(seed)
    for i, (what, slot, size) in enumerate(script):
        fsz = 4 if slot == 2 else 1
        size = max(fsz, size // fsz * fsz)
        base = 16 * slot
        ops = [ctl("mmap", slot, size)]
        ops += [(base + int(x), STORE if rng.random() < 0.7 else LOAD) for x in rng.integers(0, size, 20)]
        ops += [(48 + int(x), READ) for x in rng.integers(0, 16, 4)]
        if what == 1:
            ops += [ctl("brk", slot, 16)] + [(base + int(x), STORE) for x in rng.integers(0, 16, 10)]
        elif what == 2:
            ops += [ctl("brk", slot, fsz)]
        elif what == 3:
            ops += [ctl("munmap", slot)]
        ops.append(ctl("exit"))
        per_task = [[] for _ in range(n)]
        per_task[i] = ops
        sim.run(chunks=[chunk(*per_task)])
        if check:
            check_invariants(sim)
            assert rss_pages(s).tolist() == mapped_rss(s).tolist()
            assert int(s.sys[0]["nr_swap_used"]) == int(s.mm["swapents"].sum())
    return sim


lifecycle_scripts = hst.lists(hst.tuples(hst.integers(0, 3), hst.integers(0, 2), hst.integers(1, 12)),
                              min_size=1, max_size=25)


@settings(max_examples=25, deadline=None)
@given(lifecycle_scripts, hst.integers(0, 2**16))
def test_random_lifecycles_lose_no_page_and_stay_bounded(script, seed):
    """No page lost or duplicated (free + LRU + batched == managed after every process), RSS
    counters equal the mapped pages, and after the last exit every anon page is free again: the
    same 64 page ids served every process."""
    sim = run_lifecycles(script, seed)
    s = sim.state
    assert (s.regions.mm[:3] == st.NO_MM).all()
    assert not (s.pages.flags2[:48] & (st.F2_PRESENT | st.F2_SWAPPED | st.F2_MAPPED)).any()
    assert s.lruvec["lru_size"][:, :2].sum() == 0
    assert s.pages.node.shape[0] == 64


@settings(max_examples=10, deadline=None)
@given(lifecycle_scripts, hst.integers(0, 2**16))
def test_lifecycles_fast_and_general_case_agree(script, seed):
    """Control ops stop the fast case like a MARK: the same run with every access in the general
    case ends in the same state."""
    a = run_lifecycles(script, seed, True, False).state
    b = run_lifecycles(script, seed, False, False).state
    for (name, x), (_, y) in zip(st.state_arrays(a), st.state_arrays(b)):
        assert np.array_equal(x, y), name

def test_anon_pressure_pushes_the_file_down_and_gives_dram_back():
    """The hog's heap, bound to DRAM, grows over the cached file: kswapd demotes page cache; after
    the shrink and the hog's exit, DRAM is free again and page-cache promotion brings the file
    back; the hog's memory is all freed."""
    from tierlab.api import build
    sim = build({"machine": "qemu-2node", "workload": "anon-pressure", "scale": 64,
                 "params": {"file_size": "512MiB", "anon_size": "768MiB", "anon_start_ms": 5, "cycles": 20,
                            "hold_passes": 3, "anon_policy": "bind:0"},
                 "knobs": {"demotion_enabled": 1, "numa_balancing": 2, "pagecache_promotion_enabled": 1}}).run()
    r = sim.result()
    s = sim.state
    assert r.counters["pgdemote_kswapd"] > 0 and r.counters["pgpromote_success"] > 0
    assert int(s.task[1]["dead"]) == 1 and int(rss_pages(s)[1]) == 0
    assert len(r.marks_s[r.marks_s.task == 1]) == 2          # grown, held
    heap = sim.workload.file_pages + sim.workload.buffer_pages
    assert not (s.pages.flags2[heap:] & st.F2_PRESENT).any()
    check_invariants(sim)


def test_anon_pressure_is_listed():
    from tierlab.workloads import WORKLOADS
    w = WORKLOADS["anon-pressure"]
    assert "grows" in w.description and {"anon_size", "shrink_to", "anon_start_ms"} <= set(w.params)


def test_seed002_setup_from_a_config():
    """random-read on bergamo-cxl with cpunodebind and a bind|numa_balancing policy over a DRAM
    node and the CXL node (seed 002's numactl set-up): the task runs on that node, memory stays on
    the two nodes, and the region is NUMA-scanned."""
    from tierlab.api import build
    sim = build({"machine": "bergamo-cxl", "workload": "random-read", "scale": 1024,
                 "params": {"file_size": "192GiB", "target": "anon", "accesses": 200_000, "cpunodebind": "1",
                            "policy": "bind|numa_balancing:1,2"},
                 "knobs": {"numa_balancing": 2, "demotion_enabled": 1, "scan_delay_ms": 60,
                           "scan_period_min_ms": 20}}).run()
    s = sim.state
    assert [int(s.cpu["node"][c]) for c in s.task["cpu"]] == [1]
    assert sim._layout.cpu_ids == [256]    # node 1's first CPU (tierlab numbers CPUs node by node)
    assert set(np.unique(s.pages.node[s.pages.flags2 & st.F2_PRESENT != 0]).tolist()) <= {1, 2}
    assert sim.result().counters["numa_pte_updates"] > 0
    with pytest.raises(ConfigError, match="cpunodebind: node 2 has no CPUs"):
        build({"machine": "bergamo-cxl", "workload": "random-read", "scale": 1024,
               "params": {"cpunodebind": "2"}})


def test_large_unmaps_go_a_page_table_per_step():
    """anon-pressure's hog shrinks its 4,096-page heap to a quarter with brk() and then exits, twice
    over, while the reader runs: each unmap goes a page table (512 pages) per call (mm.zap_step), so
    no step comes near the ~0.7 ms a whole shrink's zap costs; the heap is freed entirely, the mm's
    RSS is 0 and the reader outlives the hog."""
    from tierlab.api import build
    from tierlab.core.mm import ZAP_STEP_PAGES
    sim = build({"machine": "qemu-2node", "workload": "anon-pressure", "scale": 16, "seed": 1,
                 "params": {"file_size": "64MiB", "anon_size": "256MiB", "cycles": "40", "rounds": "2",
                            "shrink_to": "0.25", "hold_passes": "1"}})
    res = sim.run().result()
    s = sim.state
    c = sim.costs
    per_page = c["zap_pte_ns"] + c["zap_rmap_ns"] + c["free_folio_ns"]
    assert s.task["dead"].tolist() == [0, 1] and res.task_times_s[1] < res.task_times_s[0]
    assert int(s.mm[1]["rss_anon"]) == 0 and int(s.mm[1]["users"]) == 0
    assert int(s.sys[0]["max_step_ns"]) < 2 * ZAP_STEP_PAGES * per_page < 3072 * per_page
    assert (s.task["ctrl_next"] == 0).all()
    assert (s.regions.vm_flags & 0x4).sum() == 0           # no VMA left detached
    check_invariants(sim)
