"""Seed 000: promotion of unmapped page-cache folios, the 128 GB file-read table.

Machine dram-cxl-1tb (768 GB DRAM + 256 GB CXL), one process reading a 128 GiB file linearly in
read() calls of MAX_RW_COUNT (2 GiB - 4 KiB), 50 cycles; the page cache is bound to CXL for the CXL
runs and to DRAM for the DRAM runs (the seed uses mbind before the CXL runs).

What is fitted and what is predicted:
- calibrated: the per-page copy cost seq_4k_ns of each node, fitted so that the DRAM-base and
  CXL-base cycle times match the seed's columns 1 and 4 (secant iterations on small runs);
- predicted: everything else -- columns 2, 3 and 5, the per-cycle times while promoting, the number
  of promotion rounds, the unlimited (v1/v2) variant, mechanism-off, list_add vs list_add_tail.

Modelling choices that matter here (each stated, none fitted):
- read_size = 2 GiB. The seed does not give its buffer size; read() moves at most MAX_RW_COUNT
  per call, and with v3's per-task cap (promo_count >= 65536 pages per call) that gives 64 calls of
  at most 65536 promotions per 128 GiB cycle: 8 cycles to promote the file, which is the seed's
  "~10 rounds". A smaller buffer promotes faster (see the notebook's read_size sweep).
- Steady-state runs (DRAM base, promo on, top-tier check, CXL base, post-promotion, mechanism off)
  take the mean over `steady_cycles` cycles: the model's cycle times are identical once steady, so
  the mean over 3 equals the mean over 50. Only the promoting run simulates all 50 cycles.
- The seed's "first 10 cycles during promotion" are aligned with the first simulated cycle that
  promotes (the seed's set-up reads are not described; in the model the first candidate call comes
  on the 4th access of a page, folio_mark_accessed's referenced -> active -> referenced -> hook).
- Times at --scale F are multiplied by F: every per-page cost is the same, the file is F times
  smaller. Valid while F <= 64 (the 2 GiB read() calls and the 1 GiB free-space margin of
  pgdat_free_space_enough() do not scale).
"""
from __future__ import annotations

import numpy as np

from ..api import Simulation
from ..kernel import Kernel
from ..machine import Machine
from ..workloads import make_workload
from . import published, register, table

FILE = "128GiB"
READ_SIZE = "2GiB"
CYCLES = 50
DRAM, CXL = 0, 1


def _sim(machine, knobs, policy_node, cycles, scale, order=None, cap=None):
    params = {"file_size": FILE, "read_size": READ_SIZE, "cycles": cycles, "file_policy": f"bind:{policy_node}"}
    w = make_workload("file-read", params, scale=scale)
    return Simulation(machine, Kernel(**knobs), w, seed=0, sample_interval_ms=1000.0 / scale)


def _cycle_times(sim, scale):
    res = sim.result()
    m = res.marks_s[res.marks_s.task == 0].time_s.to_numpy()
    return np.diff(m) * scale   # marks: end of warm-up read, then end of each cycle


def _steady(machine, knobs, node, scale, cycles):
    sim = _sim(machine, knobs, node, cycles, scale).run()
    return float(_cycle_times(sim, scale).mean()), sim


def calibrate(machine: Machine, target_dram: float, target_cxl: float, scale: float = 16.0, iters: int = 3):
    """Fit seq_4k_ns of the DRAM and CXL nodes to the two baseline columns (secant method)."""
    m = machine.scaled(scale)
    for node, target in ((DRAM, target_dram), (CXL, target_cxl)):
        x0 = m.nodes[node].seq_4k_ns
        f = lambda x: _steady(m.with_costs(seq_4k_ns=[x if i == node else None for i in range(m.nr_nodes)]),
                              {}, node, scale, 2)[0] - target
        x1 = x0 * 1.05
        f0, f1 = f(x0), f(x1)
        for _ in range(iters):
            if f1 == f0:
                break
            x0, x1, f0 = x1, x1 - f1 * (x1 - x0) / (f1 - f0), f1
            f1 = f(x1)
        m = m.with_costs(seq_4k_ns=[x1 if i == node else None for i in range(m.nr_nodes)])
    fitted = [nd.seq_4k_ns for nd in m.nodes]
    return machine.with_costs(seq_4k_ns=fitted), fitted


@register("pagecache-promotion-128g",
          "seed 000: 128 GB file read on 768 GB DRAM + 256 GB CXL, page-cache promotion table (5 columns, "
          "first 10 promotion cycles, unlimited variant, mechanism off, add vs add_tail)")
