"""The fidelity ratchet: the scoreboard of every reproduction at the test scale (Reproduction.quick),
kept in tests/data/fidelity_quick.csv. tests/test_fidelity.py fails when a row's status gets worse
or its error grows by more than the stated noise (scoreboard.compare), and names what improved.

    python tests/fidelity.py            # run every reproduction at the test scale, print worse/better rows
    python tests/fidelity.py NAME ...   # only these reproductions
    python tests/fidelity.py --accept   # ... and rewrite their rows of the committed scoreboard

A change meant to move the model (a fix, a new mechanism, a re-fit) shows up as a diff of the CSV in
review; accept it on purpose, with the reason in the commit message.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent
QUICK_CSV = HERE / "data" / "fidelity_quick.csv"


def quick_table(name: str) -> pd.DataFrame:
    """The reproduction's table at the test scale (what the suite's fixtures run)."""
    from tierlab.reproduce import REPRODUCTIONS, run_reproduction
    return run_reproduction(name, jobs=1, **REPRODUCTIONS[name].quick)


def board(name: str, df: pd.DataFrame) -> pd.DataFrame:
    """The scoreboard rows of one reproduction's test-scale table."""
    from tierlab.reproduce import REPRODUCTIONS
    from tierlab.reproduce.scoreboard import command_of, score_table
    rep = REPRODUCTIONS[name]
    return score_table(rep, df, command_of(rep, quick=True))


def load(name: str | None = None) -> pd.DataFrame | None:
    """The committed test-scale scoreboard (one reproduction's rows with `name`), or None."""
    if not QUICK_CSV.exists():
        return None
    old = pd.read_csv(QUICK_CSV, keep_default_na=False, na_values=[""])
    for col in ("fitted", "tolerance_reason"):
        old[col] = old[col].fillna("")
    return old if name is None else old[old.reproduction == name].reset_index(drop=True)


def accept(new: pd.DataFrame) -> None:
    """Replace the committed rows of the reproductions in `new`."""
    old = load()
    keep = old[~old.reproduction.isin(set(new.reproduction))] if old is not None else None
    out = pd.concat([keep, new], ignore_index=True) if keep is not None else new
    QUICK_CSV.parent.mkdir(exist_ok=True)
    out.sort_values(["reproduction"], kind="stable").to_csv(QUICK_CSV, index=False, float_format="%.9g")


def main(argv: list[str]) -> int:
    from tierlab.reproduce import list_reproductions
    from tierlab.reproduce.scoreboard import compare
    known = [r.name for r in list_reproductions()]
    wanted = [a for a in argv if not a.startswith("--")] or known
    flags = [a for a in argv if a.startswith("--")]
    bad = sorted(set(wanted) - set(known)) + [f for f in flags if f != "--accept"]
    if bad:
        print(f"fidelity.py: unknown {', '.join(bad)}; accepted: --accept, {', '.join(known)}", file=sys.stderr)
        return 2
    worse_any = False
    for name in wanted:
        new = board(name, quick_table(name))
        old = load(name)
        worse, better = compare(old, new) if old is not None and len(old) else ([f"{name}: no committed rows"], [])
        worse_any |= bool(worse)
        print(f"{name}: {len(worse)} worse, {len(better)} better")
        for line in worse:
            print(f"  worse:  {line}")
        for line in better:
            print(f"  better: {line}")
        if "--accept" in flags:
            accept(new)
            print(f"  accepted -> {QUICK_CSV.relative_to(HERE.parent)}")
    if worse_any and "--accept" not in flags:
        print("\n`python tests/fidelity.py --accept [NAME ...]` accepts the new rows (say why in the commit)")
    return 1 if worse_any and "--accept" not in flags else 0


if __name__ == "__main__":
    sys.path.insert(0, str(HERE.parent))
    raise SystemExit(main(sys.argv[1:]))
