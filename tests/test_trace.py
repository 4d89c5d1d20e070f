"""Traces: lackey parsing, folding, file formats, reuse distances, and recording real programs."""
from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import subprocess

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tierlab.errors import ConfigError, TierlabError, TraceError
from tierlab.trace import (
    COUNT_MAX, ORACLE_GENERAL_DTYPE, Trace, add_trace_commands, convert_trace, fold_trace,
    load_trace, main_trace, parse_lackey, record_trace, save_trace, save_trace_oracle_general,
    trace_info,
)

HAVE_VALGRIND = shutil.which("valgrind") is not None
needs_valgrind = pytest.mark.skipif(not HAVE_VALGRIND, reason="valgrind is not installed")


def make_trace(page, op=None, count=None, task=None) -> Trace:
    page = np.asarray(page, np.int64)
    n = len(page)
    return Trace(np.zeros(n, np.int32) if task is None else np.asarray(task, np.int32), page,
                 np.zeros(n, np.uint8) if op is None else np.asarray(op, np.uint8),
                 np.ones(n, np.uint32) if count is None else np.asarray(count, np.uint32), {})


def expand(t: Trace) -> list[tuple[int, int, int]]:
    """The unfolded access sequence as (task, page, op) tuples."""
    reps = t.count.astype(np.int64)
    return list(zip(np.repeat(t.task, reps).tolist(), np.repeat(t.page, reps).tolist(),
                    np.repeat(t.op, reps).tolist()))


def naive_reuse(pages: list[int]) -> tuple[dict[int, int], int]:
    """LRU stack distances by definition (an explicit stack); returns ({bucket: n}, cold)."""
    stack: list[int] = []
    hist: dict[int, int] = {}
    cold = 0
    for p in pages:
        if p in stack:
            d = len(stack) - 1 - stack.index(p)
            stack.remove(p)
            hist[d.bit_length()] = hist.get(d.bit_length(), 0) + 1
        else:
            cold += 1
        stack.append(p)
    return hist, cold


def cli(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="tierlab")
    add_trace_commands(p.add_subparsers(dest="command", required=True))
    return main_trace(p.parse_args(argv))


def no_temp_files(d) -> bool:
    return not [n for n in os.listdir(d) if n.endswith(".tmp")]


# ---------------------------------------------------------------------------------------------
# lackey text

LACKEY_SAMPLE = (
    b"==1== Lackey, an example Valgrind tool\n"
    b"I  0401ab70,3\n"
    b" S 1fff000778,8\n"
    b" S 1fff000770,8\n"   # same page, same op: folds
    b" L 1fff000770,8\n"   # same page, read: new record
    b" M 0000a000,4\n"     # modify: a write
    b"I  0401ab73,5\n"
    b" L 0000afff,8\n"     # straddles into page 0xb: counted at 0xa
    b"==1== Exit code: 0\n"
)


def test_lackey_lines_map_to_pages_and_ops():
    t = parse_lackey(io.BytesIO(LACKEY_SAMPLE))
    assert t.page.tolist() == [0x1fff000, 0x1fff000, 0xa, 0xa]
    assert t.op.tolist() == [1, 0, 1, 0]
    assert t.count.tolist() == [2, 1, 1, 1]
    assert t.task.tolist() == [0, 0, 0, 0]
    s = t.meta["lackey"]
    assert (s["lines"], s["data_lines"], s["instruction_lines"], s["message_lines"]) == (9, 5, 2, 2)


def test_lackey_instructions_are_reads_only_when_asked():
    t = parse_lackey(io.BytesIO(LACKEY_SAMPLE), instructions=True)
    assert t.nr_accesses == 7
    assert t.page[0] == 0x0401a and t.op[0] == 0
    assert parse_lackey(io.BytesIO(LACKEY_SAMPLE)).nr_accesses == 5


def test_lackey_last_line_without_newline_and_crlf():
    t = parse_lackey(io.BytesIO(b" L 1000,8\r\n S 2000,4"))
    assert t.page.tolist() == [1, 2] and t.op.tolist() == [0, 1]


@pytest.mark.parametrize("bad, line", [
    (b" L 1000,8\n X 1000,8\n", 2),
    (b" L 1000,8\n\n L 1000,8\n", 2),
    (b"I  0401ab70,3\n L zz,8\n", 2),
    (b" L 1000\n", 1),
    (b" L 1000,\n", 1),
    (b" L 11112222333344445,8\n", 1),  # 17 hex digits: more than 64 bits
    (b"hello\n", 1),
])
def test_lackey_malformed_line_names_file_and_line(tmp_path, bad, line):
    f = tmp_path / "x.lackey"
    f.write_bytes(bad)
    with pytest.raises(TraceError, match=rf"x\.lackey:{line}: expected a lackey line"):
        parse_lackey(f)