def reproduce(scale: float = 1.0, progress: bool = False, steady_cycles: int = 3, cycles: int = CYCLES):
    pub = published("pagecache_promotion_128g.csv")
    P = {r.metric: r.published for r in pub.itertuples() if r.experiment == "pagecache-promotion-128g"}
    machine, fitted = calibrate(Machine.load("dram-cxl-1tb"), P["dram_base_s_per_cycle"], P["cxl_base_s_per_cycle"])
    m = machine.scaled(scale)
    tiering = {"numa_balancing": 2}
    promo = {"numa_balancing": 2, "pagecache_promotion_enabled": 1}
    E = "pagecache-promotion-128g"
    sim = {}
    sim[(E, "dram_base_s_per_cycle")], _ = _steady(m, {}, DRAM, scale, steady_cycles)
    sim[(E, "promo_on_s_per_cycle")], _ = _steady(m, tiering, DRAM, scale, steady_cycles)
    sim[(E, "toptier_check_s_per_cycle")], _ = _steady(m, promo, DRAM, scale, steady_cycles)
    sim[(E, "cxl_base_s_per_cycle")], _ = _steady(m, {}, CXL, scale, steady_cycles)

    # the promoting run: v3 (per-task cap, list_add_tail), all cycles
    run = _sim(m, promo, CXL, cycles, scale).run()
    times = _cycle_times(run, scale)
    res = run.result()
    ts = res.timeseries
    promoting = _promoting_cycles(run, res, scale)
    first = int(np.argmax(promoting)) if promoting.any() else 0
    for i in range(10):
        if first + i < len(times):
            sim[(E, f"cycle_{i + 1}_s")] = times[first + i]
    last = len(promoting) - 1 - int(np.argmax(promoting[::-1])) if promoting.any() else 0
    after = times[last + 1:]
    sim[(E, "post_promotion_s_per_cycle")] = float(after.mean()) if len(after) else float("nan")
    sim[(E, "capped_promotion_rounds")] = int(promoting.sum())
    # mechanism off (sysfs pagecache_promotion_enabled=0) after promotion, same state
    run.set_knobs(pagecache_promotion_enabled=0)
    run.workload.values["cycles"] = steady_cycles
    before = len(times)
    run.state.marks[:] = 0
    run.state.nr_marks[:] = 0
    run.run(_more_cycles(run))
    off = np.diff(run.state.marks[0, :int(run.state.nr_marks[0])]) / 1e9 * scale
    sim[(E, "mechanism_off_s_per_cycle")] = float(off.mean()) if len(off) else float("nan")

    # list_add (earlier versions): post-promotion overhead against list_add_tail
    add = _sim(m, {**promo, "pagecache_promotion_order": "add"}, CXL, cycles, scale).run()
    t_add = _cycle_times(add, scale)
    sim[(E, "add_order_overhead")] = float(t_add[-steady_cycles:].mean() / times[-steady_cycles:].mean() - 1)

    # unlimited variant (v1/v2): no per-task cap
    U = "pagecache-promotion-128g-unlimited"
    unl = _sim(m, {**promo, "pagecache_promotion_cap": "unlimited"}, CXL, 6, scale).run()
    t_unl = _cycle_times(unl, scale)
    p_unl = _promoting_cycles(unl, unl.result(), scale)
    sim[(U, "peak_cycle_s")] = float(t_unl.max())
    sim[(U, "promotion_rounds")] = int(p_unl.sum())
    out = table(pub, sim, calibrated={(E, "dram_base_s_per_cycle"), (E, "cxl_base_s_per_cycle")})
    out.attrs["calibrated_seq_4k_ns"] = fitted
    out.attrs["first_promotion_cycle"] = first + 1
    out.attrs["cycle_times_s"] = times.tolist()
    out.attrs["cycle_times_add_s"] = t_add.tolist()
    out.attrs["cycle_times_unlimited_s"] = t_unl.tolist()
    return out


def _promoting_cycles(sim, res, scale) -> np.ndarray:
    """Which cycles promoted any page: pgpromote_success sampled at each cycle's end mark."""
    marks = res.marks_s[res.marks_s.task == 0].time_s.to_numpy()
    ts = res.timeseries
    if len(ts) == 0:
        return np.zeros(max(0, len(marks) - 1), bool)
    t = ts.time_s.to_numpy()
    prom = ts.pgpromote_success.to_numpy()
    at = np.interp(marks, t, prom, left=0)
    # the final total is exact; sampled values lag by at most one sample interval
    at[-1] = res.counters["pgpromote_success"]
    return np.diff(at) > 0


def _more_cycles(sim):
    """Chunks for `steady_cycles` more read passes of the same file (no warm-up)."""
    w = sim.workload
    w.values["warmup"] = 0
    return w.chunks(0)
