"""Trace writers (.npz, CSV, libCacheSim oracleGeneral), folding and `convert_trace`.

Every writer validates first and writes through `tierlab.atomic.atomic_path` (a temporary file in
the output's directory, fsync'ed and renamed into place), so a failed run leaves nothing behind.

The .npz is an ordinary numpy archive (``np.load(path, allow_pickle=False)`` reads it; no pickle):
the columns task, page, op, count and the 0-d members format_version, page_size, meta. Members are
deflate-compressed by default (zlib level 1: a recorded trace shrinks ~10x at several hundred
MB/s; higher levels gained little and cost several times the CPU); ``compress=False`` stores them.
`save_trace_chunks` writes a trace given as a stream of chunks with memory bounded by one chunk:
the columns are spooled to temporary files next to the output and then copied into the archive.
"""
from __future__ import annotations

import json
import os
import tempfile
import zipfile
from typing import Iterable, Iterator

import numpy as np

from ..atomic import atomic_path
from ..core import trace_kernels as tk
from ..errors import ConfigError
from ..units import PAGE_SIZE
from .format import (
    COLUMNS, FORMAT_VERSION, ORACLE_GENERAL_DTYPE, OUTPUT_FORMATS, Trace, make_trace, validated,
)
from .readers import TraceFile, detect_format, load_trace

COMPRESS_LEVEL = 1
_SPOOL_BYTES = 1 << 24


def _scalars(meta: dict | None) -> dict:
    meta = dict(meta or {})
    page_size = int(meta.pop("page_size", PAGE_SIZE))
    meta.pop("format_version", None)
    try:
        meta_json = json.dumps(meta, sort_keys=True)
    except TypeError as e:
        raise ConfigError(f"save_trace: meta must be JSON-serialisable: {e}") from None
    return {"format_version": np.int64(FORMAT_VERSION), "page_size": np.int64(page_size),
            "meta": np.array(meta_json)}


