"""Sweeps: spec parsing and expansion, bad specs refused before anything runs, local/dask/serial
executors giving the same rows, resume without recomputation, and SIGKILL safety."""
from __future__ import annotations

import glob
import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pandas as pd
import pytest

from tierlab import sweep as S
from tierlab.sweep import executors as E
from tierlab.cli import main as cli_main
from tierlab.core.vmstat import VMSTAT_NAMES
from tierlab.errors import ConfigError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# A tiny run: scale 256 makes node 0 of qemu-2node 4 MiB (1024 pages) and the file 16 MiB.
TINY = textwrap.dedent("""\
    name = "tiny"

    [base]
    machine = "qemu-2node"
    workload = "random-read"
    scale = 256
    seed = 1

    [base.params]
    file_size = "4GiB"
    accesses = {accesses}
    io = "read"
    policy = "bind:0"

    [base.knobs]
    numa_balancing = 2

    [grid]
    "knobs.demotion_enabled" = [0, 1]
    "params.dist" = ["uniform", "zipf"]

    [repeat]
    seeds = {seeds}
    """)


def tiny(tmp_path, accesses=6000, seeds="[1, 2]", name="tiny.toml") -> str:
    # 6000 reads: zipf touches enough of node 0 to cross its watermarks (a share of the node's size
    # at any scale, docs/scaling.md), so every demotion_enabled run demotes
    p = tmp_path / name
    p.write_text(TINY.format(accesses=accesses, seeds=seeds))
    return str(p)


@pytest.fixture(scope="session", autouse=True)
def warm_engine():
    """Load (or, on a cold numba cache, compile: ~1-3 min) the engine once for the whole session;
    worker processes started later load it from the cache in about a second."""
    S.execute_run({"machine": "qemu-2node", "workload": "random-read", "scale": 256, "seed": 0,
                   "params": {"file_size": "4GiB", "accesses": 100, "io": "read", "policy": "bind:0"},
                   "knobs": {"demotion_enabled": 1}})


@pytest.fixture
def no_simulation(monkeypatch):
    from tierlab import api

    def boom(*a, **k):
        raise AssertionError("a simulation ran before the spec was validated")
    monkeypatch.setattr(api.Simulation, "run", boom)
    monkeypatch.setattr(E, "execute_run", boom)


def frame_without_wall(df: pd.DataFrame) -> pd.DataFrame:
    return df.drop(columns=["wall_s"]).reset_index(drop=True)


# ---- specs and expansion ------------------------------------------------------------------------

def test_expand_grid_zip_repeat():
    spec = {
        "name": "x",
        "base": {"machine": "qemu-2node", "workload": "random-read", "scale": 256, "seed": 10,
                 "params": {"file_size": "4GiB", "accesses": 100}, "knobs": {"numa_balancing": 2}},
        "grid": {"knobs.demotion_enabled": [0, 1], "params.dist": ["uniform", "zipf"]},
        "zip": {"params.accesses": [100, 200, 300], "knobs.watermark_scale_factor": [10, 20, 30]},
        "repeat": {"count": 2},
    }
    runs = S.plan(spec)
    assert len(runs) == 2 * 2 * 3 * 2
    assert len({r.key for r in runs}) == len(runs)
    assert [r.seed for r in runs[:4]] == [10, 11, 10, 11]          # seeds fastest, base seed + i
    assert list(runs[0].varied) == ["knobs.demotion_enabled", "params.dist", "params.accesses",
                                    "knobs.watermark_scale_factor"]
    # grid product with the first key slowest, zip rows varied together
    assert [(r.varied["knobs.demotion_enabled"], r.varied["params.dist"]) for r in runs[::6]] == \
        [(0, "uniform"), (0, "zipf"), (1, "uniform"), (1, "zipf")]
    assert [(r.varied["params.accesses"], r.varied["knobs.watermark_scale_factor"]) for r in runs[:6:2]] == \
        [(100, 10), (200, 20), (300, 30)]
    r = runs[-1]
    assert r.config["params"] == {"file_size": "4GiB", "accesses": 300, "dist": "zipf"}
    assert r.config["knobs"] == {"numa_balancing": 2.0, "demotion_enabled": 1.0, "watermark_scale_factor": 30.0}
    assert r.config["seed"] == 11 and r.config["scale"] == 256.0


