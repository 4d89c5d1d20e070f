"""`anon-pressure`: a file reader, and an anonymous buffer that grows, is held and shrinks on a schedule.

Two processes (workloads.base.Process). The *reader* reads its file sequentially with read() in
`read_size` calls, once to warm the page cache and then `cycles` times (a MARK at each end of file,
as file-read). The *hog* starts at `anon_start_ms`, maps its heap (one region slot) and, `rounds`
times: grows it to `anon_size` in `grow_steps` brk() steps, storing to every new page (anon faults
that take DRAM from the page cache: on a tiered machine with demotion kswapd pushes the file down a
tier), holds it for `hold_passes` sequential passes of page-sized loads, then shrinks it with brk()
to `shrink_to` of its size (the freed DRAM is what page-cache promotion can use to bring the file
back); at the end it exits (exit_mmap frees whatever is left). The hog's MARKs fall at the end of each grow and
of each hold (two per round; a shrink ends at the next grow's start), so `Result.marks_s` (task 1) times the phases.

Both processes run on the first CPUs (one each when the machine has two), with the default memory
policy unless `file_policy` / `anon_policy` say otherwise. Note: with the default (local) policy on
a machine whose lower tier has room, the heap simply falls back to the lower node once DRAM is
below its LOW watermark (get_page_from_freelist does not wake kswapd), so nothing is demoted;
`anon_policy=bind:0` (or a DRAM node that must hold the heap) makes the heap's faults reclaim, and
with demotion_enabled=1 kswapd then demotes the page cache. E.g. on qemu-2node at --scale 16:
file_size=512MiB anon_size=768MiB anon_start_ms=20 cycles=20 anon_policy=bind:0 with
demotion_enabled=1 numa_balancing=2 pagecache_promotion_enabled=1 demotes ~4k pages of the file
while the heap is held and promotes them back after the shrink.
"""
from __future__ import annotations

from typing import Iterator

import numpy as np

from ..core.ops import OP_LOAD, OP_MARK, OP_PAGE, OP_STORE
from ..errors import ConfigError
from ..units import PAGE_SIZE
from ._kernels import fill_file_read
from .base import (
    Chunk, Process, Region, Workload, control_op, float_param, int_param, policy_param, size_param,
)
from .file_read import ReadCalls

PIECE = 1 << 20     # accesses per generated piece of the hog's stream


