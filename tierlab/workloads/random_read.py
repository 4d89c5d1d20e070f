"""`random-read`: uniform, zipf or gaussian 4 KiB reads over a file (fio-like) or an anonymous region.

Each task issues `accesses` reads of one 4 KiB page chosen uniformly, by a zipf law (rank r has
weight r**-zipf_theta, ranks scattered over the region by a fixed permutation), or by a normal law
around the middle of the region with standard deviation `normal_sigma` of its size, wrapped around
its ends (a gaussian hot set, contiguous as fio's random_distribution=normal puts it). Over a file with
io=mmap (the default: NUMA balancing only ever sees mapped memory) each access is a 4 KiB read
through the mapping, a private writable one by default (mmap=shared-ro maps it read-only, as fio's
mmap engine does for reads, and the NUMA scanner then skips it); with io=read it is a pread() of one page (fio's psync engine); over an anon
region (target=anon) it is a 4 KiB load (the region is first written once, ending with a MARK, so
the loads find populated memory). `prefault=1` reads the file once sequentially first (warm page
cache, as after fio's lay-out), ending with a MARK; task 0 does it (and the anon region's first
write), and every task starts its random accesses after it, together (a Chunk phase: the other
tasks wait at the barrier, and read() latencies count from there). Every task's last access
records a MARK (the end of its reads).

Like fio (fadvise_hint, on by default) and the oracle's guest program, a file's random phase runs
under POSIX_FADV_RANDOM: the file is opened with it when there is no prefault, or task 0 calls
posix_fadvise() (a control op, core/fadvise.py) right after its sequential pass. Without it, a
read() miss next to cached pages starts a readahead window (page_cache_sync_ra's context
readahead), and a uniform random reader of a file 1.5x the node missed 40 % more often than the
guest kernel did (docs/oracle.md, lru-classic-pread).

Note on placement: with the default policy a file larger than the local node spills to the next
node of the zonelist once the local node is below its LOW watermark, without waking kswapd (as
get_page_from_freelist() does); kswapd demotes from the local node only when promotions fail for
lack of room (io=mmap with numa_balancing=2) or when the policy binds the file to the local node.
"""
from __future__ import annotations

from typing import Iterator

import numpy as np

from ..core.ops import OP_LOAD, OP_MARK, OP_PAGE, OP_READ, OP_STORE, OP_STREAM, OP_SYSCALL_END
from ..errors import ConfigError
from ..units import PAGE_SIZE
from .base import (
    MAX_TASKS, Chunk, OpStream, Process, Region, Workload, choice_param, fadvise_op, float_param, int_param,
    nodes_param, one_block, policy_param, size_param, stream_chunks,
)

READ_BLOCK = 1 << 16      # random accesses drawn at a time (a task's stream is the same whatever the chunks)


