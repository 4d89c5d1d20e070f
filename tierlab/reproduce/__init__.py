"""Reproductions of the seed experiments: build the seed's machine, knobs and workload, run them, and
compare with the published numbers.

A reproduction returns a DataFrame with columns
    experiment, metric, published, simulated, rel_error, role
where role is `calibrated` (a cost parameter was fitted to this number) or `predicted` (never used
in fitting). Published numbers live in data/*.csv with their source and appear only in the
`published` column. Register a reproduction with `@register(name, description)`.
"""
from __future__ import annotations

import multiprocessing
import numbers
import os
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pandas as pd

from ..errors import ConfigError

DATA_DIR = Path(os.environ.get("TIERLAB_DATA", Path(__file__).resolve().parents[2] / "data"))
COLUMNS = ["experiment", "metric", "published", "simulated", "rel_error", "role"]


@dataclass(frozen=True)
class Reproduction:
    name: str
    description: str
    run: Callable[..., pd.DataFrame]
    default_scale: float = 1.0


REPRODUCTIONS: dict[str, Reproduction] = {}


def register(name: str, description: str, default_scale: float = 1.0):
    def deco(fn):
        REPRODUCTIONS[name] = Reproduction(name, description, fn, default_scale)
        return fn
    return deco


def published(csv_name: str) -> pd.DataFrame:
    path = DATA_DIR / csv_name
    if not path.exists():
        raise ConfigError(f"published data {path} is missing (set TIERLAB_DATA to the repository's data/ directory)")
    return pd.read_csv(path)


def table(pub: pd.DataFrame, simulated: dict, calibrated: set, reported: set = frozenset()) -> pd.DataFrame:
    """Join published numbers with simulated ones: {(experiment, metric): value}. Roles:
    `calibrated` (a cost or share was fitted to make it match), `reported` (a number the model
    derives for the record but does not claim, e.g. one carried over from a prediction by a
    calibrated ratio), `predicted` (everything else: the model's claim, with its error)."""
    rows = []
    for r in pub.itertuples():
        key = (r.experiment, r.metric)
        if key not in simulated:
            continue
        sim = float(simulated[key])
        rel = (sim - r.published) / r.published if r.published else float("nan")
        if abs(rel) < 1e-12:
            rel = 0.0       # a calibrated row's rounding
        role = "calibrated" if key in calibrated else "reported" if key in reported else "predicted"
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
    r.add_argument("name", metavar="NAME", help="a reproduction (tierlab list reproductions)")
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
    if args.name not in REPRODUCTIONS:
        raise ConfigError(f"unknown reproduction {args.name!r}; accepted: {', '.join(sorted(REPRODUCTIONS))}")
    say_if_compiling()
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
