"""Page-granular access traces: record real programs under valgrind, read, convert, summarise.

A trace is a sequence of records (task, page, op, count): `count` consecutive accesses by `task` to
virtual page `page` (address >> 12) of kind `op` (0 read, 1 write). Consecutive repeats of the same
(task, page, op) are folded into one record, so folding never changes the access sequence. A trace
is a workload: `Trace.iter_chunks` yields it as (task, page, op, count) array chunks.

File format (``.npz``, format_version 1), written by `save_trace`:

======================  =========  ===================================================
array                   dtype      meaning
======================  =========  ===================================================
``task``                int32      task id (>= 0); lackey traces are task 0
``page``                int64      virtual page number (>= 0) = address >> 12
``op``                  uint8      0 = read/load/instruction fetch, 1 = write/store
``count``               uint32     consecutive accesses folded into the record (>= 1)
``format_version``      int64 0-d  1
``page_size``           int64 0-d  4096 (bytes)
``meta``                str 0-d    JSON object: ``source`` (command line or input
                                   file), ``tool``, and tool-specific fields
======================  =========  ===================================================

Uncompressed by default (``np.savez``, so loading is a plain read); ``compress=True`` writes
``np.savez_compressed``; `load_trace` reads both. Nothing needs pickle. `load_trace` also reads
``.npy`` structured arrays (fields task, page, op[, count]), CSV (header ``task,page,op[,count]``,
op one of r/w/R/W/0/1), libCacheSim's oracleGeneral binary format and raw lackey text.

Recording (`record_trace`) runs ``valgrind --tool=lackey --trace-mem=yes --log-fd=N`` with N the
write end of a pipe, so the program's own stdout/stderr stay separate and lackey's text (about a
million lines a second, tens of bytes each) never touches the disk: it is parsed in large binary
chunks by the numba kernel in `tierlab.core.trace_kernels`. Mapping of lackey lines:

* `` L addr,size`` load -> read; `` S`` store -> write; `` M`` modify (a load then a store of the
  same bytes) -> one write access; ``I  addr,size`` instruction fetch -> read, kept only with
  ``instructions=True``;
* an access that straddles a page boundary is counted once, at the page of its first byte;
* lackey interleaves all threads of the process in one stream without thread ids, so every record
  is task 0; children started by the program are not traced (valgrind's default).
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass, field
from typing import Iterator

import numpy as np

from .core import trace_kernels as tk
from .errors import ConfigError, TierlabError, TraceError
from .units import PAGE_SHIFT, PAGE_SIZE

__all__ = [
    "FORMAT_VERSION",
    "Trace",
    "save_trace",
    "load_trace",
    "fold_trace",
    "parse_lackey",
    "record_trace",
    "trace_info",
    "format_trace_info",
    "convert_trace",
    "save_trace_csv",
    "save_trace_oracle_general",
    "add_trace_commands",
    "main_trace",
]

FORMAT_VERSION = 1
COUNT_MAX = tk.COUNT_MAX
INSTALL_HINT = (
    "valgrind was not found on PATH; `trace record` runs programs under valgrind's lackey tool. "
    "Install it with your package manager: Debian/Ubuntu: sudo apt-get install valgrind; "
    "Fedora: sudo dnf install valgrind; Arch: sudo pacman -S valgrind"
)

# libCacheSim oracleGeneral: packed little-endian struct {uint32 clock_time; uint64 obj_id;
# uint32 obj_size; int64 next_access_vtime (-1: never again)} (oracleGeneralBin.h).
ORACLE_GENERAL_DTYPE = np.dtype(
    [("clock_time", "<u4"), ("obj_id", "<u8"), ("obj_size", "<u4"), ("next_access_vtime", "<i8")]
)
assert ORACLE_GENERAL_DTYPE.itemsize == 24

_INPUT_FORMATS = ("npz", "npy", "csv", "oraclegeneral", "lackey")
_OUTPUT_FORMATS = ("npz", "csv", "oraclegeneral")
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_LACKEY_MIN_LINE_BYTES = 7  # "I  0,1\n": bounds the number of records a buffer can hold
_LACKEY_BYTES_PER_LINE = 16  # typical lackey line length, to size chunks given in lines
_PIPE_BYTES = 1 << 20  # lackey pipe capacity asked for (Linux's default pipe-max-size)
_PIPE_NAP_S = 0.005


@dataclass
class Trace:
    """A folded access trace: parallel arrays plus metadata (see the module docstring)."""

    task: np.ndarray    # int32
    page: np.ndarray    # int64
    op: np.ndarray      # uint8, 0 read, 1 write
    count: np.ndarray   # uint32, >= 1
    meta: dict = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.page)

    def __repr__(self) -> str:
        return (f"Trace(records={len(self):,}, accesses={self.nr_accesses:,}, "
                f"source={self.meta.get('source')!r})")

    @property
    def nr_accesses(self) -> int:
        """Accesses in the unfolded sequence (sum of counts)."""
        return int(self.count.sum(dtype=np.uint64))

    def iter_chunks(self, nr_records: int = 1 << 20) -> Iterator[tuple[np.ndarray, ...]]:
        """Yield (task, page, op, count) views of at most nr_records records each, in order."""
        if nr_records < 1:
            raise ConfigError(f"nr_records: expected >= 1, got {nr_records}")
        for lo in range(0, len(self), nr_records):
            hi = lo + nr_records
            yield self.task[lo:hi], self.page[lo:hi], self.op[lo:hi], self.count[lo:hi]


# ---------------------------------------------------------------------------------------------
# validation and atomic output


def _first(mask: np.ndarray) -> int:
    return int(np.flatnonzero(mask)[0])


def _as_int_array(a, name: str, dtype, lo: int, hi: int, where: str) -> np.ndarray:
    """Cast a to dtype after checking it is 1-D, integral and within [lo, hi]."""
    a = np.asarray(a)
    if a.ndim != 1:
        raise TraceError(f"{where}: array {name!r}: expected 1-D, got shape {a.shape}")
    if a.dtype == np.bool_:
        a = a.astype(np.uint8)
    if a.dtype.kind not in "iu":
        if a.size == 0:
            return np.zeros(0, dtype)
        raise TraceError(f"{where}: array {name!r}: expected integers, got dtype {a.dtype}")
    if a.size:
        # widen first: numpy 2 refuses to compare e.g. int8 with 2**31, and uint64 must not wrap
        if a.dtype.kind == "u":
            w = a.astype(np.uint64, copy=False)
            bad = w > np.uint64(hi)
            if lo > 0:
                bad |= w < np.uint64(lo)
        else:
            w = a.astype(np.int64, copy=False)
            bad = (w < lo) | (w > hi)
        if bad.any():
            i = _first(bad)
            raise TraceError(f"{where}: record {i}: expected {name} in [{lo}, {hi}], got {a[i]}")
    return a.astype(dtype, copy=False)


def _validated(task, page, op, count, where: str):
    """Canonical-dtype arrays, or TraceError naming the first bad record."""
    page = _as_int_array(page, "page", np.int64, 0, np.iinfo(np.int64).max, where)
    n = len(page)
    if count is None:
        count = np.ones(n, np.uint32)
    if task is None:
        task = np.zeros(n, np.int32)
    task = _as_int_array(task, "task", np.int32, 0, np.iinfo(np.int32).max, where)
    op = _as_int_array(op, "op", np.uint8, 0, 1, where)
    count = _as_int_array(count, "count", np.uint32, 1, COUNT_MAX, where)
    for name, a in (("task", task), ("op", op), ("count", count)):
        if len(a) != n:
            raise TraceError(f"{where}: array {name!r} has {len(a)} records, 'page' has {n}")
    return task, page, op, count


@contextlib.contextmanager
def _atomic_output(path: str):
    """Yield a temp path next to `path`; move it into place on success, delete it on any error."""
    path = os.fspath(path)
    d = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(d):
        raise ConfigError(f"output {path!r}: directory {d!r} does not exist")
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=".tmp", dir=d)
    os.close(fd)
    try:
        yield tmp
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def save_trace(path, task, page, op, count, meta: dict | None = None, compress: bool = False) -> None:
    """Validate and write a trace as .npz (format in the module docstring), atomically.

    task/op/count may be None (all task 0 / reads / count 1). meta must be JSON-serialisable.
    Records are written as given; use `fold_trace` first to fold repeats.
    """
    task, page, op, count = _validated(task, page, op, count, f"save_trace({os.fspath(path)!r})")
    meta = dict(meta or {})
    page_size = int(meta.pop("page_size", PAGE_SIZE))
    meta.pop("format_version", None)
    try:
        meta_json = json.dumps(meta, sort_keys=True)
    except TypeError as e:
        raise ConfigError(f"save_trace: meta must be JSON-serialisable: {e}") from None
    arrays = dict(task=task, page=page, op=op, count=count,
                  format_version=np.int64(FORMAT_VERSION), page_size=np.int64(page_size),
                  meta=np.array(meta_json))
    with _atomic_output(path) as tmp:
        with open(tmp, "wb") as f:
            (np.savez_compressed if compress else np.savez)(f, **arrays)


def _trace(task, page, op, count, meta, where) -> Trace:
    task, page, op, count = _validated(task, page, op, count, where)
    meta = dict(meta)
    meta.setdefault("format_version", FORMAT_VERSION)
    meta.setdefault("page_size", PAGE_SIZE)
    return Trace(task, page, op, count, meta)


# ---------------------------------------------------------------------------------------------
# readers


def _detect_format(path: str) -> str:
    with open(path, "rb") as f:
        head = f.read(8)
    if head[:2] == b"PK":  # a zip archive, as np.savez writes
        return "npz"
    if head.startswith(b"\x93NUMPY"):
        return "npy"
    if head.startswith(_ZSTD_MAGIC):
        raise TraceError(f"{path}: zstd-compressed file; decompress it first (zstd -d {path})")
    low = os.path.basename(path).lower()
    if low.endswith(".csv"):
        return "csv"
    if "oraclegeneral" in low:
        return "oraclegeneral"
    if low.endswith((".lackey", ".lackey.txt")):
        return "lackey"
    raise TraceError(
        f"{path}: cannot tell the trace format from its name or first bytes; expected .npz, .npy, "
        f".csv, a name containing 'oracleGeneral', or .lackey (or pass fmt= / --from)"
    )


def load_trace(path, fmt: str | None = None, instructions: bool = False) -> Trace:
    """Read and validate a trace. fmt: one of npz, npy, csv, oraclegeneral, lackey, or None to
    detect from the file's first bytes and name. `instructions` applies to lackey text only."""
    path = os.fspath(path)
    if not os.path.exists(path):
        raise ConfigError(f"trace file {path!r} does not exist")
    fmt = (fmt or _detect_format(path)).lower()
    if fmt == "npz":
        return _read_npz(path)
    if fmt == "npy":
        return _read_npy(path)
    if fmt == "csv":
        return _read_csv(path)
    if fmt == "oraclegeneral":
        return _read_oracle_general(path)
    if fmt == "lackey":
        return parse_lackey(path, instructions=instructions)
    raise ConfigError(f"trace format {fmt!r}: expected one of {', '.join(_INPUT_FORMATS)}")


