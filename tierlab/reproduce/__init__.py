"""Reproductions of the seed experiments: build the seed's machine, knobs and workload, run them, and
compare with the published numbers.

A reproduction returns a DataFrame with columns
    experiment, metric, published, simulated, rel_error, role
where role is `calibrated` (a cost parameter was fitted to this number, or the row equals a fitted
one by construction), `derived` (the fit's arithmetic: a fitted number times a model quantity, or
another row restated), `reported` (given for the record, not claimed) or `predicted` (the model's
claim). Published numbers live in data/*.csv with their source and appear only in the `published`
column. Register a reproduction with `@register(name, description, data=..., quick=..., fitted=...)`;
scoreboard.py scores every published row of `data` against the table.
"""
from __future__ import annotations

import multiprocessing
import numbers
import os
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import pandas as pd

from ..errors import ConfigError

DATA_DIR = Path(os.environ.get("TIERLAB_DATA", Path(__file__).resolve().parents[2] / "data"))
COLUMNS = ["experiment", "metric", "published", "simulated", "rel_error", "role"]


def _no_fit(experiment: str, metric: str) -> tuple[str, ...]:
    return ()


@dataclass(frozen=True)
class Reproduction:
    """`data`: the data/*.csv files of its published rows; `quick`: the keyword arguments of its
    test-scale run (the suite's and `reproduce --score --quick`'s); `fitted(experiment, metric)`:
    the names of the fitted numbers a row depends on."""
    name: str
    description: str
    run: Callable[..., pd.DataFrame]
    default_scale: float = 1.0
    data: tuple[str, ...] = ()
    quick: dict = field(default_factory=dict)
    fitted: Callable[[str, str], tuple[str, ...]] = _no_fit


REPRODUCTIONS: dict[str, Reproduction] = {}


def register(name: str, description: str, default_scale: float = 1.0, *, data: tuple[str, ...] = (),
             quick: dict | None = None, fitted: Callable[[str, str], tuple[str, ...]] = _no_fit):
    def deco(fn):
        REPRODUCTIONS[name] = Reproduction(name, description, fn, default_scale, tuple(data), dict(quick or {}),
                                           fitted)
        return fn
    return deco


def published(csv_name: str) -> pd.DataFrame:
    path = DATA_DIR / csv_name
    if not path.exists():
        raise ConfigError(f"published data {path} is missing (set TIERLAB_DATA to the repository's data/ directory)")
    return pd.read_csv(path)


def table(pub: pd.DataFrame, simulated: dict, calibrated: set, reported: set = frozenset(),
          derived: set = frozenset()) -> pd.DataFrame:
    """Join published numbers with simulated ones: {(experiment, metric): value}. Roles, first
    match: `calibrated` (a cost or share was fitted to make it match, or the row equals such a row
    by construction), `derived` (a fitted number times a model quantity, or another row restated),
    `reported` (a number the model gives for the record but does not claim), `predicted`
    (everything else: the model's claim, with its error)."""
    rows = []
    for r in pub.itertuples():
        key = (r.experiment, r.metric)
        if key not in simulated:
            continue
        sim = float(simulated[key])
        rel = (sim - r.published) / r.published if r.published else float("nan")
        if abs(rel) < 1e-12:
            rel = 0.0       # a calibrated row's rounding
        role = ("calibrated" if key in calibrated else "derived" if key in derived
                else "reported" if key in reported else "predicted")
        rows.append((r.experiment, r.metric, float(r.published), sim, rel, role))
    return pd.DataFrame(rows, columns=COLUMNS)


def worker_count(jobs: int | None) -> int:
    """Worker processes for a reproduction's independent runs (`--jobs`): None gives 2 where a
    fork is safe and there are two CPUs, else 1."""
    if jobs is None:
        # fork() from a process with other threads (a Jupyter kernel, a Dask worker) can deadlock
        # the child on a lock one of them held, and outside Linux (macOS) system libraries are not
        # fork-safe: the default stays serial there
        ok = sys.platform.startswith("linux") and threading.active_count() == 1 and _can_fork()
        return 2 if ok and (os.cpu_count() or 1) >= 2 else 1
    if isinstance(jobs, bool) or not isinstance(jobs, numbers.Integral) or jobs < 1:
        raise ConfigError(f"jobs (--jobs): expected an integer >= 1, got {jobs!r}")
    return int(jobs) if _can_fork() else 1


