"""The command line: ``python -m tierlab`` and the ``tierlab`` script.

    tierlab run --machine qemu-2node --workload random-read --param file_size=2GiB --set demotion_enabled=1
    tierlab list machines|workloads|knobs|costs|reproductions
    tierlab trace record|info|convert ...
    tierlab cachesim TRACE --policy lru,fifo,clock --size 1000,10%
    tierlab bench [--quick]

Bad input (an unknown machine, workload, param or knob, a value out of range, a size that does not
parse) exits with status 2 and one line ``tierlab: error: <message>`` naming the key and what is
accepted, before any simulation work. Every such error is a `tierlab.errors.TierlabError`.

Other modules add sub-commands through `COMMANDS`: name -> "module:function", where the function
takes argparse's subparsers object, adds its parser and sets ``func`` (a callable args -> exit status)
with ``set_defaults``. A module that does not exist yet, or lacks the function, is skipped.
"""
from __future__ import annotations

import argparse
import importlib
import json
import shutil
import sys
import textwrap

from .errors import ConfigError, TierlabError

# Sub-commands registered from other modules (see the module docstring).
COMMANDS: dict[str, str] = {
    "trace": "tierlab.trace:add_trace_commands",
    "cachesim": "tierlab.trace:add_cachesim_command",
    "sweep": "tierlab.sweep:add_sweep_commands",
    "reproduce": "tierlab.reproduce:add_reproduce_commands",
    "oracle": "tierlab.oracle.cli:add_oracle_command",
}


class _Parser(argparse.ArgumentParser):
    """argparse, with usage errors as one line `tierlab: error: ...` (exit status 2)."""

    def error(self, message: str):
        cmd = self.prog.split(" ", 1)[1] + " " if " " in self.prog else ""
        self.exit(2, f"tierlab: error: {message} (see 'tierlab {cmd}--help')\n")


# ---------------------------------------------------------------------------------------------
# run


