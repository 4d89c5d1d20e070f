"""Reproductions of the seed experiments: build the seed's machine, knobs and workload, run them, and
compare with the published numbers.

A reproduction returns a DataFrame with columns
    experiment, metric, published, simulated, rel_error, role
where role is `calibrated` (a cost parameter was fitted to this number) or `predicted` (never used
in fitting). Published numbers live in data/*.csv with their source and appear only in the
`published` column. Register a reproduction with `@register(name, description)`.
"""
from __future__ import annotations

import os
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


def table(pub: pd.DataFrame, simulated: dict, calibrated: set) -> pd.DataFrame:
    """Join published numbers with simulated ones: {(experiment, metric): value}."""
    rows = []
    for r in pub.itertuples():
        key = (r.experiment, r.metric)
        if key not in simulated:
            continue
        sim = float(simulated[key])
        rel = (sim - r.published) / r.published if r.published else float("nan")
        rows.append((r.experiment, r.metric, float(r.published), sim, rel,
                     "calibrated" if key in calibrated else "predicted"))
    return pd.DataFrame(rows, columns=COLUMNS)


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
    from . import pagecache_promotion  # noqa: F401  (registers itself)
