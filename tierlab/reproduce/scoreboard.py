"""The fidelity scoreboard: every published number of every reproduction beside the model's, with the
tolerance declared for it in data/ and a status.

One row per row of each reproduction's data/*.csv (and per change row a reproduction scores, seed
004's `-change` rows), keyed by (reproduction, experiment, metric):
- published, model, and the error: relative ((model - published) / published) for a `relative`
  tolerance, the difference in points for a change (a `*_change_pct` row, or after/before - 1 in a
  `-change` experiment), the plain difference for an `absolute` tolerance;
- role, from the reproduction's table, or `not reproduced` for a published row the table lacks;
- the tolerance, its kind and its reason, from data/tolerances.csv, a row's class resolved in
  data/tolerance_defaults.csv (decided from the seeds, never from the model's output);
- status: `within` or `outside` the tolerance; `stale` for a calibrated row outside it (the fit no
  longer holds, or never held for a row equal to a calibration by construction); `wrong direction`
  when a change has the other sign, or when the row moves the other way from the row named in
  `versus` than the seed's does; `not reproduced`; `missing` when the model gave no number;
- the fitted numbers it depends on (Reproduction.fitted, separated by '; ') and the command that
  gives it.

`python -m tierlab reproduce --all --score [--quick]` writes it (data/fidelity.csv, docs/fidelity.md);
tests/fidelity.py keeps the test-scale scoreboard (tests/data/fidelity_quick.csv) as a ratchet.
"""
from __future__ import annotations

import datetime
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import ConfigError
from . import list_reproductions, published, run_reproduction

STATUSES = ("within", "outside", "stale", "wrong direction", "missing", "not reproduced")
# how bad a status is, for the ratchet: a row may move down this list, never up
STATUS_RANK = {"not reproduced": 0, "within": 0, "outside": 1, "stale": 1, "wrong direction": 2, "missing": 3}
# how far a row's |error| may grow before the ratchet calls it worse, per error unit (stated once):
# 2 % of the published value, 1 point of a change, a tenth of an absolute tolerance
NOISE = {"relative": 0.02, "points": 1.0, "absolute": 0.1}
COLUMNS = ["seed", "reproduction", "experiment", "metric", "published", "model", "error", "error_unit", "role",
           "tolerance", "tolerance_kind", "tolerance_reason", "status", "fitted", "command"]
KEY = ["reproduction", "experiment", "metric"]
ROOT = Path(__file__).resolve().parents[2]


def tolerances() -> pd.DataFrame:
    """data/tolerances.csv with every row's class resolved from data/tolerance_defaults.csv."""
    tol = published("tolerances.csv")
    defaults = published("tolerance_defaults.csv").set_index("tolerance_class")
    bad = set(tol.tolerance_class) - set(defaults.index) - {"seed"}
    if bad:
        raise ConfigError(f"data/tolerances.csv: unknown tolerance_class {sorted(bad)}; accepted: seed, "
                          + ", ".join(defaults.index))
    for col in ("tolerance", "tolerance_kind", "tolerance_reason"):
        by_class = tol.tolerance_class.map(defaults[col])
        tol[col] = tol[col].where(tol.tolerance_class == "seed", by_class)
    return tol.set_index(["experiment", "metric"])


def is_change(experiment: str, metric: str) -> bool:
    return metric.endswith("_change_pct") or experiment.endswith("-change")


def to_points(experiment: str, metric: str, value: float) -> float:
    """A change in percentage points: `*_change_pct` rows are in % already, `-change` rows are
    after/before - 1."""
    return value if metric.endswith("_change_pct") else 100.0 * value


def judge(published_value: float, model: float, kind: str, tolerance: float) -> bool:
    """Whether the model is within the tolerance: `relative` to the published value, `absolute` in
    the row's unit, `sign` the same direction (a published 0 is met by 0 only)."""
    if kind == "relative":
        return abs(model - published_value) <= tolerance * abs(published_value)
    if kind == "absolute":
        return abs(model - published_value) <= tolerance
    if kind == "sign":
        return np.sign(model) == np.sign(published_value)
    raise ConfigError(f"tolerance_kind {kind!r}; accepted: relative, absolute, sign")