class AnonPressure(ReadCalls, Workload):
    name = "anon-pressure"
    description = ("a file reader plus an anon process whose heap grows (brk), is held and shrinks on a "
                   "schedule: pushes page cache down a tier, then gives DRAM back")
    control_ops = True
    params = {
        "file_size": size_param("1GiB", "the reader's file"),
        "read_size": size_param("1MiB", "bytes per read() call", scaled=False),
        "cycles": int_param(5, "read passes over the file after the warm-up pass", lo=1),
        "file_policy": policy_param("default", "memory policy of the page cache, e.g. bind:0"),
        "anon_size": size_param("1GiB", "the hog's heap at its largest"),
        "grow_steps": int_param(4, "brk() steps to grow to anon_size", lo=1, hi=1 << 20),
        "hold_passes": int_param(2, "sequential passes of page loads over the full heap", lo=0, hi=1 << 20),
        "shrink_to": float_param(0.0, "share of anon_size the shrink (brk) keeps", lo=0.0, hi=1.0),
        "rounds": int_param(1, "grow / hold / shrink rounds before the hog exits", lo=1, hi=1 << 16),
        "anon_start_ms": float_param(0.0, "when the hog starts (simulated ms)", lo=0.0, hi=1e12),
        "anon_policy": policy_param("default", "memory policy of the hog's heap"),
    }
    access_params = ("file_size", "cycles", "anon_size", "hold_passes", "rounds")

    def validate(self):
        for k in ("file_size", "anon_size"):
            if self.values[k] < PAGE_SIZE:
                raise ConfigError(f"{k}: must be at least 4KiB")
        if self.grow_steps > self.heap_pages:
            raise ConfigError(f"grow_steps: {self.grow_steps} steps for a {self.heap_pages}-page heap; accepted: "
                              f"1 .. {self.heap_pages}")

    # --- layout -------------------------------------------------------------------------------
    @property
    def nr_tasks(self) -> int:
        return 2

    @property
    def heap_pages(self) -> int:
        return self.anon_size // PAGE_SIZE

    @property
    def keep_pages(self) -> int:
        return int(self.heap_pages * self.shrink_to)

    def regions(self) -> list[Region]:
        fpol, fnodes = self.file_policy
        apol, anodes = self.anon_policy
        return [Region("file", "file", self.file_pages, fpol, fnodes),
                Region("buffer", "anon", self.buffer_pages),
                Region("heap", "anon", self.heap_pages, apol, anodes)]

    def processes(self) -> list[Process]:
        # the heap slot is mapped by the hog's own mmap op, so no process maps it at the start
        return [Process("reader", vmas=("buffer",), files=("file",)),
                Process("hog", start_ms=self.anon_start_ms)]

    def nr_marks(self) -> int:
        return max(self.cycles + 1, 2 * self.rounds)

    def _steps(self) -> list[int]:
        n = self.heap_pages
        return sorted({max(1, n * (i + 1) // self.grow_steps) for i in range(self.grow_steps)})

    def reader_length(self) -> int:
        return self.buffer_pages + self.file_pages * (self.cycles + 1)

    def _hog_plan(self):
        """(ops, lo, hi) per grow step and round, as the stream makes them: the first step maps
        the heap (mmap over its first pages), later ones move its end (brk)."""
        keep = self.keep_pages
        first = True
        for r in range(self.rounds):
            lo = 0 if r == 0 else keep
            steps = []
            for step_end in self._steps():
                if step_end > lo:
                    steps.append(("mmap" if first else "brk", lo, step_end))
                    first = False
                    lo = step_end
            yield steps

    def hog_length(self) -> int:
        n = self.heap_pages
        keep = self.keep_pages
        total = 1                                          # exit
        for steps in self._hog_plan():
            total += sum(1 + hi - lo for _, lo, hi in steps) + self.hold_passes * n + (1 if keep < n else 0)
        return total

    def nr_accesses(self) -> int:
        return self.reader_length() + self.hog_length()

    # --- streams ------------------------------------------------------------------------------
    def _hog_pieces(self) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """The hog's stream in pieces of at most PIECE accesses: per round, the heap grows step by
        step (mmap, then brk) with a store to every new page, `hold_passes` passes of page loads
        follow, then brk shrinks it to shrink_to; then exit. The last store of a growth and the
        last load of a hold carry a MARK."""
        base = self.file_pages + self.buffer_pages
        n = self.heap_pages
        keep = self.keep_pages

        def ctl(kind, npages=0):
            page, op = control_op(kind, 2, npages)
            return np.array([page], np.int64), np.array([op], np.uint8)

        def run(lo, hi, op, mark):
            for a in range(lo, hi, PIECE):
                b = min(hi, a + PIECE)
                ops = np.full(b - a, op, np.uint8)
                if mark and b == hi:
                    ops[-1] |= OP_MARK
                yield base + np.arange(a, b, dtype=np.int64), ops

        for steps in self._hog_plan():
            for kind, lo, hi in steps:
                yield ctl(kind, hi)
                yield from run(lo, hi, OP_STORE, hi == n)
            for i in range(self.hold_passes):
                yield from run(0, n, OP_LOAD | OP_PAGE, i == self.hold_passes - 1)
            if keep < n:
                yield ctl("brk", keep)
        yield ctl("exit")

    def chunks(self, seed: int) -> Iterator[Chunk]:
        per_task = max(1, self.chunk_accesses // 2)
        F, B = self.file_pages, self.buffer_pages
        total_r = self.reader_length()
        hog = self._hog_pieces()
        pending: list[tuple[np.ndarray, np.ndarray]] = []
        start_r = 0
        hog_done = False
        while start_r < total_r or not hog_done:
            n = min(per_task, total_r - start_r)
            rp = np.empty(n, np.int64)
            ro = np.empty(n, np.uint8)
            if n:
                fill_file_read(rp, ro, 0, start_r, n, 0, F, B, self.pages_per_call)
            start_r += n
            hp, ho, have = [], [], 0
            while have < per_task and not hog_done:
                if not pending:
                    nxt = next(hog, None)
                    if nxt is None:
                        hog_done = True
                        break
                    pending.append(nxt)
                pg, op = pending.pop()
                take = min(per_task - have, pg.shape[0])
                hp.append(pg[:take])
                ho.append(op[:take])
                have += take
                if take < pg.shape[0]:
                    pending.append((pg[take:], op[take:]))
            hpages = np.concatenate(hp) if hp else np.empty(0, np.int64)
            hops = np.concatenate(ho) if ho else np.empty(0, np.uint8)
            yield Chunk(np.array([0, n, n + hpages.shape[0]], np.int64),
                        np.concatenate([rp, hpages]), np.concatenate([ro, hops]))