def _read_npz(path: str) -> Trace:
    try:
        z = np.load(path, allow_pickle=False)
    except Exception as e:  # zipfile/ValueError variants: all mean "not a readable npz"
        raise TraceError(f"{path}: not a readable .npz file ({e})") from None
    try:
        with z:
            return _read_npz_arrays(z, path)
    except (ValueError, TypeError, OSError, EOFError, KeyError, zipfile.BadZipFile) as e:
        if isinstance(e, TraceError):
            raise
        raise TraceError(f"{path}: damaged .npz member ({type(e).__name__}: {e})") from None


def _read_npz_arrays(z, path: str) -> Trace:
    names = set(z.files)
    missing = {"page", "op"} - names
    if missing:
        raise TraceError(f"{path}: expected arrays task, page, op, count in the .npz; "
                         f"missing {sorted(missing)}")
    version = int(z["format_version"]) if "format_version" in names else FORMAT_VERSION
    if version > FORMAT_VERSION:
        raise TraceError(f"{path}: format_version {version} is newer than this tierlab reads "
                         f"(<= {FORMAT_VERSION}); upgrade tierlab")
    meta = {}
    if "meta" in names:
        try:
            meta = json.loads(str(z["meta"]))
        except ValueError as e:
            raise TraceError(f"{path}: array 'meta': expected a JSON object ({e})") from None
        if not isinstance(meta, dict):
            raise TraceError(f"{path}: array 'meta': expected a JSON object, got {type(meta).__name__}")
    page_size = int(z["page_size"]) if "page_size" in names else PAGE_SIZE
    if page_size <= 0 or page_size & (page_size - 1):
        raise TraceError(f"{path}: page_size: expected a power of two, got {page_size}")
    meta.update(format_version=version, page_size=page_size)
    get = lambda k: z[k] if k in names else None  # noqa: E731
    return _trace(get("task"), z["page"], z["op"], get("count"), meta, path)


