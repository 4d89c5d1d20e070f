"""Seed 002: Redis under memtier_benchmark with mainline's time-based hint-fault latency (default)
and the RFC's fault-count latency with patch 2 (patched): the cover letter's Redis-memtier table.

The set-up: bergamo-cxl, numa_balancing=2 with demotion, one Redis server (workloads/memtier.py:
one thread on node 1's CPUs, memory bound to nodes 1 and 2 and NUMA-balanced, as the seed's
microbenchmark: bind|numa_balancing:1,2) under `memtier_benchmark -t 512 -c 20 -n 25000 --ratio
1:1 --key-pattern R:R -d 20000 --pipeline=1000 --distinct-client-seed` with memtier's default key
range (0 .. 10,000,000: ~10 M keys x 20480 bytes = 205 GB, so ~126 GB on node 1 and the rest on
CXL). Two columns, default (hint_fault_latency=time) and patched (fault_count with
scan_restamp_protnone=1, the knobs of reproduce/hint_fault.py), each one simulation from an empty
machine (the seed's runs start Redis empty: their miss rates agree).

What is fitted and what is predicted:
- calibrated: one number, the server's CPU work per command (`request_cpu_ns`), fitted so that the
  default column's Ops/sec matches (secant on the mean time per command, which is linear in it).
- derived: Hits/sec, Misses/sec and KB/sec of both columns: they follow from Ops/sec and the
  key process (a GET misses when no SET of its key came before it: with 128 M SETs over 10 M keys
  memtier's R:R gives ~7.8 % misses over the run; the seed shows 15.6 %, which no reading of
  memtier's key generator gives -- e.g. a Redis that stored only ~90 % of the keys would); KB/sec
  follows from them and the RESP byte counts. The latency rows are memtier's HdrHistogram figures
  (it drops latencies >= 2^20 us, so they describe only the commands answered within 1.05 s of
  their creation, the run's first rounds: indicative, nothing is fitted to them; p99 and p99.9 are
  bucket edges near 2^20 us). The NUMA, promotion and demotion counters come from the kernel model.
- predicted: every other row of both columns (the patched Ops/sec, the latencies, the counters).

At --scale F keys and connections are divided by F (workloads/memtier.py), counters are multiplied
by F, rates need no correction, latencies are in full-size time. Valid while F <= 128 (a NUMA scan
window of scan_size_mb / F is at least the 512-page range alignment) and F divides 10240
connections; the default is 16.
"""
from __future__ import annotations

import multiprocessing
from concurrent.futures import ProcessPoolExecutor

from ..api import Simulation
from ..kernel import Kernel
from ..machine import Machine
from ..workloads import make_workload
from . import published, register, table, worker_count
from .hint_fault import KNOBS, PARAMS, PATCHED, scan_walk

E = "hint-fault-memtier"
COUNTERS = ("numa_pte_updates", "numa_hint_faults", "numa_hint_faults_local", "numa_pages_migrated",
            "pgpromote_success", "pgpromote_candidate", "pgdemote_kswapd", "pgdemote_direct",
            "numa_should_migrate_calls", "numa_latency_rejects")
# where a candidate stops besides promotion (tierlab's counters, vmstat.py): in attrs, not scored
REFUSALS = ("promote_rate_limited_pages", "misplaced_no_room_pages", "misplaced_isolate_failed_pages",
            "pgmigrate_fail")
REPORT = {"ops_per_sec": "Ops/sec", "hits_per_sec": "Hits/sec", "misses_per_sec": "Misses/sec",
          "avg_latency_ms": "Avg. Latency", "p50_latency_ms": "p50 Latency", "p99_latency_ms": "p99 Latency",
          "p999_latency_ms": "p99.9 Latency", "kb_per_sec": "KB/sec"}
CPU_START_NS = 16000.0


def run_column(scale: float, patched: bool, request_cpu_ns: float, requests: int = 25000, seed: int = 0,
               **params) -> dict:
    """One column at `scale` from an empty machine: memtier's report and the counters (full-size)."""
    w = make_workload("memtier", dict(PARAMS, requests=requests, request_cpu_ns=int(round(request_cpu_ns)), **params),
                      scale=scale)
    knobs = dict(KNOBS, **(PATCHED if patched else {}))
    sim = Simulation(Machine.load("bergamo-cxl").scaled(scale), Kernel(**knobs), w, seed=seed,
                     sample_interval_ms=1000.0)
    res = sim.run().result()
    out = {k: float(res.counters[k]) * scale for k in COUNTERS + REFUSALS}
    out.update({k: float(res.summary[v]) for k, v in REPORT.items()})
    for k in ("latency_count", "duration_s", "rounds", "latency_truncated"):
        out[k] = res.summary[k]
    out["scan_walk"] = scan_walk(res.counters, int(res.processes.numa_scan_seq[0]))
    out["latency_count"] *= scale
    return out


