"""`file-read`: N cycles of sequential read() of a file into an anonymous buffer.

Each task reads its own file of `file_size` bytes from start to end in read() calls of `read_size`
bytes, `cycles` times (seed 000's test: one process, 128 GB file, 50 cycles). Every page copied is
one READ op (filemap_read: folio_mark_accessed + a 4 KiB copy); the last page of each call ends the
system call (task work runs), and the last page of each cycle records a MARK (per-cycle times).

With `warmup=1` a set-up pass reads the file once first (placing the page cache by `file_policy`,
e.g. bind:1 for CXL as the seed does with mbind) and touches the buffer; its time is the first mark
and is not part of the cycle times. The copy's destination, the buffer, stays resident and hot in
the local node; its cost is part of the per-page copy cost (seq_4k_ns), not simulated per access.

read() moves at most MAX_RW_COUNT (2 GiB - 4 KiB) per call; a larger read_size is cut to it.
"""
from __future__ import annotations

from typing import Iterator

import numpy as np

from ..core.engine import OP_MARK, OP_READ, OP_STREAM, OP_STORE, OP_SYSCALL_END
from ..errors import ConfigError
from ..units import PAGE_SIZE
from .base import CHUNK_ACCESSES, Chunk, Region, Workload, int_param, policy_param, size_param

MAX_RW_COUNT = (1 << 31) - PAGE_SIZE


class FileRead(Workload):
    name = "file-read"
    description = "cycles of sequential read() of a file in read_size calls into an anonymous buffer (seed 000)"
    params = {
        "file_size": size_param("1GiB", "file size per task"),
        "read_size": size_param("1MiB", "bytes per read() call (capped at MAX_RW_COUNT, 2 GiB - 4 KiB)", scaled=False),
        "cycles": int_param(3, "read passes over the file", lo=1),
        "tasks": int_param(1, "tasks, each reading its own file", lo=1),
        "file_policy": policy_param("default", "memory policy of the page cache, e.g. bind:1"),
        "buffer_policy": policy_param("default", "memory policy of the read buffer"),
        "warmup": int_param(1, "1: an untimed set-up pass reads the file once first", lo=0),
    }

    def validate(self):
        if self.file_size < PAGE_SIZE:
            raise ConfigError("file_size: must be at least 4KiB")
        if self.warmup not in (0, 1):
            raise ConfigError("warmup: accepted: 0 or 1")

    @property
    def nr_tasks(self) -> int:
        return self.tasks

    @property
    def file_pages(self) -> int:
        return self.file_size // PAGE_SIZE

    @property
    def pages_per_call(self) -> int:
        return max(1, min(self.read_size, MAX_RW_COUNT) // PAGE_SIZE)

    @property
    def buffer_pages(self) -> int:
        return min(self.pages_per_call, self.file_pages)

    def regions(self) -> list[Region]:
        fpol, fnodes = self.file_policy
        bpol, bnodes = self.buffer_policy
        out = []
        for t in range(self.tasks):
            out.append(Region(f"file{t}", "file", self.file_pages, fpol, fnodes))
            out.append(Region(f"buffer{t}", "anon", self.buffer_pages, bpol, bnodes))
        return out

    def nr_marks(self) -> int:
        return self.cycles + self.warmup

    def _task_stream(self, t: int, start: int, n: int) -> tuple[np.ndarray, np.ndarray]:
        """Accesses [start, start+n) of task t's stream: optional buffer touch, then passes."""
        F = self.file_pages
        B = self.buffer_pages if self.warmup else 0
        base = t * (F + self.buffer_pages)
        idx = np.arange(start, start + n, dtype=np.int64)
        pages = np.empty(n, dtype=np.int64)
        ops = np.empty(n, dtype=np.uint8)
        in_buf = idx < B
        pages[in_buf] = base + F + idx[in_buf]
        ops[in_buf] = OP_STORE
        j = idx[~in_buf] - B
        pos = j % F
        pages[~in_buf] = base + pos
        op = np.full(j.shape[0], OP_READ | OP_STREAM, dtype=np.uint8)
        ppc = self.pages_per_call
        end_call = ((pos + 1) % ppc == 0) | (pos == F - 1)
        op[end_call] |= OP_SYSCALL_END
        op[pos == F - 1] |= OP_MARK
        ops[~in_buf] = op
        return pages, ops

    def stream_length(self) -> int:
        return (self.buffer_pages if self.warmup else 0) + self.file_pages * (self.cycles + self.warmup)

    def chunks(self, seed: int) -> Iterator[Chunk]:
        total = self.stream_length()
        per_task = max(1, CHUNK_ACCESSES // self.tasks)
        for start in range(0, total, per_task):
            n = min(per_task, total - start)
            parts = [self._task_stream(t, start, n) for t in range(self.tasks)]
            offsets = np.arange(self.tasks + 1, dtype=np.int64) * n
            yield Chunk(offsets, np.concatenate([p for p, _ in parts]), np.concatenate([o for _, o in parts]))
