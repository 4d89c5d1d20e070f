"""Trace readers: tierlab .npz, .npy structured arrays, CSV, libCacheSim oracleGeneral, lackey text.

`TraceFile(path)` checks the file up front (existence, format, headers, member shapes) and then
reads it chunk by chunk (`iter_chunks`), so analysing or replaying a trace needs memory for one
chunk, not the whole trace; every chunk is validated, and an error names file:line or the record.
How each format streams: .npz members are read through `zipfile` (stored or deflated) with the .npy
header parsed once and then fixed-size slices, so a compressed trace is inflated a chunk at a time;
.npy is memory-mapped; CSV goes through pandas in row chunks; oracleGeneral is read in record
blocks; lackey text through the chunked numba parser. `load_trace` reads everything into a `Trace`.
"""
from __future__ import annotations

import contextlib
import json
import os
import re
import zipfile
import zlib
from typing import Iterator

import numpy as np

from ..errors import ConfigError, TraceError
from ..units import PAGE_SIZE
from .format import (
    CHUNK_RECORDS, COLUMNS, COUNT_MAX, FORMAT_VERSION, INPUT_FORMATS, ORACLE_GENERAL_DTYPE, Trace,
    check_chunk_records, first_true, validated,
)
from .lackey import LACKEY_BYTES_PER_LINE, iter_lackey, new_stats, open_lackey, stats_dict

_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_CSV_EXPECTED = "task,page,op[,count]"


def detect_format(path: str) -> str:
    """Input format from the file's first bytes, then its name."""
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


def _npy_header(f, where: str):
    """(length, dtype) of the 1-D array whose .npy header starts at f's position."""
    version = np.lib.format.read_magic(f)
    read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
    shape, _, dtype = read(f)
    if len(shape) != 1:
        raise TraceError(f"{where}: expected 1-D, got shape {shape}")
    if dtype.hasobject:
        raise TraceError(f"{where}: expected integers, got dtype {dtype}")
    return shape[0], dtype


