"""The `trace` (record, info, convert) and `cachesim` commands of ``python -m tierlab``."""
from __future__ import annotations

import argparse
import json
import shlex
import sys

from ..errors import ConfigError
from .analysis import format_trace_info, trace_info
from .cachesim import POLICIES, cachesim, lru_mrc, parse_policies, parse_sizes
from .format import INPUT_FORMATS, OUTPUT_FORMATS
from .readers import TraceFile
from .recorder import record_trace
from .writers import convert_trace

_FROM_HELP = "input format (default: from the file's first bytes and name)"


def add_trace_commands(subparsers) -> argparse.ArgumentParser:
    """Register `trace` (record, info, convert) on an argparse subparsers object."""
    p = subparsers.add_parser(
        "trace", help="record, inspect and convert page-access traces of real programs",
        description="Page-granular access traces (task, page, read/write, count) in tierlab's .npz "
                    "format. A trace is a workload.")
    sub = p.add_subparsers(dest="trace_command", metavar="{record,info,convert}", required=True)

    r = sub.add_parser(
        "record", help="run a program under valgrind lackey and save its page trace",
        description="Run COMMAND under `valgrind --tool=lackey --trace-mem=yes`, stream lackey's "
                    "output through a pipe into the parser, and write a folded page trace (.npz, "
                    "compressed). Expect the program to run 50-200x slower. Needs valgrind "
                    "(Debian/Ubuntu: apt-get install valgrind).",
        epilog="example: python -m tierlab trace record --out sort.npz -- sort /tmp/words.txt")
    r.add_argument("--out", required=True, metavar="FILE", help="output trace file (.npz)")
    r.add_argument("--instructions", action="store_true",
                   help="also record instruction fetches (as reads); default: data accesses only")
    r.add_argument("--compress", action="store_true", help=argparse.SUPPRESS)  # the default now
    r.add_argument("--uncompressed", action="store_true",
                   help="store the .npz members uncompressed (default: deflate level 1)")
    r.add_argument("--chunk-lines", type=int, default=1 << 20, metavar="N",
                   help="lackey lines parsed per batch (default: %(default)s)")
    r.add_argument("command", nargs=argparse.REMAINDER, metavar="-- COMMAND ...",
                   help="the program and its arguments, after '--'")

    i = sub.add_parser(
        "info", help="summarise a trace: pages, accesses, read/write share, reuse distances",
        description="Print distinct pages, accesses, read/write share, footprint and a histogram "
                    "of LRU reuse distances (log2 buckets of distinct pages, plus cold misses). "
                    "Reads the trace in one streaming pass.")
    i.add_argument("file", metavar="FILE", help="trace file (.npz, .npy, .csv, oracleGeneral, .lackey)")
    i.add_argument("--format", choices=("table", "json"), default="table", help="output format")
    i.add_argument("--from", dest="src_format", choices=INPUT_FORMATS, default=None, help=_FROM_HELP)

    c = sub.add_parser(
        "convert", help="convert CSV, libCacheSim oracleGeneral or lackey text to a trace",
        description="Read a trace in another format, fold consecutive repeats, and write it. "
                    "CSV needs a header task,page,op[,count] with op one of r/w/R/W/0/1. "
                    "oracleGeneral (libCacheSim) records become reads of page obj_id by task 0; "
                    "timestamps and object sizes are dropped.")
    c.add_argument("src", metavar="SRC", help="input trace file")
    c.add_argument("--out", required=True, metavar="FILE", help="output file")
    c.add_argument("--from", dest="src_format", choices=INPUT_FORMATS, default=None, help=_FROM_HELP)
    c.add_argument("--to", dest="out_format", choices=OUTPUT_FORMATS, default=None,
                   help="output format (default: from --out's name, else npz)")
    c.add_argument("--renumber", action="store_true",
                   help="number pages densely 0..n-1 (sorted), e.g. for hashed oracleGeneral ids")
    c.add_argument("--instructions", action="store_true",
                   help="lackey input: keep instruction fetches too")
    c.add_argument("--compress", action="store_true", help=argparse.SUPPRESS)  # the default now
    c.add_argument("--uncompressed", action="store_true",
                   help="npz output: store members uncompressed (default: deflate level 1)")
    p.set_defaults(func=main_trace)
    return p