def score_table(rep, df: pd.DataFrame, command: str, tol: pd.DataFrame | None = None) -> pd.DataFrame:
    """The scoreboard rows of one reproduction from its table `df`."""
    tol = tolerances() if tol is None else tol
    got = df.set_index(["experiment", "metric"])
    pub = pd.concat([published(csv)[["experiment", "metric", "published"]] for csv in rep.data], ignore_index=True)
    extra = df[~df.set_index(["experiment", "metric"]).index.isin(pub.set_index(["experiment", "metric"]).index)]
    pub = pd.concat([pub, extra[["experiment", "metric", "published"]]], ignore_index=True)
    model_of = {k: float(v) for k, v in got.simulated.items()}
    pub_of = {(r.experiment, r.metric): float(r.published) for r in pub.itertuples()}
    rows = []
    for r in pub.itertuples():
        key = (r.experiment, r.metric)
        if key not in tol.index:
            raise ConfigError(f"data/tolerances.csv has no row for {r.experiment} {r.metric} "
                              f"(every published row needs a tolerance)")
        t = tol.loc[key]
        p = float(r.published)
        role = got.role[key] if key in got.index else "not reproduced"
        m = model_of.get(key, float("nan"))
        kind, tv = t.tolerance_kind, float(t.tolerance) if t.tolerance == t.tolerance else float("nan")
        change = is_change(*key)
        if kind == "absolute" and not change:
            unit, err = "absolute", m - p
        elif change:
            unit, err = "points", to_points(*key, m) - to_points(*key, p)
        else:
            unit, err = "relative", (m - p) / p if p else float("nan")
        if role == "not reproduced":
            status = "not reproduced"
        elif not math.isfinite(m):
            status = "missing"
        elif change and p != 0 and np.sign(m) != np.sign(p):
            status = "wrong direction"
        elif isinstance(t.versus, str) and _against(t.versus, key, p, m, pub_of, model_of):
            status = "wrong direction"
        elif judge(p, m, kind, tv):
            status = "within"
        else:
            status = "stale" if role == "calibrated" else "outside"
        rows.append({"seed": _seed(rep.name), "reproduction": rep.name, "experiment": r.experiment,
                     "metric": r.metric, "published": p, "model": m, "error": err, "error_unit": unit, "role": role,
                     "tolerance": tv, "tolerance_kind": kind, "tolerance_reason": t.tolerance_reason,
                     "status": status, "fitted": "; ".join(rep.fitted(*key)) if role != "not reproduced" else "",
                     "command": command})
    return pd.DataFrame(rows, columns=COLUMNS)


def _against(versus: str, key, p: float, m: float, pub_of: dict, model_of: dict) -> bool:
    """True when the model moves the other way from the `versus` row than the seed does."""
    other = tuple(versus.split(":", 1))
    if other not in pub_of:
        raise ConfigError(f"data/tolerances.csv: {key[0]} {key[1]} versus {versus!r} names no published row")
    dp = p - pub_of[other]
    dm = m - model_of.get(other, float("nan"))
    return dp != 0 and math.isfinite(dm) and np.sign(dm) != np.sign(dp)


def _seed(name: str) -> str:
    from . import REPRODUCTIONS
    return REPRODUCTIONS[name].description.split(":", 1)[0]


def command_of(rep, quick: bool) -> str:
    """What gives the row: the CLI at the default scale, the Python call at the test scale."""
    if quick:
        kw = ", ".join(f"{k}={v!r}" for k, v in rep.quick.items())
        return f"run_reproduction({rep.name!r}{', ' + kw if kw else ''})"
    return f"python -m tierlab reproduce {rep.name}"


def run_all(quick: bool = False, names: list[str] | None = None, jobs: int | None = None,
            progress: bool = False) -> pd.DataFrame:
    """Run every reproduction (or `names`) at its default scale, or at the test scale with `quick`,
    and score each."""
    reps = {r.name: r for r in list_reproductions()}
    unknown = sorted(set(names or ()) - set(reps))
    if unknown:
        raise ConfigError(f"unknown reproduction {', '.join(unknown)}; accepted: {', '.join(sorted(reps))}")
    tol = tolerances()
    parts, drift = [], {}
    for name in names or sorted(reps):
        rep = reps[name]
        kw = dict(rep.quick) if quick else {}
        if jobs is not None:
            kw["jobs"] = jobs
        print(f"scoreboard: {name} ...", file=sys.stderr, flush=True)
        df = run_reproduction(name, progress=progress, **kw)
        parts.append(score_table(rep, df, command_of(rep, quick), tol))
        if "refit_drift" in df.attrs:
            drift[name] = df.attrs["refit_drift"]
    board = pd.concat(parts, ignore_index=True)
    board.attrs["refit_drift"] = drift      # a calibration checked on the run (mglru_fio.refit)
    return board


