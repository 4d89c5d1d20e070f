"""One oracle run: the same workload, knobs and machine in a Linux 6.12 guest and in the model, and
their counters side by side.

The model runs on the machine the guest actually had: each node's capacity is the guest's MemFree
on that node just before the workload (what the workload can use; the guest's kernel, its slab and
the initramfs hold the rest), and min_free_kbytes is the value the guest computed (unless set), so
both start with the same free memory and the same reserve. The kernel sets watermarks per zone from
a zone's managed pages; the model per node from its capacity, so the LOW-MIN gap differs by the
share of the node the guest's kernel holds (a few percent).

Counters are compared, not times: TCG runs the guest's instructions at an emulator's speed, so
anything the kernel decides by the clock (NUMA scan periods, the hot threshold, kswapd's timing
against the workload) sees a different machine from the one the model simulates.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

import pandas as pd

from ..kernel import Kernel
from ..machine import Machine
from ..workloads import make_workload
from . import build, guest as guest_mod
from .console import GuestResult, parse_console
from .programs import guest_program
from .scantrace import scan_summary

# The model's counter -> the kernel's names summed for it (the kernel counts per zone type).
SUMMED = {"pgalloc": "pgalloc_", "allocstall": "allocstall_"}


@dataclass
class OracleRun:
    spec: dict                 # what was asked: workload, params, knobs, machine, scale, cpus, seed, settings
    guest: GuestResult
    model: object              # tierlab.api.Result
    machine: Machine           # the guest machine as booted
    model_machine: dict        # the machine the model ran (capacities = guest MemFree before)
    transcript: str
    wall_s: float
    warnings: list = field(default_factory=list)

    def table(self, names=None, all_counters: bool = False) -> pd.DataFrame:
        return side_by_side(self.guest, self.model.counters, names, all_counters)

    def mthp_table(self) -> pd.DataFrame:
        return mthp_side_by_side(self.guest, self.model.mthp)

    def to_dict(self) -> dict:
        t = self.table()
        return {"spec": self.spec, "kernel": self.guest.kernel, "guest_wall_s": self.wall_s,
                "guest_run_time_s": self.guest.run_time_s, "model_sim_time_s": self.model.sim_time_s,
                "model_machine": self.model_machine, "warnings": self.warnings,
                "comparison": [{"counter": r.counter, "guest": _num(r.guest), "model": _num(r.model),
                                "ratio": _num(r.ratio)} for r in t.itertuples()],
                "mthp_comparison": [{"size": r.size, "stat": r.stat, "guest": _num(r.guest), "model": _num(r.model),
                                     "ratio": _num(r.ratio)} for r in self.mthp_table().itertuples()],
                "guest": self.guest.to_dict(), "model": self.model.to_dict(),
                **({"scan": scan_summary(self.guest)} if self.spec.get("trace_scan") else {})}


def _num(x):
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return None
    if isinstance(x, float) and math.isinf(x):
        return "inf"
    return int(x) if float(x).is_integer() else float(x)


def guest_value(counters: pd.Series, name: str):
    """The guest's count for a model counter name (None: Linux 6.12 has no such counter)."""
    if name in counters.index:
        return int(counters[name])
    prefix = SUMMED.get(name)
    if prefix is not None:
        return int(counters[[k for k in counters.index if k.startswith(prefix)]].sum())
    return None


def ratio(model: float, guest: float | None) -> float:
    """model / guest; inf when only the model counted, 1 when neither did."""
    if guest is None:
        return math.nan
    if guest == 0:
        return 1.0 if model == 0 else math.inf
    return model / guest


def side_by_side(guest: GuestResult, model_counters: pd.Series, names=None, all_counters: bool = False) -> pd.DataFrame:
    """counter, guest, model, ratio (model / guest) for the model's counters (`names`, or every
    one either side counted); with `all_counters` also the guest's counters the model lacks."""
    rows = []
    for name in (names or model_counters.index):
        g = guest_value(guest.counters, name)
        m = int(model_counters.get(name, 0))
        if names is None and not m and not g:
            continue
        rows.append((name, g, m, ratio(m, g)))
    if all_counters:
        seen = {r[0] for r in rows}
        rows += [(k, int(v), None, math.nan) for k, v in guest.counters.items() if v and k not in seen]
    return pd.DataFrame(rows, columns=["counter", "guest", "model", "ratio"])


def mthp_side_by_side(guest: GuestResult, model_mthp: pd.DataFrame) -> pd.DataFrame:
    """size, stat, guest, model, ratio for the per-size THP stats both have (the sizes the model
    has: orders 2 .. PMD), rows where either side counted."""
    rows = []
    if guest.mthp.empty:
        return pd.DataFrame(rows, columns=["size", "stat", "guest", "model", "ratio"])
    for size, mrow in model_mthp.iterrows():
        for stat, m in mrow.items():
            if stat == "order" or size not in guest.mthp.index or stat not in guest.mthp.columns:
                continue
            g = int(guest.mthp.loc[size, stat])
            if m or g:
                rows.append((size, stat, g, int(m), ratio(int(m), g)))
    return pd.DataFrame(rows, columns=["size", "stat", "guest", "model", "ratio"])


