"""Trace statistics in one streaming pass: counts, distinct pages, LRU stack (reuse) distances.

Everything here reads a trace source chunk by chunk (a path, a `Trace` or a `TraceFile`), so its
memory is one chunk plus O(distinct pages): a dense-id hash table (`core.trace_kernels.PageIds`)
and the stack-distance state (`StackDistances`: last position per page, a Fenwick tree over
positions, compacted when positions run out, and the exact distance histogram). Pages form one namespace across tasks.
"""
from __future__ import annotations

import numpy as np

from ..core import trace_kernels as tk
from ..units import PAGE_SIZE
from ..core.trace_kernels import PageIds
from .format import CHUNK_RECORDS
from .readers import open_trace


def _grown(a: np.ndarray, n: int, fill) -> np.ndarray:
    if len(a) >= n:
        return a
    b = np.full(max(n, 2 * len(a)), fill, a.dtype)
    b[:len(a)] = a
    return b


class StackDistances:
    """Exact LRU stack-distance histogram of a folded access sequence, fed chunk by chunk
    (`core.trace_kernels.stack_distances`): hist[d] accesses at distance d, cold first accesses."""

    def __init__(self):
        self.last = np.full(1024, -1, np.int64)
        self.hist = np.zeros(1024, np.int64)
        self.tree = np.zeros(2 * 1024 + 1, np.int64)
        self.clock = 0
        self.cold = 0

    def add(self, ids: np.ndarray, count: np.ndarray, n_ids: int) -> None:
        """ids: dense ids (< n_ids) of a chunk of records; count: accesses per record."""
        if n_ids > len(self.last):
            self.last = _grown(self.last, n_ids, -1)
            self.hist = _grown(self.hist, n_ids, 0)
            tree = np.zeros(2 * len(self.last) + 1, np.int64)
            self.clock = int(tk.compact_positions(self.last, len(self.last), self.tree, tree))
            self.tree = tree
        self.clock, cold = tk.stack_distances(ids, count, n_ids, self.last, self.tree, self.clock,
                                              self.hist)
        self.clock = int(self.clock)
        self.cold += int(cold)

    def lru_misses(self, sizes) -> np.ndarray:
        """Misses of an LRU cache of each size (in pages; >= 0): cold + accesses at distance >= size."""
        tail = np.concatenate([np.cumsum(self.hist[::-1])[::-1], [0]])  # tail[s] = sum hist[s:]
        sizes = np.minimum(np.asarray(sizes, np.int64), len(self.hist))
        return self.cold + tail[sizes]


def scan(trace, reuse: bool = False, nr_records: int = CHUNK_RECORDS) -> dict:
    """One pass: records, accesses, writes, task ids, dense page ids (`PageIds`) and, with
    reuse=True, the `StackDistances` of the trace."""
    src = open_trace(trace)
    ids = PageIds()
    sd = StackDistances() if reuse else None
    records = accesses = writes = 0
    tasks = np.zeros(0, np.int32)
    for task, page, op, count in src.iter_chunks(nr_records):
        records += len(page)
        accesses += int(count.sum(dtype=np.uint64))
        writes += int(count[op == 1].sum(dtype=np.uint64))
        if len(task) and (task[0] not in tasks or task.min() != task.max()):
            tasks = np.union1d(tasks, task)
        dense = ids.map(page)
        if sd is not None:
            sd.add(dense, count, ids.n)
    return {"source": src, "records": records, "accesses": accesses, "writes": writes,
            "tasks": tasks, "ids": ids, "reuse": sd}


def _bucket_label(k: int) -> str:
    if k == 0:
        return "0"
    lo, hi = 1 << (k - 1), (1 << k) - 1
    return str(lo) if lo == hi else f"{lo}-{hi}"


def trace_info(trace) -> dict:
    """Summary: records, accesses, distinct pages, read/write shares, footprint, reuse histogram.

    The reuse histogram is over accesses (folded repeats count as distance 0): ``cold`` first
    touches, then log2 buckets of LRU stack distance in distinct pages, ``[lo, hi]`` inclusive.
    An LRU cache of 2**k pages hits exactly the accesses in the buckets up to ``hi = 2**k - 1``.
    Reads the trace (a path, Trace or TraceFile) in one streaming pass.
    """
    s = scan(trace, reuse=True)
    src, sd, accesses, writes = s["source"], s["reuse"], s["accesses"], s["writes"]
    pages = s["ids"].n
    hist = sd.hist[:max(pages, 1)]
    bucket = np.zeros(len(hist), np.int64)
    bucket[1:] = np.frexp(np.arange(1, len(hist), dtype=np.float64))[1]  # bit length of d
    per_bucket = np.bincount(bucket, weights=hist, minlength=1).astype(np.int64)
    nz = np.flatnonzero(per_bucket)
    top = int(nz[-1]) + 1 if nz.size else 0
    buckets = [{"distance": _bucket_label(k), "lo": 0 if k == 0 else 1 << (k - 1),
                "hi": 0 if k == 0 else (1 << k) - 1, "accesses": int(per_bucket[k])} for k in range(top)]
    page_size = int(src.meta.get("page_size", PAGE_SIZE))
    return {
        "source": src.meta.get("source"),
        "records": s["records"],
        "accesses": accesses,
        "pages": pages,
        "tasks": int(len(s["tasks"])),
        "reads": accesses - writes,
        "writes": writes,
        "read_share": (accesses - writes) / accesses if accesses else 0.0,
        "write_share": writes / accesses if accesses else 0.0,
        "page_size": page_size,
        "footprint_bytes": pages * page_size,
        "reuse": {"cold": sd.cold, "buckets": buckets},
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
