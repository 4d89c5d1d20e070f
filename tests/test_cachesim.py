"""`cachesim` and the one-pass LRU miss-ratio curve; streaming trace files (chunks, compression)."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tierlab
from tierlab.cli import main
from tierlab.core import reference
from tierlab.trace import (
    PageIds, StackDistances, Trace, TraceFile, cachesim, load_trace, lru_mrc,
    save_trace, save_trace_chunks, write_oracle_general,
)


def trace_of(pages, count=None) -> Trace:
    page = np.asarray(pages, np.int64)
    n = len(page)
    return Trace(np.zeros(n, np.int32), page, np.zeros(n, np.uint8),
                 np.ones(n, np.uint32) if count is None else np.asarray(count, np.uint32), {})



def zipf_pages(n, n_pages, seed):
    rng = np.random.default_rng(seed)
    return rng.permutation(n_pages)[np.minimum(rng.zipf(1.2, n) - 1, n_pages - 1)]


# ---------------------------------------------------------------------------------------------
# the miss-ratio curve equals exact LRU


@settings(deadline=None, max_examples=80)
@given(st.lists(st.tuples(st.integers(0, 30), st.integers(1, 3)), max_size=150))
def test_prop_mrc_equals_exact_lru_at_every_size(recs):
    pages = [p for p, _ in recs]
    counts = [c for _, c in recs]
    mrc = lru_mrc(trace_of(pages, counts))
    expanded = np.repeat(np.asarray(pages, np.int64), np.asarray(counts, np.int64))
    assert len(mrc) == len(set(pages))
    for size, misses in zip(mrc["size"], mrc["misses"]):
        assert misses == reference.simulate(expanded, int(size), "lru").nr_misses


@settings(deadline=None, max_examples=25)
@given(st.integers(1, 700), st.integers(0, 2**32 - 1))
def test_prop_stack_distances_across_chunks_growth_and_compaction(chunk, seed):
    """Chunked feeding (id-table and per-page array growth, position compaction) changes nothing."""
    pages = zipf_pages(6000, 2500, seed) * 7919 - 10**6  # negative and sparse: the hash path
    ids, sd = PageIds(bits=4), StackDistances()
    for lo in range(0, len(pages), chunk):
        sd.add(ids.map(pages[lo:lo + chunk]), np.ones(len(pages[lo:lo + chunk]), np.uint32), ids.n)
    assert ids.n == len(np.unique(pages)) and sd.cold == ids.n
    for size in (1, 3, 50, 700, ids.n):
        assert sd.lru_misses([size])[0] == reference.simulate(pages, size, "lru").nr_misses


def test_page_ids_are_first_appearance_order():
    ids = PageIds(bits=2)
    assert ids.map(np.array([50, 7, 50, -3])).tolist() == [0, 1, 0, 2]
    assert ids.map(np.arange(100, 140)).tolist() == list(range(3, 43))  # grows the table
    assert ids.map(np.array([-3, 7])).tolist() == [2, 1] and ids.n == 43


def test_mrc_and_cachesim_agree_on_a_zipf_trace():
    t = trace_of(zipf_pages(20_000, 3_000, 1))
    sizes = [1, 10, 100, 1000, 2999]
    exact = cachesim(t, "lru", sizes)
    mrc = lru_mrc(t, sizes)
    assert exact["misses"].tolist() == mrc["misses"].tolist()
    assert exact["miss_ratio"].tolist() == pytest.approx(mrc["miss_ratio"].tolist(), abs=0)


def test_sizes_in_percent_of_distinct_objects():
    t = trace_of(np.arange(1000) % 200)  # 200 distinct objects
    df = cachesim(t, ["fifo"], "1%,10%,100%,7")
    assert df["size"].tolist() == [2, 20, 200, 7]
    assert df.loc[df["size"] == 200, "misses"].item() == 200  # everything fits: cold misses only


def test_public_api():
    assert {"cachesim", "lru_mrc"} <= set(tierlab.__all__)
    df = tierlab.cachesim(trace_of([1, 2, 1, 3, 2]), policies=["lru", "fifo", "clock"], sizes=[2])
    assert df["misses"].tolist() == [4, 3, 4]  # the hand-worked case of test_reference_policies
    assert list(df.columns) == ["policy", "size", "requests", "misses", "miss_ratio"]


# ---------------------------------------------------------------------------------------------
# the command line


def test_cli_prints_libcachesim_miss_ratios(tmp_path, capsys):
    lcs = pytest.importorskip("libcachesim")
    pages = zipf_pages(30_000, 4_000, 2)
    path = tmp_path / "z.oracleGeneral.bin"
    write_oracle_general(path, pages)
    assert main(["cachesim", str(path), "--policy", "lru,fifo,clock", "--size", "10,500,5%",
                 "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    n_objects = len(np.unique(pages))
    assert {r["size"] for r in rows} == {10, 500, int(n_objects * 0.05)}
    cls = {"lru": lcs.LRU, "fifo": lcs.FIFO, "clock": lcs.Clock}
    for r in rows:
        reader = lcs.TraceReader(str(path), lcs.TraceType.ORACLE_GENERAL_TRACE)
        theirs, _ = cls[r["policy"]](r["size"], hashpower=16).process_trace(reader)
        assert r["misses"] == round(theirs * r["requests"]), r  # miss for miss
        assert r["miss_ratio"] == pytest.approx(theirs, rel=1e-12)
    assert main(["cachesim", str(path), "--mrc", "--size", "10,500"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "size,requests,misses,miss_ratio"
    lru = {r["size"]: r["misses"] for r in rows if r["policy"] == "lru"}
    for line in lines[1:]:
        size, _, misses, _ = line.split(",")
        assert int(misses) == lru[int(size)]


def test_cli_mrc_every_size_and_table(tmp_path, capsys):
    p = tmp_path / "t.csv"
    p.write_text("task,page,op\n0,1,r\n0,2,w\n0,1,r\n0,3,r\n0,2,r\n")
    assert main(["cachesim", str(p), "--mrc"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == ["size,requests,misses,miss_ratio", "1,5,5,1.0", "2,5,4,0.8", "3,5,3,0.6"]
    assert main(["cachesim", str(p), "--policy", "fifo", "--size", "2"]) == 0
    table = capsys.readouterr().out
    assert "fifo" in table and "0.600000" in table


def one_error_line(argv, capsys) -> str:
    assert main(argv) == 2
    cap = capsys.readouterr()
    assert cap.out == ""
    lines = cap.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tierlab: error: "), cap.err
    return lines[0]


@pytest.mark.parametrize("extra, names", [
    (["--policy", "lru,arc"], ["--policy", "'arc'", "lru, fifo, clock"]),
    (["--size", "0"], ["--size", "'0'", "10%"]),
    (["--size", "-5"], ["--size", "'-5'", ">= 1"]),
    (["--size", "101%"], ["--size", "'101%'", "(0, 100]"]),
    (["--size", "ten"], ["--size", "'ten'"]),
    (["--format", "xml"], ["--format", "xml"]),
])
def test_cli_bad_options_exit_2_naming_the_option(tmp_path, capsys, extra, names):
    p = tmp_path / "t.csv"
    p.write_text("task,page,op\n0,1,r\n")
    line = one_error_line(["cachesim", str(p), *extra], capsys)
    for name in names:
        assert name in line


def test_cli_bad_files_exit_2_naming_file_or_line(tmp_path, capsys):
    assert "does not exist" in one_error_line(["cachesim", str(tmp_path / "nope.csv")], capsys)
    bad = tmp_path / "bad.csv"
    bad.write_text("task,page,op\n0,1,r\n0,x,r\n")
    assert "bad.csv:3: expected page" in one_error_line(["cachesim", str(bad), "--mrc"], capsys)
    og = tmp_path / "cut.oracleGeneral.bin"
    og.write_bytes(b"\0" * 30)
    assert "partial record 1" in one_error_line(["cachesim", str(og)], capsys)


# ---------------------------------------------------------------------------------------------
# streaming files: chunks, compression, mode


def test_npz_is_compressed_by_default_with_normal_mode(tmp_path):
    t = trace_of(np.arange(200_000) % 1500)
    old = os.umask(0o022)
    try:
        save_trace(tmp_path / "c.npz", t.task, t.page, t.op, t.count)
        save_trace(tmp_path / "u.npz", t.task, t.page, t.op, t.count, compress=False)
    finally:
        os.umask(old)
    c, u = (os.stat(tmp_path / n) for n in ("c.npz", "u.npz"))
    assert c.st_mode & 0o777 == 0o644
    assert c.st_size * 5 < u.st_size
    for name in ("c.npz", "u.npz"):
        assert np.array_equal(load_trace(tmp_path / name).page, t.page)
        with np.load(tmp_path / name, allow_pickle=False) as z:  # a plain numpy archive
            assert np.array_equal(z["page"], t.page)


@pytest.mark.parametrize("compress", [True, False])
def test_chunked_reads_and_writes_equal_whole_ones(tmp_path, compress):
    rng = np.random.default_rng(4)
    n = 10_007
    cols = (rng.integers(0, 3, n), rng.integers(0, 2**40, n), rng.integers(0, 2, n),
            rng.integers(1, 9, n))
    path = tmp_path / "s.npz"
    chunks = ((a[lo:lo + 999] for a in cols) for lo in range(0, n, 999))
    assert save_trace_chunks(path, (tuple(c) for c in chunks), {"source": "x"}, compress) == n
    f = TraceFile(path)
    parts = list(f.iter_chunks(1234))
    assert [len(p[1]) for p in parts][:2] == [1234, 1234]
    for i, a in enumerate(cols):
        assert np.array_equal(np.concatenate([p[i] for p in parts]), a)
    assert f.meta["source"] == "x"
    assert not [x for x in os.listdir(tmp_path) if x != "s.npz"]  # spool files are gone


def test_csv_errors_name_the_line_in_later_chunks(tmp_path):
    p = tmp_path / "long.csv"
    p.write_text("task,page,op\n" + "0,1,r\n" * 10 + "0,1,q\n")
    with pytest.raises(tierlab.TraceError, match=r"long\.csv:12: expected op"):
        list(TraceFile(p).iter_chunks(3))
    p.write_text("task,page,op\n" + "0,1,r\n" * 10 + "0,1,r,4\n")
    with pytest.raises(tierlab.TraceError, match=r"long\.csv:12: expected the header's fields"):
        list(TraceFile(p).iter_chunks(3))