def _key_values(items: list[str] | None, flag: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError(f"{flag} {item!r}: expected key=value, e.g. {flag} "
                              + ("file_size=4GiB" if flag == "--param" else "demotion_enabled=1"))
        out[key] = value.strip()
    return out


def run_config_from_args(args: argparse.Namespace) -> dict:
    """The plain config dict (what tierlab.api.build takes) for `tierlab run` arguments."""
    config = {"machine": args.machine, "workload": args.workload,
              "params": _key_values(args.param, "--param"), "knobs": _key_values(args.set, "--set"),
              "scale": args.scale, "seed": args.seed}
    if args.sample_ms is not None:
        config["sample_interval_ms"] = args.sample_ms
    if args.quantum_us is not None:
        config["quantum_us"] = args.quantum_us
    if args.tlb_model is not None:
        config["tlb_model"] = args.tlb_model
    if args.page_alloc_model is not None:
        config["page_alloc_model"] = args.page_alloc_model
    if args.at:
        config["at"] = list(args.at)
    if args.cost:
        config["costs"] = _key_values(args.cost, "--cost")
    return config


def cmd_run(args: argparse.Namespace) -> int:
    from . import api
    from .config import estimate_note
    from .jitcache import say_if_compiling
    from .output import check_output_path, result_dict, write_parquet

    config = run_config_from_args(args)
    if args.out is not None:
        check_output_path(args.out)
    sim = api.build(config)  # validates every key and value before any work
    note = estimate_note(sim.nr_accesses)
    if note:
        print(note, file=sys.stderr)
    say_if_compiling()

    show = args.progress if args.progress is not None else sys.stderr.isatty()
    bar = None
    if show:
        from tqdm import tqdm
        bar = tqdm(total=sim.nr_accesses, unit="acc", unit_scale=True, file=sys.stderr,
                   desc=f"{config['workload']} on {config['machine']}", dynamic_ncols=True, leave=False)
    try:
        sim.run(progress=bar.update if bar is not None else None)
    finally:
        if bar is not None:
            bar.close()
    res = sim.result()

    if args.out is not None:
        write_parquet(res, args.out)
    if args.format == "json":
        print(json.dumps(result_dict(res), indent=2))
    elif args.format == "csv":
        print("counter,value")
        for name, value in res.counters.items():
            print(f"{name},{int(value)}")
        for size, row in res.mthp_nonzero().iterrows():
            for stat, value in row.items():
                print(f"{size}/{stat},{int(value)}")
    else:
        print(format_result_table(res, sim))
    if args.out is not None:
        print(f"wrote {args.out}", file=sys.stderr)
    return 0


def format_result_table(res, sim=None) -> str:
    cfg = res.config
    lines = []
    params = ", ".join(f"{k}={v}" for k, v in (cfg.get("params") or {}).items())
    from .kernel import KNOBS
    knobs = ", ".join(f"{k}={KNOBS[k].format(v) if k in KNOBS else v}" for k, v in (cfg.get("knobs") or {}).items())
    machine = cfg.get("machine")
    machine = machine.get("name") if isinstance(machine, dict) else machine
    lines.append(f"machine   {machine}" + (f" (scale 1/{cfg['scale']:g})" if cfg.get("scale", 1) != 1 else ""))
    lines.append(f"workload  {cfg.get('workload')}" + (f" ({params})" if params else ""))
    lines.append(f"knobs     {knobs or 'kernel defaults'}")
    lines.append(f"seed      {cfg.get('seed', 0)}")
    lines.append("")
    lines.append(f"simulated time  {res.sim_time_s:.6f} s")
    if len(res.task_times_s) > 1:
        for t, v in res.task_times_s.items():
            lines.append(f"  task {t:<9d} {v:.6f} s")
    ks = res.tasks[(res.tasks.kind == "kswapd") & (res.tasks.runtime_s > 0)] if len(res.tasks) else res.tasks
    for _, k in ks.iterrows():
        shared = ((res.tasks.kind == "task") & (res.tasks.cpu == k.cpu)).any()
        lines.append(f"  {k['name']:<14s}{k.runtime_s:.6f} s CPU ({100 * k.cpu_share:.1f} % of CPU {k.cpu}"
                     + (", shared with tasks)" if shared else ")"))
    if len(res.marks_s):
        cyc = res.cycle_times_s(0)
        if len(cyc):
            lines.append("cycle times     " + "  ".join(f"{x:.4f}" for x in cyc) + " s (task 0)")
    for ev in res.events.itertuples(index=False):
        lines.append(f"event           {ev.event}  " + (f"at {ev.time_s:.6f} s" if ev.applied else "(not applied: "
                                                           "its moment never came)"))
    lines.append("")
    nz = [(k, int(v)) for k, v in res.counters.items() if v]
    lines.append("vmstat counters (non-zero, /proc/vmstat names)")
    if nz:
        w = max(len(k) for k, _ in nz)
        for k, v in nz:
            lines.append(f"  {k:<{w}}  {v:>14,d}")
    else:
        lines.append("  (all zero)")
    mthp = res.mthp_nonzero()
    if len(mthp):
        lines.append("")
        lines.append("multi-size THP (/sys/kernel/mm/transparent_hugepage/hugepages-<size>kB/stats, sizes with a "
                     "non-zero stat)")
        rows = [[size] + [f"{int(v):,d}" for v in r] for size, r in mthp.iterrows()]
        lines += ["  " + s for s in _table(["size"] + list(mthp.columns), rows, right=set(range(1, mthp.shape[1] + 1)))]
    lines.append("")
    lines.append("nodes (pages of 4 KiB)")
    cols = ["name", "managed_pages", "nr_free_pages", "nr_inactive_anon", "nr_active_anon",
            "nr_inactive_file", "nr_active_file", "nr_isolated"]
    heads = ["node", "name", "managed", "free", "inact_anon", "act_anon", "inact_file", "act_file",
             "isolated"]
    if int(res.nodes.migrc_pending_nr.sum()):
        cols.append("migrc_pending_nr")
        heads.append("migrc_held")
    rows = [[str(i)] + [str(r[c]) for c in cols] for i, r in res.nodes.iterrows()]
    lines += ["  " + s for s in _table(heads, rows, right=set(range(2, len(heads))))]
    if res.buddyinfo is not None:
        lines.append("")
        lines.append("/proc/buddyinfo (free blocks per order; pages on per-CPU lists are not in it)")
        b = res.buddyinfo
        rows = [[str(n)] + [str(int(x)) for x in r] for n, r in b.iterrows()]
        lines += ["  " + s for s in _table(["node"] + [str(o) for o in b.columns], rows,
                                           right=set(range(1, b.shape[1] + 1)))]
    if res.devices is not None and int(res.devices[["rd_ios", "wr_ios"]].to_numpy().sum()):
        lines.append("")
        lines.append("block devices (/proc/diskstats)")
        rows = [[str(i), r["name"], f"{r.rd_ios:,d}", f"{r.rd_sectors * 512 / 2**20:,.1f}",
                 f"{r.wr_ios:,d}", f"{r.wr_sectors * 512 / 2**20:,.1f}"] for i, r in res.devices.iterrows()]
        lines += ["  " + s for s in _table(["dev", "name", "reads", "read MiB", "writes", "written MiB"], rows,
                                           right={2, 3, 4, 5})]
    agg = res.summary.get("aggregate") if res.summary else None
    if agg:
        lines.append("")
        lines.append(f"fio (all jobs, {len(res.summary['jobs'])} job(s), runtime {agg['job_runtime']} ms)")
        for d in ("read", "write"):
            s = agg[d]
            if s["total_ios"]:
                pct = s["clat_ns"].get("percentile", {})
                lines.append(f"  {d}: IOPS={s['iops']:,.0f}, BW={s['bw_bytes'] / 2**20:,.1f}MiB/s, clat (us) "
                             + ", ".join(f"p{k.rstrip('0').rstrip('.')}={v / 1000:,.1f}"
                                         for k, v in pct.items() if k in ("50.000000", "99.000000", "99.900000")))
    return "\n".join(lines)


def _table(heads: list[str], rows: list[list[str]], right: set[int] = frozenset()) -> list[str]:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(heads)]

    def fmt(cells):
        return "  ".join(c.rjust(w) if i in right else c.ljust(w)
                         for i, (c, w) in enumerate(zip(cells, widths))).rstrip()
    return [fmt(heads)] + [fmt(r) for r in rows]