def _read_npy(path: str) -> Trace:
    try:
        a = np.load(path, allow_pickle=False)
    except Exception as e:
        raise TraceError(f"{path}: not a readable .npy file ({e})") from None
    fields = a.dtype.names or ()
    if "page" not in fields or "op" not in fields:
        raise TraceError(f"{path}: expected a structured array with fields task, page, op[, count]; "
                         f"got dtype {a.dtype}")
    get = lambda k: a[k] if k in fields else None  # noqa: E731
    return _trace(get("task"), a["page"], a["op"], get("count"), {"source": path, "tool": "npy"},
                  path)


def _csv_ints(values: np.ndarray, name: str, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
    """(parsed int64, bad mask) for a column of decimal strings."""
    v = np.char.strip(values)
    bad = ~np.char.isdigit(v)  # also rejects "" and signs
    lens = np.char.str_len(v)
    out = np.zeros(len(v), np.int64)
    short = ~bad & (lens <= 18)  # fits int64 for sure
    try:
        out[short] = v[short].astype(np.int64)
    except ValueError:  # non-ASCII digits such as '²' pass isdigit but not int()
        for i in np.flatnonzero(short):
            if v[i].isascii():
                out[i] = int(v[i])
            else:
                bad[i] = True
    for i in np.flatnonzero(~bad & (lens > 18)):  # rare: check big values one by one
        x = int(v[i])
        if x > hi:
            bad[i] = True
        else:
            out[i] = x
    bad |= (out < lo) | (out > hi)
    return out, bad


def _read_csv(path: str) -> Trace:
    import pandas as pd  # only CSV needs pandas

    expected = "task,page,op[,count]"
    try:
        df = pd.read_csv(path, dtype=str, keep_default_na=False, skip_blank_lines=False,
                         engine="c", encoding="utf-8")
    except pd.errors.EmptyDataError:
        raise TraceError(f"{path}:1: expected a header line {expected!r}, found an empty file") from None
    except pd.errors.ParserError as e:
        m = re.search(r"line (\d+), saw (\d+)", str(e))
        where = f"{path}:{m.group(1)}" if m else path
        got = f", got {m.group(2)} fields" if m else f" ({e})"
        raise TraceError(f"{where}: expected the header's fields {expected}{got}") from None
    except UnicodeDecodeError as e:
        raise TraceError(f"{path}: expected UTF-8 text CSV ({e})") from None
    cols = [str(c).strip().lower() for c in df.columns]
    if cols not in (["task", "page", "op"], ["task", "page", "op", "count"]):
        raise TraceError(f"{path}:1: expected header {expected!r}, got {','.join(map(str, df.columns))!r}")
    df.columns = cols
    df = df.fillna("")  # short rows leave NaN in the trailing columns
    n = len(df)
    line0 = 2  # data row k is on file line k + 2 (header on line 1; blank lines are kept as rows)
    checks = []
    task, bad = _csv_ints(df["task"].to_numpy(dtype=str), "task", 0, np.iinfo(np.int32).max)
    checks.append((bad, "task: an integer in [0, 2**31)"))
    page, bad = _csv_ints(df["page"].to_numpy(dtype=str), "page", 0, np.iinfo(np.int64).max)
    checks.append((bad, "page: a non-negative decimal integer (virtual page number)"))
    ops = np.char.lower(np.char.strip(df["op"].to_numpy(dtype=str)))
    op = ((ops == "w") | (ops == "1")).astype(np.uint8)
    checks.append((~np.isin(ops, ["r", "w", "0", "1"]), "op: one of r, w, R, W, 0, 1"))
    if "count" in df.columns:
        count, bad = _csv_ints(df["count"].to_numpy(dtype=str), "count", 1, COUNT_MAX)
        checks.append((bad, "count: an integer in [1, 2**32)"))
    else:
        count = np.ones(n, np.int64)
    firsts = [(_first(bad), what) for bad, what in checks if n and bad.any()]
    if firsts:
        i, what = min(firsts, key=lambda f: f[0])  # first bad line; its first bad column
        row = ",".join(df.iloc[i].astype(str))
        if not row.strip(","):
            raise TraceError(f"{path}:{i + line0}: expected a record {expected}, got an empty line")
        raise TraceError(f"{path}:{i + line0}: expected {what}; got {row!r}")
    return _trace(task, page, op, count, {"source": path, "tool": "csv"}, path)


def _read_oracle_general(path: str) -> Trace:
    size = os.path.getsize(path)
    if size % ORACLE_GENERAL_DTYPE.itemsize:
        n = size // ORACLE_GENERAL_DTYPE.itemsize
        raise TraceError(f"{path}: expected whole 24-byte oracleGeneral records; {size} bytes leaves "
                         f"a partial record {n} at byte {n * 24}")
    rec = np.fromfile(path, dtype=ORACLE_GENERAL_DTYPE)
    # libCacheSim skips zero-size requests when reading this format; do the same
    rec = rec[rec["obj_size"] != 0]
    obj = rec["obj_id"]
    if obj.size and obj.max() > np.iinfo(np.int64).max:
        i = _first(obj > np.iinfo(np.int64).max)
        raise TraceError(f"{path}: record {i}: expected obj_id < 2**63 to use as a page number, got "
                         f"{obj[i]}; convert with renumber=True (--renumber) to number objects densely")
    meta = {"source": path, "tool": "oracleGeneral", "obj_size_ignored": True}
    return _trace(None, obj.astype(np.int64), np.zeros(len(obj), np.uint8), None, meta, path)


def _read_oracle_general_ids(path: str) -> np.ndarray:
    """obj_id column as uint64 (for renumbering ids that do not fit int64)."""
    rec = np.fromfile(path, dtype=ORACLE_GENERAL_DTYPE)
    return rec["obj_id"][rec["obj_size"] != 0]


# ---------------------------------------------------------------------------------------------
# lackey


def _parse_lackey_stream(readinto, name: str, instructions: bool, chunk_bytes: int):
    """Parse lackey text from readinto(memoryview) -> nbytes (0 at EOF) into folded arrays.

    Returns (page, op, count, stats) with stats a dict of line counts.
    """
    buf = np.empty(max(int(chunk_bytes), 64), np.uint8)
    cap = len(buf) // _LACKEY_MIN_LINE_BYTES + 1
    out_page = np.empty(cap, np.int64)
    out_op = np.empty(cap, np.uint8)
    out_count = np.empty(cap, np.uint32)
    stats = np.zeros(tk.N_LINE_STATS, np.int64)
    pages, ops, counts = [], [], []
    filled = 0
    eof = False
    nr_bytes = 0
    while True:
        mv = memoryview(buf)
        while filled < len(buf) and not eof:
            n = readinto(mv[filled:])
            if not n:
                eof = True
            else:
                filled += n
                nr_bytes += n
        del mv
        if eof and filled and buf[filled - 1] != 10:  # close a last line without '\n'
            if filled == len(buf):
                buf = np.concatenate([buf, np.zeros(1, np.uint8)])
            buf[filled] = 10
            filled += 1
        lines_before = int(stats.sum())
        n_out, consumed, bad = tk.parse_lackey_chunk(buf, filled, bool(instructions), PAGE_SHIFT,
                                                      out_page, out_op, out_count, stats)
        if bad >= 0:
            text = bytes(buf[consumed:filled]).split(b"\n", 1)[0][:80]
            raise TraceError(f"{name}:{lines_before + bad + 1}: expected a lackey line ' L addr,size', "
                             f"' S addr,size', ' M addr,size' or 'I  addr,size' (hex address, "
                             f"decimal size) or a valgrind '==pid==' message; got {text!r}")
        if n_out:
            lo = 0
            if (counts and pages[-1][-1] == out_page[0] and ops[-1][-1] == out_op[0]
                    and int(counts[-1][-1]) + int(out_count[0]) <= COUNT_MAX):
                counts[-1][-1] += out_count[0]  # the run continues across the chunk boundary
                lo = 1
            if n_out > lo:
                pages.append(out_page[lo:n_out].copy())
                ops.append(out_op[lo:n_out].copy())
                counts.append(out_count[lo:n_out].copy())
        rest = filled - consumed
        if consumed == 0 and filled == len(buf) and not eof:
            # one line longer than the whole buffer: grow rather than fail on odd valgrind output
            buf = np.concatenate([buf, np.empty(len(buf), np.uint8)])
            cap = len(buf) // _LACKEY_MIN_LINE_BYTES + 1
            out_page, out_op, out_count = (np.empty(cap, a.dtype) for a in (out_page, out_op, out_count))
            continue
        buf[:rest] = buf[consumed:filled]
        filled = rest
        if eof and filled == 0:
            break
    cat = lambda parts, dt: np.concatenate(parts) if parts else np.zeros(0, dt)  # noqa: E731
    s = {
        "lines": int(stats.sum()),
        "data_lines": int(stats[tk.LINE_DATA]),
        "instruction_lines": int(stats[tk.LINE_INSTR] + stats[tk.LINE_INSTR_SKIPPED]),
        "instruction_lines_kept": int(stats[tk.LINE_INSTR]),
        "message_lines": int(stats[tk.LINE_MESSAGE]),
        "bytes": nr_bytes,
    }
    return cat(pages, np.int64), cat(ops, np.uint8), cat(counts, np.uint32), s


def parse_lackey(src, instructions: bool = False, chunk_lines: int = 1 << 20,
                 name: str | None = None) -> Trace:
    """Parse valgrind lackey --trace-mem text (a path or a binary file object) into a folded Trace.

    Instruction fetches ('I' lines) are kept, as reads, only if `instructions`. Malformed lines
    raise TraceError naming file:line. Reads chunk_lines * ~16 bytes at a time.
    """
    chunk_bytes = max(int(chunk_lines), 1) * _LACKEY_BYTES_PER_LINE
    with contextlib.ExitStack() as stack:
        if isinstance(src, (str, os.PathLike)):
            name = name or os.fspath(src)
            f = stack.enter_context(open(src, "rb", buffering=0))
        else:
            f = src
            name = name or getattr(src, "name", "<lackey stream>")
        page, op, count, stats = _parse_lackey_stream(f.readinto, str(name), instructions, chunk_bytes)
    meta = {"source": str(name), "tool": "valgrind-lackey", "instructions": bool(instructions),
            "lackey": stats}
    return _trace(None, page, op, count, meta, str(name))


def _batching_reader(f, pipe_bytes: int):
    """readinto that naps after a short read so the pipe can fill.

    Valgrind writes lackey's text in ~100-byte pieces; a reader that wakes for each piece costs
    more CPU in context switches than the parsing itself (measured on 2 CPUs, `sort` of 3000
    lines: 1.6 M reads, 9.3 s wall; with the nap 6 s). A nap is far shorter than the 1 MiB pipe
    takes to fill at lackey's ~30 MB/s, so the writer does not stall.
    """
    def readinto(mv):
        n = f.readinto(mv)
        if n and n < len(mv) and n < pipe_bytes // 4:
            time.sleep(_PIPE_NAP_S)
        return n
    return readinto


def _find_valgrind() -> str:
    vg = shutil.which("valgrind")
    if vg is None:
        raise TierlabError(INSTALL_HINT)
    return vg


def record_trace(cmd: list[str], out, instructions: bool = False, chunk_lines: int = 1 << 20,
                 compress: bool = False, stdin=None, stdout=None, stderr=None,
                 env: dict | None = None) -> Trace:
    """Run `cmd` under valgrind lackey and write its folded page trace to `out` (.npz).

    lackey's text goes through a pipe (valgrind --log-fd) into the chunked numba parser, never to a
    file. stdin/stdout/stderr/env are passed to subprocess.Popen for the program (default:
    inherited).
    The trace is written even if the program exits non-zero; meta["exit_code"] records it. Returns
    the Trace, whose meta also has wall_s and lines_per_s (not stored in the file).
    Raises TierlabError if valgrind is missing or the run yields no accesses.
    """
    cmd = [os.fspath(c) for c in cmd]
    if not cmd:
        raise ConfigError("trace record: expected a command to run after '--'")
    vg = _find_valgrind()
    if shutil.which(cmd[0]) is None:
        raise ConfigError(f"trace record: command not found: {cmd[0]!r}")
    out = os.fspath(out)
    out_dir = os.path.dirname(os.path.abspath(out))
    if not os.path.isdir(out_dir):  # fail before the (slow) run, not after
        raise ConfigError(f"--out {out!r}: directory {out_dir!r} does not exist")
    rfd, wfd = os.pipe()
    pipe_bytes = 1 << 16
    with contextlib.suppress(OSError, AttributeError, ImportError):
        import fcntl
        pipe_bytes = fcntl.fcntl(wfd, fcntl.F_SETPIPE_SZ, _PIPE_BYTES)  # best effort
    argv = [vg, "--tool=lackey", "--trace-mem=yes", f"--log-fd={wfd}", "--", *cmd]
    t0 = time.perf_counter()
    proc = None
    try:
        with open(rfd, "rb", buffering=0, closefd=True) as r:
            try:
                proc = subprocess.Popen(argv, pass_fds=(wfd,), stdin=stdin, stdout=stdout,
                                        stderr=stderr, env=env)
            finally:
                os.close(wfd)  # only valgrind may hold the write end, or EOF never comes
            page, op, count, stats = _parse_lackey_stream(
                _batching_reader(r, pipe_bytes), f"valgrind lackey output of {shlex.join(cmd)!r}", instructions,
                max(int(chunk_lines), 1) * _LACKEY_BYTES_PER_LINE)
        exit_code = proc.wait()
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
    wall_s = time.perf_counter() - t0
    if len(page) == 0:
        raise TierlabError(f"valgrind lackey recorded no memory accesses for {shlex.join(cmd)!r} "
                           f"(exit code {exit_code}); see valgrind's messages on stderr")
    meta = {"source": shlex.join(cmd), "tool": "valgrind-lackey", "instructions": bool(instructions),
            "exit_code": int(exit_code), "lackey": stats}
    save_trace(out, None, page, op, count, meta, compress=compress)
    trace = _trace(None, page, op, count, meta, out)
    trace.meta.update(wall_s=wall_s, lines_per_s=stats["lines"] / wall_s if wall_s > 0 else 0.0)
    return trace


# ---------------------------------------------------------------------------------------------
# transforms, writers, summary


def fold_trace(trace: Trace) -> Trace:
    """Fold consecutive records with equal (task, page, op); the access sequence is unchanged."""
    n = len(trace)
    outs = (np.empty(n, np.int32), np.empty(n, np.int64), np.empty(n, np.uint8), np.empty(n, np.uint32))
    k = tk.fold_runs(trace.task, trace.page, trace.op, trace.count, *outs)
    return Trace(*(a[:k].copy() for a in outs), meta=dict(trace.meta))


def save_trace_csv(path, trace: Trace) -> None:
    """Write `task,page,op,count` CSV (op as r/w), atomically."""
    import pandas as pd

    df = pd.DataFrame({"task": trace.task, "page": trace.page,
                       "op": np.where(trace.op == 1, "w", "r"), "count": trace.count})
    with _atomic_output(path) as tmp:
        df.to_csv(tmp, index=False)


def save_trace_oracle_general(path, trace: Trace) -> None:
    """Write libCacheSim oracleGeneral binary: one request per access (counts expanded), obj_id =
    page, obj_size = page size, clock_time = request index mod 2**32, next_access_vtime = index of
    the next request to the same page or -1. Ops and tasks are not representable and are dropped."""
    ids = np.repeat(trace.page, trace.count.astype(np.int64))
    n = len(ids)
    rec = np.zeros(n, ORACLE_GENERAL_DTYPE)
    idx = np.arange(n, dtype=np.int64)
    rec["clock_time"] = (idx & 0xFFFFFFFF).astype(np.uint32)
    rec["obj_id"] = ids.astype(np.uint64)
    rec["obj_size"] = int(trace.meta.get("page_size", PAGE_SIZE))
    nxt = np.full(n, -1, np.int64)
    order = np.argsort(ids, kind="stable")
    same = ids[order[1:]] == ids[order[:-1]]
    nxt[order[:-1][same]] = order[1:][same]
    rec["next_access_vtime"] = nxt
    with _atomic_output(path) as tmp:
        rec.tofile(tmp)


def _bucket_label(k: int) -> str:
    if k == 0:
        return "0"
    lo, hi = 1 << (k - 1), (1 << k) - 1
    return str(lo) if lo == hi else f"{lo}-{hi}"


def trace_info(trace: Trace) -> dict:
    """Summary: records, accesses, distinct pages, read/write shares, footprint, reuse histogram.

    The reuse histogram is over accesses (folded repeats count as distance 0): ``cold`` first
    touches, then log2 buckets of LRU stack distance in distinct pages, ``[lo, hi]`` inclusive.
    An LRU cache of 2**k pages hits exactly the accesses in the buckets up to ``hi = 2**k - 1``.
    Pages are one namespace across tasks.
    """
    accesses = trace.nr_accesses
    writes = int(trace.count[trace.op == 1].sum(dtype=np.uint64))
    uniq, ids = np.unique(trace.page, return_inverse=True)
    hist, cold = tk.reuse_distance_histogram(ids.astype(np.int64).ravel(), trace.count, len(uniq))
    nz = np.flatnonzero(hist)
    top = int(nz[-1]) + 1 if nz.size else 0
    buckets = [{"distance": _bucket_label(k), "lo": 0 if k == 0 else 1 << (k - 1),
                "hi": 0 if k == 0 else (1 << k) - 1, "accesses": int(hist[k])} for k in range(top)]
    page_size = int(trace.meta.get("page_size", PAGE_SIZE))
    return {
        "source": trace.meta.get("source"),
        "records": len(trace),
        "accesses": accesses,
        "pages": int(len(uniq)),
        "tasks": int(len(np.unique(trace.task))),
        "reads": accesses - writes,
        "writes": writes,
        "read_share": (accesses - writes) / accesses if accesses else 0.0,
        "write_share": writes / accesses if accesses else 0.0,
        "page_size": page_size,
        "footprint_bytes": int(len(uniq)) * page_size,
        "reuse": {"cold": int(cold), "buckets": buckets},
    }


def format_trace_info(info: dict) -> str:
    """A human-readable table of `trace_info` output."""
    rows = [
        ("source", info["source"]),
        ("records", f"{info['records']:,}"),
        ("accesses", f"{info['accesses']:,}"),
        ("pages", f"{info['pages']:,}"),
        ("footprint", f"{info['footprint_bytes'] / 2**20:,.2f} MiB ({info['footprint_bytes']:,} bytes)"),
        ("tasks", f"{info['tasks']}"),
        ("reads", f"{info['reads']:,} ({info['read_share']:.1%})"),
        ("writes", f"{info['writes']:,} ({info['write_share']:.1%})"),
    ]
    w = max(len(k) for k, _ in rows)
    lines = [f"{k:<{w}}  {v}" for k, v in rows]
    total = max(info["accesses"], 1)
    lines.append("")
    lines.append("reuse distance (LRU stack distance, distinct pages)   accesses    share")
    entries = [("cold (first touch)", info["reuse"]["cold"])]
    entries += [(b["distance"], b["accesses"]) for b in info["reuse"]["buckets"]]
    for label, n in entries:
        bar = "#" * round(30 * n / total)
        lines.append(f"  {label:<50}  {n:>10,}  {n / total:6.1%}  {bar}")
    return "\n".join(lines)


def convert_trace(src, out, fmt: str | None = None, to: str | None = None, renumber: bool = False,
                  instructions: bool = False, compress: bool = False) -> Trace:
    """Read `src` (fmt as in `load_trace`), fold repeats, and write `out` as npz (default), csv or
    oraclegeneral (`to`, else from out's name). renumber maps pages to 0..n-1 in sorted order,
    which also admits oracleGeneral obj_ids >= 2**63. Returns the written Trace."""
    src, out = os.fspath(src), os.fspath(out)
    if to is None:
        low = os.path.basename(out).lower()
        to = "csv" if low.endswith(".csv") else "oraclegeneral" if "oraclegeneral" in low else "npz"
    to = to.lower()
    if to not in _OUTPUT_FORMATS:
        raise ConfigError(f"output format {to!r}: expected one of {', '.join(_OUTPUT_FORMATS)}")
    if not os.path.exists(src):
        raise ConfigError(f"trace file {src!r} does not exist")
    fmt = (fmt or _detect_format(src)).lower()
    if renumber and fmt == "oraclegeneral":
        # obj_ids may be 64-bit hashes beyond int64: renumber from the raw uint64 column
        if os.path.getsize(src) % ORACLE_GENERAL_DTYPE.itemsize:
            _read_oracle_general(src)  # raises the partial-record error
        ids = _read_oracle_general_ids(src)
        _, page = np.unique(ids, return_inverse=True)
        trace = _trace(None, page.astype(np.int64).ravel(), np.zeros(len(ids), np.uint8), None,
                       {"source": src, "tool": "oracleGeneral", "obj_size_ignored": True}, src)
    else:
        trace = load_trace(src, fmt, instructions=instructions)
        if renumber:
            _, page = np.unique(trace.page, return_inverse=True)
            trace.page = page.astype(np.int64).ravel()
    if renumber:
        trace.meta["renumbered"] = True
    trace = fold_trace(trace)
    if to == "npz":
        save_trace(out, trace.task, trace.page, trace.op, trace.count, trace.meta, compress=compress)
    elif to == "csv":
        save_trace_csv(out, trace)
    else:
        save_trace_oracle_general(out, trace)
    return trace


# ---------------------------------------------------------------------------------------------
# command line


def add_trace_commands(subparsers) -> argparse.ArgumentParser:
    """Register `trace` (record, info, convert) on an argparse subparsers object."""
    p = subparsers.add_parser(
        "trace", help="record, inspect and convert page-access traces of real programs",
        description="Page-granular access traces (task, page, read/write, count) in tierlab's .npz "
                    "format. A trace is a workload.")
    sub = p.add_subparsers(dest="trace_command", metavar="{record,info,convert}", required=True)

    r = sub.add_parser(
        "record", help="run a program under valgrind lackey and save its page trace",
        description="Run COMMAND under `valgrind --tool=lackey --trace-mem=yes`, stream lackey's "
                    "output through a pipe into the parser, and write a folded page trace (.npz). "
                    "Expect the program to run 50-200x slower. Needs valgrind (Debian/Ubuntu: "
                    "apt-get install valgrind).",
        epilog="example: python -m tierlab trace record --out sort.npz -- sort /tmp/words.txt")
    r.add_argument("--out", required=True, metavar="FILE", help="output trace file (.npz)")
    r.add_argument("--instructions", action="store_true",
                   help="also record instruction fetches (as reads); default: data accesses only")
    r.add_argument("--compress", action="store_true", help="write a compressed .npz")
    r.add_argument("--chunk-lines", type=int, default=1 << 20, metavar="N",
                   help="lackey lines parsed per batch (default: %(default)s)")
    r.add_argument("command", nargs=argparse.REMAINDER, metavar="-- COMMAND ...",
                   help="the program and its arguments, after '--'")

    i = sub.add_parser(
        "info", help="summarise a trace: pages, accesses, read/write share, reuse distances",
        description="Print distinct pages, accesses, read/write share, footprint and a histogram "
                    "of LRU reuse distances (log2 buckets of distinct pages, plus cold misses).")
    i.add_argument("file", metavar="FILE", help="trace file (.npz, .npy, .csv, oracleGeneral, .lackey)")
    i.add_argument("--format", choices=("table", "json"), default="table", help="output format")
    i.add_argument("--from", dest="src_format", choices=_INPUT_FORMATS, default=None,
                   help="input format (default: from the file's first bytes and name)")

    c = sub.add_parser(
        "convert", help="convert CSV, libCacheSim oracleGeneral or lackey text to a trace",
        description="Read a trace in another format, fold consecutive repeats, and write it. "
                    "CSV needs a header task,page,op[,count] with op one of r/w/R/W/0/1. "
                    "oracleGeneral (libCacheSim) records become reads of page obj_id by task 0; "
                    "timestamps and object sizes are dropped.")
    c.add_argument("src", metavar="SRC", help="input trace file")
    c.add_argument("--out", required=True, metavar="FILE", help="output file")
    c.add_argument("--from", dest="src_format", choices=_INPUT_FORMATS, default=None,
                   help="input format (default: from the file's first bytes and name)")
    c.add_argument("--to", dest="out_format", choices=_OUTPUT_FORMATS, default=None,
                   help="output format (default: from --out's name, else npz)")
    c.add_argument("--renumber", action="store_true",
                   help="number pages densely 0..n-1 (sorted), e.g. for hashed oracleGeneral ids")
    c.add_argument("--instructions", action="store_true",
                   help="lackey input: keep instruction fetches too")
    c.add_argument("--compress", action="store_true", help="write a compressed .npz")
    p.set_defaults(func=main_trace)
    return p


def main_trace(args: argparse.Namespace) -> int:
    """Run a parsed `trace` sub-command. Returns the process exit status."""
    cmd = args.trace_command
    if cmd == "record":
        command = list(args.command)
        if command and command[0] == "--":
            command = command[1:]
        trace = record_trace(command, args.out, instructions=args.instructions,
                             chunk_lines=args.chunk_lines, compress=args.compress)
        m = trace.meta
        print(f"wrote {args.out}: {len(trace):,} records, {trace.nr_accesses:,} accesses, "
              f"{len(np.unique(trace.page)):,} pages; {m['lackey']['lines']:,} lackey lines in "
              f"{m['wall_s']:.1f} s ({m['lines_per_s']:,.0f} lines/s)", file=sys.stderr)
        if m["exit_code"] != 0:
            print(f"warning: {shlex.join(command)!r} exited with status {m['exit_code']}",
                  file=sys.stderr)
        return 0
    if cmd == "info":
        info = trace_info(load_trace(args.file, args.src_format))
        print(json.dumps(info, indent=2) if args.format == "json" else format_trace_info(info))
        return 0
    if cmd == "convert":
        trace = convert_trace(args.src, args.out, fmt=args.src_format, to=args.out_format,
                              renumber=args.renumber, instructions=args.instructions,
                              compress=args.compress)
        print(f"wrote {args.out}: {len(trace):,} records, {trace.nr_accesses:,} accesses",
              file=sys.stderr)
        return 0
    raise ConfigError(f"trace: unknown sub-command {cmd!r}; expected record, info or convert")