def test_keys_are_stable_and_normalised(tmp_path):
    a = S.plan(tiny(tmp_path))
    assert [r.key for r in a] == [r.key for r in S.plan(tiny(tmp_path))]
    # the same grid as TOML sub-tables, and knob values spelled differently, give the same keys
    text = (tmp_path / "tiny.toml").read_text().replace(
        '[grid]\n"knobs.demotion_enabled" = [0, 1]\n"params.dist" = ["uniform", "zipf"]',
        '[grid.knobs]\ndemotion_enabled = ["0", 1.0]\n[grid.params]\ndist = ["uniform", "zipf"]')
    b = S.plan(S.load_spec(text))
    assert sorted(r.key for r in a) == sorted(r.key for r in b)
    # a knob set to its kernel default is the same run as leaving it unset
    c = S.plan({"base": {"machine": "qemu-2node", "workload": "random-read", "knobs": {"demotion_enabled": 0}}})
    d = S.plan({"base": {"machine": "qemu-2node", "workload": "random-read"}})
    assert c[0].key == d[0].key
    assert S.run_key(a[0].config, "1.0") != S.run_key(a[0].config, "1.1")


BAD = [
    # (spec text, substrings the error must contain)
    ('name = "b"\ngrids = 1\n[base]\nmachine = "qemu-2node"\nworkload = "random-read"\n',
     ["bad.toml:2:", "unknown key 'grids'", "accepted"]),
    ('[base]\nmachine = "qemu-2node"\nworkload = "random-read"\n[grid]\n"knobs.demotion_enable" = [0, 1]\n',
     ["bad.toml:5:", "unknown knob 'demotion_enable'", "demotion_enabled"]),
    ('[base]\nmachine = "qemu-2node"\nworkload = "random-read"\n[grid]\n',
     ["bad.toml:4:", "empty grid"]),
    ('[base]\nmachine = "qemu-2node"\nworkload = "random-read"\n[grid]\n"params.dist" = []\n',
     ["bad.toml:5:", "'params.dist'", "empty list"]),
    ('[base]\nmachine = "qemu-2node"\nworkload = "random-read"\n[zip]\n'
     '"params.dist" = ["uniform", "zipf"]\n"knobs.demotion_enabled" = [0, 1, 1]\n',
     ["bad.toml:6:", "equal lengths", "'params.dist' has 2", "'knobs.demotion_enabled' has 3"]),
    ('[base]\nmachine = "qemu-2node"\nworkload = "random-read"\n[grid]\nfile_size = ["1GiB"]\n',
     ["bad.toml:5:", "unknown key 'file_size'", "params.file_size", "accepted"]),
    ('[base]\nmachine = "qemu-2node"\nworkload = "random-read"\n[grid]\nseed = [1, 2]\n',
     ["bad.toml:5:", "'seed'", "[repeat]"]),
    ('[base]\nmachine = "qemu-2node"\nworkload = "random-read"\n[grid]\n"knobs.demotion_enabled" = [0, 5]\n',
     ["bad.toml:5:", "knobs.demotion_enabled", "= 5", "out of range", "accepted: 0 .. 1"]),
    ('[base]\nmachine = "qemu-2node"\nworkload = "random-read"\n[grid]\n"params.dist" = ["uniform", "pareto"]\n',
     ["bad.toml:5:", "'params.dist' = pareto", "accepted: uniform, zipf"]),
    ('[base]\nmachine = "qemu-2node"\nworkload = "random-read"\n\n[base.params]\nfil_size = "1GiB"\n',
     ["bad.toml:6:", "unknown param 'fil_size'", "file_size"]),
    ('[base]\nmachine = "qemu-3node"\nworkload = "random-read"\n',
     ["bad.toml:2:", "unknown machine 'qemu-3node'", "qemu-2node"]),
    ('[base]\nmachine = "qemu-2node"\nworkload = "random-read"\nknob = 1\n',
     ["bad.toml:4:", "unknown key 'knob'", "knobs"]),
    ('[base]\nmachine = "qemu-2node"\nworkload = "random-read"\n[repeat]\nseeds = [1, 1]\n',
     ["bad.toml:5:", "seeds", "twice"]),
    ('[base]\nmachine = "qemu-2node"\nworkload = "random-read"\n[repeat]\ncount = 0\n',
     ["bad.toml:5:", "count", ">= 1"]),
    ('[base]\nmachine = "qemu-2node"\nworkload = "random-read"\n[grid]\n"knobs.demotion_enabled" = [0, 1]\n'
     '[zip]\n"knobs.demotion_enabled" = [0, 1]\n',
     ["bad.toml:7:", "varied twice"]),
    ('[base]\nmachine = "qemu-2node"\nworkload = "random-read"\n[grid]\n"knobs.demotion_enabled" = [0, 0]\n',
     ["bad.toml:5:", "appears twice"]),
    ('[base]\nmachine = "qemu-2node"\n', ["bad.toml", "needs 'workload'"]),
    ('[base\nmachine = 1\n', ["bad.toml", "not valid TOML", "line 1"]),
    ('[base]\nmachine = "qemu-2node"\nworkload = "random-read"\nseed = -1\n',
     ["bad.toml:4:", "seed", "-1", "0 .."]),
    ('[base]\nmachine = "qemu-2node"\nworkload = "random-read"\n[repeat]\nseeds = [1, -1]\n',
     ["bad.toml:5:", "seed", "-1", "0 .."]),
    ('[base]\nmachine = "qemu-2node"\nworkload = "random-read"\nscale = nan\n',
     ["bad.toml:4:", "scale", "finite number > 0"]),
    ('[base]\nmachine = "qemu-2node"\nworkload = "random-read"\nscale = inf\n',
     ["bad.toml:4:", "scale", "finite number > 0"]),
    ('[base]\nmachine = "qemu-2node"\nworkload = "random-read"\n[grid]\n"params.accesses" = [10, 1.5]\n',
     ["bad.toml:5:", "'params.accesses' = 1.5", "integer"]),
    ('[base]\nmachine = "qemu-2node"\nworkload = "random-read"\n[grid]\n"costs.fault_ns" = [100, -100]\n',
     ["bad.toml:5:", "'costs.fault_ns' = -100", "0 .."]),
    ('[base]\nmachine = "qemu-2node"\nworkload = "random-read"\n[base.params]\naccesses = 1e13\n',
     ["bad.toml:5:", "accesses", "at most 1e+12"]),
]