def _wrapped_table(heads: list[str], rows: list[list[str]]) -> str:
    """A table whose last column is wrapped to the terminal width with a hanging indent."""
    fixed = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(heads[:-1])]
    indent = sum(fixed) + 2 * len(fixed)
    width = max(shutil.get_terminal_size((120, 24)).columns, indent + 40)
    out = []
    for cells in [heads] + rows:
        head = "  ".join(c.ljust(w) for c, w in zip(cells[:-1], fixed)) + "  "
        text = textwrap.wrap(cells[-1], width=width - indent, break_long_words=False,
                             break_on_hyphens=False) or [""]
        out.append(head + text[0])
        out += [" " * indent + t for t in text[1:]]
    return "\n".join(s.rstrip() for s in out)


def _knobs_table(data: list[dict]) -> str:
    """The knobs as one table when it fits the terminal; else one block per knob (NAME DEFAULT UNIT
    ACCEPTED, then the sysfs/sysctl path and what it models, indented and wrapped)."""
    width = shutil.get_terminal_size((120, 24)).columns
    wide = _wrapped_table(["NAME", "DEFAULT", "UNIT", "ACCEPTED", "WHERE", "MODELS"],
                          [[d["name"], d["default"], d["unit"] or "-", d["accepted"], d["where"], d["models"]]
                           for d in data])
    if max(map(len, wide.splitlines())) <= width:
        return wide
    short = 30      # a longer ACCEPTED (an enum's many choices) goes on its own indented line
    head = _table(["NAME", "DEFAULT", "UNIT", "ACCEPTED"],
                  [[d["name"], d["default"], d["unit"] or "-", d["accepted"] if len(d["accepted"]) <= short
                    else "(below)"] for d in data])
    out = [head[0] + "\n    WHERE; MODELS"]
    for line, d in zip(head[1:], data):
        out.append(line)
        if len(d["accepted"]) > short:
            out += textwrap.wrap("accepted: " + d["accepted"], width=max(20, width - 4), initial_indent="    ",
                                 subsequent_indent="    ", break_on_hyphens=False)
        out += textwrap.wrap(d["where"], width=max(20, width - 4), initial_indent="    ",
                             subsequent_indent="    ", break_on_hyphens=False)
        out += textwrap.wrap(d["models"], width=max(20, width - 4), initial_indent="    ",
                             subsequent_indent="    ", break_on_hyphens=False)
    return "\n".join(out)


