"""The command line: `list`, `run` (formats, Parquet output, errors before any work), `--help`."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pandas as pd
import pytest

from tierlab import cli
from tierlab.cli import main
from tierlab.core.vmstat import VMSTAT_NAMES
from tierlab.output import read_parquet

SMALL = ["run", "--machine", "qemu-2node", "--workload", "random-read", "--scale", "64",
         "--param", "file_size=2GiB", "--param", "accesses=20000",
         "--set", "demotion_enabled=1", "--seed", "3"]


def run_json(capsys, argv) -> dict:
    assert main(argv + ["--format", "json"]) == 0
    return json.loads(capsys.readouterr().out)


def error_line(capsys, argv) -> str:
    """Run a command that must fail on bad input: exit 2, one line on stderr, nothing on stdout."""
    assert main(argv) == 2
    cap = capsys.readouterr()
    assert cap.out == ""
    lines = cap.err.strip().splitlines()
    assert len(lines) == 1, cap.err
    assert lines[0].startswith("tierlab: error: ")
    return lines[0]


@pytest.fixture
def no_simulation(monkeypatch):
    """Fail the test if anything reaches the engine."""
    from tierlab import api

    def boom(*a, **k):
        raise AssertionError("the simulation ran before the input was validated")
    monkeypatch.setattr(api.Simulation, "run", boom)


# ---- list ---------------------------------------------------------------------------------------

def test_list_knobs(capsys):
    assert main(["list", "knobs"]) == 0
    out = capsys.readouterr().out
    for name in ("numa_balancing", "demotion_enabled", "/proc/sys/kernel/numa_balancing"):
        assert name in out
    row = next(line for line in out.splitlines() if line.startswith("min_free_kbytes"))
    assert "computed" in row


def test_list_knobs_fits_80_columns(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["list", "knobs"]) == 0
    out = capsys.readouterr().out
    assert max(len(line) for line in out.splitlines()) <= 80
    assert "/proc/sys/vm/watermark_scale_factor" in out and "computed" in out


def test_list_machines_workloads_costs(capsys):
    assert main(["list", "machines"]) == 0
    out = capsys.readouterr().out
    assert "qemu-2node" in out and "dram-cxl-1tb" in out and "machines" in out
    assert main(["list", "workloads"]) == 0
    out = capsys.readouterr().out
    assert "random-read" in out and "file_size" in out and "1GiB" in out
    assert main(["list", "costs", "--format", "json"]) == 0
    costs = json.loads(capsys.readouterr().out)
    assert {"name", "default", "unit", "source"} <= set(costs[0])
    assert any(c["name"] == "fault_ns" for c in costs)


# ---- bad input: exit 2, one line naming the key, before any work -------------------------------

@pytest.mark.parametrize("extra, names", [
    (["--set", "no_such_knob=1"], ["no_such_knob", "demotion_enabled"]),
    (["--set", "demotion_enabled=7"], ["demotion_enabled", "0 .. 1"]),
    (["--param", "no_such_param=1"], ["no_such_param", "file_size"]),
    (["--param", "file_size=4XB"], ["file_size", "4XB", "GiB"]),
    (["--param", "file_size"], ["--param", "key=value"]),
    (["--set", "numa_balancing"], ["--set", "numa_balancing"]),
    (["--scale", "0"], ["scale"]),
    (["--seed", "-1"], ["seed", "-1", "0 .."]),
    (["--scale", "nan"], ["scale", "nan", "finite number > 0"]),
    (["--scale", "inf"], ["scale", "inf", "finite number > 0"]),
    (["--param", "accesses=1.5"], ["accesses", "1.5", "integer"]),
    (["--param", "accesses=1e20"], ["accesses", "1e20", "integer in 1 .."]),
    (["--param", "accesses=1e13"], ["accesses", "1e13", "at most 1e+12"]),
    (["--cost", "fault_ns=-100"], ["fault_ns", "-100", "0 .."]),
    (["--sample-ms", "0"], ["sample_interval_ms", "0.001"]),
])
def test_bad_input_names_the_key(capsys, no_simulation, tmp_path, extra, names):
    line = error_line(capsys, SMALL + extra + ["--out", str(tmp_path / "r.parquet")])
    for n in names:
        assert n in line
    assert os.listdir(tmp_path) == []      # nothing left behind


def test_unknown_machine_and_workload(capsys, no_simulation):
    line = error_line(capsys, ["run", "--machine", "no-such-machine", "--workload", "random-read"])
    assert "no-such-machine" in line and "qemu-2node" in line
    line = error_line(capsys, ["run", "--machine", "qemu-2node", "--workload", "no-such-workload"])
    assert "no-such-workload" in line and "random-read" in line
    line = error_line(capsys, ["run", "--machine", "/nonexistent/m.toml", "--workload", "random-read"])
    assert "/nonexistent/m.toml" in line


def test_usage_errors_are_one_line(capsys):
    line = error_line(capsys, ["run", "--machine", "qemu-2node"])
    assert "--workload" in line
    line = error_line(capsys, ["list", "nothing"])
    assert "machines" in line


def test_out_in_missing_directory_fails_before_work(capsys, no_simulation, tmp_path):
    line = error_line(capsys, SMALL + ["--out", str(tmp_path / "missing" / "r.parquet")])
    assert "--out" in line


# ---- run ----------------------------------------------------------------------------------------

def test_run_json_has_kernel_counters(capsys):
    d = run_json(capsys, SMALL)
    assert set(d["counters"]) == set(VMSTAT_NAMES)
    assert d["counters"]["pgpgin"] > 0 and d["counters"]["pgalloc"] > 0
    assert d["sim_time_s"] > 0 and len(d["task_times_s"]) == 1
    assert set(d["nr_free_pages"]) == {"0", "1"}
    assert d["config"]["machine"]["name"] == "qemu-2node" and d["config"]["knobs"] == {"demotion_enabled": 1.0}


def test_run_says_when_it_compiles_and_how_long_it_takes(capsys, monkeypatch):
    from tierlab import jitcache
    monkeypatch.setattr(jitcache, "engine_cached", lambda: False)
    assert main(SMALL) == 0
    assert "compiling the simulation engine" in capsys.readouterr().err
    monkeypatch.setattr(jitcache, "engine_cached", lambda: True)
    big = [a if a != "accesses=20000" else "accesses=1e9" for a in SMALL]
    monkeypatch.setattr("tierlab.api.Simulation.run", lambda self, **k: self)
    assert main(big) == 0
    err = capsys.readouterr().err
    assert "1e+09 simulated accesses" in err and "compiling" not in err


def test_same_command_twice_gives_identical_counters(capsys):
    a = run_json(capsys, SMALL)
    b = run_json(capsys, SMALL)
    assert a["counters"] == b["counters"]
    assert a["sim_time_s"] == b["sim_time_s"]


def test_run_table_and_csv(capsys):
    assert main(SMALL) == 0
    out = capsys.readouterr().out
    assert "simulated time" in out and "pgpgin" in out and "node0" in out
    assert main(SMALL + ["--format", "csv"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "counter,value"
    assert len(lines) == 1 + len(VMSTAT_NAMES)
    assert any(line.startswith("pgpgin,") for line in lines)


def test_file_read_cycle_times(capsys):
    d = run_json(capsys, ["run", "--machine", "dram-cxl-1tb", "--workload", "file-read", "--scale", "4096",
                          "--param", "file_size=128GiB", "--param", "cycles=3", "--param", "file_policy=bind:1"])
    assert len(d["cycle_times_s"]) == 3 and all(x > 0 for x in d["cycle_times_s"])


def test_run_out_writes_parquet(capsys, tmp_path):
    out = tmp_path / "r.parquet"
    d = run_json(capsys, SMALL + ["--out", str(out)])
    ts, meta = read_parquet(out)
    assert meta["counters"] == d["counters"] and meta["config"] == d["config"]
    assert meta["format_version"] == 1
    assert list(ts.columns[:2]) == ["time_s", VMSTAT_NAMES[0]] and "node1_nr_free_pages" in ts.columns
    assert len(pd.read_parquet(out)) == len(ts)
    assert sorted(os.listdir(tmp_path)) == ["r.parquet"]


def test_failing_run_leaves_no_file(capsys, tmp_path):
    """An anonymous region larger than the machine, with no swap and no demotion: out of memory."""
    out = tmp_path / "r.parquet"
    line = error_line(capsys, ["run", "--machine", "qemu-2node", "--workload", "random-read",
                               "--scale", "64", "--param", "target=anon", "--param", "file_size=16GiB",
                               "--param", "accesses=1000", "--out", str(out)])
    assert "out of memory" in line
    assert os.listdir(tmp_path) == []


def test_failing_write_leaves_no_file(capsys, tmp_path, monkeypatch):
    import pyarrow.parquet as pq

    def broken(table, path, *a, **k):
        with open(path, "wb") as f:
            f.write(b"PAR1 half a file")
        raise OSError("disk full")
    monkeypatch.setattr(pq, "write_table", broken)
    out = tmp_path / "r.parquet"
    assert main(SMALL + ["--out", str(out)]) == 1
    assert "disk full" in capsys.readouterr().err
    assert os.listdir(tmp_path) == []


# ---- hooks and entry points ---------------------------------------------------------------------

def test_extra_command_registry(capsys, monkeypatch):
    monkeypatch.setitem(cli.COMMANDS, "missing", "tierlab.no_such_module:add_commands")
    assert main(["trace", "--help"]) == 0
    assert "record" in capsys.readouterr().out


def test_python_m_tierlab_help():
    p = subprocess.run([sys.executable, "-m", "tierlab", "--help"], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    for cmd in ("run", "list", "trace", "bench"):
        assert cmd in p.stdout


# ---- bench --------------------------------------------------------------------------------------

def test_bench_measure_and_format():
    from tierlab import bench
    cfg = bench._tiny(dict(bench.bench_configs(quick=True))["random-read"])
    r = bench.measure(cfg, warmup=False)
    assert r["sim_accesses"] == 10_000 and r["wall_s"] > 0 and r["accesses_per_s"] > 0
    text = bench.format_bench({"benchmarks": [{"name": "random-read", **r}],
                               "libcachesim": {"skipped": "not installed"},
                               "startup": {"cold_start_s": 60.0, "warm_start_s": 2.0, "command": "x"}})
    assert "random-read" in text and "skipped" in text and "cold 60.0 s" in text


def test_bench_formats_a_compile_report():
    from tierlab import bench
    from tierlab.codesize import measure
    text = bench.format_bench({"benchmarks": [], "compile": {
        "command": "python -m tierlab run x", "wall_s": 90.0, "kernels_compiled": 300,
        "entry_points_s": {"engine.run": 85.0, "state.init_lists": 0.2},
        "top_kernels_own_s": {"engine.run": 15.0, "memory.fault_in": 2.0}, "size": measure()}})
    assert "cold compile: 90.0 s wall, 300 kernels" in text and "engine.run 85.0" in text
    assert "memory.fault_in 2.0" in text and "benchmark" not in text


def test_compile_recorder_times_a_kernel_compile():
    """A kernel called from Python compiles a twin: one top-level compile event, timed."""
    from numba import njit

    from tierlab.core._jit import OPTIONS
    from tierlab.core import resource
    from tierlab.core.resource import calendar_array
    from tierlab.jitcache import CompileRecorder, kernel_name
    fresh = njit(**OPTIONS)(resource.calendar_book_slow.py_func)     # uncompiled: a compile is sure
    assert kernel_name(fresh) == "resource.calendar_book_slow"
    cal = calendar_array([1.0], 64, 1 << 10)
    with CompileRecorder() as rec:
        fresh(cal, 0, 100, 1.0)
    assert [name for name, _ in rec.top_level] == ["resource.calendar_book_slow"]
    name, inclusive, own = rec.kernels[-1]
    assert name == "resource.calendar_book_slow" and inclusive >= own > 0


def test_bench_libcachesim_comparison_matches():
    pytest.importorskip("libcachesim")
    from tierlab import bench
    r = bench.compare_with_libcachesim(50_000, 5_000, 500)
    assert r["tierlab_miss_ratio"] == r["libcachesim_miss_ratio"] and r["speedup"] > 0


@pytest.mark.slow
def test_bench_quick_json(capsys):
    assert main(["bench", "--quick", "--format", "json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert [b["name"] for b in d["benchmarks"]] == ["file-read", "random-read", "hot-chunks"]
    for b in d["benchmarks"]:
        assert {"sim_accesses", "wall_s", "accesses_per_s"} <= set(b)
    assert {"cold_start_s", "warm_start_s"} <= set(d["startup"])
    assert "speedup" in d["libcachesim"] or "skipped" in d["libcachesim"]


def test_list_reproductions(capsys):
    assert main(["list", "reproductions", "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert all({"name", "description", "default_scale"} <= set(r) for r in rows)


def test_run_anon_folio_orders_with_the_buddy_reports_sizes_and_buddyinfo(capsys):
    out = run_json(capsys, ["run", "--machine", "qemu-2node", "--workload", "anon-browser",
                            "--set", "anon_folio_orders=v2", "--page-alloc-model", "buddy"])
    assert out["config"]["page_alloc_model"] == "buddy" and out["config"]["knobs"]["anon_folio_orders"] == 4.0
    assert out["mthp"]["hugepages-64kB"]["anon_fault_alloc"] > 0
    assert set(out["buddyinfo"]) == {"dram", "cxl"} or len(out["buddyinfo"]) == 2
    line = error_line(capsys, SMALL + ["--page-alloc-model", "slab"])
    assert "--page-alloc-model" in line


def test_run_table_and_csv_show_the_per_size_stats(capsys):
    """The per-size sysfs stats in the table and the csv; knobs printed as they are written."""
    argv = ["run", "--machine", "qemu-2node", "--workload", "anon-browser", "--set", "anon_folio_orders=mthp",
            "--set", "huge_anon_orders_always=16kB,64K"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "anon_folio_orders=mthp, huge_anon_orders_always=16K,64K" in out
    assert "hugepages-64kB" in out and "anon_fault_alloc" in out and "hugepages-32kB" not in out
    assert main(argv + ["--format", "csv"]) == 0
    rows = dict(line.split(",") for line in capsys.readouterr().out.split()[1:])
    assert int(rows["hugepages-64kB/anon_fault_alloc"]) > 0 and "hugepages-32kB/anon_fault_alloc" not in rows


def test_a_policy_knob_without_its_policy_is_refused(capsys):
    line = error_line(capsys, SMALL + ["--set", "huge_anon_orders_always=16K"])
    assert "huge_anon_orders_always" in line and "anon_folio_orders=mthp" in line


def test_compile_progress_stops_when_its_file_is_closed():
    """A progress bar installed for a cold engine whose stderr has closed before engine.run is
    compiled (a test's capture) stops listening instead of failing that compile."""
    import io

    from tierlab.core.engine import run
    from tierlab.jitcache import CompileProgress
    f = io.StringIO()
    progress = CompileProgress(f)
    progress.install()
    f.close()
    progress.started(run)
    progress.ended(run)
    assert progress.bar is None