def _can_fork() -> bool:
    return "fork" in multiprocessing.get_all_start_methods()


def run_reproduction(name: str, scale: float | None = None, progress: bool = False, **kw) -> pd.DataFrame:
    _load_all()
    rep = REPRODUCTIONS.get(name)
    if rep is None:
        raise ConfigError(f"unknown reproduction {name!r}; accepted: {', '.join(sorted(REPRODUCTIONS))}")
    return rep.run(scale=rep.default_scale if scale is None else scale, progress=progress, **kw)


def list_reproductions() -> list[Reproduction]:
    _load_all()
    return [REPRODUCTIONS[k] for k in sorted(REPRODUCTIONS)]


def _load_all() -> None:
    from . import (anon_folio_order, hint_fault, hint_fault_memtier, mglru_fio, migrc_xsbench,  # noqa: F401
                   pagecache_promotion)  # (they register themselves)


# ---------------------------------------------------------------------------------------------
# CLI: tierlab reproduce NAME


def add_reproduce_commands(subparsers) -> None:
    import argparse
    names = ", ".join(r.name for r in list_reproductions())
    r = subparsers.add_parser(
        "reproduce", help="reproduce a seed experiment's published table from the model",
        description=("Build the seed's machine, knobs and workload, run them, and print a table "
                     "experiment, metric, published, simulated, rel_error, role (calibrated: a cost "
                     "was fitted to it; predicted: never used in fitting). Reproductions: " + names),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    r.add_argument("name", metavar="NAME", nargs="?", help="a reproduction (tierlab list reproductions)")
    r.add_argument("--all", action="store_true", help="every reproduction (with --score)")
    r.add_argument("--score", action="store_true",
                   help="score the published rows against their declared tolerances (scoreboard.py); with "
                        "--all write data/fidelity.csv and docs/fidelity.md and print the summary")
    r.add_argument("--quick", action="store_true",
                   help="with --score: run each reproduction at the test scale (Reproduction.quick); writes "
                        "only the files given by --csv and --md")
    r.add_argument("--csv", metavar="PATH", help="with --score: the scoreboard CSV (default with --all: data/fidelity.csv)")
    r.add_argument("--md", metavar="PATH", help="with --score: the markdown (default with --all: docs/fidelity.md)")
    r.add_argument("--scale", type=float, default=None, metavar="F",
                   help="divide sizes by F to run small (results are normalised back where the "
                        "reproduction says so; default: the reproduction's own, full size for seed 000)")
    r.add_argument("--format", choices=("table", "csv", "json"), default="table", help="output format")
    r.add_argument("--figures", metavar="DIR", help="also write figures (PNG) into DIR")
    r.add_argument("--jobs", type=int, default=None, metavar="N",
                   help="worker processes for the reproduction's independent simulations (default: "
                        "2 on Linux with two or more CPUs; the table is identical for any N)")
    r.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="progress bar on stderr (default: only when stderr is a terminal)")
    r.set_defaults(func=main_reproduce)


def main_reproduce(args) -> int:
    import json
    import sys

    from ..jitcache import say_if_compiling
    from ..units import parse_scale

    if args.scale is not None:
        parse_scale(args.scale, "--scale")
    _load_all()
    _check_flags(args)
    if args.name is not None and args.name not in REPRODUCTIONS:
        raise ConfigError(f"unknown reproduction {args.name!r}; accepted: {', '.join(sorted(REPRODUCTIONS))}")
    say_if_compiling()
    if args.score:
        from .scoreboard import main_score
        return main_score(args)
    show = args.progress if args.progress is not None else sys.stderr.isatty()
    df = run_reproduction(args.name, scale=args.scale, progress=show,
                          **({} if args.jobs is None else {"jobs": args.jobs}))
    if args.format == "json":
        print(json.dumps({"reproduction": args.name, "rows": df.to_dict(orient="records"),
                          "attrs": {k: v for k, v in df.attrs.items()}}, indent=2, default=float))
    elif args.format == "csv":
        df.to_csv(sys.stdout, index=False)
    else:
        with pd.option_context("display.width", 160, "display.max_rows", 500):
            print(df.to_string(index=False, float_format=lambda x: f"{x:.4g}"))
        for k, v in df.attrs.items():
            if not isinstance(v, list) or len(v) <= 12:
                _print_attr(k, v, "")
    if args.figures:
        write_figures(args.name, df, args.figures)
    return 0