class TraceFile:
    """A trace file read chunk by chunk (see the module docstring); a trace source like `Trace`."""

    def __init__(self, path, fmt: str | None = None, instructions: bool = False):
        self.path = os.fspath(path)
        if not os.path.exists(self.path):
            raise ConfigError(f"trace file {self.path!r} does not exist")
        self.fmt = (fmt or detect_format(self.path)).lower()
        if self.fmt not in INPUT_FORMATS:
            raise ConfigError(f"trace format {fmt!r}: expected one of {', '.join(INPUT_FORMATS)}")
        self.instructions = bool(instructions)
        self.meta = {"source": self.path, "tool": self.fmt, "format_version": FORMAT_VERSION,
                     "page_size": PAGE_SIZE}
        self._lackey_stats = None
        getattr(self, f"_open_{self.fmt}")()

    def __repr__(self) -> str:
        return f"TraceFile({self.path!r}, fmt={self.fmt!r})"

    def iter_chunks(self, nr_records: int = CHUNK_RECORDS) -> Iterator[tuple[np.ndarray, ...]]:
        """Yield validated (task, page, op, count) chunks of at most nr_records records, in order."""
        n = check_chunk_records(nr_records)
        yield from getattr(self, f"_chunks_{self.fmt}")(n)

    def load(self) -> Trace:
        """The whole trace in memory."""
        parts = list(self.iter_chunks())
        cols = [np.concatenate([p[i] for p in parts]) if parts else np.zeros(0, dt)
                for i, (_, dt) in enumerate(COLUMNS)]
        meta = dict(self.meta)
        if self._lackey_stats is not None:
            meta["lackey"] = stats_dict(self._lackey_stats)
        return Trace(*cols, meta=meta)

    # -- npz ------------------------------------------------------------------------------------

    def _open_npz(self):
        try:
            zf = zipfile.ZipFile(self.path)
        except (zipfile.BadZipFile, OSError, ValueError, EOFError) as e:
            raise TraceError(f"{self.path}: not a readable .npz file ({e})") from None
        with self._npz_errors(), zf:
            names = {n[:-4] for n in zf.namelist() if n.endswith(".npy")}
            missing = {"page", "op"} - names
            if missing:
                raise TraceError(f"{self.path}: expected arrays task, page, op, count in the .npz; "
                                 f"missing {sorted(missing)}")
            self._members = {}
            for c, _ in COLUMNS:
                if c in names:
                    with zf.open(c + ".npy") as f:
                        self._members[c] = _npy_header(f, f"{self.path}: array {c!r}")
            n = self._members["page"][0]
            for c, (m, _) in self._members.items():
                if m != n:
                    raise TraceError(f"{self.path}: array {c!r} has {m} records, 'page' has {n}")
            scalar = lambda k: np.load(zf.open(k + ".npy"), allow_pickle=False)[()]  # noqa: E731
            version = int(scalar("format_version")) if "format_version" in names else FORMAT_VERSION
            if version > FORMAT_VERSION:
                raise TraceError(f"{self.path}: format_version {version} is newer than this tierlab "
                                 f"reads (<= {FORMAT_VERSION}); upgrade tierlab")
            meta = {}
            if "meta" in names:
                try:
                    meta = json.loads(str(scalar("meta")))
                except ValueError as e:
                    raise TraceError(f"{self.path}: array 'meta': expected a JSON object ({e})") from None
                if not isinstance(meta, dict):
                    raise TraceError(f"{self.path}: array 'meta': expected a JSON object, got "
                                     f"{type(meta).__name__}")
            page_size = int(scalar("page_size")) if "page_size" in names else PAGE_SIZE
            if page_size <= 0 or page_size & (page_size - 1):
                raise TraceError(f"{self.path}: page_size: expected a power of two, got {page_size}")
        meta.update(format_version=version, page_size=page_size)
        self.meta = meta

    @contextlib.contextmanager
    def _npz_errors(self):
        """zip, zlib and .npy errors inside the archive -> one TraceError naming the file."""
        try:
            yield
        except TraceError:
            raise
        except (ValueError, TypeError, OSError, EOFError, KeyError, zlib.error, zipfile.BadZipFile) as e:
            raise TraceError(f"{self.path}: damaged .npz member ({type(e).__name__}: {e})") from None

    def _chunks_npz(self, n: int):
        with self._npz_errors(), zipfile.ZipFile(self.path) as zf:
            files = {}
            for c in self._members:
                f = files[c] = zf.open(c + ".npy")
                _npy_header(f, self.path)
            total = self._members["page"][0]
            for lo in range(0, total, n):
                k = min(n, total - lo)
                cols = {}
                for c, f in files.items():
                    dt = self._members[c][1]
                    raw = f.read(k * dt.itemsize)
                    if len(raw) != k * dt.itemsize:
                        raise EOFError(f"array {c!r} ends before record {lo + len(raw) // dt.itemsize}")
                    cols[c] = np.frombuffer(raw, dt)
                yield validated(cols.get("task"), cols["page"], cols["op"], cols.get("count"),
                                self.path, lo)
            for f in files.values():
                f.read()  # to the end: zipfile checks the CRC there
                f.close()

    # -- npy ------------------------------------------------------------------------------------

    def _open_npy(self):
        try:
            self._array = np.load(self.path, mmap_mode="r", allow_pickle=False)
        except Exception as e:
            raise TraceError(f"{self.path}: not a readable .npy file ({e})") from None
        fields = self._array.dtype.names or ()
        if "page" not in fields or "op" not in fields or self._array.ndim != 1:
            raise TraceError(f"{self.path}: expected a 1-D structured array with fields task, page, "
                             f"op[, count]; got dtype {self._array.dtype}")
        self.meta["tool"] = "npy"

    def _chunks_npy(self, n: int):
        a = self._array
        fields = a.dtype.names
        for lo in range(0, len(a), n):
            part = np.array(a[lo:lo + n])
            get = lambda k: part[k] if k in fields else None  # noqa: E731
            yield validated(get("task"), part["page"], part["op"], get("count"), self.path, lo)

    # -- CSV ------------------------------------------------------------------------------------

    def _open_csv(self):
        import pandas as pd  # only CSV needs pandas
        self.meta["tool"] = "csv"
        try:
            head = pd.read_csv(self.path, dtype=str, nrows=0, encoding="utf-8")
        except pd.errors.EmptyDataError:
            raise TraceError(f"{self.path}:1: expected a header line {_CSV_EXPECTED!r}, found an "
                             f"empty file") from None
        except UnicodeDecodeError as e:
            raise TraceError(f"{self.path}: expected UTF-8 text CSV ({e})") from None
        cols = [str(c).strip().lower() for c in head.columns]
        if cols not in (["task", "page", "op"], ["task", "page", "op", "count"]):
            raise TraceError(f"{self.path}:1: expected header {_CSV_EXPECTED!r}, got "
                             f"{','.join(map(str, head.columns))!r}")
        self._csv_cols = cols

    def _chunks_csv(self, n: int):
        import pandas as pd
        path = self.path
        try:
            reader = pd.read_csv(path, dtype=str, keep_default_na=False, skip_blank_lines=False,
                                 engine="c", encoding="utf-8", chunksize=n)
            row0 = 0
            for df in reader:
                df.columns = self._csv_cols
                yield _csv_chunk(df.fillna(""), path, row0 + 2)  # header on line 1
                row0 += len(df)
        except pd.errors.ParserError as e:
            m = re.search(r"line (\d+), saw (\d+)", str(e))
            where = f"{path}:{m.group(1)}" if m else path
            got = f", got {m.group(2)} fields" if m else f" ({e})"
            raise TraceError(f"{where}: expected the header's fields {_CSV_EXPECTED}{got}") from None
        except UnicodeDecodeError as e:
            raise TraceError(f"{path}: expected UTF-8 text CSV ({e})") from None

    # -- oracleGeneral --------------------------------------------------------------------------

    def _open_oraclegeneral(self):
        size = os.path.getsize(self.path)
        if size % ORACLE_GENERAL_DTYPE.itemsize:
            n = size // ORACLE_GENERAL_DTYPE.itemsize
            raise TraceError(f"{self.path}: expected whole 24-byte oracleGeneral records; {size} bytes "
                             f"leaves a partial record {n} at byte {n * 24}")
        self.meta.update(tool="oracleGeneral", obj_size_ignored=True)

    def iter_oracle_ids(self, n: int = CHUNK_RECORDS) -> Iterator[np.ndarray]:
        """The raw uint64 obj_id column in chunks, zero-size requests skipped (as libCacheSim does)."""
        with open(self.path, "rb") as f:
            while True:
                rec = np.fromfile(f, ORACLE_GENERAL_DTYPE, count=n)
                if not len(rec):
                    return
                yield rec["obj_id"][rec["obj_size"] != 0]

    def _chunks_oraclegeneral(self, n: int):
        lo = 0
        for obj in self.iter_oracle_ids(n):
            if obj.size and obj.max() > np.iinfo(np.int64).max:
                i = first_true(obj > np.iinfo(np.int64).max)
                raise TraceError(f"{self.path}: record {lo + i}: expected obj_id < 2**63 to use as a "
                                 f"page number, got {obj[i]}; convert with renumber=True (--renumber) "
                                 f"to number objects densely")
            yield validated(None, obj.astype(np.int64), None, None, self.path, lo)
            lo += len(obj)

    # -- lackey ---------------------------------------------------------------------------------

    def _open_lackey(self):
        self.meta.update(tool="valgrind-lackey", instructions=self.instructions)

    def _chunks_lackey(self, n: int):
        self._lackey_stats = new_stats()
        with open_lackey(self.path) as (readinto, name):
            for page, op, count in iter_lackey(readinto, name, self.instructions,
                                               n * LACKEY_BYTES_PER_LINE, self._lackey_stats):
                yield validated(None, page, op, count, name)


