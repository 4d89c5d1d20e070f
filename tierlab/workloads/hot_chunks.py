"""`hot-chunks`: seed 002's microbenchmark -- a large anonymous allocation touched one random chunk at a time.

The program (Bharata B Rao, "[RFC PATCH 0/2] Hot page promotion optimization for large address
space", 2024-03-27, and his replies in that thread) allocates `total` of anonymous memory and writes
it once, so it "initially occupies full of Node 1 (DRAM) and half of Node 2 (CXL)"; it divides it
into chunks of `chunk`, then `visits` times picks a chunk at random (with replacement) and accesses
it for `iterations` passes, each pass `accesses` loads of random 4 KiB pages of the chunk.

Run it as the seed did: one task bound to the DRAM node's CPUs with its memory on that node and the
CXL node, NUMA-balanced: `cpunodebind=1 policy=bind|numa_balancing:1,2` on bergamo-cxl (a bind
allocates along the local node's zonelist filtered by the mask: node 1 until its LOW watermark, then
node 2; MPOL_F_NUMA_BALANCING makes the VMA NUMA-scanned and its folios promotable toward the
faulting CPU's node). The defaults (default policy, no binding) run on any machine.

Iteration counts (calibrated inputs, not published as such):
- `accesses` = 262144 per pass and `iterations` = 512 per visit: Bharata's reply of 1 Apr 2024 in
  the thread, "Within that 1G, 262144 random accesses are performed and 262144 such accesses are
  repeated for 512 times". "Repeated" is read literally: one set of 262144 random pages is drawn
  per visit and the same set is walked 512 times. It touches 1 - 1/e = 63 % of the chunk's pages
  (165,700), and that is what the published counters need: a visit to a CXL chunk whose PTEs are
  all PROT_NONE takes one hint fault per touched page, so the default column's 12.5 M
  numa_hint_faults are ~75 such visits of 165.7 K, against ~66 expected CXL visits among 192 (a
  third of the chunks start on CXL) plus re-protection by scans that pass during a visit. Fresh
  random pages every pass would touch the whole chunk: 262144 faults a visit, 17-19 M for ~66
  visits, 50 % more than published. The default 0 means one access per page of the chunk, so the
  density per page is kept under --scale.
- `visits` = 192: the reply of 12 Apr 2024 reports "the numbers for the 192nd chunk" (its 512
  passes took ~5 s; numa_scan_seq was 16 then), and its latencies reach 630 s of the ~638 s run,
  i.e. it was the last one: 192 = total / chunk picks. With ~5 s per CXL visit and ~2.3 s per DRAM
  one (the same loads at DRAM's lower latency), 66 x 5 + 126 x 2.3 = 620 s of the 638 s score.
The per-load cost these passes imply (~10 ms for 262144 loads from CXL: ~38 ns, a 250 ns line with
~6.5 loads in flight) is not the workload's business: the reproduction calibrates it
(tierlab/reproduce/hint_fault.py).

The score is the access phase's simulated time in us (from the MARK after the initial write to the
end), as a benchmark times its measured loop; `summary()` reports it, the fill time and each visit's
chunk index and duration. MARKs: one after the fill, one after each visit.
"""
from __future__ import annotations

from typing import Iterator

import numpy as np

from ..core.ops import OP_LOAD, OP_MARK, OP_STORE
from ..errors import ConfigError
from ..units import PAGE_SIZE
from .base import Chunk, Process, Region, Workload, int_param, nodes_param, policy_param, size_param


class HotChunks(Workload):
    name = "hot-chunks"
    description = ("seed 002's microbenchmark: a large anonymous allocation, one random chunk at a time "
                   "accessed for many passes at random 4 KiB pages")
    params = {
        "total": size_param("192GiB", "anonymous memory allocated and written once"),
        "chunk": size_param("1GiB", "chunk size"),
        "visits": int_param(192, "chunks picked at random (with replacement), one after another", lo=1),
        "iterations": int_param(512, "passes over the visit's random pages", lo=1),
        "accesses": int_param(0, "random page loads per pass, drawn once per visit (0: one per page of the "
                                 "chunk, 262144 for 1 GiB)", lo=0),
        "policy": policy_param("default", "memory policy of the allocation, e.g. bind|numa_balancing:1,2"),
        "cpunodebind": nodes_param("", "run the task on these nodes' CPUs (numactl --cpunodebind), e.g. 1"),
    }
    access_params = ("total", "visits", "iterations", "accesses")

    def validate(self):
        if self.chunk < PAGE_SIZE:
            raise ConfigError("chunk: must be at least 4KiB")
        if self.total < self.chunk:
            raise ConfigError(f"total: {self.total} bytes is less than one chunk ({self.chunk} bytes); "
                              "accepted: total >= chunk")

    @property
    def pages(self) -> int:
        return self.total // PAGE_SIZE

    @property
    def chunk_pages(self) -> int:
        return self.chunk // PAGE_SIZE

    @property
    def nr_chunks(self) -> int:
        return self.pages // self.chunk_pages

    @property
    def pass_accesses(self) -> int:
        return self.accesses or self.chunk_pages

    def regions(self) -> list[Region]:
        pol, nodes = self.policy
        return [Region("data", "anon", self.pages, pol, nodes)]

    def processes(self) -> list[Process]:
        return [Process("main", threads=1, vmas=("data",), cpunodebind=self.cpunodebind)]

    def nr_marks(self) -> int:
        return 1 + self.visits

    def nr_accesses(self) -> int:
        return self.pages + self.visits * self.iterations * self.pass_accesses

    def visit_chunks(self, seed: int) -> np.ndarray:
        """The chunk index of every visit, in order (the workload's own random stream)."""
        return np.random.default_rng([seed, 2]).integers(0, self.nr_chunks, size=self.visits)

    def chunks(self, seed: int) -> Iterator[Chunk]:
        n = self.pages
        for lo in range(0, n, self.chunk_accesses):
            hi = min(n, lo + self.chunk_accesses)
            ops = np.full(hi - lo, OP_STORE, np.uint8)
            if hi == n:
                ops[-1] |= OP_MARK
            yield _one_task(np.arange(lo, hi, dtype=np.int64), ops)
        rng = np.random.default_rng([seed, 1])
        cp, k = self.chunk_pages, self.pass_accesses
        reps = max(1, self.chunk_accesses // k)          # passes per generated piece
        for c in self.visit_chunks(seed):
            pages = int(c) * cp + rng.integers(0, cp, size=k, dtype=np.int64)
            left = self.iterations
            while left > 0:
                r = min(reps, left)
                left -= r
                ops = np.full(r * k, OP_LOAD, np.uint8)
                if left == 0:
                    ops[-1] |= OP_MARK
                yield _one_task(np.tile(pages, r), ops)

    def summary(self, result, phase_start_ns: int) -> dict:
        """score_us: the access phase's simulated time (MARK after the fill to the last MARK), in us;
        fill_s; per visit its chunk and its time (s)."""
        m = result.marks_s[result.marks_s.task == 0].time_s.to_numpy()
        if len(m) < 1 + self.visits:
            return {}
        c = result.config.get("seed", 0)
        return {"score_us": float((m[-1] - m[0]) * 1e6), "fill_s": float(m[0]),
                "visit_chunks": [int(x) for x in self.visit_chunks(c)],
                "visit_s": [float(x) for x in np.diff(m)]}


def _one_task(pages: np.ndarray, ops: np.ndarray) -> Chunk:
    return Chunk(np.array([0, pages.shape[0]], np.int64), pages, ops)