def _write_npz(tmp: str, n: int, columns: dict[str, Iterable[np.ndarray]], scalars: dict,
               compress: bool) -> None:
    """Write an .npz whose 1-D members of n records come as pieces, one member at a time."""
    mode = zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED
    with zipfile.ZipFile(tmp, "w", compression=mode, compresslevel=COMPRESS_LEVEL if compress else None,
                         allowZip64=True) as zf:
        for name, dtype in COLUMNS:
            with zf.open(name + ".npy", "w", force_zip64=True) as f:
                np.lib.format.write_array_header_2_0(
                    f, {"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False, "shape": (n,)})
                for part in columns[name]:
                    f.write(np.ascontiguousarray(part, dtype).data)
        for name, value in scalars.items():
            with zf.open(name + ".npy", "w") as f:
                np.lib.format.write_array(f, value, allow_pickle=False)


def save_trace(path, task, page, op, count, meta: dict | None = None, compress: bool = True) -> None:
    """Validate and write a trace as .npz (see the module docstring), atomically.

    task/op/count may be None (all task 0 / reads / count 1). meta must be JSON-serialisable.
    Records are written as given; use `fold_trace` first to fold repeats.
    """
    task, page, op, count = validated(task, page, op, count, f"save_trace({os.fspath(path)!r})")
    scalars = _scalars(meta)
    cols = {"task": [task], "page": [page], "op": [op], "count": [count]}
    with atomic_path(path) as tmp:
        _write_npz(tmp, len(page), cols, scalars, compress)


def _spooled(path: str, dtype) -> Iterator[np.ndarray]:
    with open(path, "rb") as f:
        while True:
            a = np.fromfile(f, dtype, count=_SPOOL_BYTES // dtype.itemsize)
            if not len(a):
                return
            yield a


def save_trace_chunks(path, chunks: Iterable[tuple], meta: dict | None = None,
                      compress: bool = True) -> int:
    """Write a trace given as (task, page, op, count) chunks (task/op/count may be None) as .npz,
    atomically, holding one chunk in memory; `meta` is read after the last chunk, so the producer
    may fill it in while streaming. Returns the number of records."""
    path = os.fspath(path)
    with atomic_path(path) as tmp:
        with tempfile.TemporaryDirectory(prefix="." + os.path.basename(path) + ".spool.",
                                         dir=os.path.dirname(tmp)) as spool:
            files = {name: os.path.join(spool, name) for name, _ in COLUMNS}
            n = 0
            handles = {name: open(p, "wb") for name, p in files.items()}
            try:
                for chunk in chunks:
                    cols = validated(*chunk, where=f"save_trace({path!r})", offset=n)
                    for (name, _), a in zip(COLUMNS, cols):
                        a.tofile(handles[name])
                    n += len(cols[1])
            finally:
                for h in handles.values():
                    h.close()
            _write_npz(tmp, n, {name: _spooled(files[name], dt) for name, dt in COLUMNS},
                       _scalars(meta), compress)
    return n


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
    with atomic_path(path) as tmp:
        df.to_csv(tmp, index=False)


def write_oracle_general(path, pages, obj_size: int = 1, next_access: bool = False) -> None:
    """Write libCacheSim's oracleGeneral binary: one request per element of `pages` (obj_id = the
    page, clock_time = the request's index mod 2**32), each object `obj_size` bytes (1: libCacheSim's
    cache size is then in objects), next_access_vtime the index of the next request to the same
    page (-1 when there is none, or for every request unless `next_access`). Atomic."""
    ids = np.asarray(pages, np.int64)
    n = len(ids)
    rec = np.zeros(n, ORACLE_GENERAL_DTYPE)
    idx = np.arange(n, dtype=np.int64)
    rec["clock_time"] = (idx & 0xFFFFFFFF).astype(np.uint32)
    rec["obj_id"] = ids.view(np.uint64)
    rec["obj_size"] = obj_size
    nxt = np.full(n, -1, np.int64)
    if next_access:
        order = np.argsort(ids, kind="stable")
        same = ids[order[1:]] == ids[order[:-1]]
        nxt[order[:-1][same]] = order[1:][same]
    rec["next_access_vtime"] = nxt
    with atomic_path(path) as tmp:
        rec.tofile(tmp)


def save_trace_oracle_general(path, trace: Trace) -> None:
    """A trace in libCacheSim's oracleGeneral binary: one request per access (counts expanded),
    obj_size = page size, with next_access_vtime. Ops and tasks are not representable and are
    dropped."""
    write_oracle_general(path, np.repeat(trace.page, trace.count.astype(np.int64)),
                         obj_size=int(trace.meta.get("page_size", PAGE_SIZE)), next_access=True)


def convert_trace(src, out, fmt: str | None = None, to: str | None = None, renumber: bool = False,
                  instructions: bool = False, compress: bool = True) -> Trace:
    """Read `src` (fmt as in `load_trace`), fold repeats, and write `out` as npz (default), csv or
    oraclegeneral (`to`, else from out's name). renumber maps pages to 0..n-1 in sorted order,
    which also admits oracleGeneral obj_ids >= 2**63. Returns the written Trace."""
    src, out = os.fspath(src), os.fspath(out)
    if to is None:
        low = os.path.basename(out).lower()
        to = "csv" if low.endswith(".csv") else "oraclegeneral" if "oraclegeneral" in low else "npz"
    to = to.lower()
    if to not in OUTPUT_FORMATS:
        raise ConfigError(f"output format {to!r}: expected one of {', '.join(OUTPUT_FORMATS)}")
    if not os.path.exists(src):
        raise ConfigError(f"trace file {src!r} does not exist")
    fmt = (fmt or detect_format(src)).lower()
    if renumber and fmt == "oraclegeneral":
        # obj_ids may be 64-bit hashes beyond int64: renumber from the raw uint64 column
        f = TraceFile(src, fmt)
        parts = list(f.iter_oracle_ids())
        ids = np.concatenate(parts) if parts else np.zeros(0, np.uint64)
        _, page = np.unique(ids, return_inverse=True)
        trace = make_trace(None, page.astype(np.int64).ravel(), None, None, f.meta, src)
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
