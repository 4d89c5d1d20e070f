"""The model's scan-period series for an oracle suite entry, on the machine a guest transcript had
(capacities = the guest's MemFree, its min_free_kbytes), without changing tierlab/core: the
workload's chunks are made small (random-read: 20,000 accesses) and the task's numa_scan_period,
numa_scan_seq, numa_scan_period_max and the mm's numa_scan_seq are read at every chunk; a 1 ms
time series of numa_pte_updates shows the task_numa_work() calls that updated PTEs.

    PYTHONPATH=. python experiments/oracle_scan_period_model.py promote-anon console.txt [R] [out.json] [chunk_accesses]

(R: run the time-matched model, every NUMA-balancing time knob divided by R.) Used for the scan
period section of docs/oracle.md (2026-11-28)."""
import sys, json
import numpy as np
from tierlab import api
from tierlab.oracle import guest as G
from tierlab.oracle.compare import model_machine
from tierlab.oracle.console import parse_console
from tierlab.oracle.suite import ENTRIES, time_matched_knobs
from tierlab.machine import Machine
name, transcript = sys.argv[1], sys.argv[2]
r = float(sys.argv[3]) if len(sys.argv) > 3 and sys.argv[3] else None
e = next(x for x in ENTRIES if x.name == name)
g = parse_console(open(transcript).read())
m = G.guest_machine(Machine.load(e.machine).scaled(e.scale), e.cpus)
mm = model_machine(m, g)
knobs = dict(e.knobs, min_free_kbytes=g.knobs.get("min_free_kbytes"))
if r:
    knobs = time_matched_knobs(knobs, r)
cfg = {"machine": mm.to_dict(), "workload": e.workload, "params": e.params, "knobs": knobs, "scale": e.scale,
       "seed": e.seed, "sample_interval_ms": 1.0}
sim = api.build(cfg)
if hasattr(sim.workload, "chunk_accesses"):
    sim.workload.chunk_accesses = int(sys.argv[5]) if len(sys.argv) > 5 else 20000
snaps = []
def cb(n):
    s = sim.state
    snaps.append((int(s.sys[0]["now"]), [int(x) for x in s.task["numa_scan_period"]], [int(x) for x in s.mm["numa_scan_seq"]],
                  [int(x) for x in s.task["numa_scan_seq"]], [int(x) for x in s.task["numa_scan_period_max"]]))
sim.run(progress=cb)
res = sim.result()
s = sim.state
snaps.append((int(s.sys[0]["now"]), [int(x) for x in s.task["numa_scan_period"]], [int(x) for x in s.mm["numa_scan_seq"]],
              [int(x) for x in s.task["numa_scan_seq"]], [int(x) for x in s.task["numa_scan_period_max"]]))
ts = res.timeseries
print("sim_time_s", res.sim_time_s, "chunks", len(snaps))
print("ts columns", [c for c in ts.columns if "numa" in c or "time" in c][:20])
col = "numa_pte_updates"
out = {"sim_time_s": res.sim_time_s, "snaps": snaps,
       "counters": {k: int(res.counters.get(k, 0)) for k in ("numa_pte_updates", "numa_hint_faults", "pgpromote_success")}}
if col in ts.columns:
    tcol = ts.columns[0] if "time" in ts.columns[0] else None
    x = ts[col].to_numpy()
    d = np.diff(np.concatenate([[0], x])) if x.size and x[-1] >= x.max() else x
    jumps = [(float(ts.index[i]) if tcol is None else float(ts[tcol].iloc[i]), int(d[i])) for i in np.nonzero(d)[0]]
    out["pte_jumps"] = jumps
json.dump(out, open(sys.argv[4] if len(sys.argv) > 4 else "/tmp/scanper/model.json", "w"))
prev = None
for t, per, mseq, tseq, pmax in snaps:
    key = (per, mseq, tseq, pmax)
    if key != prev:
        print(f"{t/1e9:.4f}s period={per} mm_seq={mseq} task_seq={tseq} pmax={pmax}")
        prev = key
print("pte jumps:", out.get("pte_jumps", [])[:60])