class RandomRead(Workload):
    name = "random-read"
    description = "uniform, zipf or gaussian 4 KiB random reads over a file (read() or mmap) or an anon region"
    params = {
        "file_size": size_param("1GiB", "size of the file or anon region (shared by all tasks)"),
        "accesses": int_param(1_000_000, "reads per task", lo=1),
        "tasks": int_param(1, "concurrent tasks", lo=1, hi=MAX_TASKS),
        "dist": choice_param("uniform", ("uniform", "zipf", "normal"), "access distribution"),
        "zipf_theta": float_param(0.99, "zipf exponent (dist=zipf)", lo=0.0, hi=5.0),
        "normal_sigma": float_param(0.1, "dist=normal: standard deviation as a fraction of the size", lo=1e-6, hi=10.0),
        "target": choice_param("file", ("file", "anon"), "what is read"),
        "io": choice_param("mmap", ("mmap", "read"), "file access: 4 KiB loads through mmap (NUMA-scanned) or pread() calls"),
        "mmap": choice_param("private-rw", ("private-rw", "shared-ro"),
                             "io=mmap: how the file is mapped: MAP_PRIVATE with PROT_READ|PROT_WRITE (never "
                             "written; NUMA-scanned), or MAP_SHARED with PROT_READ as fio's mmap engine reads "
                             "(the NUMA scanner skips read-only file mappings)"),
        "policy": policy_param("default", "memory policy of the region, e.g. bind:1"),
        "prefault": int_param(0, "1: populate the region sequentially first (untimed, ends with a MARK)", lo=0, hi=1),
        "cpunodebind": nodes_param("", "run the tasks on these nodes' CPUs (numactl --cpunodebind), e.g. 0"),
    }
    access_params = ("accesses", "tasks")

    def validate(self):
        if self.file_size < PAGE_SIZE:
            raise ConfigError("file_size: must be at least 4KiB")

    @property
    def nr_tasks(self) -> int:
        return self.tasks

    @property
    def pages(self) -> int:
        return self.file_size // PAGE_SIZE

    def regions(self) -> list[Region]:
        pol, nodes = self.policy
        mapped = self.target == "file" and self.io == "mmap"
        prot = "r" if mapped and self.mmap == "shared-ro" else "rw"
        advice = "random" if self.target == "file" and not self.prefault else "normal"
        return [Region("data", "anon" if self.target == "anon" else "file", self.pages, pol, nodes, mapped=mapped,
                       prot=prot, advice=advice)]

    @property
    def control_ops(self) -> bool:
        # task 0 calls posix_fadvise(POSIX_FADV_RANDOM) after its sequential pass over a file
        return bool(self.prefault) and self.target == "file"

    def processes(self) -> list[Process]:
        # seed 002's set-up: cpunodebind=0 with policy=bind|numa_balancing:0,2 on bergamo-cxl
        return [Process("main", threads=self.tasks, vmas=("data",), cpunodebind=self.cpunodebind,
                        files=(("data",) if self.target == "file" and self.io == "read" else ()))]

    def nr_marks(self) -> int:
        return 2

    def nr_accesses(self) -> int:
        return sum(self._prefault_len(t) + self._fadvise_len(t) + self.accesses for t in range(self.tasks))

    def _prefault_len(self, t: int) -> int:
        # anon always needs populating before loads mean anything; one task does it
        populate = self.prefault or self.target == "anon"
        return self.pages if (populate and t == 0) else 0

    def _fadvise_len(self, t: int) -> int:
        return 1 if (self.control_ops and t == 0) else 0

    def _sampler(self, seed: int):
        rng = np.random.default_rng(seed)
        n = self.pages
        perm = rng.permutation(n).astype(np.int64)
        if self.dist == "uniform":
            return lambda r, k: r.integers(0, n, size=k, dtype=np.int64)
        if self.dist == "normal":
            sd = self.normal_sigma * n
            return lambda r, k: np.mod(np.floor(n / 2 + sd * r.standard_normal(k)).astype(np.int64), n)
        w = np.arange(1, n + 1, dtype=np.float64) ** -self.zipf_theta
        cdf = np.cumsum(w)
        cdf /= cdf[-1]
        return lambda r, k: perm[np.minimum(np.searchsorted(cdf, r.random(k)), n - 1)]

    def chunks(self, seed: int) -> Iterator[Chunk]:
        sample = self._sampler(seed)
        T = self.tasks
        if self.target == "anon":
            fill_op, op = OP_STORE | OP_STREAM, OP_LOAD | OP_PAGE
        elif self.io == "read":
            fill_op, op = OP_READ | OP_STREAM | OP_SYSCALL_END, OP_READ | OP_SYSCALL_END
        else:
            fill_op, op = OP_LOAD | OP_STREAM | OP_PAGE, OP_LOAD | OP_PAGE
        per_task = max(1, self.chunk_accesses // T)
        populate = self._prefault_len(0) > 0
        if populate:
            # task 0 populates the region (a MARK at its end); the others wait at the barrier
            fill = np.full(self.pages, fill_op, np.uint8)
            fill[-1] |= OP_MARK
            yield from stream_chunks([OpStream(one_block(np.arange(self.pages, dtype=np.int64), fill))]
                                     + [OpStream(one_block()) for _ in range(1, T)], per_task)
        fadvise = fadvise_op(0, "random")

        def reads(t):
            rng = np.random.default_rng([seed, t])
            first = [fadvise] if self._fadvise_len(t) else []
            left = self.accesses

            def make():
                nonlocal left
                if first:
                    page, code = first.pop()
                    return np.array([page], np.int64), np.array([code], np.uint8)
                k = min(READ_BLOCK, left)
                if k == 0:
                    return None
                left -= k
                ops = np.full(k, op, np.uint8)
                if left == 0:
                    ops[-1] |= OP_MARK
                return sample(rng, k), ops
            return OpStream(make)
        # the random accesses start together (a phase: latency statistics from here)
        yield from stream_chunks([reads(t) for t in range(T)], per_task, start_phase=populate)

