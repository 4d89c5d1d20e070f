"""`trace`: replay a recorded or converted page-access trace (tierlab.trace formats: .npz, .npy,
CSV task,page,op[,count], libCacheSim oracleGeneral, raw lackey text).

The trace's virtual pages are renumbered densely, in order of first appearance, into one
anonymous region (a process's memory as lackey sees it), so state grows with the pages the trace
touches, not with the span of its addresses. Reads become loads and writes stores through the
page tables; a record with count c is c consecutive accesses. Task ids are kept (0..T-1).
With `kind=file` the pages are instead a file read with read() (one page per call), e.g. for a
libCacheSim block trace.
"""
from __future__ import annotations

from functools import cached_property
from typing import Iterator

import numpy as np

from ..core.ops import OP_LOAD, OP_READ, OP_STORE, OP_SYSCALL_END, OP_WRITE
from ..errors import ConfigError
from .base import CHUNK_ACCESSES, Chunk, Param, Region, Workload, choice_param, policy_param


def _path(v, key="path"):
    if not v:
        raise ConfigError(f"{key}: the trace workload needs --param path=FILE")
    return str(v)


class TraceWorkload(Workload):
    name = "trace"
    description = "replay a page-access trace file (npz/npy/CSV/oracleGeneral/lackey) through the model"
    params = {
        "path": Param("", _path, "trace file"),
        "format": choice_param("auto", ("auto", "npz", "npy", "csv", "oraclegeneral", "lackey"), "file format"),
        "kind": choice_param("anon", ("anon", "file"), "replay as anonymous memory (loads/stores) or as read()s of a file"),
        "policy": policy_param("default", "memory policy of the region, e.g. bind:1"),
    }

    def validate(self):
        self.trace  # load now: a malformed file fails before any simulation

    @cached_property
    def trace(self):
        from ..trace import load_trace
        return load_trace(self.path, fmt=None if self.format == "auto" else self.format)

    @cached_property
    def _dense(self) -> tuple[np.ndarray, int]:
        pages = self.trace.page
        uniq, first, inv = np.unique(pages, return_index=True, return_inverse=True)
        order = np.argsort(first, kind="stable")          # first appearance -> dense id
        rank = np.empty_like(order)
        rank[order] = np.arange(order.shape[0])
        return rank[inv].astype(np.int64), int(uniq.shape[0])

    @property
    def nr_tasks(self) -> int:
        return int(self.trace.task.max()) + 1 if len(self.trace) else 1

    def regions(self) -> list[Region]:
        pol, nodes = self.policy
        return [Region("trace", self.kind, max(1, self._dense[1]), pol, nodes)]

    def nr_accesses(self) -> int:
        return int(self.trace.count.astype("int64").sum())

    def nr_marks(self) -> int:
        return 1

    def chunks(self, seed: int) -> Iterator[Chunk]:
        tr = self.trace
        dense, _ = self._dense
        T = self.nr_tasks
        if self.kind == "anon":
            op_of = np.array([OP_LOAD, OP_STORE], dtype=np.uint8)
        else:
            op_of = np.array([OP_READ | OP_SYSCALL_END, OP_WRITE | OP_SYSCALL_END], dtype=np.uint8)
        step = max(1, CHUNK_ACCESSES // 4)
        for lo in range(0, len(tr), step):
            hi = min(len(tr), lo + step)
            cnt = tr.count[lo:hi].astype(np.int64)
            task = np.repeat(tr.task[lo:hi].astype(np.int64), cnt)
            pages = np.repeat(dense[lo:hi], cnt)
            ops = np.repeat(op_of[tr.op[lo:hi]], cnt)
            order = np.argsort(task, kind="stable")       # CSR by task, keeping each task's order
            counts = np.bincount(task, minlength=T)
            offsets = np.zeros(T + 1, dtype=np.int64)
            np.cumsum(counts, out=offsets[1:])
            yield Chunk(offsets, pages[order], ops[order])
