"""Seed 002's fault-count RFC in the guest against the model: the tables of docs/oracle.md's section
"A patched kernel: seed 002's fault-count RFC", from the JSON of two suite runs, one on the plain
kernel and one on the patched kernel (both need building once: tierlab/oracle/kernel.py):

    python -m tierlab oracle suite --only promote-hot-chunks --only promote-anon --kernel tierlab-6.12 \\
        --count-decisions --no-doc --format json > plain.json
    python -m tierlab oracle suite --only promote-hot-chunks --only promote-anon \\
        --kernel tierlab-6.12+fault-count --count-decisions --no-doc --format json > fault-count.json
    python experiments/oracle_fault_count.py plain.json fault-count.json

Per entry one table: each counter's guest runs and the model (plain and time-matched) on either
kernel; the model runs the patched kernel's knobs (hint_fault_latency=fault_count,
scan_restamp_protnone=1) on the patched side, as the suite does.
"""
from __future__ import annotations

import json
import sys

ROWS = ("numa_pte_updates", "numa_hint_faults", "pgpromote_candidate", "pgpromote_success", "pgdemote_kswapd",
        "pgdemote_direct", "pgmigrate_success", "numa_should_migrate_calls", "numa_latency_rejects")


def _n(x) -> str:
    return "-" if x is None else f"{x:,.0f}"


def table(plain: dict, patched: dict) -> str:
    rows_p = {r["counter"]: r for r in plain["rows"]}
    rows_f = {r["counter"]: r for r in patched["rows"]}
    out = [f"**{plain['entry']}** (guest workload time [plain] {plain['info']['guest_run_time_s']} s, "
           f"[fault-count] {patched['info']['guest_run_time_s']} s; scanner passes {plain['info']['numa_scan_seq']} / "
           f"{patched['info']['numa_scan_seq']}; R = {plain['r']:.2f} / {patched['r']:.2f})", "",
           "| counter | plain guest (runs) | model | time-matched | fault-count guest (runs) | model | time-matched |",
           "|---|---|---|---|---|---|---|"]
    for c in ROWS:
        p, f = rows_p.get(c), rows_f.get(c)
        if p is None and f is None:
            continue
        cells = [c]
        for r in (p, f):
            if r is None:
                cells += ["-", "-", "-"]
            else:
                cells += [" / ".join(_n(v) for v in r["guest"]), _n(r["model"]), _n(r.get("matched"))]
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    plain, patched = (json.load(open(a)) for a in argv)
    by_name = {e["entry"]: e for e in patched}
    for e in plain:
        if e["entry"] in by_name:
            print(table(e, by_name[e["entry"]]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
