"""Run configs: the one validator, and the frozen record of what decides a run's result.

A config is a plain dict (what the CLI, sweeps and notebooks pass around):

    {"machine": preset name, TOML path or a machine dict, "workload": name, "params": {...},
     "knobs": {...}, "costs": {...}, "scale": F, "seed": N, "sample_interval_ms": X, "quantum_us": Q,
     "tlb_model": "off" | "set_assoc", "page_alloc_model": "counts" | "buddy", "at": [event, ...]}

`validate(config)` checks every key and value (the machine, the kernel's knob parsers, the
workload's params, scale, seed, sample interval, quantum, costs, region nodes against the machine, host memory
for the state, and the simulated accesses) before any work, raising ConfigError (or CapacityError)
whose one-line message names the key and what is accepted. `tierlab.api.build`, `Simulation`, the CLI
and sweeps all go through it (`check` / `check_parts` below); there is no other validator.

It returns a `RunConfig`: the machine *as run* (every capacity after `scale`, every cost after
calibration, as a dict `Machine.from_dict` accepts; its name is a label), knobs as the kernel parses
them (knobs at their default left out), costs overrides as floats (defaults left out), params as
written, scale, seed, sample interval, quantum (the engine's interleaving of CPUs: it
decides which of two CPUs' events comes first, so it is part of the result) and the TLB model
(whether the CPUs' TLBs are simulated: page walks cost time). `RunConfig.to_dict()` is what every Result carries
(`Result.config`, `--format json`, Parquet metadata); `build(result.config)` rebuilds the same run,
bit-identical. A machine given as a dict is taken as run: `scale` divides the workload's sized
params only, not that machine's capacities (a preset name or TOML path is scaled).
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field

from .core import time_rules as _time_rules
from .errors import CapacityError, ConfigError
from .units import parse_int, parse_number, parse_scale

CONFIG_KEYS = ("machine", "workload", "params", "knobs", "costs", "scale", "seed", "sample_interval_ms",
               "quantum_us", "tlb_model", "page_alloc_model", "at")
# "set_assoc": every CPU's dTLB, iTLB and STLB as the machine's [tlb] table gives them (core/tlb_hw.py);
# "off": flushes are counted, no TLB is simulated
TLB_MODELS = ("off", "set_assoc")
# "buddy": physical frames from a buddy allocator with per-CPU lists (core/buddy.py): large folios can
# fail to allocate; "counts": a node's memory is a count of free pages
PAGE_ALLOC_MODELS = ("counts", "buddy")
SEED_MAX = 2**63 - 1                    # seeds are int64 (sweep tables)
SAMPLE_INTERVAL_MS = (1e-3, 1e12)       # 1 us .. ~31 years of simulated time, in int64 ns
# 1 ns .. ~24 us: how far a CPU's clock may run ahead of the next's; with one step it stays within a
# quarter of a lock calendar's ring, which sets the upper end (core/time_rules.py)
QUANTUM_US = (1e-3, int(_time_rules.QUANTUM_MAX_NS) / 1e3)
DEFAULT_QUANTUM_US = 20.0
MAX_ACCESSES = 10**12                   # more cannot finish: ~2 days at EST_ACCESSES_PER_S
EST_ACCESSES_PER_S = 5e6                # conservative host speed (random-read under pressure: ~9 M/s)
STATE_MEMORY_SHARE = 0.8                # the state may take this share of the available memory
MAX_PAGES = 2**31 - 4096                # page ids are int32 list links
COST_MAX = 1e15                         # ns (11.6 days per event)


@dataclass(frozen=True)
class RunConfig:
    """Everything that decides a run's result (see the module docstring). Build one with
    `validate(dict)` or `RunConfig.from_dict(dict)`; `to_dict()` gives the plain dict back."""
    machine: dict
    workload: str
    params: dict = field(default_factory=dict)
    knobs: dict = field(default_factory=dict)
    costs: dict = field(default_factory=dict)
    scale: float = 1.0
    seed: int = 0
    sample_interval_ms: float = 100.0
    quantum_us: float = DEFAULT_QUANTUM_US
    tlb_model: str = "off"
    page_alloc_model: str = "counts"
    at: tuple = ()               # run-script events (tierlab/events.py), as written

    def to_dict(self) -> dict:
        d = {"machine": copy.deepcopy(self.machine), "workload": self.workload,
             "params": dict(self.params), "knobs": dict(self.knobs), "costs": dict(self.costs),
             "scale": self.scale, "seed": self.seed, "sample_interval_ms": self.sample_interval_ms,
             "quantum_us": self.quantum_us, "tlb_model": self.tlb_model,
             "page_alloc_model": self.page_alloc_model}
        if self.at:
            d["at"] = list(self.at)
        return d

    @classmethod
    def from_dict(cls, config: dict) -> "RunConfig":
        return validate(config)

    @property
    def machine_name(self) -> str:
        return str(self.machine.get("name", "machine"))

    @classmethod
    def from_parts(cls, machine, kernel, workload, seed: int, sample_interval_ms: float,
                   costs: dict, quantum_us: float = DEFAULT_QUANTUM_US, tlb_model: str = "off",
                   page_alloc_model: str = "counts", at=()) -> "RunConfig":
        """The record of already-validated parts (a Machine, a Kernel, a Workload, ...)."""
        from .kernel import KNOBS
        knobs = {k: v for k, v in kernel.to_dict().items()
                 if KNOBS[k].default is None or v != float(KNOBS[k].default)}
        return cls(machine=machine.to_dict(), workload=workload.name, params=dict(workload.raw),
                   knobs=knobs, costs=dict(costs), scale=float(workload.scale), seed=int(seed),
                   sample_interval_ms=float(sample_interval_ms), quantum_us=float(quantum_us),
                   tlb_model=tlb_model, page_alloc_model=page_alloc_model, at=tuple(at or ()))


@dataclass
class Layout:
    """Where a validated workload's processes live: per task its mm (process index) and machine
    CPU; the machine CPUs used (`cpu_ids`, sorted: the state's CPU slots); per region slot the mm
    mapping it at the start (-1: none), the pages mapped, its effective policy (code, nodes, flags)
    and whether that policy is the region's own; per mm its start (ns) and task policy."""
    processes: list
    task_mm: list
    task_cpu: list
    cpu_ids: list
    region_mm: list
    region_mapped: list
    region_policy: list
    region_nodes: list
    region_pol_flags: list
    region_vma_policy: list
    mm_start_ns: list
    mm_policy: list
    mm_after: list             # per mm, the mm whose exit starts it (Process.after), -1: none


@dataclass
class Checked:
    """A validated run: its RunConfig and the parts built from it."""
    config: RunConfig
    machine: object
    kernel: object
    workload: object
    regions: list
    nr_pages: int
    accesses: int | None
    layout: Layout | None = None
    events: list = field(default_factory=list)   # the parsed run-script events (events.Event)


def estimate_note(accesses: int | None, min_s: float = 10.0) -> str | None:
    """One line for stderr when a run of `accesses` simulated accesses is expected to take at
    least `min_s` of wall time (at the conservative EST_ACCESSES_PER_S)."""
    if accesses is None or accesses / EST_ACCESSES_PER_S < min_s:
        return None
    return (f"tierlab: {accesses:.3g} simulated accesses; expect up to ~{_duration(accesses / EST_ACCESSES_PER_S)} "
            f"of wall time (at >= {EST_ACCESSES_PER_S / 1e6:g} M accesses/s)")


def validate(config) -> RunConfig:
    """Check every key and value of a config dict (or a RunConfig) before any work; return the
    normalised RunConfig. Errors name the key and what is accepted."""
    return check(config).config


def check(config) -> Checked:
    """`validate`, also returning the Machine, Kernel and Workload it built."""
    from .kernel import Kernel
    from .machine import Machine
    from .workloads import make_workload

    if isinstance(config, RunConfig):
        config = config.to_dict()
    if not isinstance(config, dict):
        raise ConfigError(f"config: expected a dict with keys {', '.join(CONFIG_KEYS)}, got {type(config).__name__}")
    unknown = sorted(set(config) - set(CONFIG_KEYS), key=str)
    if unknown:
        raise ConfigError(f"unknown config key {unknown[0]!r}; accepted: {', '.join(CONFIG_KEYS)}")
    for k in ("machine", "workload"):
        if k not in config:
            raise ConfigError(f"config: missing {k!r}")
    scale = parse_scale(config.get("scale", 1.0))
    m = config["machine"]
    if isinstance(m, dict):
        machine = Machine.from_dict(m, where="machine")     # as run: not scaled again
    elif isinstance(m, str):
        machine = Machine.load(m).scaled(scale)
    else:
        raise ConfigError(f"machine: expected a preset name, a TOML path or a machine table, got {m!r}")
    if not isinstance(config["workload"], str):
        raise ConfigError(f"workload: expected a workload name, got {config['workload']!r}")
    tables = {}
    for k in ("params", "knobs", "costs"):
        v = config.get(k) or {}
        if not isinstance(v, dict):
            raise ConfigError(f"{k}: expected a table of name = value, got {v!r}")
        tables[k] = v
    kernel = Kernel(**tables["knobs"])
    workload = make_workload(config["workload"], dict(tables["params"]), scale=scale)
    return check_parts(machine, kernel, workload, config.get("seed", 0),
                       config.get("sample_interval_ms", 100.0), tables["costs"],
                       config.get("quantum_us", DEFAULT_QUANTUM_US), config.get("tlb_model", "off"),
                       config.get("page_alloc_model", "counts"), config.get("at"))


def check_parts(machine, kernel, workload, seed=0, sample_interval_ms=100.0, costs=None,
                quantum_us=DEFAULT_QUANTUM_US, tlb_model="off", page_alloc_model="counts", at=None) -> Checked:
    """The checks of a run given as objects (the Python API's Simulation(...)): seed, sample
    interval, quantum, costs, region nodes against the machine, state memory, simulated accesses,
    run-script events (tierlab/events.py)."""
    seed = parse_seed(seed)
    kernel.check_combination()
    interval = parse_sample_interval(sample_interval_ms)
    quantum = parse_number(quantum_us, "quantum_us", *QUANTUM_US)
    for key, value, accepted in (("tlb_model", tlb_model, TLB_MODELS),
                                 ("page_alloc_model", page_alloc_model, PAGE_ALLOC_MODELS)):
        if value not in accepted:
            raise ConfigError(f"{key}: {value!r} is not accepted; accepted: {', '.join(accepted)}")
    costs = parse_costs(costs or {})
    regions = workload.regions()
    for r in regions:
        for n in r.nodes:
            if not 0 <= n < machine.nr_nodes:
                raise ConfigError(f"region {r.name}: node {n} does not exist; machine {machine.name} has "
                                  f"nodes 0..{machine.nr_nodes - 1}")
    layout = check_processes(machine, kernel, workload, regions)
    nr_pages = sum(r.pages for r in regions)
    if nr_pages >= MAX_PAGES:
        raise CapacityError(f"{nr_pages} pages exceed the 2^31 page ids of int32 list links; "
                            "use --scale to shrink the run")
    from .api import available_memory_bytes, state_bytes
    need, avail = state_bytes(nr_pages), available_memory_bytes()
    if need > STATE_MEMORY_SHARE * avail:
        raise CapacityError(f"the simulation state needs ~{need / 2**30:.1f} GiB for {nr_pages} pages "
                            f"but only {avail / 2**30:.1f} GiB is available; use --scale to shrink the run")
    accesses = workload.nr_accesses()
    if accesses is not None and accesses > MAX_ACCESSES:
        named = ", ".join(f"{p}={workload.raw.get(p, workload.params[p].default)}" for p in workload.access_params)
        raise ConfigError(f"{', '.join(workload.access_params) or 'workload'}: workload {workload.name}"
                          f"{f' ({named})' if named else ''} would simulate {accesses:.3g} accesses, "
                          f"~{_duration(accesses / EST_ACCESSES_PER_S)} of wall time; accepted: at most "
                          f"{MAX_ACCESSES:.0e} accesses")
    from .events import parse_events
    events = parse_events(at, machine, kernel, workload, regions, len(layout.task_mm), layout)
    rc = RunConfig.from_parts(machine, kernel, workload, seed, interval, costs, quantum, tlb_model, page_alloc_model,
                              [e.text for e in events])
    return Checked(rc, machine, kernel, workload, regions, nr_pages, accesses, layout, events)


def _nodes_of(machine, nodes, key: str, need_cpus: bool = False) -> tuple[int, ...]:
    for n in nodes:
        if not isinstance(n, int) or not 0 <= n < machine.nr_nodes:
            raise ConfigError(f"{key}: node {n!r} does not exist; machine {machine.name} has nodes "
                              f"0..{machine.nr_nodes - 1}")
        if need_cpus and machine.nodes[n].cpus == 0:
            raise ConfigError(f"{key}: node {n} has no CPUs; accepted: nodes with CPUs "
                              f"({', '.join(str(i) for i, nd in enumerate(machine.nodes) if nd.cpus)})")
    return tuple(nodes)


def policy_code(policy: str, nodes, key: str):
    """(MPOL_* code, pol->flags, node list) of a policy string as Region and Process take it."""
    from .core import state as st
    from .workloads.base import split_policy
    mode, flags = split_policy(policy, key)
    if mode != "default" and not nodes:
        raise ConfigError(f"{key}: policy {policy} needs nodes")
    if mode == "default" and nodes:
        raise ConfigError(f"{key}: the default policy takes no nodes, got {tuple(nodes)}")
    pol_flags = st.MPOL_F_MOF | st.MPOL_F_MORON if (mode == "default" or flags) else 0
    if flags:
        pol_flags |= st.MPOL_F_NUMA_BALANCING
    return st.MPOL_CODES[mode], pol_flags, list(nodes)


def check_processes(machine, kernel, workload, regions) -> Layout:
    """The processes of a workload against its regions and the machine: threads add up to the
    workload's tasks, every VMA and file names a region (a VMA at most one process's at the start,
    a file not mapped), CPU sets and nodes exist, policies are known (a VMA larger than memory is
    fine: the kernel overcommits); then where each task runs and each slot's effective policy.
    Whether a control op's slot and length fit is checked per chunk (api.check_control_ops)."""
    from .core import state as st
    from .workloads.base import Process
    procs = workload.processes()
    if not procs or not all(isinstance(pr, Process) for pr in procs):
        raise ConfigError(f"workload {workload.name}: processes() must return Process records")
    if sum(pr.threads for pr in procs) != workload.nr_tasks:
        raise ConfigError(f"workload {workload.name}: processes have {sum(pr.threads for pr in procs)} threads "
                          f"but the workload has {workload.nr_tasks} tasks")
    by_name = {r.name: i for i, r in enumerate(regions)}
    if len(by_name) != len(regions):
        raise ConfigError(f"workload {workload.name}: region names must be unique")
    cpu_nodes = machine.cpu_nodes()
    region_mm = [-1] * len(regions)
    task_mm, task_cpu, mm_policy, mm_start, mm_after = [], [], [], [], []
    load = [0] * len(cpu_nodes)
    for i, pr in enumerate(procs):
        key = f"process {pr.name}"
        if not isinstance(pr.threads, int) or pr.threads < 1:
            raise ConfigError(f"{key}: threads must be an integer >= 1, got {pr.threads!r}")
        if not (0 <= float(pr.start_ms) < 1e12):
            raise ConfigError(f"{key}: start_ms must be in 0 .. 1e12, got {pr.start_ms!r}")
        for name in pr.vmas:
            r = by_name.get(name)
            if r is None:
                raise ConfigError(f"{key}: vma {name!r} is not a region; accepted: "
                                  f"{', '.join(x.name for x in regions) or 'none'}")
            if region_mm[r] >= 0:
                raise ConfigError(f"{key}: vma {name!r} is already mapped by process {procs[region_mm[r]].name}")
            region_mm[r] = i
        for name in pr.files:
            if name not in by_name or not regions[by_name[name]].is_file:
                raise ConfigError(f"{key}: file {name!r} is not a read()-only file region; accepted: "
                                  f"{', '.join(x.name for x in regions if x.is_file) or 'none'}")
        if pr.cpus and pr.cpunodebind:
            raise ConfigError(f"{key}: give cpus or cpunodebind, not both")
        for c in pr.cpus:
            if not isinstance(c, int) or not 0 <= c < len(cpu_nodes):
                raise ConfigError(f"{key}: cpus: CPU {c!r} does not exist; machine {machine.name} has CPUs "
                                  f"0..{len(cpu_nodes) - 1}")
        bind = _nodes_of(machine, pr.cpunodebind, f"{key}: cpunodebind", need_cpus=True)
        allowed = list(pr.cpus) or [c for c, n in enumerate(cpu_nodes) if not bind or n in bind]
        for _ in range(pr.threads):
            c = min(allowed, key=lambda x: (load[x], x))
            load[c] += 1
            task_cpu.append(c)
            task_mm.append(i)
        nodes = _nodes_of(machine, pr.policy_nodes, f"{key}: policy_nodes")
        if pr.policy != "default" and machine.nr_nodes > st.MAX_POLICY_NODES:
            raise ConfigError(f"{key}: policy: a task policy takes at most {st.MAX_POLICY_NODES} nodes")
        code, flags, nl = policy_code(pr.policy, nodes, f"{key}: policy")
        mm_policy.append((code, flags, sum(1 << n for n in nl)))
        mm_start.append(int(round(float(pr.start_ms) * 1e6)))
        if pr.after:
            earlier = [q.name for q in procs[:i]]
            if pr.after not in earlier:
                raise ConfigError(f"{key}: after: {pr.after!r} is not an earlier process; accepted: "
                                  f"{', '.join(earlier) or 'none (the first process starts at start_ms)'}")
            mm_after.append(earlier.index(pr.after))
        else:
            mm_after.append(-1)
    rpol, rnodes, rflags, rown = [], [], [], []
    for r, reg in enumerate(regions):
        own = reg.policy != "default"
        if own or region_mm[r] < 0:
            code, flags, nl = policy_code(reg.policy, reg.nodes, f"region {reg.name}: policy")
        else:
            pr = procs[region_mm[r]]
            code, flags, nl = policy_code(pr.policy, pr.policy_nodes, f"process {pr.name}: policy")
        rpol.append(code)
        rnodes.append(nl)
        rflags.append(flags)
        rown.append(int(own))
    mapped = [r.pages if (region_mm[i] >= 0 or r.is_file) else 0 for i, r in enumerate(regions)]
    cpu_ids = sorted(set(task_cpu))
    slot = {c: i for i, c in enumerate(cpu_ids)}
    return Layout(procs, task_mm, [slot[c] for c in task_cpu], cpu_ids, region_mm, mapped, rpol, rnodes,
                  rflags, rown, mm_start, mm_policy, mm_after)


def parse_seed(value) -> int:
    return parse_int(value, "seed", 0, SEED_MAX)


def parse_sample_interval(value) -> float:
    return parse_number(value, "sample_interval_ms", *SAMPLE_INTERVAL_MS)


def cost_range(name: str) -> tuple[float, float, str]:
    """(lo, hi, accepted) for a time-model constant: ns >= 0; the bandwidth window from one bin of
    the bandwidth calendar to half its horizon (cost.py); stream_break_ns also takes -1 ('one idle
    cache-line latency of the node')."""
    if name == "util_window_ns":
        from .core.cost import UTIL_WINDOW_MAX_NS
        from .core.state import MEM_BW_BIN_NS
        return float(MEM_BW_BIN_NS), float(UTIL_WINDOW_MAX_NS), \
            f"a number in {MEM_BW_BIN_NS} .. {UTIL_WINDOW_MAX_NS} (ns)"
    if name == "stream_break_ns":
        return -1.0, COST_MAX, f"-1 or a number in 0 .. {COST_MAX:g} (ns)"
    return 0.0, COST_MAX, f"a number in 0 .. {COST_MAX:g} (ns)"


def parse_costs(costs: dict) -> dict:
    """Cost overrides as floats, each within `cost_range`; overrides equal to the default are
    left out (the same run as no override)."""
    from .core.costs import COSTS
    out = {}
    for k, v in costs.items():
        if k not in COSTS:
            raise ConfigError(f"unknown cost {k!r}; accepted: {', '.join(COSTS)}")
        lo, hi, accepted = cost_range(k)
        x = parse_number(v, k, lo, hi, accepted)
        if -1 < x < 0:
            raise ConfigError(f"{k}: {v!r} is not accepted; accepted: {accepted}")
        if x != COSTS[k][0]:
            out[k] = x
    return out


def _duration(s: float) -> str:
    for unit, n in (("days", 86400), ("h", 3600), ("min", 60)):
        if s >= 2 * n:
            return f"{s / n:.3g} {unit}"
    return f"{s:.3g} s"
