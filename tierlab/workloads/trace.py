"""`trace`: replay a recorded or converted page-access trace (tierlab.trace formats: .npz, .npy,
CSV task,page,op[,count], libCacheSim oracleGeneral, raw lackey text).

The trace's virtual pages are renumbered densely, in order of first appearance, into one
anonymous region (a process's memory as lackey sees it), so state grows with the pages the trace
touches, not with the span of its addresses. Reads become loads and writes stores through the
page tables; a record with count c is c consecutive accesses. Task ids are kept (0..T-1).
With `kind=file` the pages are instead a file read with read() (one page per call), e.g. for a
libCacheSim block trace, opened with the `fadvise` advice (random: no readahead, so the page cache
sees exactly the trace's requests, as a cache simulator does).

The file is streamed: `validate` reads it once (checking every record, counting accesses, tasks and
distinct pages, and numbering pages), `chunks` reads it again chunk by chunk; memory is one chunk
plus O(distinct pages), never the whole trace.
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
        "fadvise": choice_param("normal", ("normal", "random", "sequential"),
                                "kind=file: posix_fadvise advice of the file at open (random: no readahead, "
                                "every miss reads one page; with readahead, note that pages are renumbered in "
                                "order of first appearance, so the readahead window covers renumbered neighbours)"),
    }

    def validate(self):
        self._scan  # read the file now: a malformed record fails before any simulation

    @cached_property
    def _scan(self) -> dict:
        from ..trace import TraceFile
        from ..trace.analysis import scan
        return scan(TraceFile(self.path, None if self.format == "auto" else self.format),
                    nr_records=_RECORDS_PER_CHUNK)

    @property
    def nr_tasks(self) -> int:
        tasks = self._scan["tasks"]
        return int(tasks.max()) + 1 if len(tasks) else 1

    def regions(self) -> list[Region]:
        pol, nodes = self.policy
        return [Region("trace", self.kind, max(1, self._scan["ids"].n), pol, nodes,
                       advice=self.fadvise if self.kind == "file" else "normal")]

    def nr_accesses(self) -> int:
        return self._scan["accesses"]

    def nr_marks(self) -> int:
        return 1

    def chunks(self, seed: int) -> Iterator[Chunk]:
        src, ids = self._scan["source"], self._scan["ids"]  # every page already has its id
        T = self.nr_tasks
        if self.kind == "anon":
            op_of = np.array([OP_LOAD, OP_STORE], dtype=np.uint8)
        else:
            op_of = np.array([OP_READ | OP_SYSCALL_END, OP_WRITE | OP_SYSCALL_END], dtype=np.uint8)
        for task, page, op, count in src.iter_chunks(_RECORDS_PER_CHUNK):
            cnt = count.astype(np.int64)
            task = np.repeat(task.astype(np.int64), cnt)
            pages = np.repeat(ids.map(page), cnt)
            ops = np.repeat(op_of[op], cnt)
            order = np.argsort(task, kind="stable")       # CSR by task, keeping each task's order
            counts = np.bincount(task, minlength=T)
            offsets = np.zeros(T + 1, dtype=np.int64)
            np.cumsum(counts, out=offsets[1:])
            yield Chunk(offsets, pages[order], ops[order])


_RECORDS_PER_CHUNK = max(1, CHUNK_ACCESSES // 4)