lackey_lines = st.lists(
    st.tuples(st.sampled_from(["I", "L", "S", "M", "=="]), st.integers(0, 5), st.integers(0, 4095)),
    max_size=60)


@settings(deadline=None, max_examples=60)
@given(lackey_lines, st.integers(1, 8), st.booleans())
def test_prop_lackey_chunking_matches_naive_parse(lines, chunk_lines, instructions):
    """Any chunk size (partial lines at every boundary) gives the naive line-by-line answer."""
    text, want = [], []
    for kind, page, off in lines:
        addr = (page << 12) + off
        if kind == "==":
            text.append("==7== message\n")
            continue
        text.append(f"I  {addr:08x},4\n" if kind == "I" else f" {kind} {addr:x},8\n")
        if kind != "I" or instructions:
            want.append((0, page, 1 if kind in "SM" else 0))
    t = parse_lackey(io.BytesIO("".join(text).encode()), instructions=instructions,
                     chunk_lines=chunk_lines)
    assert expand(t) == want
    # folded: no two neighbours share (page, op)
    assert not np.any((t.page[1:] == t.page[:-1]) & (t.op[1:] == t.op[:-1]))


# ---------------------------------------------------------------------------------------------
# folding and the reuse-distance kernel


@settings(deadline=None, max_examples=60)
@given(st.lists(st.tuples(st.integers(0, 1), st.integers(0, 3), st.integers(0, 1),
                          st.integers(1, 3)), max_size=50))
def test_prop_fold_keeps_sequence_and_never_grows(recs):
    task, page, op, count = (list(c) for c in zip(*recs)) if recs else ([], [], [], [])
    t = make_trace(page, op, count, task)
    f = fold_trace(t)
    assert len(f) <= len(t)
    assert expand(f) == expand(t)
    key = np.stack([f.task, f.page, f.op.astype(np.int64)])
    assert not np.any(np.all(key[:, 1:] == key[:, :-1], axis=0))


def test_fold_splits_runs_at_count_max():
    t = make_trace([5, 5, 5], count=[COUNT_MAX, COUNT_MAX - 1, 7])
    f = fold_trace(t)
    assert f.count.tolist() == [COUNT_MAX, COUNT_MAX, 6]
    assert f.nr_accesses == t.nr_accesses


@settings(deadline=None, max_examples=80)
@given(st.lists(st.integers(0, 12), max_size=120), st.integers(1, 3))
def test_prop_reuse_histogram_matches_naive_lru_stack(pages, rep):
    t = fold_trace(make_trace(pages, count=[rep] * len(pages)))
    info = trace_info(t)
    hist, cold = naive_reuse(np.repeat(np.asarray(pages, np.int64), rep).tolist())
    assert info["reuse"]["cold"] == cold == len(set(pages))
    got = {k: b["accesses"] for k, b in enumerate(info["reuse"]["buckets"]) if b["accesses"]}
    assert got == hist
    assert cold + sum(got.values()) == info["accesses"]


def test_info_counts_on_a_hand_trace():
    t = make_trace([1, 2, 1, 3], op=[0, 1, 1, 0], count=[3, 1, 2, 1])
    info = trace_info(t)
    assert (info["records"], info["accesses"], info["pages"]) == (4, 7, 3)
    assert (info["reads"], info["writes"]) == (4, 3)
    assert info["footprint_bytes"] == 3 * 4096
    assert info["reuse"]["cold"] == 3
    # distance 0: 2 repeats in the first record + 1 in the third; distance 1: page 1 after page 2
    assert [b["accesses"] for b in info["reuse"]["buckets"]] == [3, 1]


def test_reuse_histogram_predicts_libcachesim_lru(tmp_path):
    """An LRU of 2**k pages hits exactly the accesses with distance < 2**k (checked by libCacheSim)."""
    libcachesim = pytest.importorskip("libcachesim")
    rng = np.random.default_rng(7)
    t = make_trace(rng.zipf(1.3, 4000) % 300)
    path = str(tmp_path / "z.oracleGeneral.bin")
    save_trace_oracle_general(path, t)
    info = trace_info(t)
    for pages in (1, 4, 32):
        reader = libcachesim.TraceReader(path, libcachesim.TraceType.ORACLE_GENERAL_TRACE)
        miss_ratio, _ = libcachesim.LRU(cache_size=pages * 4096).process_trace(reader)
        hits = sum(b["accesses"] for b in info["reuse"]["buckets"] if b["hi"] < pages)
        assert miss_ratio == pytest.approx(1 - hits / info["accesses"], abs=1e-12)