def _check_flags(args) -> None:
    """NAME or --all; --all, --quick, --csv and --md only with --score; --score takes no --scale,
    --format or --figures (it runs each reproduction at its default or test scale)."""
    if (args.name is None) == (not args.all):
        raise ConfigError("reproduce: give a reproduction NAME or --all (with --score), not "
                          + ("both" if args.all else "neither"))
    if not args.score:
        given = [f for f, on in (("--all", args.all), ("--quick", args.quick), ("--csv", args.csv), ("--md", args.md))
                 if on]
        if given:
            raise ConfigError(f"reproduce: {', '.join(given)} only with --score")
    else:
        given = [f for f, on in (("--scale", args.scale is not None), ("--format", args.format != "table"),
                                 ("--figures", args.figures)) if on]
        if given:
            raise ConfigError(f"reproduce --score: {', '.join(given)} not accepted; --score runs each reproduction "
                              "at its default scale, or the test scale with --quick")


def _print_attr(key, value, indent: str) -> None:
    """One attribute of a reproduction's table: nested dicts one key per line, numbers to 4 digits."""
    if isinstance(value, dict) and any(isinstance(v, dict) for v in value.values()):
        print(f"{indent}{key}:")
        for k, v in value.items():
            _print_attr(k, v, indent + "  ")
        return
    if isinstance(value, dict):
        value = "{" + ", ".join(f"{k}: {_short(v)}" for k, v in value.items()) + "}"
    print(f"{indent}{key}: {_short(value)}")


def _short(v):
    return f"{v:.4g}" if isinstance(v, float) else v


def write_figures(name: str, df: pd.DataFrame, out_dir: str) -> list[str]:
    """Published vs simulated scatter, and per-cycle times when the reproduction has them."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    os.makedirs(out_dir, exist_ok=True)
    paths = []
    fig, ax = plt.subplots(figsize=(5, 5))
    for role, mk in (("calibrated", "s"), ("predicted", "o"), ("reported", "x")):
        d = df[df.role == role]
        ax.scatter(d.published, d.simulated, marker=mk, label=role)
    lo = float(min(df.published.min(), df.simulated.min()))
    hi = float(max(df.published.max(), df.simulated.max()))
    ax.plot([lo, hi], [lo, hi], "k--", lw=1)
    ax.set_xlabel("published")
    ax.set_ylabel("simulated")
    ax.set_title(name)
    ax.legend()
    paths.append(os.path.join(out_dir, f"{name}-scatter.png"))
    fig.savefig(paths[-1], dpi=120, bbox_inches="tight")
    plt.close(fig)
    if "cycle_times_s" in df.attrs:
        fig, ax = plt.subplots(figsize=(7, 4))
        t = df.attrs["cycle_times_s"]
        ax.plot(range(1, len(t) + 1), t, label="model (add_tail, v3)")
        for key, lab in (("cycle_times_add_s", "model (list_add)"), ("cycle_times_unlimited_s", "model (unlimited)")):
            if key in df.attrs:
                v = df.attrs[key]
                ax.plot(range(1, len(v) + 1), v, label=lab, alpha=0.7)
        pub = df[df.metric.str.match(r"cycle_\d+_s")]
        first = df.attrs.get("first_promotion_cycle", 1)
        ax.plot([first + int(m.split("_")[1]) - 1 for m in pub.metric], pub.published, "ko", label="seed")
        ax.set_xlabel("read cycle")
        ax.set_ylabel("seconds per cycle")
        ax.legend()
        paths.append(os.path.join(out_dir, f"{name}-cycles.png"))
        fig.savefig(paths[-1], dpi=120, bbox_inches="tight")
        plt.close(fig)
    return paths
