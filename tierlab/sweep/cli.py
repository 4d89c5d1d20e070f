"""`tierlab sweep` and `python -m tierlab.sweep`: the command line of sweeps."""
from __future__ import annotations

import os
import sys

from ..errors import ConfigError, TierlabError
from .runner import sweep
from .spec import EXECUTORS, _short, load_spec, plan
from .store import done_keys, runs_dir

def dry_run_report(spec, out_dir) -> str:
    """The runs of `spec` (validated) with done/todo status in `out_dir`, and a summary line."""
    spec = load_spec(spec)
    runs = plan(spec)
    if out_dir is not None and os.path.exists(out_dir) and not os.path.isdir(out_dir):
        raise ConfigError(f"--out {os.fspath(out_dir)!r}: exists and is not a directory")
    done = done_keys(out_dir) if out_dir is not None else set()
    heads = ["#", "run_key"] + spec.varied_keys + ["seed", "status"]
    rows = [[str(r.index + 1), r.key] + [_short(r.varied[k]) for k in spec.varied_keys] + [str(r.seed),
            "done" if r.key in done else "todo"] for r in runs]
    w = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(heads)]
    lines = ["  ".join(h.ljust(w[i]) for i, h in enumerate(heads))]
    lines += ["  ".join(c.ljust(w[i]) for i, c in enumerate(row)) for row in rows]
    n_done = sum(r.key in done for r in runs)
    extra = len(done - {r.key for r in runs})
    lines.append("")
    lines.append(f"{spec.name}: {len(runs)} runs, {n_done} already done, {len(runs) - n_done} to run"
                 + (f" (out: {out_dir})" if out_dir is not None else "")
                 + (f"; {extra} other stored runs in {runs_dir(out_dir)} are not part of this sweep" if extra else ""))
    return "\n".join(lines)


def add_sweep_arguments(p) -> None:
    p.add_argument("spec", help="sweep spec (TOML), e.g. experiments/quickstart.toml")
    p.add_argument("--out", metavar="DIR", default=None,
                   help="output directory: DIR/runs/<key>.json per run, DIR/<name>.parquet (default sweeps/<name>)")
    p.add_argument("--executor", choices=EXECUTORS, default=None,
                   help="local: process pool (default); dask: distributed Client; serial: this process")
    p.add_argument("--workers", type=int, default=None, metavar="N",
                   help="worker processes (local, or a dask LocalCluster); default: cores (bounded by memory)")
    p.add_argument("--scheduler", metavar="ADDRESS", default=None,
                   help="dask scheduler address (implies --executor dask); default: a LocalCluster")
    p.add_argument("--dry-run", action="store_true", help="validate, list the runs and how many are done; run nothing")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--progress", dest="progress", action="store_true", default=None, help="show a progress bar")
    g.add_argument("--no-progress", dest="progress", action="store_false", help="no progress bar")


def add_sweep_commands(subparsers) -> None:
    """Register `tierlab sweep` on the CLI's subparsers (tierlab.cli.COMMANDS)."""
    p = subparsers.add_parser("sweep", help="run a parameter sweep from a TOML spec into a Parquet table",
                              description="Run every run of a sweep spec (grid, zip, repeats) not already "
                                          "stored in --out, then write DIR/<name>.parquet. See docs/sweeps.md.")
    add_sweep_arguments(p)
    p.set_defaults(func=main_sweep)


add_sweep_command = add_sweep_commands


def main_sweep(args) -> int:
    """`tierlab sweep` (exit 0: all runs finished; 1: some runs failed; 2: bad input, via ConfigError)."""
    spec = load_spec(args.spec)
    out = args.out if args.out is not None else os.path.join("sweeps", spec.name)
    if args.dry_run:
        print(dry_run_report(spec, out))
        return 0
    executor = args.executor or ("dask" if args.scheduler else "local")
    df, stats = sweep(spec, out, executor=executor, workers=args.workers, scheduler=args.scheduler,
                      progress=args.progress)
    print(f"{spec.name}: {stats.summary()} ({stats.wall_s:.1f} s)", file=sys.stderr)
    return 1 if stats.failed else 0   # each failure was reported when it happened


def main(argv: list[str] | None = None) -> int:
    """`python -m tierlab.sweep SPEC --out DIR ...` (the same as `python -m tierlab sweep`)."""
    import argparse
    p = argparse.ArgumentParser(prog="tierlab sweep", description="Run a tierlab parameter sweep.")
    add_sweep_arguments(p)
    args = p.parse_args(argv)
    try:
        return main_sweep(args)
    except TierlabError as e:
        print(f"tierlab: error: {e.one_line()}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("tierlab: interrupted; finished runs are stored, re-run to resume", file=sys.stderr)
        return 130
