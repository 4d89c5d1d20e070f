"""A trace recorded from a real program replays through `run` (issue: traces of real programs)."""
import json
import shutil

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