def calibrate(target_ops: float, scale: float, iters: int = 3, **kw):
    """Fit request_cpu_ns so that the default column's Ops/sec is `target_ops`: the time per command
    is linear in it (every command pays it once), so a secant on 1/ops converges in a step or two.
    Returns (request_cpu_ns, the default column at it)."""
    def f(x):
        col = run_column(scale, False, x, **kw)
        return 1e9 / col["ops_per_sec"] - 1e9 / target_ops, col

    x0 = CPU_START_NS
    f0, c0 = f(x0)
    x1 = x0 - f0
    f1, c1 = f(x1)
    best = min((abs(f0), x0, c0), (abs(f1), x1, c1), key=lambda t: t[0])
    for _ in range(iters - 2):
        if f1 == f0 or best[0] < 1e-4 * 1e9 / target_ops:
            break
        x0, x1, f0 = x1, x1 - f1 * (x1 - x0) / (f1 - f0), f1
        f1, c1 = f(x1)
        if abs(f1) < best[0]:
            best = (abs(f1), x1, c1)
    return best[1], best[2]


def _patched(scale, cpu, kw):
    return run_column(scale, True, cpu, **kw)


@register(E, "seed 002: Redis under memtier_benchmark (-t 512 -c 20 -n 25000 --ratio 1:1 -d 20000 "
             "--pipeline=1000) on bergamo-cxl, time-based (default) vs fault-count hint-fault latency with "
             "patch 2 (patched): ops/s, hits, misses, latencies, KB/s and the NUMA counters", default_scale=16.0,
          data=("hint_fault_memtier.csv",), quick={"scale": 128, "requests": 2500},
          fitted=lambda e, m: ("request_cpu_ns",))
def reproduce(scale: float = 16.0, progress: bool = False, jobs: int | None = None,
              calibrate_scale: float | None = None, **kw):
    """Calibrate request_cpu_ns on the default column at `calibrate_scale` (default: the run's scale,
    or 16 for a larger run), then the default column at `scale` (the calibration's own run when the
    scales are equal) and the patched one with the same CPU cost. `kw` goes to the workload (e.g.
    requests= for a shorter test run). With jobs > 1 the patched column runs in a forked worker."""
    pub = published("hint_fault_memtier.csv")
    target = float(pub[(pub.experiment == f"{E}-default") & (pub.metric == "ops_per_sec")].published.iloc[0])
    cal_scale = max(scale, 16.0) if calibrate_scale is None else calibrate_scale
    cpu, cal_col = calibrate(target, cal_scale, **kw)
    if worker_count(jobs) > 1:
        ctx = multiprocessing.get_context("fork")
        with ProcessPoolExecutor(1, mp_context=ctx) as ex:
            other = ex.submit(_patched, scale, cpu, kw)
            default = cal_col if cal_scale == scale else run_column(scale, False, cpu, **kw)
            patched = other.result()
    else:
        default = cal_col if cal_scale == scale else run_column(scale, False, cpu, **kw)
        patched = _patched(scale, cpu, kw)
    sim = {}
    for col, vals in (("default", default), ("patched", patched)):
        for key, v in vals.items():
            if key != "scan_walk":
                sim[(f"{E}-{col}", key)] = v
    # hits, misses and KB/s are the column's Ops/s split by the key process and the RESP bytes
    out = table(pub, sim, calibrated={(f"{E}-default", "ops_per_sec")},
                derived={(f"{E}-{col}", m) for col in ("default", "patched")
                         for m in ("hits_per_sec", "misses_per_sec", "kb_per_sec")})
    out.attrs["request_cpu_ns"] = cpu
    out.attrs["scale"] = scale
    out.attrs["calibrate_scale"] = cal_scale
    for col, vals in (("default", default), ("patched", patched)):
        for key in ("numa_should_migrate_calls", "numa_latency_rejects", "latency_count", "duration_s") + REFUSALS:
            out.attrs[f"{key}_{col}"] = vals[key]
        for key, v in vals["scan_walk"].items():
            out.attrs[f"{key}_{col}"] = v
    return out