def summary(board: pd.DataFrame) -> pd.DataFrame:
    """Per seed and overall: rows, fitted numbers, and per status and role the counts that matter."""
    def one(d):
        fitted = set(fitted_names(d))
        pred = d[d.role == "predicted"]
        return pd.Series({
            "rows": len(d), "fitted": len(fitted), "calibrated": int((d.role == "calibrated").sum()),
            "stale": int((d.status == "stale").sum()), "derived": int((d.role == "derived").sum()),
            "predicted": len(pred), "predicted_within": int((pred.status == "within").sum()),
            "outside": int((d.status == "outside").sum()),
            "wrong_direction": int((d.status == "wrong direction").sum()),
            "reported": int((d.role == "reported").sum()), "not_reproduced": int((d.role == "not reproduced").sum())})
    per = board.groupby("reproduction", sort=False).apply(one, include_groups=False)
    total = one(board).rename("all")
    total["fitted"] = int(per.fitted.sum())        # names are per reproduction (k is two different numbers)
    return pd.concat([per, total.to_frame().T]).astype(int)


def to_markdown(board: pd.DataFrame, command: str, when: str | None = None) -> str:
    """docs/fidelity.md: how to read it, the summary, then one table per reproduction."""
    when = when or datetime.date.today().isoformat()
    s = summary(board)
    defaults = published("tolerance_defaults.csv")
    by_reason = dict(zip(defaults.tolerance_reason, defaults.tolerance_class))
    lines = [
        "# Fidelity scoreboard", "",
        f"Generated by `{command}` on {when}{_commit()}. Do not edit: rerun the command.", "",
        "Every published number of the seeds' tables beside the model's. The tolerance of each row is "
        "declared in `data/tolerances.csv` (defaults in `data/tolerance_defaults.csv`) from the seed's own "
        "stated noise or a default, never from the model. Error: relative to the published value, in "
        "points for a change, or the plain difference for an absolute tolerance. Roles: `calibrated` (fitted "
        "to the row, or equal to a fitted row by construction), `derived` (a fitted number times a model "
        "quantity, or another row restated), `predicted` (the model's claim), `reported` (given, not "
        "claimed), `not reproduced`. Status: `within`, `outside`, `stale` (a calibrated row outside its "
        "tolerance: its fit no longer holds), `wrong direction` (a change of the other sign, or moving the "
        "other way from the row the seed compares it with), `not reproduced`.", "",
        "Default tolerances (a row's reason says `default: NAME`; every other reason is the seed's):", ""]
    lines += [f"- `{r.tolerance_class}`: {r.tolerance_reason}" for r in defaults.itertuples()]
    lines += ["", "## Summary", "",
              "Rows per reproduction; `fitted`: the numbers fitted to published values; `predicted_within`: "
              "predicted rows within their tolerance; `wrong_direction`: rows of any role.", "",
              _md_table(s.reset_index(names="reproduction")), ""]
    for name, d in board.groupby("reproduction", sort=False):
        lines += [f"## {name}", "", f"{d.seed.iloc[0]}. Command: `{d.command.iloc[0]}`.", ""]
        fitted = fitted_names(d)
        lines += [f"Fitted ({len(fitted)}): {', '.join(f'`{f}`' for f in fitted) or 'none'}.", ""]
        drift = board.attrs.get("refit_drift", {}).get(name)
        if drift:
            lines += ["The fitted costs checked on this run (one step of the fit from its own after-fill "
                      "figures, against the committed values): " + ", ".join(f"`{k}` {v:+.0%}" for k, v in drift.items())
                      + ".", ""]
        view = d.assign(published=d.published.map(_num), model=d.model.map(_num),
                        error=[_err(e, u) for e, u in zip(d.error, d.error_unit)],
                        tolerance=[_tol(v, k, e, m) for v, k, e, m in zip(d.tolerance, d.tolerance_kind,
                                                                          d.experiment, d.metric)],
                        reason=[f"default: {by_reason[r]}" if r in by_reason else r for r in d.tolerance_reason])
        lines += [_md_table(view[["experiment", "metric", "published", "model", "error", "role", "status",
                                  "tolerance", "reason"]]), ""]
    return "\n".join(lines)