def model_machine(machine: Machine, guest: GuestResult) -> Machine:
    """`machine` with each node's capacity set to the guest's MemFree on it before the workload."""
    nodes = []
    for i, nd in enumerate(machine.nodes):
        free_kb = int(guest.meminfo_before.loc[i, "MemFree"])
        nodes.append(dataclasses.replace(nd, capacity_bytes=free_kb * 1024))
    return dataclasses.replace(machine, nodes=tuple(nodes))


def check_tiers(machine: Machine, guest: GuestResult) -> list[str]:
    """Warnings when the guest's memory tiers do not order the nodes as the model's do."""
    node_tier = guest.node_tier()
    if sorted(node_tier) != list(range(machine.nr_nodes)):
        return [f"the guest reports memory tiers for nodes {sorted(node_tier)}, not all {machine.nr_nodes} nodes"]
    ids = sorted(set(node_tier.values()))
    guest_index = [ids.index(node_tier[i]) for i in range(machine.nr_nodes)]
    model_index = machine.tier_index()
    if guest_index != model_index:
        return [f"the guest's memory tiers {guest.tiers} order the nodes as {guest_index}; the model's as "
                f"{model_index}: the comparison is not of the same machine"]
    return []


def run_oracle(workload: str, params: dict | None = None, knobs: dict | None = None,
               machine: str = "qemu-2node", scale: float = 1.0, cpus: int = guest_mod.DEFAULT_CPUS,
               seed: int = 0, guest_settings: dict | None = None, program_args: dict | None = None,
               accel: str = "tcg", timeout_s: float = 900, log=None, guest_kernel: str | None = None,
               icount: str | None = None, count_decisions: bool = False, trace_scan: bool = False) -> OracleRun:
    """Run `workload` in the guest and in the model on the same configuration (module docstring).
    `guest_kernel` tierlab-6.12+<set> runs the model with the set's knobs (kernel.PATCH_SETS);
    `count_decisions` adds the guest's probes on should_numa_migrate_memory() (guest.DECISION_PROBES:
    numa_should_migrate_calls, numa_latency_rejects); `trace_scan` the scanner probes (scantrace.py:
    every task_numa_work() call and placement with the task's scan period, in guest.scan_trace)."""
    from .. import api

    from .kernel import patch_set_of
    params, knobs = dict(params or {}), dict(knobs or {})
    pset = patch_set_of(build.kernel_choice(guest_kernel))   # a patched guest: the model runs its knobs too
    if pset is not None:
        knobs = dict(pset.model_knobs, **knobs)     # a different value is refused by the guest's knob check
    m = guest_mod.guest_machine(Machine.load(machine).scaled(scale), cpus)
    w = make_workload(workload, params, scale=scale)       # validates params before any work
    w.validate()
    kernel = Kernel(**knobs)
    from ..config import validate
    validate({"machine": m.to_dict(), "workload": workload, "params": params, "knobs": knobs,
              "scale": scale, "seed": seed})               # the model's side too, before the guest boots
    program, args, files = guest_program(w, seed, program_args)
    settings = dict(guest_mod.MODEL_GUEST_SETTINGS if guest_settings is None else guest_settings)
    booted = guest_mod.boot(m, program, args, files, kernel, settings, timeout_s=timeout_s, accel=accel, log=log,
                            guest_kernel=guest_kernel, icount=icount, count_decisions=count_decisions,
                            trace_scan=trace_scan)
    g = parse_console(booted.transcript)
    if g.exit_status != 0 or g.errors:
        raise guest_mod.GuestError(f"the guest's workload failed (exit status {g.exit_status}): "
                                   f"{'; '.join(g.errors) or 'no error message'}")
    warnings = check_tiers(m, g)
    mm = model_machine(m, g)
    model_knobs = dict(knobs)
    model_knobs.setdefault("min_free_kbytes", g.knobs.get("min_free_kbytes"))
    if log:
        log("running the model ...")
    res = api.build({"machine": mm.to_dict(), "workload": workload, "params": params, "knobs": model_knobs,
                     "scale": scale, "seed": seed}).run().result()
    spec = {"workload": workload, "params": params, "knobs": knobs, "machine": machine, "scale": scale,
            "cpus": cpus, "seed": seed, "guest_settings": settings, "program_args": dict(program_args or {}),
            "accel": accel, "icount": icount, "guest_kernel": booted.kernel_package,
            "count_decisions": count_decisions, "trace_scan": trace_scan}
    return OracleRun(spec=spec, guest=g, model=res, machine=m, model_machine=mm.to_dict(),
                     transcript=booted.transcript, wall_s=booted.wall_s, warnings=warnings)
