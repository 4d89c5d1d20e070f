"""Seed 004's MIGRC series in the guest against the model: the tables of docs/oracle.md's section
"MIGRC on tierlab's kernel", from the JSON of suite runs of `promote-xsbench` on the plain kernel
and on the MIGRC kernel (both need building once: tierlab/oracle/kernel.py):

    python -m tierlab oracle suite --only promote-xsbench --kernel tierlab-6.12 --no-doc --format json > plain1.json
    python -m tierlab oracle suite --only promote-xsbench --kernel tierlab-6.12+migrc --no-doc --format json > migrc1.json
    python experiments/oracle_migrc.py --plain plain1.json [plain2.json ...] --migrc migrc1.json [migrc2.json ...]

Each suite call boots the guest twice and runs the model once (plain and time-matched); on the
MIGRC kernel the model runs migrc=1 (kernel.PATCH_SETS), everything else as on the plain kernel.

Two tables: every counter on either kernel (guest runs, the model, time-matched, model / guest
mean), and the change MIGRC makes (after / before - 1) in the guest (mean of the runs), in the
model, time-matched, and in seed 004's published /proc/vmstat.
"""
from __future__ import annotations

import argparse
import json
import sys

ROWS = ("nr_tlb_remote_flush", "nr_tlb_remote_flush_received", "nr_tlb_local_flush_all", "nr_tlb_local_flush_one",
        "numa_pages_migrated", "pgmigrate_success", "pgpromote_success", "pgdemote_kswapd", "pgdemote_direct",
        "numa_hint_faults", "pgpromote_candidate")
# seed 004's cover letter (v8 = v7): /proc/vmstat before (v6.7) and after (v6.7 + migrc)
PUBLISHED = {"numa_pages_migrated": (12790664, 14897064), "pgmigrate_success": (26835314, 30825530),
             "nr_tlb_remote_flush": (3031412, 198290), "nr_tlb_remote_flush_received": (45234862, 2820156),
             "nr_tlb_local_flush_all": (216584, 92048), "nr_tlb_local_flush_one": (740940, 741401)}


def _n(x) -> str:
    return "-" if x is None else f"{x:,.0f}"


def _pct(a, b) -> str:
    if a is None or b is None or not b:
        return "-"
    return f"{100.0 * (a / b - 1):+.1f} %"


def _mean(xs):
    xs = [x for x in xs if x is not None]
    return sum(xs) / len(xs) if xs else None


def _load(paths: list[str]) -> list[dict]:
    out = []
    for p in paths:
        d = json.load(open(p))
        out += [e for e in (d if isinstance(d, list) else [d]) if e["entry"] == "promote-xsbench"]
    if not out:
        sys.exit(f"no promote-xsbench entry in {', '.join(paths)}")
    return out


def _collect(sets: list[dict]) -> dict:
    """counter -> {'guest': [runs...], 'model': [...], 'matched': [...]} over all suite calls."""
    out = {}
    for e in sets:
        for r in e["rows"]:
            d = out.setdefault(r["counter"], {"guest": [], "model": [], "matched": []})
            d["guest"] += list(r["guest"])
            d["model"].append(r["model"])
            d["matched"].append(r.get("matched"))
    return out


def tables(plain: list[dict], migrc: list[dict]) -> str:
    p, m = _collect(plain), _collect(migrc)
    head = []
    for name, sets in (("plain", plain), ("migrc", migrc)):
        head.append(f"[{name}] guest workload {', '.join(str(t) for e in sets for t in e['info']['guest_run_time_s'])} s; "
                    f"scanner passes {', '.join(str(t) for e in sets for t in e['info']['numa_scan_seq'])}; "
                    f"R = {', '.join('%.2f' % e['r'] for e in sets)}; model knobs "
                    f"{sets[0]['info']['model_knobs']}")
    out = ["; ".join(head), "",
           "| counter | plain guest (runs) | model / time-matched | model/guest | MIGRC guest (runs) | "
           "model / time-matched | model/guest |", "|---|---|---|---|---|---|---|"]
    for c in ROWS:
        if c not in p and c not in m:
            continue
        cells = [c]
        for d in (p.get(c), m.get(c)):
            if d is None:
                cells += ["-", "-", "-"]
                continue
            g = _mean(d["guest"])
            mo = _mean(d["model"])
            cells += [" / ".join(_n(v) for v in d["guest"]),
                      "; ".join(f"{_n(a)} / {_n(b)}" for a, b in zip(d["model"], d["matched"])),
                      "-" if not g else f"{mo / g:.2f}"]
        out.append("| " + " | ".join(cells) + " |")
    out += ["", "| counter | guest change (means) | model change | time-matched change | published (seed 004) |",
            "|---|---|---|---|---|"]
    for c in ROWS:
        if c not in p or c not in m:
            continue
        pub = PUBLISHED.get(c)
        out.append(f"| {c} | {_pct(_mean(m[c]['guest']), _mean(p[c]['guest']))} | "
                   f"{_pct(_mean(m[c]['model']), _mean(p[c]['model']))} | "
                   f"{_pct(_mean(m[c]['matched']), _mean(p[c]['matched']))} | "
                   f"{_pct(pub[1], pub[0]) if pub else '-'} |")
    return "\n".join(out) + "\n"


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--plain", nargs="+", required=True, help="suite JSON from --kernel tierlab-6.12")
    ap.add_argument("--migrc", nargs="+", required=True, help="suite JSON from --kernel tierlab-6.12+migrc")
    a = ap.parse_args(argv)
    print(tables(_load(a.plain), _load(a.migrc)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