# ---------------------------------------------------------------------------------------------
# list

LIST_KINDS = ("machines", "workloads", "knobs", "costs", "reproductions")


def list_data(what: str) -> list[dict]:
    if what == "machines":
        from .machine import PRESET_DIR, Machine, presets
        out = []
        for name in presets():
            m = Machine.load(name)
            out.append({"name": name, "path": str(PRESET_DIR / f"{name}.toml"), "nodes": m.nr_nodes,
                        "description": m.description})
        return out
    if what == "workloads":
        from .workloads import WORKLOADS
        return [{"name": name, "description": cls.description,
                 "params": [{"name": k, "default": p.default, "help": p.help, "scaled": p.scaled}
                            for k, p in cls.params.items()]}
                for name, cls in sorted(WORKLOADS.items())]
    if what == "knobs":
        from .kernel import KNOBS, _fmt
        out = []
        for k in KNOBS.values():
            accepted = (", ".join(f"{n} ({v})" for n, v in k.choices.items()) if k.choices
                        else f"{_fmt(k.lo)} .. {_fmt(k.hi)}")
            out.append({"name": k.name, "default": "computed" if k.default is None else _fmt(k.default),
                        "unit": k.unit, "accepted": accepted, "where": k.where, "models": k.models})
        return out
    if what == "costs":
        from .core.costs import COSTS
        return [{"name": n, "default": v[0], "unit": v[1], "source": v[2]} for n, v in COSTS.items()]
    if what == "reproductions":
        try:
            from .reproduce import REPRODUCTIONS
        except ImportError:
            return []
        return [{"name": r.name, "default_scale": r.default_scale, "description": r.description}
                for r in sorted(REPRODUCTIONS.values(), key=lambda r: r.name)]
    raise ConfigError(f"list: unknown kind {what!r}; accepted: {', '.join(LIST_KINDS)}")