# ---------------------------------------------------------------------------------------------
# file formats


@pytest.mark.parametrize("compress", [False, True])
def test_npz_round_trip(tmp_path, compress):
    t = make_trace([3, 9, 2**40], op=[0, 1, 1], count=[1, 5, COUNT_MAX], task=[0, 2, 1])
    path = tmp_path / "t.npz"
    save_trace(path, t.task, t.page, t.op, t.count, {"source": "unit test"}, compress=compress)
    u = load_trace(path)
    for a in ("task", "page", "op", "count"):
        assert np.array_equal(getattr(u, a), getattr(t, a)) and getattr(u, a).dtype == getattr(t, a).dtype
    assert u.meta["source"] == "unit test" and u.meta["page_size"] == 4096
    assert u.meta["format_version"] == 1
    with np.load(path, allow_pickle=False) as z:  # the documented layout, no pickle needed
        assert set(z.files) == {"task", "page", "op", "count", "format_version", "page_size", "meta"}


def test_save_rejects_bad_records_and_leaves_no_file(tmp_path):
    path = tmp_path / "bad.npz"
    with pytest.raises(TraceError, match=r"record 1: expected op in \[0, 1\], got 2"):
        save_trace(path, None, [1, 2], [0, 2], None)
    with pytest.raises(TraceError, match=r"record 0: expected count in \[1, "):
        save_trace(path, None, [1], [0], [0])
    with pytest.raises(TraceError, match=r"expected page in"):
        save_trace(path, None, np.array([2**63], np.uint64), [0], None)
    assert not path.exists() and no_temp_files(tmp_path)


def test_npz_newer_format_version_is_refused(tmp_path):
    path = tmp_path / "future.npz"
    np.savez(path, task=np.zeros(1, np.int32), page=np.zeros(1, np.int64), op=np.zeros(1, np.uint8),
             count=np.ones(1, np.uint32), format_version=np.int64(99))
    with pytest.raises(TraceError, match="format_version 99 is newer"):
        load_trace(path)