def main_trace(args: argparse.Namespace) -> int:
    """Run a parsed `trace` sub-command. Returns the process exit status."""
    cmd = args.trace_command
    if cmd == "record":
        command = list(args.command)
        if command and command[0] == "--":
            command = command[1:]
        s = record_trace(command, args.out, instructions=args.instructions,
                         chunk_lines=args.chunk_lines, compress=not args.uncompressed, load=False)
        m = s["meta"]
        print(f"wrote {args.out}: {s['records']:,} records, {s['accesses']:,} accesses, "
              f"{s['pages']:,} pages; {m['lackey']['lines']:,} lackey lines in {m['wall_s']:.1f} s "
              f"({m['lines_per_s']:,.0f} lines/s, {m['records_per_s']:,.0f} records/s)", file=sys.stderr)
        if m["exit_code"] != 0:
            print(f"warning: {shlex.join(command)!r} exited with status {m['exit_code']}",
                  file=sys.stderr)
        return 0
    if cmd == "info":
        info = trace_info(TraceFile(args.file, args.src_format))
        print(json.dumps(info, indent=2) if args.format == "json" else format_trace_info(info))
        return 0
    if cmd == "convert":
        trace = convert_trace(args.src, args.out, fmt=args.src_format, to=args.out_format,
                              renumber=args.renumber, instructions=args.instructions,
                              compress=not args.uncompressed)
        print(f"wrote {args.out}: {len(trace):,} records, {trace.nr_accesses:,} accesses",
              file=sys.stderr)
        return 0
    raise ConfigError(f"trace: unknown sub-command {cmd!r}; expected record, info or convert")


def add_cachesim_command(subparsers) -> argparse.ArgumentParser:
    """Register `cachesim` on an argparse subparsers object."""
    p = subparsers.add_parser(
        "cachesim", help="miss ratios of exact LRU/FIFO/CLOCK on a trace, and LRU's miss-ratio curve",
        description="Replay a trace (any format `trace convert` reads) through exact LRU, FIFO and "
                    "CLOCK with unit-size objects (libCacheSim's LRU, FIFO and Clock, miss for miss) "
                    "and print one row per policy and size. --mrc prints LRU's miss ratio at every "
                    "size (or at --size) from one pass over the trace (reuse distances).",
        epilog="example: python -m tierlab cachesim trace.oracleGeneral.bin --policy lru,fifo,clock "
               "--size 1000,10%")
    p.add_argument("trace", metavar="TRACE", help="trace file (.npz, .npy, .csv, oracleGeneral, .lackey)")
    p.add_argument("--policy", default=",".join(POLICIES), metavar="P[,P...]",
                   help=f"policies, comma-separated, of {', '.join(POLICIES)} (default: all)")
    p.add_argument("--size", default=None, metavar="S[,S...]",
                   help="cache sizes in objects, or %% of the trace's distinct objects (e.g. "
                        "1000,10%%); default 1%%,10%%, or every size with --mrc")
    p.add_argument("--mrc", action="store_true",
                   help="LRU miss-ratio curve in one pass (csv by default) instead of the policy table")
    p.add_argument("--format", choices=("table", "csv", "json"), default=None,
                   help="output format (default: table; csv with --mrc)")
    p.add_argument("--from", dest="src_format", choices=INPUT_FORMATS, default=None, help=_FROM_HELP)
    p.set_defaults(func=main_cachesim)
    return p


def main_cachesim(args: argparse.Namespace) -> int:
    """Run a parsed `cachesim` command: validate every option, then read the trace."""
    policies = parse_policies(args.policy)
    if args.size is not None:
        parse_sizes(args.size)
    src = TraceFile(args.trace, args.src_format)  # a missing or unknown file stops here
    if args.mrc:
        df = lru_mrc(src, args.size)
    else:
        df = cachesim(src, policies, args.size or "1%,10%")
    fmt = args.format or ("csv" if args.mrc else "table")
    if fmt == "csv":
        sys.stdout.write(df.to_csv(index=False))
    elif fmt == "json":
        print(json.dumps(df.to_dict(orient="records"), indent=2))
    else:
        print(df.to_string(index=False, float_format=lambda x: f"{x:.6f}"))
    return 0