def fitted_names(board: pd.DataFrame) -> list[str]:
    """The fitted numbers the rows depend on (the `fitted` column: names separated by '; ')."""
    return sorted({f.strip() for x in board.fitted.fillna("") for f in x.split(";") if f.strip()})


def _num(x: float) -> str:
    if not math.isfinite(x):
        return "–"
    return f"{x:.4g}" if abs(x) < 1e6 else f"{x:.4e}"


def _err(e: float, unit: str) -> str:
    if not math.isfinite(e):
        return "–"
    return {"relative": f"{e:+.1%}", "points": f"{e:+.1f} pts"}.get(unit, f"{e:+.3g}")


def _tol(v: float, kind: str, experiment: str, metric: str) -> str:
    if kind == "sign":
        return "sign"
    if kind == "relative":
        return f"±{v:.0%}" + (" of the change" if is_change(experiment, metric) else "")
    return f"±{v:g}"


def _md_table(df: pd.DataFrame) -> str:
    head = "| " + " | ".join(map(str, df.columns)) + " |"
    rule = "|" + "|".join("---" for _ in df.columns) + "|"
    body = ["| " + " | ".join(str(v).replace("|", "\\|") for v in row) + " |" for row in df.itertuples(index=False)]
    return "\n".join([head, rule] + body)


def _commit() -> str:
    try:
        sha = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                             check=True).stdout.strip()
        return f" at commit {sha}" if sha else ""
    except (OSError, subprocess.CalledProcessError):
        return ""


def compare(old: pd.DataFrame, new: pd.DataFrame) -> tuple[list[str], list[str]]:
    """The ratchet: (worse, better) lines, old -> new, by (reproduction, experiment, metric). Worse: a
    row gone or new, a status further down STATUS_RANK, or an |error| grown by more than NOISE;
    better: the reverse."""
    o, n = old.set_index(KEY), new.set_index(KEY)
    worse, better = [], []
    for key in o.index.difference(n.index):
        worse.append(f"{' '.join(key)}: row gone")
    for key in n.index.difference(o.index):
        worse.append(f"{' '.join(key)}: new row (accept it)")
    for key in o.index.intersection(n.index):
        a, b = o.loc[key], n.loc[key]
        name = " ".join(key)
        ra, rb = STATUS_RANK[a.status], STATUS_RANK[b.status]
        desc = f"{name}: {a.status} -> {b.status}, model {_num(a.model)} -> {_num(b.model)}, " \
               f"error {_err(a.error, a.error_unit)} -> {_err(b.error, b.error_unit)}"
        if a.role != b.role:
            worse.append(f"{name}: role {a.role} -> {b.role} (a change of role: accept it on purpose)")
        elif rb > ra:
            worse.append(desc)
        elif rb < ra:
            better.append(desc)
        elif math.isfinite(a.error) and math.isfinite(b.error):
            noise = NOISE[b.error_unit] * (b.tolerance if b.error_unit == "absolute" else 1.0)
            if abs(b.error) > abs(a.error) + noise:
                worse.append(desc)
            elif abs(b.error) < abs(a.error) - noise:
                better.append(desc)
    return worse, better


# ---------------------------------------------------------------------------------------------
# CLI: tierlab reproduce --all --score [--quick]

def main_score(args) -> int:
    """`reproduce --all --score` (or `NAME --score`): run, score, write the CSV and the markdown (by
    default only for --all at the default scale), print the summary (and a NAME's rows)."""
    board = run_all(quick=args.quick, names=None if args.all else [args.name], jobs=args.jobs,
                    progress=bool(args.progress))
    command = f"python -m tierlab reproduce {'--all' if args.all else args.name} --score" + (" --quick" if args.quick else "")
    default = args.all and not args.quick
    csv = Path(args.csv) if args.csv else (ROOT / "data" / "fidelity.csv" if default else None)
    md = Path(args.md) if args.md else (ROOT / "docs" / "fidelity.md" if default else None)
    if csv is not None:
        board.to_csv(csv, index=False, float_format="%.6g")
        print(f"wrote {csv}", file=sys.stderr)
    if md is not None:
        md.write_text(to_markdown(board, command) + "\n")
        print(f"wrote {md}", file=sys.stderr)
    with pd.option_context("display.width", 200, "display.max_rows", 500, "display.max_colwidth", 40):
        if not args.all:
            print(board[["experiment", "metric", "published", "model", "error", "role", "status"]].to_string(index=False))
        print(summary(board).to_string())
    return 0


