"""The trace record model, its file-format constants and record validation.

A trace is a sequence of records (task, page, op, count): `count` consecutive accesses by `task` to
virtual page `page` (address >> 12) of kind `op` (0 read, 1 write). Consecutive repeats of the same
(task, page, op) are folded into one record, so folding never changes the access sequence.

Anything with ``meta`` and ``iter_chunks(nr_records)`` yielding (task, page, op, count) array chunks
in order is a trace source: an in-memory `Trace`, or a `tierlab.trace.readers.TraceFile` that reads
a file chunk by chunk (memory bounded by one chunk).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator

import numpy as np

from ..core import trace_kernels as tk
from ..errors import ConfigError, TraceError
from ..units import PAGE_SIZE

FORMAT_VERSION = 1
COUNT_MAX = tk.COUNT_MAX
CHUNK_RECORDS = 1 << 20  # records per chunk when streaming a trace

# libCacheSim oracleGeneral: packed little-endian struct {uint32 clock_time; uint64 obj_id;
# uint32 obj_size; int64 next_access_vtime (-1: never again)} (oracleGeneralBin.h). The one
# declaration in tierlab: tests, benchmarks and bench import it from here.
ORACLE_GENERAL_DTYPE = np.dtype(
    [("clock_time", "<u4"), ("obj_id", "<u8"), ("obj_size", "<u4"), ("next_access_vtime", "<i8")]
)
assert ORACLE_GENERAL_DTYPE.itemsize == 24

# the record columns in file and chunk order, with their canonical dtypes
COLUMNS = (("task", np.dtype(np.int32)), ("page", np.dtype(np.int64)), ("op", np.dtype(np.uint8)),
           ("count", np.dtype(np.uint32)))
INPUT_FORMATS = ("npz", "npy", "csv", "oraclegeneral", "lackey")
OUTPUT_FORMATS = ("npz", "csv", "oraclegeneral")


@dataclass
class Trace:
    """A folded access trace held in memory: parallel arrays plus metadata."""

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

    def iter_chunks(self, nr_records: int = CHUNK_RECORDS) -> Iterator[tuple[np.ndarray, ...]]:
        """Yield (task, page, op, count) views of at most nr_records records each, in order."""
        check_chunk_records(nr_records)
        for lo in range(0, len(self), nr_records):
            hi = lo + nr_records
            yield self.task[lo:hi], self.page[lo:hi], self.op[lo:hi], self.count[lo:hi]


def check_chunk_records(nr_records) -> int:
    if isinstance(nr_records, bool) or not isinstance(nr_records, (int, np.integer)) or nr_records < 1:
        raise ConfigError(f"nr_records: expected an integer >= 1, got {nr_records!r}")
    return int(nr_records)


def first_true(mask: np.ndarray) -> int:
    return int(np.flatnonzero(mask)[0])


def _as_int_array(a, name: str, dtype, lo: int, hi: int, where: str, offset: int) -> np.ndarray:
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
            i = first_true(bad)
            raise TraceError(f"{where}: record {offset + i}: expected {name} in [{lo}, {hi}], "
                             f"got {a[i]}")
    return a.astype(dtype, copy=False)


def validated(task, page, op, count, where: str, offset: int = 0):
    """Canonical-dtype arrays, or TraceError naming the first bad record (numbered from offset).

    task/op/count may be None: all task 0 / reads / count 1."""
    page = _as_int_array(page, "page", np.int64, 0, np.iinfo(np.int64).max, where, offset)
    n = len(page)
    if count is None:
        count = np.ones(n, np.uint32)
    if task is None:
        task = np.zeros(n, np.int32)
    if op is None:
        op = np.zeros(n, np.uint8)
    task = _as_int_array(task, "task", np.int32, 0, np.iinfo(np.int32).max, where, offset)
    op = _as_int_array(op, "op", np.uint8, 0, 1, where, offset)
    count = _as_int_array(count, "count", np.uint32, 1, COUNT_MAX, where, offset)
    for name, a in (("task", task), ("op", op), ("count", count)):
        if len(a) != n:
            raise TraceError(f"{where}: array {name!r} has {len(a)} records, 'page' has {n}")
    return task, page, op, count


def make_trace(task, page, op, count, meta, where) -> Trace:
    """A validated Trace with format_version and page_size in its meta."""
    task, page, op, count = validated(task, page, op, count, where)
    meta = dict(meta)
    meta.setdefault("format_version", FORMAT_VERSION)
    meta.setdefault("page_size", PAGE_SIZE)
    return Trace(task, page, op, count, meta)
