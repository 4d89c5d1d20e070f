"""`tierlab oracle`: one workload in the guest and the model side by side, or the comparison suite.

    tierlab oracle random-read --machine qemu-2node --scale 4 --param target=anon \\
        --param file_size=1536MiB --param policy=bind:0 --set demotion_enabled=1 [--format json]
    tierlab oracle suite [--only NAME] [--doc docs/oracle.md | --no-doc]

Both take --kernel tierlab-6.12 to boot tierlab's own kernel (tierlab/oracle/kernel.py) instead of
Debian's package, or --kernel tierlab-6.12+<set> for it with a patch set (kernel.PATCH_SETS), and
--count-decisions for the probes on should_numa_migrate_memory() (guest.DECISION_PROBES), and
--trace-scan for the NUMA scanner's pace (every task_numa_work() call and placement with the task's
scan period; scantrace.py).
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import textwrap

from ..cli import _key_values, _table
from ..errors import ConfigError
from .guest import ICOUNT_REPEATABLE


def _log(msg: str) -> None:
    print(f"oracle: {msg}", file=sys.stderr, flush=True)


def _fmt_ratio(r) -> str:
    if r is None or (isinstance(r, float) and math.isnan(r)):
        return "-"
    if math.isinf(r):
        return "inf"
    return f"{r:.3f}"


def format_run(run, all_counters: bool = False) -> str:
    s = run.spec
    params = ", ".join(f"{k}={v}" for k, v in s["params"].items())
    knobs = ", ".join(f"{k}={v}" for k, v in s["knobs"].items())
    lines = [f"workload  {s['workload']}" + (f" ({params})" if params else ""),
             f"machine   {s['machine']}" + (f" (scale 1/{s['scale']:g})" if s["scale"] != 1 else "")
             + f", {sum(nd.cpus for nd in run.machine.nodes)} vCPUs",
             f"knobs     {knobs or 'kernel defaults'}",
             f"guest     Linux {run.guest.kernel} under QEMU ({s['accel']}"
             + (f", -icount {s['icount']}" if s.get("icount") else "") + f"); memory tiers {run.guest.tiers}; "
             f"workload {run.guest.run_time_s:.2f} s on the guest's clock (TCG: not a machine's time)",
             "model     capacities = guest MemFree before the workload: "
             + ", ".join(f"node{i} {nd['capacity'] >> 20} MiB" for i, nd in enumerate(run.model_machine["nodes"]))
             + f"; {run.model.sim_time_s:.3f} s simulated"]
    lines += [f"WARNING   {w}" for w in run.warnings]
    lines.append("")
    t = run.table(all_counters=all_counters)
    rows = [[r.counter, _fmt_count(r.guest), _fmt_count(r.model), _fmt_ratio(r.ratio)] for r in t.itertuples()]
    lines += _table(["counter", "guest", "model", "model/guest"], rows, right={1, 2, 3})
    mt = run.mthp_table()
    if len(mt):
        lines.append("")
        rows = [[f"{r.size}/{r.stat}", _fmt_count(r.guest), _fmt_count(r.model), _fmt_ratio(r.ratio)]
                for r in mt.itertuples()]
        lines += _table(["per-size THP stat", "guest", "model", "model/guest"], rows, right={1, 2, 3})
    if s.get("trace_scan"):
        from .scantrace import format_scan
        lines.append("")
        lines += format_scan(run.guest)
    lines.append("")
    lines.append("'-' in guest: Linux 6.12 has no such counter; pgalloc and allocstall are the kernel's per-zone counters summed")
    return "\n".join(lines)


def _fmt_count(x) -> str:
    # a counter one side lacks is None, or NaN once pandas has put it in a float column
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{int(x):,d}"


def cmd_oracle(args: argparse.Namespace) -> int:
    from .guest import GuestError
    try:
        return _cmd_oracle(args)
    except GuestError as e:
        print(f"tierlab: oracle: {e}", file=sys.stderr)
        return 1


def _cmd_oracle(args: argparse.Namespace) -> int:
    if args.workload == "suite":
        from .suite import DOC, run_suite
        return run_suite(only=args.only, doc=None if args.no_doc else (args.doc or DOC), fmt=args.format,
                         log=_log, accel=args.accel, guest_kernel=args.kernel, icount=args.icount,
                         count_decisions=args.count_decisions, trace_scan=args.trace_scan)
    if args.workload == "redis-memtier":
        from .redis import cmd_redis_memtier
        return cmd_redis_memtier(args, _key_values(args.param, "--param"), _key_values(args.set, "--set"))
    from .compare import run_oracle
    if args.only or args.no_doc or args.doc:
        raise ConfigError("--only, --doc and --no-doc belong to `tierlab oracle suite`")
    settings = None
    if args.guest_setting:
        from .guest import MODEL_GUEST_SETTINGS
        settings = dict(MODEL_GUEST_SETTINGS) | _key_values(args.guest_setting, "--guest-setting")
    run = run_oracle(args.workload, _key_values(args.param, "--param"), _key_values(args.set, "--set"),
                     machine=args.machine, scale=args.scale, cpus=args.cpus, seed=args.seed,
                     guest_settings=settings, program_args=_key_values(args.program_arg, "--program-arg"),
                     accel=args.accel, timeout_s=args.timeout, log=_log, guest_kernel=args.kernel,
                     icount=args.icount, count_decisions=args.count_decisions, trace_scan=args.trace_scan)
    if args.transcript:
        with open(args.transcript, "w") as f:
            f.write(run.transcript)
    if args.format == "json":
        print(json.dumps(run.to_dict(), indent=2))
    else:
        print(format_run(run, all_counters=args.all))
    return 0


def add_oracle_command(sub) -> None:
    o = sub.add_parser(
        "oracle", help="run a workload in a Linux 6.12 guest (QEMU) and in the model; compare counters",
        description=textwrap.fill(
            "Boot a Linux 6.12 guest under QEMU with the machine's nodes (a CPU-less node in a lower "
            "memory tier from HMAT), run the workload as a C program in it, and run the model on the same "
            "machine and knobs; print every vmstat counter of both and their ratio. `tierlab oracle suite` "
            "runs the per-mechanism comparison and rewrites the table in docs/oracle.md. Needs "
            "qemu-system-x86, busybox-static, cpio, gcc and apt (the kernel package is downloaded into "
            "~/.cache/tierlab/oracle, or $TIERLAB_ORACLE_CACHE).", 78),
        epilog="example: tierlab oracle random-read --machine qemu-2node --scale 4 --param target=anon "
               "--param file_size=1536MiB --param policy=bind:0 --param accesses=300000 --set demotion_enabled=1",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    o.add_argument("workload", metavar="WORKLOAD|suite",
                   help="a workload with a guest program (file-read, random-read, hot-chunks, xsbench, fio (reads), "
                        "anon-build, anon-browser), or `suite`, or `redis-memtier` (real Redis under a memtier-like "
                        "load, guest only; --param case=no-fork|bgsave-default|bgsave-continuous|client-memory|no-fork-filled|bgsave-continuous-filled)")
    o.add_argument("--machine", default="qemu-2node", metavar="NAME|FILE.toml", help="machine preset (default: qemu-2node)")
    o.add_argument("--param", action="append", metavar="KEY=VALUE", help="a workload parameter, repeatable")
    o.add_argument("--set", action="append", metavar="KNOB=VALUE", help="a kernel knob, repeatable")
    o.add_argument("--scale", type=float, default=1.0, metavar="F",
                   help="divide node capacities and sized params by F, as `tierlab run` does (default: 1)")
    o.add_argument("--cpus", type=int, default=2, metavar="N", help="vCPUs of the guest, and CPUs of the model (default: 2)")
    o.add_argument("--seed", type=int, default=0, metavar="N", help="random seed of the model and the guest program")
    o.add_argument("--guest-setting", action="append", metavar="PATH=VALUE",
                   help="write VALUE to PATH in the guest before the knobs (overrides the defaults "
                        "/sys/kernel/mm/lru_gen/enabled=0, /proc/sys/vm/watermark_boost_factor=0)")
    o.add_argument("--program-arg", action="append", metavar="KEY=VALUE",
                   help="an argument of the guest program the workload has no param for "
                        "(tierlab/oracle/programs/*.c say which)")
    o.add_argument("--accel", default="tcg", metavar="ACCEL",
                   help="QEMU accelerator (default: tcg; e.g. 'tcg,thread=single' or 'kvm' where it works)")
    o.add_argument("--kernel", metavar="NAME",
                   help="the guest's kernel: tierlab-6.12 (our build of Debian's linux-source-6.12 with "
                        "tierlab/oracle/kernel.config; built on first use, see docs/oracle.md), "
                        "tierlab-6.12+fault-count (the same with seed 002's fault-count RFC applied, "
                        "tierlab/oracle/patches/fault-count; the model then runs hint_fault_latency=fault_count, "
                        "scan_restamp_protnone=1), tierlab-6.12+migrc (seed 004's MIGRC series v8, "
                        "tierlab/oracle/patches/migrc; the model then runs migrc=1), "
                        "tierlab-6.12+pagecache-promotion (seed 000's page-cache promotion RFC v3, "
                        "tierlab/oracle/patches/pagecache-promotion; it has pagecache_promotion_enabled), "
                        "or a Debian package "
                        "linux-image-6.12.N+deb12-amd64-unsigned (default: $TIERLAB_ORACLE_KERNEL, else the newest "
                        "Debian package cached or known to apt)")
    o.add_argument("--icount", nargs="?", const=ICOUNT_REPEATABLE, metavar="SPEC",
                   help=f"run the guest under QEMU's -icount SPEC (alone: {ICOUNT_REPEATABLE}): its clock counts "
                        "instructions and the vCPUs share one host thread, for repeatable timing; opt-in, TCG only")
    o.add_argument("--count-decisions", action="store_true",
                   help="count should_numa_migrate_memory()'s calls and its refusals of slow-tier folios in the "
                        "guest with two kprobes (numa_should_migrate_calls, numa_latency_rejects: the RFC's own "
                        "debugging counts); suite: in the NUMA-balancing entries")
    o.add_argument("--trace-scan", action="store_true",
                   help="trace the NUMA scanner in the guest: every task_numa_work() call and placement with the "
                        "task's numa_scan_period (kprobes; needs a kernel with BTF, i.e. Debian's); suite: in the "
                        "NUMA-balancing entries")
    o.add_argument("--timeout", type=float, default=900, metavar="S", help="give up on the guest after S seconds")
    o.add_argument("--format", choices=("table", "json"), default="table", help="output on stdout")
    o.add_argument("--all", action="store_true", help="also list the guest's counters the model does not have")
    o.add_argument("--transcript", metavar="FILE", help="save the guest's console transcript")
    o.add_argument("--only", action="append", metavar="NAME", help="suite: run only these entries")
    o.add_argument("--doc", metavar="FILE", help="suite: the markdown file whose table to rewrite (default: docs/oracle.md)")
    o.add_argument("--no-doc", action="store_true", help="suite: print the table only")
    o.set_defaults(func=cmd_oracle)
