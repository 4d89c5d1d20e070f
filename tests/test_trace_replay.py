"""A trace recorded from a real program replays through `run` (issue: traces of real programs)."""
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from tierlab.cli import main
from tierlab.trace import load_trace, record_trace


def test_csv_trace_replays_through_run(tmp_path, capsys):
    p = tmp_path / "t.csv"
    p.write_text("task,page,op\n0,100,r\n0,101,w\n1,100,r\n0,5000,w\n1,5000,r\n")
    assert main(["run", "--machine", "qemu-2node", "--workload", "trace", "--param", f"path={p}",
                 "--format", "json"]) == 0
    c = json.loads(capsys.readouterr().out)["counters"]
    assert c["pgalloc"] == 2          # two written pages; read-only page 100 maps the zero page
    assert c["pgfault"] == 3


def test_bad_trace_names_the_line(tmp_path, capsys):
    p = tmp_path / "bad.csv"
    p.write_text("task,page,op\n0,100,r\n0,x,w\n")
    assert main(["run", "--machine", "qemu-2node", "--workload", "trace", "--param", f"path={p}"]) == 2
    assert "bad.csv:3" in capsys.readouterr().err


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is not installed")
def test_recorded_program_replays_through_run(tmp_path, capsys):
    words = tmp_path / "words.txt"
    words.write_text("".join(f"{(i * 7919) % 1000:04d} line\n" for i in range(300)))
    out = tmp_path / "sort.npz"
    record_trace(["sort", str(words)], str(out), stdout=open(tmp_path / "sorted.txt", "w"))
    tr = load_trace(str(out))
    assert len(tr) > 0
    assert main(["run", "--machine", "qemu-2node", "--workload", "trace", "--param", f"path={out}",
                 "--format", "json"]) == 0
    res = json.loads(capsys.readouterr().out)
    c = res["counters"]
    assert c["pgfault"] > 0 and c["pgalloc"] > 0
    assert c["pgalloc"] <= len(set(tr.page.tolist()))     # one page per distinct written page at most
    assert res["sim_time_s"] > 0


YCSB_C = Path(__file__).resolve().parents[1] / "data" / "traces" / "sqlite" / "ycsb_c.npz"


@pytest.mark.parametrize("lru_gen", [0, 7])
def test_real_trace_through_the_page_cache_is_bounded_by_opt_and_near_lru(lru_gen):
    """The shipped SQLite/YCSB-C pread() trace replayed as read()s of a file under
    POSIX_FADV_RANDOM (every miss allocates exactly one page: pgalloc is the miss count) on a node
    whose page cache holds about a fifth of the file: no policy can miss less than Belady's OPT at
    the largest page-cache size the run reached, and the kernel's LRUs stay within 10 % of exact LRU
    at the size they ended with (measured: classic 0.94x, MGLRU 0.95x at 16 MiB)."""
    from tierlab import Kernel, Machine, simulate
    from tierlab.core import reference as ref
    from tierlab.workloads import make_workload
    m = Machine.from_dict({"name": "one", "nodes": [{
        "name": "dram0", "capacity": "16MiB", "cpus": 2, "adistance": 576, "seq_4k_ns": 250.0,
        "rand_line_ns": 100.0, "write_line_ns": 110.0, "bandwidth_GBps": 100.0}]})
    w = make_workload("trace", {"path": str(YCSB_C), "kind": "file", "fadvise": "random"})
    assert [r.advice for r in w.regions()] == ["random"]
    r = simulate(m, Kernel(lru_gen=lru_gen), w)
    cached = r.timeseries.node0_nr_inactive_file + r.timeseries.node0_nr_active_file
    tr = load_trace(YCSB_C)
    pages = np.repeat(tr.page, tr.count.astype(np.int64))
    misses = int(r.counters["pgalloc"])
    assert misses >= ref.simulate_opt(pages, int(cached.max()))
    assert abs(misses / ref.simulate_lru(pages, int(cached.iloc[-1])) - 1) < 0.10
