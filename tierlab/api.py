"""The Python API: build a simulation from a Machine, Kernel knobs and a Workload; get a Result.

    from tierlab import Machine, Kernel, simulate
    from tierlab.workloads import make_workload
    res = simulate(Machine.load("qemu-2node"), Kernel(demotion_enabled=1),
                   make_workload("random-read", {"file_size": "4GiB"}), seed=7)
    res.counters["pgdemote_kswapd"]

`Simulation` keeps the state between runs, so a notebook (or a reproduction) can run a workload,
change knobs (`sim.set_knobs(pagecache_promotion_enabled=0)`) and run more.
"""
from __future__ import annotations

import copy
import os
import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .core import state as st
from .core.cost import mem_bw_flush_all
from .core.costs import COSTS
from .core.engine import node_gauges, run, sample_columns, take_sample
from .core.lru import lru_gen_change_state
from .core.migrate import NR_MAX_BATCHED_MIGRATION
from .core.mglru import LRU_GEN_CORE
from .core.mmzone import setup_watermarks
from .core.numa_balancing import mm_first_scan_jiffies, reset_promotion_state, thread_node_stamps
from .core.params import KNOB_NAMES, NR_PARAMS, P
from .core.sched import place_kswapds
from .core.time_rules import MAX_STEP_NS, phase_start
from .core.profile import KSYMS, NOT_CPU
from .core.vmstat import MTHP_STAT_NAMES, NODE_GAUGE_NAMES, NR_NODE_GAUGES, NR_VMSTAT_ITEMS, VMSTAT_NAMES, Vm
from .config import CONFIG_KEYS  # noqa: F401 (re-exported)
from .errors import ConfigError, TimeRulesWarning
from .feed import ChunkFeed
from .kernel import KNOBS, Kernel
from .machine import Machine
from .workloads.base import Progress, Workload


SAMPLE_BLOCK = 4096
DISKSTATS = ("rd_ios", "rd_sectors", "rd_ticks_ns", "wr_ios", "wr_sectors", "wr_ticks_ns", "last_done_ns")

if set(KNOBS) != set(KNOB_NAMES):   # the engine reads exactly the knobs tierlab.kernel describes
    raise ImportError(f"tierlab.kernel.KNOBS and core.params.KNOB_NAMES differ: {sorted(set(KNOBS) ^ set(KNOB_NAMES))}")


@dataclass
class Result:
    """What a run produced: vmstat counters (kernel names), per-node counters and gauges, a time
    series sampled every `sample_interval_ms` of simulated time, per-task times and marks, per
    process (mm) its state at the end (`processes`), per lock (core/locks.py: each node's lru_lock,
    each file's i_pages xa_lock) its acquisitions, hold and wait time (`locks`), and the CPU time of
    every task and kswapd (`tasks`, like top: name, kind, process, cpu, node of the CPU, runtime_s,
    cpu_share = runtime over the run's elapsed virtual time), and that time by kernel function
    (`profile`, core/profile.py: like `perf report --sort comm,sym`)."""
    counters: pd.Series
    node_counters: pd.DataFrame
    nodes: pd.DataFrame
    timeseries: pd.DataFrame
    task_times_s: pd.Series
    marks_s: pd.DataFrame
    sim_time_s: float
    config: dict = field(default_factory=dict)
    processes: pd.DataFrame | None = None   # per process (mm): threads, start, RSS, swap, scanner, CPUs used
    locks: pd.DataFrame = field(default_factory=pd.DataFrame)
    tasks: pd.DataFrame = field(default_factory=pd.DataFrame)   # CPU time per task and kswapd
    profile: pd.DataFrame = field(default_factory=pd.DataFrame)  # simulated time per entity and kernel function
    clat_hist: np.ndarray | None = None   # int64[task, read/write, bucket]: read()/write() completion
                                          # latencies in fio's buckets (core/fileio.py)
    io_done_s: pd.Series | None = None    # per task: when its last read()/write() call completed
    devices: pd.DataFrame | None = None   # per block device: /proc/diskstats fields
    summary: dict = field(default_factory=dict)   # the workload's own report (Workload.summary: fio's JSON)
    hint_latency: pd.DataFrame = field(default_factory=pd.DataFrame)
    mthp: pd.DataFrame = field(default_factory=pd.DataFrame)
    # per anon folio size (hugepages-16kB .. hugepages-2048kB, orders 2..9): the per-size stats of
    # /sys/kernel/mm/transparent_hugepage/hugepages-<size>kB/stats (core/huge_memory.py)
    anon_fault_orders: pd.DataFrame = field(default_factory=pd.DataFrame)
    # per region (VMA slot) that faulted anon folios in under a seed-001 policy: its size in pages and
    # the folios per order (0..9) it got (Simulation.mthp_by_region)
    buddyinfo: pd.DataFrame | None = None
    events: pd.DataFrame = field(default_factory=pd.DataFrame)
    # the run-script events (tierlab/events.py): time_s and the event as written, applied False for
    # one whose moment never came (time_s NaN); an applied one is also in the `event` column of the
    # first time-series row at or after it
    # with page_alloc_model="buddy": /proc/buddyinfo, free blocks per node and order at the end
    # a sample of should_numa_migrate_memory()'s latency tests (core/numa_balancing.hint_latency_log):
    # time_s (simulated), latency and threshold in `unit` (ms of the kernel's clock, or hint faults of
    # the mm with hint_fault_latency=fault_count), every `stride`-th test of the run (df.attrs)

    def to_dict(self) -> dict:
        return {
            "counters": {k: int(v) for k, v in self.counters.items()},
            "nr_free_pages": {str(k): int(v) for k, v in self.nodes["nr_free_pages"].items()},
            "sim_time_s": self.sim_time_s,
            "task_times_s": [float(x) for x in self.task_times_s],
            "marks_s": self.marks_s.to_dict(orient="list"),
            "tasks": self.tasks.to_dict(orient="records"),
            "devices": [] if self.devices is None else self.devices.to_dict(orient="records"),
            "mthp": {size: {k: int(v) for k, v in row.items()} for size, row in self.mthp_nonzero().iterrows()},
            "buddyinfo": None if self.buddyinfo is None else {
                str(n): [int(x) for x in row] for n, row in self.buddyinfo.iterrows()},
            "summary": self.summary,
            "events": [{"time_s": None if np.isnan(t) else float(t), "event": e, "applied": bool(a)}
                       for t, e, a in self.events.itertuples(index=False)] if len(self.events) else [],
            "config": self.config,
        }

    def mthp_nonzero(self) -> pd.DataFrame:
        """The per-size stats of the sizes with a non-zero one, by the sysfs names only (no order
        column): what the JSON, the table and the csv show."""
        if self.mthp is None or not len(self.mthp):
            return pd.DataFrame()
        m = self.mthp.drop(columns=["order"], errors="ignore")
        return m[(m != 0).any(axis=1)]

    def task_kernel_ns(self) -> float:
        """Simulated kernel time of the workload's tasks: every profiled kernel function (faults,
        zeroing, zaps, frees, syscall entries, VMA work, ...), not their user work (`other`) nor
        time off the CPU (NOT_CPU: I/O waits)."""
        tasks = self.profile[self.profile.entity.str.startswith("task")]
        return float(tasks[~tasks.function.isin(("other",) + NOT_CPU)].ns.sum())

    def cycle_times_s(self, task: int = 0) -> np.ndarray:
        """Time between consecutive marks of a task (e.g. seconds per read cycle)."""
        m = self.marks_s[self.marks_s.task == task].time_s.to_numpy()
        return np.diff(m)


