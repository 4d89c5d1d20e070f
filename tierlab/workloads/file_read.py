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

from ..errors import ConfigError
from ..units import PAGE_SIZE
from ._kernels import fill_file_read
from .base import MAX_TASKS, Chunk, Region, Workload, int_param, low_water, policy_param, size_param

MAX_RW_COUNT = (1 << 31) - PAGE_SIZE


class ReadCalls:
    """A file of `file_size` read in calls of `read_size` into a one-call anon buffer (file-read's
    layout; anon-pressure's reader uses it too)."""

    @property
    def file_pages(self) -> int:
        return self.file_size // PAGE_SIZE

    @property
    def pages_per_call(self) -> int:
        return max(1, min(self.read_size, MAX_RW_COUNT) // PAGE_SIZE)

    @property
    def buffer_pages(self) -> int:
        """One call's worth of anonymous memory, as memory divided by --scale like the file (the
        call length itself is not: docs/scaling.md)."""
        return max(1, min(int(self.pages_per_call / self.scale), self.file_pages))


class FileRead(ReadCalls, Workload):
    name = "file-read"
    description = "cycles of sequential read() of a file in read_size calls into an anonymous buffer (seed 000)"
    params = {
        "file_size": size_param("1GiB", "file size per task"),
        "read_size": size_param("1MiB", "bytes per read() call (capped at MAX_RW_COUNT, 2 GiB - 4 KiB)", scaled=False),
        "cycles": int_param(3, "read passes over the file", lo=1),
        "tasks": int_param(1, "tasks, each reading its own file", lo=1, hi=MAX_TASKS),
        "file_policy": policy_param("default", "memory policy of the page cache, e.g. bind:1"),
        "buffer_policy": policy_param("default", "memory policy of the read buffer"),
        "warmup": int_param(1, "1: an untimed set-up pass reads the file once first", lo=0, hi=1),
    }
    access_params = ("file_size", "cycles", "tasks")

    def validate(self):
        if self.file_size < PAGE_SIZE:
            raise ConfigError("file_size: must be at least 4KiB")

    @property
    def nr_tasks(self) -> int:
        return self.tasks

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

    def nr_accesses(self) -> int:
        return self.stream_length() * self.tasks

    def stream_length(self) -> int:
        return (self.buffer_pages if self.warmup else 0) + self.file_pages * (self.cycles + self.warmup)

    def chunks(self, seed: int) -> Iterator[Chunk]:
        total = self.stream_length()
        per_task = max(1, self.chunk_accesses // self.tasks)
        F, B = self.file_pages, (self.buffer_pages if self.warmup else 0)
        # one pair of buffers, refilled for every chunk: a chunk is valid until the next is taken
        pages_buf = np.empty(min(per_task, total) * self.tasks, dtype=np.int64)
        ops_buf = np.empty(pages_buf.shape[0], dtype=np.uint8)
        done = np.zeros(self.tasks, np.int64)      # each task's place in its own stream
        progress = None
        while (done < total).any():
            # the next part of each task below the low-water mark (workloads.base.low_water)
            n = np.where(low_water(progress, per_task, self.tasks), np.minimum(per_task, total - done), 0)
            offsets = np.zeros(self.tasks + 1, np.int64)
            np.cumsum(n, out=offsets[1:])
            pages, ops = pages_buf[:offsets[-1]], ops_buf[:offsets[-1]]
            for t in np.flatnonzero(n).tolist():
                fill_file_read(pages, ops, int(offsets[t]), int(done[t]), int(n[t]), t * (F + self.buffer_pages), F, B,
                               self.pages_per_call)
            done += n
            progress = yield Chunk(offsets, pages, ops, ended=done >= total)