def cmd_list(args: argparse.Namespace) -> int:
    data = list_data(args.what)
    if args.format == "json":
        print(json.dumps(data, indent=2))
        return 0
    if args.what == "machines":
        from .machine import PRESET_DIR
        print(_wrapped_table(["NAME", "NODES", "DESCRIPTION"],
                             [[d["name"], str(d["nodes"]), d["description"]] for d in data]))
        print(f"\npresets live in {PRESET_DIR}/NAME.toml; `--machine path/to/copy.toml` runs your own "
              "copy (see docs/machines.md)")
    elif args.what == "workloads":
        for d in data:
            print(f"{d['name']}: {d['description']}")
            print(textwrap.indent(_wrapped_table(
                ["PARAM", "DEFAULT", "HELP"],
                [[p["name"], str(p["default"]), p["help"] + (" (divided by --scale)" if p["scaled"] else "")]
                 for p in d["params"]]), "  "))
            print()
        print("set with --param NAME=VALUE; sizes accept B, KiB/MiB/GiB/TiB, KB/MB/GB/TB, pages")
    elif args.what == "knobs":
        print(_knobs_table(data))
        print("\nset with --set NAME=VALUE; 'computed' defaults depend on the machine's memory")
    elif args.what == "reproductions":
        print(_wrapped_table(["NAME", "DEFAULT SCALE", "DESCRIPTION"],
                             [[d["name"], f"{d['default_scale']:g}", d["description"]] for d in data]))
        print("\nrun with: tierlab reproduce NAME [--scale F]")
    else:
        print(_wrapped_table(["NAME", "DEFAULT", "UNIT", "SOURCE"],
                             [[d["name"], f"{d['default']:g}", d["unit"], d["source"]] for d in data]))
        print("\noverride with tierlab.api.build({..., 'costs': {NAME: VALUE}}) or run --cost NAME=VALUE")
    return 0


# ---------------------------------------------------------------------------------------------
# bench


def cmd_bench(args: argparse.Namespace) -> int:
    from .bench import format_bench, run_bench
    report = run_bench(quick=args.quick, startup=not args.no_startup, compile_only=args.compile,
                       libcachesim=not args.no_libcachesim, log=sys.stderr, reproduction=args.reproduction)
    print(json.dumps(report, indent=2) if args.format == "json" else format_bench(report))
    return 0