def available_memory_bytes() -> int:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")


def state_bytes(nr_pages: int) -> int:
    """Bytes the state will take: 16 per page (`page_state_bytes`) plus two chunks of access
    arrays (8 B page + 1 B op per access)."""
    from .workloads.base import CHUNK_ACCESSES
    return st.page_state_bytes(nr_pages) + CHUNK_ACCESSES * 9 * 2


class Simulation:
    def __init__(self, machine: Machine, kernel: Kernel | None, workload: Workload, seed: int = 0,
                 sample_interval_ms: float = 100.0, costs: dict | None = None, quantum_us: float = 20.0,
                 fast_case: bool = True, tlb_model: str = "off", page_alloc_model: str = "counts", at=None):
        from .config import check_parts
        checked = check_parts(machine, kernel or Kernel(), workload, seed, sample_interval_ms, costs, quantum_us,
                              tlb_model, page_alloc_model, at)
        self.machine = machine
        self.kernel = checked.kernel
        self._recorded_kernel = checked.kernel   # the knobs config() records: set_knobs', not an event's
        self.workload = workload
        self.seed = checked.config.seed
        self.costs = {k: v[0] for k, v in COSTS.items()} | checked.config.costs
        self.sample_interval_ms = checked.config.sample_interval_ms
        self.quantum_us = checked.config.quantum_us
        self.fast_case = bool(fast_case)   # False: every access takes the general case (for testing)
        self.tlb_model = checked.config.tlb_model   # "set_assoc": the CPUs' TLBs are simulated (core/tlb_hw.py)
        self.page_alloc_model = checked.config.page_alloc_model   # "buddy": frames from core/buddy.py
        self._regions = checked.regions
        self._layout = checked.layout
        self.nr_pages = checked.nr_pages
        self.nr_accesses = checked.accesses       # the workload's accesses (None: not known up front)
        self.state = self._build_state()
        self.p = self._build_params()
        self.state.lruvec["lru_gen_enabled"] = int(self.kernel.lru_gen) & LRU_GEN_CORE
        self._ts_rows: list[np.ndarray] = []
        self._scratch = np.zeros(NR_MAX_BATCHED_MIGRATION, dtype=np.int64)   # isolated folios: reclaim, migration
        self._cands = np.zeros(machine.nr_nodes, dtype=np.int64)
        self._chunks = None
        self.phase_start_ns = 0        # when the last phase started (Chunk.start_phase)
        self.nr_phases = 0             # phases started so far
        self._events = list(checked.events)   # run-script events still to come (tierlab/events.py)
        self._at = list(checked.config.at)
        self.events_log: list[tuple[int, str]] = []   # (ns, event) of those applied
        self._feed = None

    # ---- set-up ----------------------------------------------------------------------------
    def _build_state(self) -> st.SimState:
        m, w, lay = self.machine, self.workload, self._layout
        cpu_nodes = m.cpu_nodes()
        # each node's kswapd: a CPU of its own when its cpumask has one no task uses, else shared
        kswapd_cpu, sim_cpu_nodes = place_kswapds(cpu_nodes, lay.cpu_ids, lay.task_cpu,
                                                  [nd.cpus for nd in m.nodes], m.zonelists())
        managed = np.array([nd.capacity_pages for nd in m.nodes], dtype=np.int64)
        total_pages = int(managed.sum())
        return st.allocate(
            region_pages=[r.pages for r in self._regions],
            region_kind=[st.REGION_ANON if r.kind == "anon" else (st.REGION_FILE_MAPPED if r.mapped else st.REGION_FILE)
                         for r in self._regions],
            region_policy=lay.region_policy, region_nodes=lay.region_nodes,
            region_order=[r.order for r in self._regions],
            region_mm=lay.region_mm, region_mapped=lay.region_mapped, region_pol_flags=lay.region_pol_flags,
            region_vma_policy=lay.region_vma_policy,
            region_advice=[st.FADV_CODES[r.advice] for r in self._regions],
            region_vm_flags=[st.VM_FLAGS_OF_PROT[r.prot] for r in self._regions],
            devices=[d.engine_figures() for d in m.devices],
            task_iodepth=w.task_iodepth(),
            managed=managed,
            wmark=setup_watermarks(managed, self._min_free_kbytes(total_pages),
                                   int(self.kernel.watermark_scale_factor)),
            tier=m.tier_index(), node_cpus=[nd.cpus for nd in m.nodes],
            zonelists=m.zonelists(), demotion_targets=m.demotion_targets(),
            mem=[{"seq_ns": nd.seq_4k_ns, "line_ns": nd.rand_line_ns, "write_ns": nd.write_line_ns,
                  "bw_bytes_ns": nd.bandwidth_GBps} for nd in m.nodes],      # GB/s == bytes/ns
            # the state's CPU slots are the machine CPUs tasks sit on (config.check_processes: the
            # allowed CPU with the fewest tasks, lowest id first; without placement the first CPUs),
            # then the CPUs only a kswapd runs on
            cpu_nodes=sim_cpu_nodes, kswapd_cpu=kswapd_cpu,
            task_cpu=np.asarray(lay.task_cpu, dtype=np.int64), task_mm=np.asarray(lay.task_mm, dtype=np.int64),
            task_start=np.asarray([lay.mm_start_ns[i] if lay.mm_after[i] < 0 else st.NO_START for i in lay.task_mm],
                                  dtype=np.int64),
            task_node_stamp=thread_node_stamps(self.kernel, [pr.threads for pr in lay.processes], self.workload.scale),
            mm_start=lay.mm_start_ns, mm_policy=lay.mm_policy,
            mm_text_pages=[pr.text_pages for pr in lay.processes], mm_start_after=lay.mm_after,
            tlb_geometry=m.tlb.geometry() if self.tlb_model == "set_assoc" else None,
            buddy=self.page_alloc_model == "buddy",
            mm_next_scan=mm_first_scan_jiffies(self.kernel, lay.mm_start_ns, self.workload.scale),
            nr_marks=w.nr_marks(), nr_counters=NR_VMSTAT_ITEMS,
            sample_cols=sample_columns(m.nr_nodes), sample_rows=SAMPLE_BLOCK,
            first_sample_ns=int(self.sample_interval_ms * 1e6), scan_delay_ms=int(self.kernel.scan_delay_ms), seed=self.seed)

    def _min_free_kbytes(self, total_pages: int) -> int:
        """min_free_kbytes as run: the knob, or the kernel's default for the full-size machine (total
        pages times the scale), divided by the scale (docs/scaling.md)."""
        f = self.workload.scale
        return int(self.kernel.get("min_free_kbytes", round(total_pages * f)) / f)

    def _now_ms(self) -> int:
        """The kernel's ms clock (numa_balancing.now_ms) at the latest time reached."""
        return int(int(self.state.sys[0]["now"]) * self.workload.scale // 1_000_000) & 0xFFFFFFFF

    def _build_params(self) -> np.ndarray:
        p = np.zeros(NR_PARAMS, dtype=np.float64)
        total_pages = int(self.state.pgdat["managed"].sum())
        for name in KNOB_NAMES:
            p[P[name.upper()]] = self.kernel.get(name, total_pages)
        for k, v in self.costs.items():
            p[P[k.upper()]] = v
        p[P.LOADED_LATENCY_C] = self.machine.loaded_latency_c
        p[P.NR_CPUS] = self.machine.nr_cpus
        p[P.QUANTUM_NS] = self.quantum_us * 1000
        p[P.SAMPLE_INTERVAL_NS] = self.sample_interval_ms * 1e6
        p[P.SEED] = self.seed
        p[P.FAST_CASE] = 1.0 if self.fast_case else 0.0
        p[P.SCALE] = self.workload.scale
        p[P.SWAP_SIZE] = np.floor(p[P.SWAP_SIZE] / self.workload.scale)   # swap of the full-size machine
        return p

    def set_knobs(self, **knobs) -> None:
        """Change kernel knobs between runs (as writing the sysctl/sysfs files would). config()
        records them (a run-script `set` event is recorded as the event instead)."""
        self._write_knobs(knobs)
        self._recorded_kernel = self._recorded_kernel.replace(**knobs)

    def _write_knobs(self, knobs: dict) -> None:
        old_tiering = int(self.kernel.numa_balancing) & 2
        kernel = self.kernel.replace(**knobs)
        kernel.check_combination()
        self.kernel = kernel
        if "min_free_kbytes" in knobs or "watermark_scale_factor" in knobs:
            managed = self.state.pgdat["managed"]
            self.state.pgdat["wmark"] = setup_watermarks(managed, self._min_free_kbytes(int(managed.sum())),
                                                         int(self.kernel.watermark_scale_factor))
        self.p = self._build_params()
        if "lru_gen" in knobs:
            lru_gen_change_state(self.state, bool(int(self.kernel.lru_gen) & LRU_GEN_CORE))
        if not old_tiering and int(self.kernel.numa_balancing) & 2:
            reset_promotion_state(self.state.pgdat, self.state.counters[:, Vm.PGPROMOTE_CANDIDATE], self._now_ms())

    def fork(self) -> "Simulation":
        """An independent copy of this simulation as it stands: same machine, knobs, costs and
        seed, a deep copy of every state array, the time series taken so far and the workload's
        parameters. Branch a warmed-up machine into variants (one set-up read, several knob
        settings after it) without re-running the set-up; the fork and a simulation that ran the
        same steps from scratch give bit-identical counters."""
        new = copy.copy(self)
        new.state = st.copy_state(self.state)
        new.p = self.p.copy()
        new.workload = copy.copy(self.workload)
        new.workload.values = dict(self.workload.values)
        new._ts_rows = [r.copy() for r in self._ts_rows]
        new._scratch = self._scratch.copy()
        new._events, new.events_log, new._at = list(self._events), list(self.events_log), list(self._at)
        new._cands = self._cands.copy()
        return new

    # ---- running ---------------------------------------------------------------------------
    def run(self, chunks=None, progress=None) -> "Simulation":
        """Run the workload's chunks (or the given iterable of Chunk) to their end. Chunks are taken
        as tasks need input (feed.ChunkFeed): a task that runs out asks for the next chunk, whose
        parts go after each task's rest. A chunk that starts a phase waits until every task has run
        its input. A generator of chunks gets a Progress (workloads.base) sent in when the next
        chunk is asked for: the tasks' clocks then. `progress(n)` is called with each chunk's
        number of ops."""
        # the input of this run arrives now (the latest time reached): a CPU that idled since its
        # tasks' input ended in an earlier run moves on to now, so no task starts behind the others
        s = self.state
        s.cpu["clock"] = np.maximum(s.cpu["clock"], int(s.sys[0]["now"]))
        s.sys[0]["resume_cpu"] = -1

        def on_chunk(ch):
            if self.workload.control_ops:
                check_control_ops(ch, self._regions, self.state, self.machine.nr_nodes)
            if progress is not None:
                progress(int(ch.pages.shape[0]))

        def progress_now():
            task = self.state.task
            return Progress(task_clock_ns=task["end"].copy(), stopped=(task["end"] >= task["stop_at"]) | (task["dead"] != 0),
                            phase_start_ns=self.phase_start_ns, buffered=self._feed.input.left())
        feed = ChunkFeed(self.workload.chunks(self.seed) if chunks is None else chunks, s.task, self.workload.name,
                         on_chunk, self._start_phase, progress_now)
        self._feed = feed
        inp = feed.input
        self._arm_events()
        feed.pull()      # before any quantum: a first chunk that starts a phase sets the tasks' stops
        while True:
            self.state.sys[0]["phase_held"] = feed.held is not None
            status = run(self.state, self.p, inp.offsets, inp.pages, inp.ops, inp.pos, self._scratch, self._cands)
            if status == st.STATUS_SAMPLES_FULL:
                self._drain_samples()
            elif status == st.STATUS_OOM:
                raise ConfigError(self._oom_message())
            elif status == st.STATUS_SEGV:
                raise ConfigError(self._segv_message())
            elif status == st.STATUS_MARKS_FULL:
                old = self.state.marks
                grown = np.zeros((old.shape[0], 2 * old.shape[1]), dtype=old.dtype)
                grown[:, :old.shape[1]] = old
                self.state = self.state._replace(marks=grown)
            elif status == st.STATUS_NEED_INPUT:
                feed.need(int(self.state.sys[0]["need_input"]))
            elif status == st.STATUS_EVENT:
                self._events_due()
            elif status == st.STATUS_PHASE:
                feed.next_phase()             # the last task is through: the held phase starts
            elif not feed.next_phase():       # every task has exited or run all its input
                break
        mem_bw_flush_all(self.state.mem, self.state.membw)
        self._drain_samples()
        self._check_horizons()
        return self

    # ---- run-script events (tierlab/events.py) ----------------------------------------------
    def _arm_events(self) -> None:
        """Tell the engine where the next events are: the earliest time event (sys.event_at) and,
        per task, the mark its next mark event waits for (task.event_mark)."""
        s = self.state
        times = [e.at_ns for e in self._events if e.trigger == "time"]
        s.sys[0]["event_at"] = min(times) if times else st.NO_STOP
        s.task["event_mark"] = 0
        for e in self._events:
            if e.trigger == "mark" and (s.task[e.task]["event_mark"] == 0 or e.count < s.task[e.task]["event_mark"]):
                s.task[e.task]["event_mark"] = e.count

    def _events_due(self) -> None:
        """engine.run stopped at an event: apply every event due (marks reached, times reached)."""
        s = self.state
        due = [e for e in self._events
               if (e.trigger == "mark" and s.task[e.task]["nr_marks"] >= e.count)
               or (e.trigger == "time" and e.at_ns <= s.sys[0]["event_at"])]
        for e in due:
            self._apply_event(e, int(s.marks[e.task, e.count - 1]) if e.trigger == "mark" else e.at_ns)
        self._arm_events()

    def _apply_event(self, e, at_ns: int) -> None:
        """Apply one due event: knobs written now; a system call put before the rest of its task's
        input (a task whose input had ended, e.g. at a phase barrier, runs it and ends again)."""
        self._events.remove(e)
        if e.knobs:
            self._write_knobs(e.knobs)
        if e.op is not None:
            if self.state.task[e.issuer]["dead"] or self.state.task[e.issuer]["exiting"]:
                raise ConfigError(f"at {e.text!r}: task {e.issuer} has exited at {at_ns / 1e6:.3f} ms, so it cannot "
                                  "issue the call; name a task that runs then (task=T)")
            # a system call the issuer has under way (task.ctrl_next) finishes first
            self._feed.input.insert(e.issuer, np.array([e.op[0]], np.int64), np.array([e.op[1]], np.uint8),
                                    after=int(self.state.task[e.issuer]["ctrl_next"] != 0))
        if e.kill:
            from .core.ops import CTRL_EXIT, OP_CTRL
            inp = self._feed.input
            for t in e.kill:
                task = self.state.task[t]
                if task["dead"] or task["exiting"]:
                    continue
                lo = int(inp.pos[t])
                # the rest of its input is never run, but a system call under way finishes
                # (the signal is taken at the return to user)
                keep = slice(lo, lo + 1 if task["ctrl_next"] != 0 else lo)
                pages, ops = inp.pages[keep].copy(), inp.ops[keep].copy()
                inp.pos[t] = inp.offsets[t + 1]
                inp.insert(t, np.append(pages, 0).astype(np.int64),
                           np.append(ops, OP_CTRL | CTRL_EXIT).astype(np.uint8))
        self.events_log.append((at_ns, e.text))

    def _check_horizons(self) -> None:
        """No booking fell behind a memory-bandwidth or lock calendar's horizon (resource.py): the
        time rules keep every client within a quantum and one step of the others -- an access (a
        fault that stalls reclaims a batch per step: memory.fault_stalls; a read's wait ends the
        step, the task sleeps through it) or a reclaim batch, at most time_rules.MAX_STEP_NS -- well
        inside the rings (134 ms, and 2.1 ms for a lock: at least 4x that lead). System calls that
        move, drop or unmap many pages go a bounded piece per step (a migration batch, a folio
        batch, a page table: task.ctrl_next). A bandwidth booking beyond is an engine bug: an error;
        so is a lock booking beyond when no step was longer than the bound. A step the bound does
        not cover (costs set far above their defaults, a NUMA scan of a huge scan_size_mb) can
        outrun a lock's ring: its lock holds were served without their wait, which is warned
        about (TimeRulesWarning, naming the step) and counted (Result.locks `beyond`). A device's
        ring (537 ms) can be outrun by a backlog of requests queued longer than that: counted in
        its calendar."""
        s = self.state
        for what, cal, name in (("memory bandwidth", s.membw, lambda i: f"node {i}"),
                                ("lock", s.locks, self._lock_name)):
            n = int(cal["nr_beyond"].sum())
            if not n:
                continue
            i = int(np.flatnonzero(cal["nr_beyond"])[0])
            horizon_us = (1 << int(cal["bin_shift"][i])) * cal["bin_tag"].shape[1] / 1e3
            step_us = int(s.sys[0]["max_step_ns"]) / 1e3
            msg = (f"{n} {what} booking(s) of {name(i)} fell behind its calendar's horizon of {horizon_us:,.0f} us; "
                   f"the longest step was {step_us:,.0f} us (the time rules bound it by "
                   f"{int(MAX_STEP_NS) / 1e3:,.0f} us)")
            if what == "lock" and step_us * 1e3 > MAX_STEP_NS:
                warnings.warn(msg + " (costs set above their defaults, or a NUMA scan of a large "
                              "scan_size_mb, make longer steps); those holds were served without their wait",
                              TimeRulesWarning, stacklevel=3)
            else:
                raise RuntimeError(msg + ": an engine bug, please report it with the run's config")

    def _start_phase(self, ch) -> None:
        """Chunk.start_phase: every task starts the next chunk at the time rules' phase start
        (time_rules.phase_start: when the last task got through the previous one), or
        start_offsets_ns later, with empty latency histograms that count from ramp_ns after its
        start, and stops issuing accesses runtime_ns after that (None: no limit)."""
        s = self.state
        assert s.sys[0]["resume_cpu"] < 0, "a phase starts while a quantum waits for input"
        t0 = phase_start(s)
        own = t0 if ch.start_offsets_ns is None else t0 + np.asarray(ch.start_offsets_ns, np.int64)
        if ch.start_offsets_ns is not None:
            s.task["start"] = np.where(s.task["dead"] == 0, np.maximum(s.task["start"], own), s.task["start"])
        stats = own + int(ch.ramp_ns)
        s.task["stop_at"] = st.NO_STOP if ch.runtime_ns is None else stats + int(ch.runtime_ns)
        s.task["stats_from"] = stats
        s.task["call_clock"] = own
        s.task["clat_hist"] = 0
        s.task["input_end"] = s.task["dead"]
        s.sys[0]["now"] = max(int(s.sys[0]["now"]), t0)
        self.phase_start_ns = t0
        self.nr_phases += 1
        for e in [e for e in self._events if e.trigger == "phase" and e.count == self.nr_phases]:
            self._apply_event(e, t0)

    def _oom_message(self) -> str:
        s = self.state
        ttl = int(s.sys[0]["oom_min_ttl_node"])
        if ttl >= 0:
            return (f"out of memory: kswapd of node {ttl} found its oldest generation younger than min_ttl_ms="
                    f"{int(self.kernel.min_ttl_ms)} (MGLRU thrash protection calls the OOM killer rather than "
                    "evict the working set); lower min_ttl_ms or give the workload more memory")
        nodes = ", ".join(f"node{i}: {int(pd_['free'])} free of {int(pd_['managed'])}" for i, pd_ in enumerate(s.pgdat))
        return ("out of memory: an allocation found no node above its MIN watermark and direct reclaim "
                f"freed nothing ({nodes}); the workload does not fit this machine with these knobs "
                "(anon memory needs swap_size or demotion_enabled with a lower tier)")

    def _region_of(self, pages: np.ndarray) -> np.ndarray:
        """The region slot holding each page id (state.region_of, for arrays in Python)."""
        return np.searchsorted(self.state.regions.start, pages, side="right") - 1

    def _segv_message(self) -> str:
        s = self.state
        t, page = int(s.sys[0]["segv_task"]), int(s.sys[0]["segv_page"])
        proc = self._layout.processes[int(s.task[t]["mm"])].name
        r = int(self._region_of(np.array([page]))[0]) if page >= 0 else -1
        where = f"page {page} of region {self._regions[r].name}" if 0 <= r < len(self._regions) else f"slot {page}"
        return (f"workload {self.workload.name}: task {t} (process {proc}) touched {where}, which no VMA of "
                "its process maps (SIGSEGV); accepted: accesses and control ops on the process's own mapped "
                "regions, read()/write() of any file")

    def _drain_samples(self) -> None:
        n = int(self.state.sys[0]["nr_samples"])
        if n:
            self._ts_rows.append(self.state.samples[:n].copy())
            self.state.sys[0]["nr_samples"] = 0

    def _timeseries_rows(self) -> list[np.ndarray]:
        """The samples taken so far plus a final row of the state as it stands (engine.take_sample
        at the latest simulated time), unless the last sample already is that row; the state's
        sample buffer is left empty, so later runs continue as before."""
        self._drain_samples()
        s = self.state
        take_sample(s, max(int(s.sys[0]["now"]), int(s.task["end"].max())))
        final = s.samples[:1].copy()
        s.sys[0]["nr_samples"] = 0
        last = self._ts_rows[-1][-1:] if self._ts_rows and len(self._ts_rows[-1]) else None
        if last is not None and last[0, 0] >= final[0, 0] and np.array_equal(last[0, 1:], final[0, 1:]):
            return list(self._ts_rows)
        return self._ts_rows + [final]

    # ---- results ---------------------------------------------------------------------------
    def result(self) -> Result:
        s, m = self.state, self.machine
        N = m.nr_nodes
        names = list(VMSTAT_NAMES)
        counters = pd.Series(s.counters.sum(axis=0), index=names, dtype="int64")
        node_counters = pd.DataFrame(s.counters, columns=names)
        node_counters.index.name = "node"
        gauges = np.zeros((N, NR_NODE_GAUGES), np.int64)
        for nid in range(N):
            node_gauges(s, nid, gauges[nid])
        nodes = pd.DataFrame(gauges, columns=list(NODE_GAUGE_NAMES))
        nodes.insert(0, "name", [nd.name for nd in m.nodes])
        nodes["managed_pages"] = s.pgdat["managed"]
        for i, w in enumerate(("min", "low", "high", "promo")):
            nodes[f"wmark_{w}"] = s.pgdat["wmark"][:, i]
        nodes.index.name = "node"
        cols = ["time_s"] + names + [f"node{i}_{g}" for i in range(N) for g in NODE_GAUGE_NAMES]
        rows = np.concatenate(self._timeseries_rows())
        ts = pd.DataFrame(rows, columns=cols)
        ts["time_s"] = ts["time_s"] / 1e9
        events = pd.DataFrame([(t / 1e9, text, True) for t, text in self.events_log]
                              + [(np.nan, e.text, False) for e in self._events], columns=["time_s", "event", "applied"])
        if len(events):
            ts["event"] = ""
            for t, text in self.events_log:
                row = int(np.searchsorted(rows[:, 0], t)) if len(rows) else 0
                if row < len(ts):
                    ts.loc[row, "event"] = (ts.loc[row, "event"] + "; " if ts.loc[row, "event"] else "") + text
        task_times = pd.Series(s.task["end"] / 1e9, name="time_s")
        # when each task's I/O is done: its clock, or the completion of its last call in flight
        inflight = [s.task[t]["inflight"][:int(s.task[t]["nr_inflight"])] for t in range(len(s.task))]
        io_done = pd.Series([max(int(s.task[t]["end"]), int(f.max()) if len(f) else 0) / 1e9
                             for t, f in enumerate(inflight)], name="time_s")
        task_times.index.name = "task"
        mk = [(t, i, s.marks[t, i] / 1e9) for t in range(s.marks.shape[0]) for i in range(int(s.task[t]["nr_marks"]))]
        marks = pd.DataFrame(mk, columns=["task", "mark", "time_s"])
        devs = pd.DataFrame({"name": [d.name for d in m.devices],
                             **{k: s.blkdev[k].astype(np.int64) for k in DISKSTATS}})
        devs.index.name = "device"
        res = Result(counters=counters, node_counters=node_counters, nodes=nodes, timeseries=ts,
                     task_times_s=task_times, marks_s=marks, sim_time_s=float(s.task["end"].max() / 1e9),
                     config=self.config(), clat_hist=s.task["clat_hist"].copy(), io_done_s=io_done,
                     devices=devs, processes=self.processes(), locks=self._locks(), tasks=self.cpu_times(),
                     hint_latency=self.hint_latency(), profile=self.profile(), mthp=self.mthp_stats(),
                     anon_fault_orders=self.mthp_by_region(), buddyinfo=self.buddyinfo(), events=events)
        res.summary = self.workload.summary(res, self.phase_start_ns)
        return res

    def processes(self) -> pd.DataFrame:
        """Per process (mm), as it stands: name, threads, threads still alive, start time, the RSS
        counters (pages: MM_ANONPAGES, MM_FILEPAGES, MM_SWAPENTS), the NUMA scanner's completed
        passes (numa_scan_seq) and hint-fault count (mm->hint_faults of the fault-count RFC), and how many CPUs ran its threads (the
        weight of mm_cpumask)."""
        s = self.state
        procs = self._layout.processes
        alive = np.bincount(s.task["mm"][s.task["dead"] == 0], minlength=len(procs))
        cpus = [int(sum(bin(int(w)).count("1") for w in s.mm[i]["cpumask"])) for i in range(len(procs))]
        df = pd.DataFrame({
            "name": [p.name for p in procs], "threads": [p.threads for p in procs], "alive": alive[:len(procs)],
            "start_s": s.task["start"][[self._layout.task_mm.index(i) for i in range(len(procs))]] / 1e9,
            "rss_anon": s.mm["rss_anon"], "rss_file": s.mm["rss_file"], "swapents": s.mm["swapents"],
            "numa_scan_seq": s.mm["numa_scan_seq"], "hint_faults": s.mm["hint_faults"],
            "nr_cpus_ran": cpus})
        df.index.name = "mm"
        return df

    def move_pages_status(self) -> pd.DataFrame:
        """Per task, the pages of its move_pages(2) calls by outcome (core/migrate.py MP_*): moved,
        already on the node, -ENOENT, -EFAULT, -EBUSY, and not migrated (the target had no room)."""
        from .core.migrate import MP_NAMES
        df = pd.DataFrame(self.state.task["move_status"], columns=list(MP_NAMES))
        df.index.name = "task"
        return df

    def hint_latency(self) -> pd.DataFrame:
        """The logged latency tests of should_numa_migrate_memory() (the seed 002 RFC's table of
        latency and threshold samples): time_s (simulated), latency, threshold, unit ("ms" of the
        kernel's clock, full-size under --scale, or "faults": the mm's hint faults), and the folio
        tested (page: its head page id; region: the workload region holding it); every
        `attrs["stride"]`-th test of the run so far (numa_balancing.hint_latency_log)."""
        from .core.numa_balancing import HINT_LATENCY_FAULT_COUNT
        s = self.state
        log = s.hintlog[:int(s.sys[0]["nr_hintlog"])]
        names = np.array([r.name for r in self._regions], dtype=object)
        slot = self._region_of(log[:, 4])
        df = pd.DataFrame({"time_s": log[:, 0] / 1e9, "latency": log[:, 1], "threshold": log[:, 2],
                           "unit": np.where(log[:, 3] == HINT_LATENCY_FAULT_COUNT, "faults", "ms"),
                           "page": log[:, 4], "region": names[slot] if len(log) else names[:0]})
        df.attrs["stride"] = int(s.sys[0]["hintlog_stride"])
        return df

    def lru_gen(self) -> pd.DataFrame:
        """The multi-gen LRU as it stands, like /sys/kernel/debug/lru_gen_full: one row per node,
        type (anon, file) and live generation (min_seq[type]..max_seq, oldest first): seq, gen (its
        slot, seq % MAX_NR_GENS), age (max_seq - seq: 0 is the youngest), age_ms (the kernel's ms
        clock now less the generation's birth, full-size ms under --scale), nr_pages (lrugen's
        count), and tier0..tier3, those pages by the tier of their folio's refs (lru_tier_from_refs
        of refs + PG_workingset), counted from the folios' own generation bits, so a folio whose
        generation was raised lazily counts where the kernel's nr_pages counts it. Empty for nodes
        whose lruvec is classic (lru_gen off)."""
        from .core.mglru import GEN_SHIFT, LRU_REFS_MASK, REFS_SHIFT
        s = self.state
        pg = s.pages
        order = pg.order.view(np.uint8)
        heads = np.flatnonzero(pg.flags & st.PG_LRU)
        nid = pg.node[heads].astype(np.int64)
        on = s.lruvec["lru_gen_enabled"][nid] != 0
        heads, nid = heads[on], nid[on]
        o = order[heads].astype(np.int64)
        gen = (o >> GEN_SHIFT) & (st.MAX_NR_GENS - 1)
        refs = ((o >> REFS_SHIFT) & LRU_REFS_MASK) + ((pg.flags[heads] & st.PG_WORKINGSET) != 0)
        tier = np.searchsorted([0, 1, 2, 4], refs, side="right") - 1   # order_base_2(refs + 1)
        typ = np.where(pg.flags2[heads] & st.F2_ANON, st.LRU_GEN_ANON, st.LRU_GEN_FILE)
        N = s.lruvec.shape[0]
        hist = np.zeros((N, st.ANON_AND_FILE, st.MAX_NR_GENS, st.MAX_NR_TIERS), np.int64)
        np.add.at(hist, (nid, typ, gen, tier), np.int64(1) << (o & int(st.ORDER_MASK)))
        now = int(int(s.sys[0]["now"]) * self.workload.scale // 1_000_000)
        rows = []
        for n in range(N):
            lv = s.lruvec[n]
            if not lv["lru_gen_enabled"]:
                continue
            max_seq = int(lv["max_seq"])
            for t, tname in ((st.LRU_GEN_ANON, "anon"), (st.LRU_GEN_FILE, "file")):
                for seq in range(int(lv["min_seq"][t]), max_seq + 1):
                    g = seq % st.MAX_NR_GENS
                    rows.append((n, tname, seq, g, max_seq - seq, now - int(lv["timestamps"][g]),
                                 int(lv["nr_pages"][g, t]), *hist[n, t, g].tolist()))
        return pd.DataFrame(rows, columns=["node", "type", "seq", "gen", "age", "age_ms", "nr_pages",
                                           *(f"tier{i}" for i in range(st.MAX_NR_TIERS))])

    def lru_gen_tiers(self) -> pd.DataFrame:
        """The refault PID controller's inputs and its last decision, one row per node (lru_gen on),
        type and tier: refaulted, evicted and protected in the current generation (the P term;
        tier 0 is never protected), avg_refaulted and avg_total (the I term), the rate
        (avg_refaulted + refaulted) / (avg_total + evicted + protected) that get_tier_idx()
        compares with tier 0's, and tier_idx, the type's last get_tier_idx(): tiers above it are
        protected from eviction (mglru.py)."""
        s = self.state
        rows = []
        for n in range(s.lruvec.shape[0]):
            lv = s.lruvec[n]
            if not lv["lru_gen_enabled"]:
                continue
            for t, tname in ((st.LRU_GEN_ANON, "anon"), (st.LRU_GEN_FILE, "file")):
                for tier in range(st.MAX_NR_TIERS):
                    prot = int(lv["protected"][t, tier - 1]) if tier else 0
                    ref, ev = int(lv["refaulted"][t, tier]), int(lv["evicted"][t, tier])
                    avg_r, avg_t = int(lv["avg_refaulted"][t, tier]), int(lv["avg_total"][t, tier])
                    total = avg_t + ev + prot
                    rows.append((n, tname, tier, ref, ev, prot, avg_r, avg_t,
                                 (avg_r + ref) / total if total else float("nan"), int(lv["tier_idx"][t])))
        return pd.DataFrame(rows, columns=["node", "type", "tier", "refaulted", "evicted", "protected",
                                           "avg_refaulted", "avg_total", "refault_rate", "tier_idx"])

    def mthp_stats(self) -> pd.DataFrame:
        """Per anon folio size (orders 2 .. PMD): its sysfs stats (vmstat.MTHP_STAT_NAMES)."""
        orders = range(2, self.state.mthp.shape[0])
        df = pd.DataFrame(self.state.mthp[2:], columns=list(MTHP_STAT_NAMES),
                          index=pd.Index([f"hugepages-{4 << o}kB" for o in orders], name="size"))
        df.insert(0, "order", list(orders))
        return df

    def mthp_by_region(self) -> pd.DataFrame:
        """Per region slot with anon faults under a seed-001 policy: its name, size (pages) and the
        folios it faulted in per order (columns 0..9): the order histogram per VMA size."""
        fo = self.state.regions.fault_orders
        rows = np.flatnonzero(fo.sum(axis=1))
        regions = self.workload.regions()
        df = pd.DataFrame(fo[rows], columns=list(range(fo.shape[1])))
        df.insert(0, "pages", [regions[r].pages for r in rows])
        df.insert(0, "region", [regions[r].name for r in rows])
        return df

    def buddyinfo(self) -> pd.DataFrame | None:
        """/proc/buddyinfo: free blocks per node (rows, by name) and order (columns 0..10); None
        without the buddy allocator. Pages on per-CPU lists are not in it, as in the kernel."""
        b = self.state.buddy
        if b.order.shape[0] == 0:
            return None
        df = pd.DataFrame(b.nr_free, columns=list(range(b.nr_free.shape[1])),
                          index=pd.Index([nd.name for nd in self.machine.nodes], name="node"))
        df.columns.name = "order"
        return df

    def _lock_name(self, i: int) -> str:
        """Lock calendar i's name: lru_lock of a node, or xa_lock of a file (state.locks' layout)."""
        N = len(self.machine.nodes)
        return f"lru_lock of {self.machine.nodes[i].name}" if i < N else f"xa_lock of {self._regions[i - N].name}"

    def _locks(self) -> pd.DataFrame:
        """One row per lock: `lock` (lru_lock, xa_lock), `of` (the node or file), acquisitions,
        hold_ns and wait_ns summed over them, `contended` (acquisitions that waited) and `beyond`
        (acquisitions booked further back than the lock calendar's horizon: Simulation.run stops
        with an error if there is one)."""
        s, N = self.state, self.machine.nr_nodes
        rows = [("lru_lock", nd.name, i) for i, nd in enumerate(self.machine.nodes)]
        rows += [("xa_lock", r.name, N + i) for i, r in enumerate(self._regions) if r.kind != "anon"]
        c = s.locks
        return pd.DataFrame({
            "lock": [r[0] for r in rows], "of": [r[1] for r in rows],
            "acquisitions": [int(c[i].nr_requests) for *_, i in rows],
            "hold_ns": [float(c[i].booked) for *_, i in rows],
            "wait_ns": [float(c[i].wait_ns) for *_, i in rows],
            "contended": [int(c[i].nr_waits) for *_, i in rows],
            "beyond": [int(c[i].nr_beyond) for *_, i in rows]})

    def profile(self) -> pd.DataFrame:
        """Simulated time by entity and kernel function (core/profile.py), one row per pair with time:
        entity (task<i>, kswapd<nid>), function (its kernel name; `other` is the entity's runtime
        that no function claims: user-space work, mechanisms not broken down), ns, and cpu_pct, the
        share of the entity's CPU time (its runtime less io_wait, which is waiting, not work) in
        percent -- what perf's per-comm percentages show."""
        s = self.state
        T = s.task.shape[0]
        names = [f"task{t}" for t in range(T)] + [f"kswapd{n}" for n in range(s.pgdat.shape[0])]
        runtime = np.concatenate([s.task["runtime"], s.pgdat["kswapd_runtime"]]).astype(np.float64)
        rows = []
        for e, name in enumerate(names):
            prof = s.prof[e]
            cpu = runtime[e] - sum(prof[KSYMS.index(k)] for k in NOT_CPU)
            for i, fn in enumerate(KSYMS):
                if prof[i] != 0:
                    rows.append((name, fn, float(prof[i]), 100.0 * prof[i] / cpu if fn not in NOT_CPU and cpu > 0
                                 else float("nan")))
            other = runtime[e] - prof.sum()
            if runtime[e] > 0:
                rows.append((name, "other", float(other), 100.0 * other / cpu if cpu > 0 else float("nan")))
        return pd.DataFrame(rows, columns=["entity", "function", "ns", "cpu_pct"])

    def cpu_times(self) -> pd.DataFrame:
        """CPU time per task and per kswapd, like top's TIME+ and %CPU: name (task<i>, kswapd<nid>),
        kind, process (the task's process; '' for a kthread), cpu, node (the CPU's node), runtime_s,
        and cpu_share, the runtime over the run's elapsed virtual time (the latest CPU clock): 1.0 is
        one CPU all the time."""
        s = self.state
        elapsed = max(1, int(s.cpu["clock"].max()))
        rows = [(f"task{t}", "task", int(s.task[t]["cpu"]), int(s.task[t]["runtime"]))
                for t in range(s.task.shape[0])]
        rows += [(f"kswapd{n}", "kswapd", int(s.pgdat[n]["kswapd_cpu"]), int(s.pgdat[n]["kswapd_runtime"]))
                 for n in range(s.pgdat.shape[0])]
        df = pd.DataFrame(rows, columns=["name", "kind", "cpu", "runtime_ns"])
        df.insert(2, "process", [self._layout.processes[int(s.task[t]["mm"])].name for t in range(s.task.shape[0])]
                  + [""] * s.pgdat.shape[0])
        df.insert(4, "node", [int(s.cpu[c]["node"]) for c in df.cpu])
        df["runtime_s"] = df.pop("runtime_ns") / 1e9
        df["cpu_share"] = df.runtime_s * 1e9 / elapsed
        return df

    def config(self) -> dict:
        """The RunConfig of this simulation as a dict (tierlab.config): `build(sim.config())`
        rebuilds it. Knobs are the current ones (after set_knobs)."""
        from .config import RunConfig
        overrides = {k: v for k, v in self.costs.items() if v != COSTS[k][0]}
        return RunConfig.from_parts(self.machine, self._recorded_kernel, self.workload, self.seed,
                                    self.sample_interval_ms, overrides, self.quantum_us, self.tlb_model,
                                    self.page_alloc_model, self._at).to_dict()


def check_control_ops(ch, regions, state, nr_nodes=None) -> None:
    """The control ops of a chunk, before it runs: a known kind, a region slot that exists, an
    mmap/brk length within the slot and a multiple of its folio size, an exit as the task's last
    op in the chunk, a fadvise of a file region with a known advice, move_pages/migrate_pages/mbind
    naming nodes that exist (nr_nodes) and a known policy. (Whether a slot is mapped by the right
    process at that moment is the engine's to check: a wrong one stops the run with a SIGSEGV
    message.)"""
    from .core.mempolicy import MIGRATE_FROM_SHIFT, mbind_unpack
    from .core.ops import (
        CTRL_DROP_CACHES, CTRL_EXIT, CTRL_FADVISE, CTRL_KIND_MASK, CTRL_MBIND, CTRL_MIGRATE_PAGES, CTRL_MOVE_PAGES,
        CTRL_NAMES, CTRL_SET_MEMPOLICY, MOVE_NODE_SHIFT, OP_CPU, OP_CTRL, ctrl_unpack,
    )
    from .core.state import FADV_CODES, MPOL_CODES
    # CPU work (OP_CPU) may ride between every few accesses: checked in bulk, not op by op
    cpu = ch.ops == OP_CPU
    if cpu.any() and (ch.pages[cpu] < 0).any():
        i = int(np.flatnonzero(cpu & (ch.pages < 0))[0])
        t = int(np.searchsorted(ch.offsets, i, side="right")) - 1
        raise ConfigError(f"task {t} op {i - int(ch.offsets[t])}: CPU work of {int(ch.pages[i])} ns; accepted: >= 0 ns")
    idx = np.flatnonzero(((ch.ops & OP_CTRL) != 0) & ~cpu)
    if idx.size == 0:
        return
    kinds = set(CTRL_NAMES.values())
    task_of = np.searchsorted(ch.offsets, idx, side="right") - 1
    for i, t in zip(idx.tolist(), task_of.tolist()):
        kind = int(ch.ops[i]) & CTRL_KIND_MASK
        arg = int(ch.pages[i])
        slot, npages = ctrl_unpack(arg)
        key = f"task {t} control op {i - int(ch.offsets[t])}"
        if kind not in kinds:
            raise ConfigError(f"{key}: kind {kind} is not a control op; accepted: "
                              f"{', '.join(f'{k} ({v})' for k, v in CTRL_NAMES.items())}")
        if kind == CTRL_EXIT:
            if i != int(ch.offsets[t + 1]) - 1:
                raise ConfigError(f"{key}: exit must be the task's last op")
            continue

        def check_nodes(what, nodes):
            bad = [n for n in nodes if nr_nodes is not None and not 0 <= n < nr_nodes]
            if bad or not nodes:
                raise ConfigError(f"{key}: {what} node(s) {bad or 'none'}; accepted: 0..{(nr_nodes or 1) - 1}")
        if kind == CTRL_MIGRATE_PAGES:
            check_nodes("migrate_pages from", [n for n in range(64) if (arg >> MIGRATE_FROM_SHIFT) >> n & 1])
            check_nodes("migrate_pages to", [arg & 255])
            continue
        if kind == CTRL_MOVE_PAGES:
            check_nodes("move_pages target", [slot >> MOVE_NODE_SHIFT])
            slot &= (1 << MOVE_NODE_SHIFT) - 1
        if kind == CTRL_DROP_CACHES:
            if arg not in (1, 2, 3):
                raise ConfigError(f"{key}: drop_caches {arg}; accepted: 1, 2, 3")
            continue
        if kind in (CTRL_MBIND, CTRL_SET_MEMPOLICY):
            slot, mode, _, mask = mbind_unpack(arg)
            if mode not in MPOL_CODES.values():
                raise ConfigError(f"{key}: mbind mode {mode}; accepted: "
                                  + ", ".join(f"{k} ({v})" for k, v in MPOL_CODES.items()))
            nodes = [n for n in range(32) if mask >> n & 1]
            if mode == MPOL_CODES["default"]:
                if nodes:
                    raise ConfigError(f"{key}: mbind default takes no nodes, got {nodes}")
            else:
                check_nodes("mbind" if kind == CTRL_MBIND else "set_mempolicy", nodes)
            if kind == CTRL_SET_MEMPOLICY:
                continue
        if kind in (CTRL_MOVE_PAGES, CTRL_MBIND):
            if not 0 <= slot < len(regions):
                raise ConfigError(f"{key}: slot {slot} does not exist; accepted: 0..{len(regions) - 1}")
            if kind == CTRL_MOVE_PAGES and not 0 <= npages <= regions[slot].pages:
                raise ConfigError(f"{key}: move_pages of {npages} pages of region {regions[slot].name} "
                                  f"({regions[slot].pages} pages; 0: all)")
            continue
        if kind == CTRL_FADVISE:
            if not 0 <= slot < len(regions) or regions[slot].kind != "file":
                raise ConfigError(f"{key}: fadvise of slot {slot}, which is not a file region; accepted: "
                                  + ", ".join(str(j) for j, r in enumerate(regions) if r.kind == "file"))
            if npages not in FADV_CODES.values():
                raise ConfigError(f"{key}: fadvise advice {npages}; accepted: "
                                  + ", ".join(f"{k} ({v})" for k, v in FADV_CODES.items()))
            continue
        if not 0 <= slot < len(regions) or regions[slot].is_file:
            raise ConfigError(f"{key}: slot {slot} is not an anon or mmap'd file region; accepted: "
                              f"0..{len(regions) - 1} except read()-only files")
        size, fsz = regions[slot].pages, 1 << regions[slot].order
        if not 0 <= npages <= size or npages % fsz:
            raise ConfigError(f"{key}: {npages} pages do not fit region {regions[slot].name} ({size} pages, "
                              f"in multiples of its {fsz}-page folios)")


def simulate(machine: Machine, kernel: Kernel | None, workload: Workload, seed: int = 0, **kw) -> Result:
    """Run `workload` on `machine` with `kernel` knobs from an empty state and return the Result."""
    return Simulation(machine, kernel, workload, seed=seed, **kw).run().result()


def build(config) -> Simulation:
    """A Simulation from a config dict (or a RunConfig): {"machine": preset name, TOML path or a
    machine dict as run, "workload": name, "params": {...}, "knobs": {...}, "scale": F, "seed": N,
    "sample_interval_ms": X, "quantum_us": Q, "tlb_model": M, "page_alloc_model": A, "costs": {...}} (tierlab.config). Every key and value is validated
    before anything runs (`tierlab.config.validate`); errors name the key. `build(result.config)`
    repeats a run bit-identically."""
    from .config import check
    c = check(config)
    return Simulation(c.machine, c.kernel, c.workload, seed=c.config.seed,
                      sample_interval_ms=c.config.sample_interval_ms, costs=c.config.costs,
                      quantum_us=c.config.quantum_us, tlb_model=c.config.tlb_model,
                      page_alloc_model=c.config.page_alloc_model, at=c.config.at)


def run_config(config, progress=None) -> Result:
    """build(config), run it, and return the Result (its full RunConfig in Result.config)."""
    return build(config).run(progress=progress).result()
