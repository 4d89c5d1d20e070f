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
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .core import state as st
from .core.cost import mem_bw_flush_all
from .core.costs import COSTS
from .core.engine import node_gauges, run, sample_columns, take_sample
from .core.mmzone import setup_watermarks
from .core.numa_balancing import reset_promotion_state
from .core.params import KNOB_NAMES, NR_PARAMS, P
from .core.vmstat import NODE_GAUGE_NAMES, NR_NODE_GAUGES, NR_VMSTAT_ITEMS, VMSTAT_NAMES, Vm
from .config import CONFIG_KEYS  # noqa: F401 (re-exported)
from .errors import ConfigError
from .kernel import KNOBS, Kernel
from .machine import Machine
from .workloads.base import Workload

SAMPLE_BLOCK = 4096

if set(KNOBS) != set(KNOB_NAMES):   # the engine reads exactly the knobs tierlab.kernel describes
    raise ImportError(f"tierlab.kernel.KNOBS and core.params.KNOB_NAMES differ: {sorted(set(KNOBS) ^ set(KNOB_NAMES))}")


@dataclass
class Result:
    """What a run produced: vmstat counters (kernel names), per-node counters and gauges, a time
    series sampled every `sample_interval_ms` of simulated time, per-task times and marks, and per
    lock (core/locks.py: each node's lru_lock, each file's i_pages xa_lock) its acquisitions, hold
    and wait time."""
    counters: pd.Series
    node_counters: pd.DataFrame
    nodes: pd.DataFrame
    timeseries: pd.DataFrame
    task_times_s: pd.Series
    marks_s: pd.DataFrame
    sim_time_s: float
    config: dict = field(default_factory=dict)
    locks: pd.DataFrame = field(default_factory=pd.DataFrame)

    def to_dict(self) -> dict:
        return {
            "counters": {k: int(v) for k, v in self.counters.items()},
            "nr_free_pages": {str(k): int(v) for k, v in self.nodes["nr_free_pages"].items()},
            "sim_time_s": self.sim_time_s,
            "task_times_s": [float(x) for x in self.task_times_s],
            "marks_s": self.marks_s.to_dict(orient="list"),
            "config": self.config,
        }

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
                 fast_case: bool = True):
        from .config import check_parts
        checked = check_parts(machine, kernel or Kernel(), workload, seed, sample_interval_ms, costs)
        self.machine = machine
        self.kernel = checked.kernel
        self.workload = workload
        self.seed = checked.config.seed
        self.costs = {k: v[0] for k, v in COSTS.items()} | checked.config.costs
        self.sample_interval_ms = checked.config.sample_interval_ms
        self.quantum_us = quantum_us
        self.fast_case = bool(fast_case)   # False: every access takes the general case (for testing)
        self._regions = checked.regions
        self.nr_pages = checked.nr_pages
        self.nr_accesses = checked.accesses       # the workload's accesses (None: not known up front)
        self.state = self._build_state()
        self.p = self._build_params()
        self._ts_rows: list[np.ndarray] = []
        self._scratch = np.zeros(64, dtype=np.int64)
        self._cands = np.zeros(machine.nr_nodes, dtype=np.int64)
        self._chunks = None

    # ---- set-up ----------------------------------------------------------------------------
    def _build_state(self) -> st.SimState:
        m, w = self.machine, self.workload
        T = w.nr_tasks
        cpu_nodes = m.cpu_nodes()
        C = max(1, min(len(cpu_nodes), T))  # CPUs that can ever run a task
        managed = np.array([nd.capacity_pages for nd in m.nodes], dtype=np.int64)
        total_pages = int(managed.sum())
        return st.allocate(
            region_pages=[r.pages for r in self._regions],
            region_kind=[st.REGION_ANON if r.kind == "anon" else (st.REGION_FILE_MAPPED if r.mapped else st.REGION_FILE)
                         for r in self._regions],
            region_policy=[st.MPOL_CODES[r.policy] for r in self._regions],
            region_nodes=[r.nodes for r in self._regions],
            region_order=[r.order for r in self._regions],
            managed=managed,
            wmark=setup_watermarks(managed, self._min_free_kbytes(total_pages),
                                   int(self.kernel.watermark_scale_factor)),
            tier=m.tier_index(), node_cpus=[nd.cpus for nd in m.nodes],
            zonelists=m.zonelists(), demotion_targets=m.demotion_targets(),
            mem=[{"seq_ns": nd.seq_4k_ns, "line_ns": nd.rand_line_ns, "write_ns": nd.write_line_ns,
                  "bw_bytes_ns": nd.bandwidth_GBps} for nd in m.nodes],      # GB/s == bytes/ns
            cpu_nodes=cpu_nodes[:C],
            # tasks are spread over CPUs in node order (the first CPUs of the first CPU node)
            task_cpu=np.arange(T, dtype=np.int64) % C,
            nr_marks=w.nr_marks(), nr_counters=NR_VMSTAT_ITEMS,
            sample_cols=sample_columns(m.nr_nodes), sample_rows=SAMPLE_BLOCK,
            first_sample_ns=int(self.sample_interval_ms * 1e6),
            first_scan_ns=int(int(self.kernel.scan_delay_ms) * 1_000_000 / self.workload.scale), seed=self.seed)

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
        p[P.QUANTUM_NS] = self.quantum_us * 1000
        p[P.SAMPLE_INTERVAL_NS] = self.sample_interval_ms * 1e6
        p[P.SEED] = self.seed
        p[P.FAST_CASE] = 1.0 if self.fast_case else 0.0
        p[P.SCALE] = self.workload.scale
        p[P.SWAP_SIZE] = np.floor(p[P.SWAP_SIZE] / self.workload.scale)   # swap of the full-size machine
        return p

    def set_knobs(self, **knobs) -> None:
        """Change kernel knobs between runs (as writing the sysctl/sysfs files would)."""
        old_tiering = int(self.kernel.numa_balancing) & 2
        self.kernel = self.kernel.replace(**knobs)
        if "min_free_kbytes" in knobs or "watermark_scale_factor" in knobs:
            managed = self.state.pgdat["managed"]
            self.state.pgdat["wmark"] = setup_watermarks(managed, self._min_free_kbytes(int(managed.sum())),
                                                         int(self.kernel.watermark_scale_factor))
        self.p = self._build_params()
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
        new._cands = self._cands.copy()
        return new

    # ---- running ---------------------------------------------------------------------------
    def run(self, chunks=None, progress=None) -> "Simulation":
        """Run the workload's chunks (or the given iterable of Chunk)."""
        if chunks is None:
            chunks = self.workload.chunks(self.seed)
        for ch in chunks:
            pos = ch.offsets[:-1].copy()
            while True:
                status = run(self.state, self.p, ch.offsets, ch.pages, ch.ops, pos, self._scratch, self._cands)
                if status == st.STATUS_SAMPLES_FULL:
                    self._drain_samples()
                    continue
                if status == st.STATUS_OOM:
                    raise ConfigError(self._oom_message())
                if status == st.STATUS_MARKS_FULL:
                    old = self.state.marks
                    grown = np.zeros((old.shape[0], 2 * old.shape[1]), dtype=old.dtype)
                    grown[:, :old.shape[1]] = old
                    self.state = self.state._replace(marks=grown)
                    continue
                break
            if progress is not None:
                progress(int(ch.pages.shape[0]))
        mem_bw_flush_all(self.state.mem, self.state.membw)
        self._drain_samples()
        return self

    def _oom_message(self) -> str:
        s = self.state
        nodes = ", ".join(f"node{i}: {int(pd_['free'])} free of {int(pd_['managed'])}" for i, pd_ in enumerate(s.pgdat))
        return ("out of memory: an allocation found no node above its MIN watermark and direct reclaim "
                f"freed nothing ({nodes}); the workload does not fit this machine with these knobs "
                "(anon memory needs swap_size or demotion_enabled with a lower tier)")

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
        task_times = pd.Series(s.task["end"] / 1e9, name="time_s")
        task_times.index.name = "task"
        mk = [(t, i, s.marks[t, i] / 1e9) for t in range(s.marks.shape[0]) for i in range(int(s.task[t]["nr_marks"]))]
        marks = pd.DataFrame(mk, columns=["task", "mark", "time_s"])
        return Result(counters=counters, node_counters=node_counters, nodes=nodes, timeseries=ts,
                      task_times_s=task_times, marks_s=marks, sim_time_s=float(s.task["end"].max() / 1e9),
                      config=self.config(), locks=self._locks())

    def _locks(self) -> pd.DataFrame:
        """One row per lock: `lock` (lru_lock, xa_lock), `of` (the node or file), acquisitions,
        hold_ns and wait_ns summed over them, `contended` (acquisitions that waited) and `beyond`
        (acquisitions booked further back than the lock calendar's horizon, served unchecked)."""
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

    def config(self) -> dict:
        """The RunConfig of this simulation as a dict (tierlab.config): `build(sim.config())`
        rebuilds it. Knobs are the current ones (after set_knobs)."""
        from .config import RunConfig
        overrides = {k: v for k, v in self.costs.items() if v != COSTS[k][0]}
        return RunConfig.from_parts(self.machine, self.kernel, self.workload, self.seed,
                                    self.sample_interval_ms, overrides).to_dict()


def simulate(machine: Machine, kernel: Kernel | None, workload: Workload, seed: int = 0, **kw) -> Result:
    """Run `workload` on `machine` with `kernel` knobs from an empty state and return the Result."""
    return Simulation(machine, kernel, workload, seed=seed, **kw).run().result()


def build(config) -> Simulation:
    """A Simulation from a config dict (or a RunConfig): {"machine": preset name, TOML path or a
    machine dict as run, "workload": name, "params": {...}, "knobs": {...}, "scale": F, "seed": N,
    "sample_interval_ms": X, "costs": {...}} (tierlab.config). Every key and value is validated
    before anything runs (`tierlab.config.validate`); errors name the key. `build(result.config)`
    repeats a run bit-identically."""
    from .config import check
    c = check(config)
    return Simulation(c.machine, c.kernel, c.workload, seed=c.config.seed,
                      sample_interval_ms=c.config.sample_interval_ms, costs=c.config.costs)


def run_config(config, progress=None) -> Result:
    """build(config), run it, and return the Result (its full RunConfig in Result.config)."""
    return build(config).run(progress=progress).result()