# ---------------------------------------------------------------------------------------------
# parser


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="tierlab",
                description="tierlab: simulate Linux memory tiering (DRAM + CXL) with the kernel's own "
                            "mechanisms, knobs and counters.",
                epilog="'tierlab COMMAND --help' describes each command.")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)

    r = sub.add_parser(
        "run", help="simulate one workload on one machine and print the result",
        description=textwrap.fill(
            "Build a simulation from a machine, a workload and kernel knobs, run it, and print "
            "vmstat counters (kernel names), per-node memory and the simulated time. Every name and "
            "value is checked before the simulation starts.", 78),
        epilog="example: tierlab run --machine qemu-2node --workload random-read "
               "--param file_size=2GiB --param accesses=2000000 --set demotion_enabled=1 --seed 7\n"
               "'tierlab list machines|workloads|knobs' shows what is accepted.",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    r.add_argument("--machine", required=True, metavar="NAME|FILE.toml",
                   help="a machine preset (tierlab list machines) or a TOML file")
    r.add_argument("--workload", required=True, metavar="NAME", help="a workload (tierlab list workloads)")
    r.add_argument("--param", action="append", metavar="KEY=VALUE",
                   help="a workload parameter, repeatable (e.g. file_size=4GiB)")
    r.add_argument("--set", action="append", metavar="KNOB=VALUE",
                   help="a kernel knob, repeatable (e.g. demotion_enabled=1; tierlab list knobs)")
    r.add_argument("--cost", action="append", metavar="NAME=VALUE",
                   help="override a time-model constant, repeatable (tierlab list costs)")
    r.add_argument("--scale", type=float, default=1.0, metavar="F",
                   help="divide every node capacity and sized workload parameter by F (default: 1)")
    r.add_argument("--seed", type=int, default=0, metavar="N", help="random seed (default: 0)")
    r.add_argument("--sample-ms", type=float, default=None, metavar="X",
                   help="time-series sample interval in simulated ms (default: 100)")
    r.add_argument("--quantum-us", type=float, default=None, metavar="Q",
                   help="how far one CPU's clock may run ahead of the next one's, in simulated us "
                        "(default: 20; part of the result: it orders the CPUs' events)")
    r.add_argument("--tlb-model", choices=("off", "set_assoc"), default=None,
                   help="simulate every CPU's TLBs (set_assoc: dTLB, iTLB, STLB of the machine's [tlb] "
                        "table; page walks cost time) or only count flushes (off, the default)")
    r.add_argument("--page-alloc-model", choices=("counts", "buddy"), default=None,
                   help="give folios physical frames from a buddy allocator with per-CPU lists (buddy: a large "
                        "folio can fail to allocate when memory is fragmented) or count free pages per node "
                        "(counts, the default)")
    r.add_argument("--at", action="append", metavar="WHEN:ACTION",
                   help="a run-script event, repeatable: WHEN is a simulated time (10ms, 1.5s), mark:TASK:N or "
                        "phase:N; ACTION is set KNOB=VALUE, move_pages REGION NODE, migratepages FROM NODE, "
                        "mbind REGION POLICY [move], set_mempolicy POLICY or drop_caches 1|2|3 (e.g. --at 'phase:1:move_pages 0 1' --at '2s:set "
                        "numa_balancing=2'; tierlab/events.py)")
    r.add_argument("--format", choices=("table", "json", "csv"), default="table",
                   help="output on stdout (default: table)")
    r.add_argument("--out", metavar="FILE",
                   help="also write the time series, counters and config to a Parquet file (atomically)")
    r.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="progress bar on stderr (default: only when stderr is a terminal)")
    r.set_defaults(func=cmd_run)

    ls = sub.add_parser("list", help="list machines, workloads, knobs, costs or reproductions",
                        description="List what `run` accepts: machine presets (with their file), "
                                    "workloads (with their params), kernel knobs (default, unit, "
                                    "sysfs/sysctl path, what they model), time-model costs and "
                                    "reproductions of the seed experiments.")
    ls.add_argument("what", choices=LIST_KINDS, help="what to list")
    ls.add_argument("--format", choices=("table", "json"), default="table", help="output format")
    ls.set_defaults(func=cmd_list)

    b = sub.add_parser("bench", help="measure simulator throughput, start-up time and libCacheSim parity",
                       description="Measure host wall time of (a) file-read on a two-tier DRAM+CXL machine "
                                   "with demotion and page-cache promotion, (b) random-read under memory "
                                   "pressure with demotion, (c) tierlab's exact LRU against libCacheSim, "
                                   "and (d) cold and warm start-up of `python -m tierlab run` (empty vs "
                                   "filled numba cache). Simulation results never depend on wall time.")
    b.add_argument("--format", choices=("table", "json"), default="table", help="output format")
    b.add_argument("--quick", action="store_true", help="smaller sizes (about a minute, most of it JIT)")
    b.add_argument("--no-startup", action="store_true", help="skip the cold/warm start-up measurement")
    b.add_argument("--compile", action="store_true",
                   help="only the compile: a cold compile timed per entry point and per kernel (numba's "
                        "compile events), the engine's size as the compile budget counts it, and start-up")
    b.add_argument("--no-libcachesim", action="store_true", help="skip the libCacheSim comparison")
    b.add_argument("--reproduction", action=argparse.BooleanOptionalAction, default=None,
                   help="time the seed 000 reproduction (default: at full size, unless --quick)")
    b.set_defaults(func=cmd_bench)

    for name, target in COMMANDS.items():
        mod_name, _, fn_name = target.partition(":")
        try:
            mod = importlib.import_module(mod_name)
        except ModuleNotFoundError as e:
            if e.name == mod_name:
                continue
            raise
        registrar = getattr(mod, fn_name, None)
        if registrar is not None:
            registrar(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    """Parse `argv` (default: sys.argv[1:]), run the command, and return its exit status."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # --help (0) and usage errors (2)
        return int(e.code or 0) if isinstance(e.code, int) or e.code is None else 2
    try:
        return int(args.func(args) or 0)
    except TierlabError as e:
        print(f"tierlab: error: {e.one_line()}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("tierlab: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # e.g. `tierlab list knobs | head`
        try:
            import os
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (OSError, ValueError, AttributeError):
            pass
        return 0
    except OSError as e:
        print(f"tierlab: error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
