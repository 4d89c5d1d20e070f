"""`anon-browser`: a JavaScript engine's heap (Speedometer-like work): one process mapping many
anonymous VMAs of varied sizes, touching them and unmapping them often.

The process is a recorded node v20 (V8) run of data/anon/jsbench.js, a web-tooling-benchmark-like
program: acorn parsing, terser minifying and typescript transpiling real sources (npm's own), twice
(data/anon/README.md). V8 reserves address space PROT_NONE, trims it to aligned 256 KiB pages and
commits them with mprotect; each commit is a VMA here (kind `mprotect`), with glibc's brk heap and
the anon mmaps (kind `mmap`). `source=trace` replays the recorded VMAs and first touches;
`source=dist` draws every VMA from the recorded ones (workloads._anon.draw_process). All of the
process's threads (V8's main thread and its GC and compiler helpers) are one task here.
"""
from __future__ import annotations

from typing import Iterator

import numpy as np

from .anon_build import AnonReplay, draw_seed_param, recording_param, user_time_param
from .base import Chunk, choice_param


class AnonBrowser(AnonReplay):
    name = "anon-browser"
    description = ("a JavaScript engine's heap (recorded node/V8 running real JS tools): many anon mappings "
                   "of varied sizes, commits, touches and frequent munmap")
    params = {
        "source": choice_param("trace", ("trace", "dist"), "replay the recorded VMAs, or draw them from the "
                               "recorded distributions"),
        "recording": recording_param("node"),
        "draw_seed": draw_seed_param(),
        "user_time": user_time_param(),
    }
    access_params = ("recording",)
    procs = 1
    nr_lanes = 1

    def _programs(self, rec):
        # the recorded process with the most touched anon pages (node itself)
        progs = super()._programs(rec)
        return progs.sort_values("anon_touched_pages", ascending=False).head(1)

    def chunks(self, seed: int) -> Iterator[Chunk]:
        pages, ops = self.process_ops(0)
        n = pages.shape[0]
        for a in range(0, n, self.chunk_accesses):
            b = min(n, a + self.chunk_accesses)
            yield Chunk(np.array([0, b - a], np.int64), pages[a:b], ops[a:b])
