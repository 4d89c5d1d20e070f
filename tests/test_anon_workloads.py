"""anon-build and anon-browser: the recorded VMA lifecycles replayed (data/anon, tierlab.trace.vmalog),
the drawn ones following the recorded distributions (fixed seeds), end-to-end runs, refusals."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as hst

from simkit import DRAM, counters, machine
from test_properties import check_invariants

from tierlab.api import Simulation
from tierlab.core.ops import CTRL_ARG_SHIFT, CTRL_BRK, CTRL_EXIT, CTRL_KIND_MASK, CTRL_MMAP, CTRL_MUNMAP, OP_CTRL, OP_STORE
from tierlab.errors import ConfigError
from tierlab.kernel import Kernel
from tierlab.workloads import make_workload
from tierlab.workloads._anon import KINDS, load_recording, touch_runs


def stream_stats(w):
    """Per task: mmaps (slot, pages), munmaps, brks and the stores of its op stream."""
    out = []
    for ch in w.chunks(0):
        for t in range(ch.offsets.shape[0] - 1):
            a, b = int(ch.offsets[t]), int(ch.offsets[t + 1])
            if a == b:
                continue
            pg, op = ch.pages[a:b], ch.ops[a:b]
            ctl = (op & OP_CTRL) != 0
            kind = op[ctl] & CTRL_KIND_MASK
            arg = pg[ctl]
            out.append(dict(task=t, mmaps=arg[kind == CTRL_MMAP] >> CTRL_ARG_SHIFT,
                            munmaps=int((kind == CTRL_MUNMAP).sum()), brks=arg[kind == CTRL_BRK] >> CTRL_ARG_SHIFT,
                            exits=int((kind == CTRL_EXIT).sum()), stores=pg[op == OP_STORE]))
    return out


def ks_statistic(x, y):
    """Two-sample Kolmogorov-Smirnov D."""
    x, y = np.sort(x), np.sort(y)
    v = np.union1d(x, y)
    return float(np.abs(np.searchsorted(x, v, "right") / x.size - np.searchsorted(y, v, "right") / y.size).max())


@settings(max_examples=200, deadline=None)
@given(hst.integers(1, 300), hst.data())
def test_touch_runs_lay_out_exactly_the_touched_pages_in_separate_runs(pages, data):
    touched = data.draw(hst.integers(0, pages))
    runs = data.draw(hst.integers(1, 50))
    seed = data.draw(hst.integers(0, 2**16))
    r = touch_runs(np.random.default_rng(seed), pages, touched, runs)
    assert sum(n for _, n in r) == touched
    if touched:
        assert len(r) == min(runs, touched, pages - touched + 1)
    for (o1, n1), (o2, _) in zip(r, r[1:]):
        assert o2 >= o1 + n1 + 1          # runs are separate: a gap of at least one page
    assert all(o >= 0 and n >= 1 and o + n <= pages for o, n in r)


def test_trace_replays_the_recorded_process_exactly():
    """source=trace on the single-file compile (gcc -O2 -c pngtest.c): per process, the mmaps map the
    recorded VMA sizes, the stores touch exactly the recorded touched pages, the munmaps are the
    recorded ones, and the heap grows by the recorded brk steps."""
    rec = load_recording("cc1")
    w = make_workload("anon-build", {"recording": "cc1", "jobs": 2})
    progs = rec.procs[~rec.procs["comm"].isin(["", "make"])].sort_values(["start_s", "proc"])
    stats = stream_stats(w)
    assert [s["task"] for s in stats] == list(range(len(progs)))
    for s, (_, p) in zip(stats, progs.iterrows()):
        v = rec.vmas[(rec.vmas["proc"] == p["proc"]) & rec.vmas["kind"].isin(KINDS)]
        heap_steps = rec.steps[rec.steps["proc"] == p["proc"]]["heap_pages"].to_numpy()
        assert s["stores"].size == int(v["touched_pages"].sum())   # (page ids recycle across VMAs)
        assert s["munmaps"] == int((~v["unmapped_by"].isin(["exit", "exec"])).sum())
        mm = v[v["kind"] != "brk"]["pages"].to_numpy()
        heap_first = [int(heap_steps[heap_steps > 0][0])] if (heap_steps > 0).any() else []
        assert sorted(s["mmaps"].tolist()) == sorted(mm.tolist() + heap_first)
        assert s["exits"] == 1


def test_trace_replays_the_whole_build():
    """Every replayed process of the recorded build: the stores are its touched pages, the brk ops its
    heap moves after the first (which maps the heap), the munmaps its recorded ones."""
    rec = load_recording("kbuild")
    keep = rec.procs[~rec.procs["comm"].isin(["", "make"])]["proc"]
    v = rec.vmas[rec.vmas["proc"].isin(keep) & rec.vmas["kind"].isin(KINDS)]
    st = rec.steps[rec.steps["proc"].isin(keep)]
    heaps = st[st["heap_pages"] > 0]["proc"].nunique()
    stats = stream_stats(make_workload("anon-build", {}))
    assert sum(s["stores"].size for s in stats) == int(v["touched_pages"].sum())
    assert sum(s["munmaps"] for s in stats) == int((~v["unmapped_by"].isin(["exit", "exec"])).sum())
    first_pos = st.groupby("proc")["heap_pages"].apply(lambda x: int((x > 0).to_numpy().argmax()))
    assert sum(s["brks"].size for s in stats) >= len(st) - heaps - int(first_pos.sum())
    assert sum(s["exits"] for s in stats) == len(keep)


def test_dist_follows_the_recorded_distributions():
    """source=dist (fixed draw_seed): the sizes of the mapped VMAs and their touched shares follow the
    recorded ones (two-sample KS at alpha = 0.001; the means within 15 %), and the program mix is the
    recorded one."""
    rec = load_recording("kbuild")
    w = make_workload("anon-build", {"source": "dist", "procs": 600, "draw_seed": 7})
    pes = w._plan()[0]
    sizes, shares = [], []
    for pe in pes:
        touched = {}
        for _, kind, vma, a, b in pe.events:
            if kind == 2:
                touched[vma] = touched.get(vma, 0) + b
        for vma, ext in pe.extent.items():
            sizes.append(ext)
            shares.append(touched.get(vma, 0) / ext)
    v = rec.vmas[rec.vmas["kind"].isin(KINDS) & ~rec.vmas["proc"].isin(
        rec.procs[rec.procs["comm"].isin(["", "make"])]["proc"])]
    rs = v["pages"].to_numpy()
    rsh = v["touched_pages"].to_numpy() / rs
    n, m = len(sizes), len(rs)
    crit = 1.95 * np.sqrt((n + m) / (n * m))
    assert ks_statistic(np.array(sizes), rs) < crit
    assert ks_statistic(np.array(shares), rsh) < crit
    assert abs(np.mean(shares) - rsh.mean()) < 0.15 * rsh.mean()
    comms = np.array([pe.comm for pe in pes])
    rc = rec.procs[~rec.procs["comm"].isin(["", "make"])]["comm"]
    for c in ("cc1", "sh", "gcc"):
        p = (rc == c).mean()
        assert abs((comms == c).mean() - p) < 4 * np.sqrt(p * (1 - p) / len(pes)) + 1e-9


def test_browser_dist_follows_the_recorded_vmas():
    """anon-browser source=dist: as many VMAs of each kind as recorded; the commits' sizes and touched
    shares follow the recorded ones (KS at alpha = 0.001)."""
    rec = load_recording("node")
    pe = make_workload("anon-browser", {"source": "dist", "draw_seed": 3})._plan()[0][0]
    proc = int(rec.procs.sort_values("anon_touched_pages").iloc[-1]["proc"])
    v = rec.vmas[(rec.vmas["proc"] == proc) & rec.vmas["kind"].isin(KINDS)]
    assert len(pe.extent) == len(v)
    touched = {}
    for _, kind, vma, a, b in pe.events:
        if kind == 2:
            touched[vma] = touched.get(vma, 0) + b
    sizes = np.array(list(pe.extent.values()))
    shares = np.array([touched.get(k, 0) / n for k, n in pe.extent.items()])
    rs, rsh = v["pages"].to_numpy(), (v["touched_pages"] / v["pages"]).to_numpy()
    crit = 1.95 * np.sqrt(2 / len(v))
    assert ks_statistic(sizes, rs) < crit and ks_statistic(shares, rsh) < crit


def small_run(workload, params, pages=1 << 17):
    m = machine((pages, 2, DRAM))
    sim = Simulation(m, Kernel(), make_workload(workload, params))
    sim.run()
    return sim


@pytest.mark.parametrize("params", [
    {"procs": 16, "jobs": 8, "source": "trace"},
    {"procs": 16, "jobs": 8, "source": "dist"},
    {"recording": "cc1", "jobs": 2},
])
def test_anon_build_runs_end_to_end_deterministically(params):
    """The first 16 processes of the recorded build (or drawn ones), 8 at a time, and the single-file
    compile: every touched page faults, every exit gives its memory back (all memory free at the end,
    no RSS left), the invariants hold, and a second run is bit-identical."""
    a = small_run("anon-build", params)
    b = small_run("anon-build", params)
    ca, cb = counters(a), counters(b)
    assert ca == cb and a.result().sim_time_s == b.result().sim_time_s
    stores = sum(s["stores"].size for s in stream_stats(make_workload("anon-build", params)))
    assert ca["pgfault"] >= stores > 0
    s = a.state
    assert int(s.mm["rss_anon"].sum()) == 0
    assert (s.pgdat["free"] == s.pgdat["managed"]).all()
    check_invariants(a)


def test_user_time_adds_the_recorded_gaps_as_cpu_work():
    """user_time=x: CPU work of x times the recorded gap before each event; the faults stay the same."""
    a = small_run("anon-build", {"recording": "cc1", "jobs": 2})
    b = small_run("anon-build", {"recording": "cc1", "jobs": 2, "user_time": 0.01})
    assert counters(a)["pgfault"] == counters(b)["pgfault"]
    # the cc1 process lived 3.93 s under the tracers: 1 % of it is ~39 ms of CPU work
    assert b.result().sim_time_s - a.result().sim_time_s > 0.03


def test_free_waves_keep_the_cpus_busy_and_fault_the_same():
    """waves=phase waits for a wave's slowest process; waves=free does not: the same faults and CPU
    time in less simulated time."""
    p = {"procs": 48, "jobs": 8, "user_time": 0.05}
    a = small_run("anon-build", p | {"waves": "phase"})
    b = small_run("anon-build", p | {"waves": "free"})
    assert counters(a)["pgfault"] == counters(b)["pgfault"]
    ta, tb = a.result(), b.result()
    assert abs(ta.tasks["runtime_s"].sum() - tb.tasks["runtime_s"].sum()) < 1e-3 * ta.tasks["runtime_s"].sum()
    assert tb.sim_time_s < ta.sim_time_s


def test_anon_browser_runs_and_unmaps_often():
    w = make_workload("anon-browser", {})
    st = stream_stats(w)
    assert len(st) == 1 and st[0]["munmaps"] > 500 and st[0]["exits"] == 1
    sim = small_run("anon-browser", {}, pages=1 << 18)
    assert counters(sim)["pgfault"] >= st[0]["stores"].size
    assert (sim.state.pgdat["free"] == sim.state.pgdat["managed"]).all()


@pytest.mark.parametrize("params, match", [
    ({"jobs": 0}, "jobs"), ({"source": "replay"}, "source"), ({"recording": "nope"}, "recording"),
    ({"procs": 5000}, "procs"), ({"user_time": -1}, "user_time"),
])
def test_bad_params_are_refused_naming_the_key(params, match):
    with pytest.raises(ConfigError, match=match):
        make_workload("anon-build", params)


@pytest.mark.parametrize("name", ["anon-build", "anon-browser"])
def test_a_scale_is_refused(name):
    with pytest.raises(ConfigError, match="scale"):
        make_workload(name, {}, scale=16)