@pytest.mark.parametrize("text,expect", BAD, ids=[f"bad{i}" for i in range(len(BAD))])
def test_bad_spec_refused_before_running(tmp_path, no_simulation, text, expect):
    p = tmp_path / "bad.toml"
    p.write_text(text)
    out = tmp_path / "out"
    with pytest.raises(ConfigError) as ei:
        S.run_sweep(str(p), out, executor="serial", progress=False)
    msg = str(ei.value)
    for s in expect:
        assert s in msg, msg
    assert not out.exists()   # nothing written either


def test_cli_dry_run_and_error(tmp_path, capsys):
    spec = tiny(tmp_path)
    assert cli_main(["sweep", spec, "--out", str(tmp_path / "o"), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "tiny: 8 runs, 0 already done, 8 to run" in out
    assert "knobs.demotion_enabled" in out and "params.dist" in out
    assert not (tmp_path / "o").exists()
    bad = tmp_path / "bad.toml"
    bad.write_text('[base]\nmachine = "qemu-2node"\nworkload = "random-read"\n[grid]\n"knobs.nope" = [1]\n')
    assert cli_main(["sweep", str(bad), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("tierlab: error: ") and "bad.toml:5:" in err[0], err


# ---- running ------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def local_sweep(tmp_path_factory):
    """The tiny sweep run once with the local process pool (2 workers)."""
    d = tmp_path_factory.mktemp("local")
    spec = tiny(d)
    out = d / "out"
    df = S.run_sweep(spec, out, executor="local", workers=2, progress=False)
    return spec, out, df


def test_local_sweep_writes_one_row_per_run(local_sweep):
    spec, out, df = local_sweep
    assert df.attrs["sweep"] == {"total": 8, "done_before": 0, "ran": 8, "failed": 0,
                                 "table": str(out / "tiny.parquet")}
    table = pd.read_parquet(out / "tiny.parquet")
    assert len(table) == 8
    assert list(table.columns[:4]) == ["run_key", "knobs.demotion_enabled", "params.dist", "seed"]
    for c in list(VMSTAT_NAMES) + ["sim_time_s", "wall_s", "task_times_s", "cycle_times_s"]:
        assert c in table.columns, c
    assert (table["pgdemote_kswapd"][table["knobs.demotion_enabled"] == 1] > 0).all()
    assert (table["pgdemote_kswapd"][table["knobs.demotion_enabled"] == 0] == 0).all()
    assert (table["sim_time_s"] > 0).all() and (table["wall_s"] > 0).all()
    assert sorted(os.listdir(out / "runs")) == sorted(k + ".json" for k in table.run_key)
    pd.testing.assert_frame_equal(table, df, check_exact=True)
    _, meta = S.read_table(out / "tiny.parquet")
    assert meta["name"] == "tiny" and meta["runs"] == 8 and meta["spec"]["grid"]


def test_second_call_runs_nothing_new(local_sweep, tmp_path):
    spec, out, df = local_sweep
    files = sorted(glob.glob(str(out / "runs" / "*.json")))
    before = {f: (os.stat(f).st_mtime_ns, open(f).read()) for f in files}
    df2 = S.run_sweep(spec, out, executor="local", progress=False)
    assert df2.attrs["sweep"]["ran"] == 0 and df2.attrs["sweep"]["done_before"] == 8
    assert {f: (os.stat(f).st_mtime_ns, open(f).read()) for f in files} == before
    pd.testing.assert_frame_equal(frame_without_wall(df2), frame_without_wall(df), check_exact=True)
    # a third seed: only its 4 runs are new; the serial executor gives the same stored rows
    grown = tiny(tmp_path, seeds="[1, 2, 3]")
    df3 = S.run_sweep(grown, out, executor="serial", progress=False)
    assert df3.attrs["sweep"]["ran"] == 4 and df3.attrs["sweep"]["done_before"] == 8
    assert len(df3) == 12 and (pd.read_parquet(out / "tiny.parquet").run_key == df3.run_key).all()
    pd.testing.assert_frame_equal(frame_without_wall(df3[df3.seed != 3]), frame_without_wall(df), check_exact=True)


def test_dask_gives_the_same_rows(local_sweep, tmp_path):
    from distributed import Client, LocalCluster
    spec, _, df = local_sweep
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=":0") as cluster, \
            Client(cluster) as client:
        ddf = S.run_sweep(spec, tmp_path / "dask", executor=client, progress=False)
    assert ddf.attrs["sweep"]["ran"] == 8
    pd.testing.assert_frame_equal(frame_without_wall(ddf), frame_without_wall(df), check_exact=True)
    # the stored run files carry the same counters too
    for key in df.run_key:
        a = json.load(open(tmp_path / "dask" / "runs" / f"{key}.json"))
        b = json.load(open(local_sweep[1] / "runs" / f"{key}.json"))
        assert a["counters"] == b["counters"] and a["sim_time_s"] == b["sim_time_s"]


def test_failed_run_is_reported_and_not_stored(tmp_path, monkeypatch):
    spec = tiny(tmp_path)
    real = S.execute_run

    def flaky(config):
        if config["seed"] == 2 and config["params"].get("dist") == "zipf":
            raise RuntimeError("boom")
        return real(config)
    monkeypatch.setattr(E, "execute_run", flaky)
    df, stats = S.sweep(spec, tmp_path / "o", executor="serial", progress=False)
    assert stats.ran == 6 and len(stats.failed) == 2 and "boom" in stats.failed[0][1]
    assert len(df) == 6 and len(os.listdir(tmp_path / "o" / "runs")) == 6
    monkeypatch.setattr(E, "execute_run", real)
    df, stats = S.sweep(spec, tmp_path / "o", executor="serial", progress=False)
    assert stats.ran == 2 and not stats.failed and len(df) == 8


def _live_in_group(pgid: int) -> list[int]:
    """Processes of process group `pgid` that are not zombies (from /proc)."""
    live = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                stat = open(f"/proc/{d}/stat").read()
            except OSError:
                continue
            fields = stat[stat.rindex(")") + 2:].split()
            if int(fields[2]) == pgid and fields[0] != "Z":
                live.append(int(d))
    return live


def test_sigkill_loses_no_finished_run(tmp_path):
    spec = tiny(tmp_path, accesses=1_000_000, seeds="[1, 2, 3, 4]")   # 16 runs of ~0.3 s
    out = tmp_path / "out"
    runs = out / "runs"
    cmd = [sys.executable, "-m", "tierlab.sweep", spec, "--out", str(out), "--executor", "local",
           "--workers", "1", "--no-progress"]
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    try:
        deadline = time.time() + 300   # generous: a numba cache invalidated mid-session recompiles
        while not (runs.is_dir() and len([n for n in os.listdir(runs) if n.endswith(".json")]) >= 3):
            assert proc.poll() is None, proc.communicate()
            assert time.time() < deadline, "the sweep stored no 3 runs in 300 s"
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
        # the pool's worker and helpers die with the sweep (PR_SET_PDEATHSIG, pipes closed)
        deadline = time.time() + 10
        while _live_in_group(proc.pid) and time.time() < deadline:
            time.sleep(0.05)
        assert not _live_in_group(proc.pid)
    finally:
        if _live_in_group(proc.pid):
            os.killpg(proc.pid, signal.SIGKILL)
    done = {n: ((runs / n).stat().st_mtime_ns, (runs / n).read_bytes())
            for n in os.listdir(runs) if not n.startswith(".")}
    assert 3 <= len(done) < 16
    for n, (_, data) in done.items():
        assert json.loads(data)["key"] + ".json" == n   # every stored file is complete
    (runs / ".0123456789abcdef01234567.json.x1y2z3.tmp").write_text('{"key": "trunc')  # a kill mid-write

    res = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert f"16 runs: {len(done)} already done, {16 - len(done)} run now" in res.stderr
    after = {n: ((runs / n).stat().st_mtime_ns, (runs / n).read_bytes()) for n in os.listdir(runs)}
    assert not [n for n in after if n.startswith(".")]              # temp files cleaned
    assert len(after) == 16
    assert {n: after[n] for n in done} == done                      # nothing recomputed or lost
    table = pd.read_parquet(out / "tiny.parquet")
    assert len(table) == 16 and set(table.run_key + ".json") == set(after)


def test_experiment_specs_validate():
    """Every spec in experiments/ plans (validates) without running."""
    specs = sorted(glob.glob(os.path.join(ROOT, "experiments", "*.toml")))
    assert any(s.endswith("quickstart.toml") for s in specs)
    for path in specs:
        runs = S.plan(path)
        assert runs, path