def test_damaged_npz_is_a_trace_error(tmp_path):
    t = make_trace(np.arange(1000))
    save_trace(tmp_path / "ok.npz", t.task, t.page, t.op, t.count)
    raw = (tmp_path / "ok.npz").read_bytes()
    (tmp_path / "cut.npz").write_bytes(raw[: len(raw) // 2])
    (tmp_path / "flip.npz").write_bytes(raw[:200] + b"\xff" * 100 + raw[300:])
    with pytest.raises(TraceError, match="not a readable .npz"):
        load_trace(tmp_path / "cut.npz")
    with pytest.raises(TraceError, match="damaged .npz member"):
        load_trace(tmp_path / "flip.npz")


def test_npy_structured_array(tmp_path):
    a = np.zeros(3, dtype=[("task", "i4"), ("page", "i8"), ("op", "u1")])
    a["page"] = [4, 4, 7]
    a["op"] = [0, 1, 0]
    np.save(tmp_path / "s.npy", a)
    t = load_trace(tmp_path / "s.npy")
    assert t.page.tolist() == [4, 4, 7] and t.count.tolist() == [1, 1, 1]


def test_csv_convert_round_trip(tmp_path):
    src = tmp_path / "in.csv"
    src.write_text("task,page,op,count\n0,10,r,1\n0,10,R,2\n1,11,W,1\n1,12,1,4\n0,10,0,1\n")
    t = convert_trace(src, tmp_path / "out.npz")
    u = load_trace(tmp_path / "out.npz")
    assert u.page.tolist() == [10, 11, 12, 10] and u.count.tolist() == [3, 1, 4, 1]
    assert u.op.tolist() == [0, 1, 1, 0] and u.task.tolist() == [0, 1, 1, 0]
    convert_trace(tmp_path / "out.npz", tmp_path / "back.csv")
    v = load_trace(tmp_path / "back.csv")
    assert expand(v) == expand(u) == expand(t)
    # count is optional; op may be 0/1
    (tmp_path / "three.csv").write_text("task,page,op\n0,5,0\n0,5,1\n")
    assert load_trace(tmp_path / "three.csv").op.tolist() == [0, 1]


@pytest.mark.parametrize("body, where", [
    ("task,page,op\n0,1,r\n0,2,x\n", r"bad\.csv:3: expected op: one of r, w"),
    ("task,page,op\n0,1,r\n\n0,2,r\n", r"bad\.csv:3: expected a record task,page,op\[,count\], got an empty line"),
    ("task,page,op\n0,1,r\n1.5,2,r\n", r"bad\.csv:3: expected task"),
    ("task,page,op\n0,1,r\n0,-2,r\n", r"bad\.csv:3: expected page"),
    ("task,page,op,count\n0,1,r,0\n", r"bad\.csv:2: expected count"),
    ("task,page,op\n0,1,r\n0,2,r,9\n", r"bad\.csv:3: expected the header's fields"),
    ("0,1,r\n", r"bad\.csv:1: expected header 'task,page,op\[,count\]'"),
    ("", r"bad\.csv:1: expected a header line"),
])
def test_malformed_csv_names_file_and_line(tmp_path, body, where):
    (tmp_path / "bad.csv").write_text(body)
    with pytest.raises(TraceError, match=where):
        load_trace(tmp_path / "bad.csv")
    with pytest.raises(TraceError, match=where):  # and convert writes nothing
        convert_trace(tmp_path / "bad.csv", tmp_path / "never.npz")
    assert not (tmp_path / "never.npz").exists() and no_temp_files(tmp_path)


def test_oracle_general_convert_round_trip(tmp_path):
    t = make_trace([7, 7, 3, 7, 9, 3], count=[1, 1, 2, 1, 1, 1])
    path = tmp_path / "x.oracleGeneral.bin"
    save_trace_oracle_general(path, t)
    raw = np.fromfile(path, dtype=ORACLE_GENERAL_DTYPE)
    assert path.stat().st_size == 24 * 7 == raw.nbytes
    # next_access_vtime: index of the next request to the same object, -1 if none
    assert raw["obj_id"].tolist() == [7, 7, 3, 3, 7, 9, 3]
    assert raw["next_access_vtime"].tolist() == [1, 4, 3, 6, -1, -1, -1]
    assert (raw["obj_size"] == 4096).all()
    u = convert_trace(path, tmp_path / "x.npz")
    assert expand(load_trace(tmp_path / "x.npz")) == expand(u) == expand(fold_trace(t))


def test_oracle_general_reader_details(tmp_path):
    rec = np.zeros(3, ORACLE_GENERAL_DTYPE)
    rec["obj_id"] = [5, 2**64 - 1, 5]
    rec["obj_size"] = [100, 100, 0]  # zero-size requests are skipped, as libCacheSim does
    path = tmp_path / "h.oracleGeneral"
    rec.tofile(path)
    with pytest.raises(TraceError, match=r"record 1: expected obj_id < 2\*\*63.*--renumber"):
        load_trace(path)
    t = convert_trace(path, tmp_path / "h.npz", renumber=True)
    assert t.page.tolist() == [0, 1] and t.meta["renumbered"]
    with open(path, "ab") as f:
        f.write(b"\0" * 5)
    with pytest.raises(TraceError, match="partial record 3"):
        load_trace(path)


def test_convert_cli_to_oracle_general_and_back(tmp_path, capsys):
    (tmp_path / "in.csv").write_text("task,page,op,count\n0,1,r,2\n0,2,w,1\n0,1,r,1\n")
    og = tmp_path / "t.oracleGeneral.bin"
    assert cli(["trace", "convert", str(tmp_path / "in.csv"), "--out", str(og)]) == 0
    assert og.stat().st_size == 4 * 24
    assert cli(["trace", "convert", str(og), "--out", str(tmp_path / "t.npz")]) == 0
    assert load_trace(tmp_path / "t.npz").page.tolist() == [1, 2, 1]  # ops are not kept by the format
    assert cli(["trace", "info", str(og), "--format", "json"]) == 0
    assert '"accesses": 4' in capsys.readouterr().out


def test_unknown_format_and_missing_file(tmp_path):
    (tmp_path / "x.dat").write_bytes(b"abc")
    with pytest.raises(TraceError, match="cannot tell the trace format"):
        load_trace(tmp_path / "x.dat")
    with pytest.raises(ConfigError, match="does not exist"):
        load_trace(tmp_path / "nope.npz")


def test_iter_chunks_covers_the_trace():
    t = make_trace(np.arange(10))
    chunks = list(t.iter_chunks(4))
    assert [len(c[1]) for c in chunks] == [4, 4, 2]
    assert np.concatenate([c[1] for c in chunks]).tolist() == list(range(10))


# ---------------------------------------------------------------------------------------------
# recording real programs


def test_missing_valgrind_says_how_to_install(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # a PATH without valgrind
    with pytest.raises(TierlabError, match="apt-get install valgrind"):
        record_trace(["/bin/true"], tmp_path / "t.npz")
    assert not (tmp_path / "t.npz").exists()


@pytest.fixture(scope="module")
def sort_traces(tmp_path_factory):
    """`sort` of 200 and 2000 random 60-byte lines, recorded under valgrind (data accesses)."""
    if not HAVE_VALGRIND:
        pytest.skip("valgrind is not installed")
    d = tmp_path_factory.mktemp("sort")
    rng = np.random.default_rng(3)
    env = {**os.environ, "LC_ALL": "C"}  # plain byte compares: faster under valgrind
    out = {}
    for n in (200, 2000):
        words = ["".join(rng.choice(list("abcdefghij"), 60)) for _ in range(n)]
        (d / f"in{n}.txt").write_text("\n".join(words) + "\n")
        with open(d / f"sorted{n}.txt", "wb") as so:
            t = record_trace(["sort", str(d / f"in{n}.txt")], d / f"sort{n}.npz", stdout=so, env=env)
        assert (d / f"sorted{n}.txt").read_text().split() == sorted(words)  # stdout kept apart
        out[n] = (t, d / f"sort{n}.npz")
    return out


@needs_valgrind
def test_record_sort_facts(sort_traces):
    small, big = (trace_info(sort_traces[n][0]) for n in (200, 2000))
    assert big["accesses"] > 5 * small["accesses"]  # n log n compares, and more copying
    assert big["pages"] >= small["pages"] + 20  # 2000 x 61 bytes needs >= 29 more pages
    for info in (small, big):
        assert info["writes"] > 0
        assert info["reads"] > info["writes"]
        assert info["tasks"] == 1
    for t, _ in sort_traces.values():
        assert t.meta["exit_code"] == 0
        s = t.meta["lackey"]
        assert t.nr_accesses == s["data_lines"] > 0  # every data line counted exactly once
        assert s["instruction_lines"] > s["data_lines"]  # instruction fetches were seen, dropped
        assert len(t) < s["lines"]  # folding never increases length
        assert not np.any((t.page[1:] == t.page[:-1]) & (t.op[1:] == t.op[:-1]))


@needs_valgrind
def test_record_writes_a_loadable_file(sort_traces):
    t, path = sort_traces[200]
    u = load_trace(path)
    assert expand(u) == expand(t)
    assert u.meta["source"].startswith("sort ") and u.meta["tool"] == "valgrind-lackey"
    assert "wall_s" not in u.meta  # wall-clock time stays out of the file
    assert no_temp_files(path.parent)


@needs_valgrind
def test_record_cli_with_instructions_and_info(tmp_path, capsys):
    out = tmp_path / "true.npz"
    assert cli(["trace", "record", "--out", str(out), "--instructions", "--", "true"]) == 0
    t = load_trace(out)
    data_only = record_trace(["true"], tmp_path / "true_data.npz")
    assert t.nr_accesses > 2 * data_only.nr_accesses  # instruction fetches dominate
    assert t.meta["instructions"] is True and data_only.meta["instructions"] is False
    capsys.readouterr()
    assert cli(["trace", "info", str(out), "--format", "json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["accesses"] == t.nr_accesses and info["reuse"]["cold"] == info["pages"]
    assert cli(["trace", "info", str(out)]) == 0
    assert "reuse distance" in capsys.readouterr().out


@needs_valgrind
def test_record_failing_program_keeps_trace_and_exit_code(tmp_path):
    t = record_trace(["sort", str(tmp_path / "no-such-file")], tmp_path / "f.npz",
                     stderr=subprocess.DEVNULL)
    assert t.meta["exit_code"] == 2 and len(t) > 0
    assert load_trace(tmp_path / "f.npz").meta["exit_code"] == 2


def test_record_checks_before_running(tmp_path):
    if not HAVE_VALGRIND:
        pytest.skip("valgrind is not installed")
    with pytest.raises(ConfigError, match="command not found"):
        record_trace(["no-such-program-xyz"], tmp_path / "t.npz")
    with pytest.raises(ConfigError, match="does not exist"):
        record_trace(["true"], tmp_path / "no" / "dir" / "t.npz")
    with pytest.raises(ConfigError, match="expected a command"):
        record_trace([], tmp_path / "t.npz")