def _csv_ints(values: np.ndarray, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
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


def _csv_chunk(df, path: str, line0: int):
    """Validated columns of one CSV chunk whose first row is on file line line0."""
    n = len(df)
    checks = []
    task, bad = _csv_ints(df["task"].to_numpy(dtype=str), 0, np.iinfo(np.int32).max)
    checks.append((bad, "task: an integer in [0, 2**31)"))
    page, bad = _csv_ints(df["page"].to_numpy(dtype=str), 0, np.iinfo(np.int64).max)
    checks.append((bad, "page: a non-negative decimal integer (virtual page number)"))
    ops = np.char.lower(np.char.strip(df["op"].to_numpy(dtype=str)))
    op = ((ops == "w") | (ops == "1")).astype(np.uint8)
    checks.append((~np.isin(ops, ["r", "w", "0", "1"]), "op: one of r, w, R, W, 0, 1"))
    if "count" in df.columns:
        count, bad = _csv_ints(df["count"].to_numpy(dtype=str), 1, COUNT_MAX)
        checks.append((bad, "count: an integer in [1, 2**32)"))
    else:
        count = None
    firsts = [(first_true(bad), what) for bad, what in checks if n and bad.any()]
    if firsts:
        i, what = min(firsts, key=lambda f: f[0])  # first bad line; its first bad column
        row = ",".join(df.iloc[i].astype(str))
        if not row.strip(","):
            raise TraceError(f"{path}:{i + line0}: expected a record {_CSV_EXPECTED}, got an empty line")
        raise TraceError(f"{path}:{i + line0}: expected {what}; got {row!r}")
    return validated(task, page, op, count, path, line0 - 2)


def open_trace(trace, fmt: str | None = None):
    """A trace source: a Trace or TraceFile as is, a path as a TraceFile."""
    if isinstance(trace, (Trace, TraceFile)):
        return trace
    if isinstance(trace, (str, os.PathLike)):
        return TraceFile(trace, fmt)
    raise ConfigError(f"trace: expected a path, a Trace or a TraceFile, got {type(trace).__name__}")


def load_trace(path, fmt: str | None = None, instructions: bool = False) -> Trace:
    """Read and validate a whole trace. fmt: one of npz, npy, csv, oraclegeneral, lackey, or None to
    detect from the file's first bytes and name. `instructions` applies to lackey text only."""
    return TraceFile(path, fmt, instructions).load()

