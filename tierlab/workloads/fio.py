"""`fio`: buffered file I/O jobs with fio's own option names, reported in fio's JSON shape.

Each of `numjobs` jobs is a process with one thread (fio forks a process per job) that
issues I/Os of `bs` bytes -- one read()/write() call (pread/pwrite) each, or one io_uring request
-- over its file: its own file of `size` bytes (fio's default, jobname.N.0), or one shared file when
`filename` is given. The pattern is fio's `rw`: read / write (sequential from the file's start),
randread / randwrite (every block once per pass in a random order, like fio's random map; with
norandommap=1 each I/O's block is drawn uniformly, so blocks repeat within a pass as they do for
fio's norandommap and t/io_uring; with random_distribution=zipf, pareto or normal the blocks come
from fio's generators, workloads/fio_dist.py), rw / readwrite and randrw (each I/O a read with probability
rwmixread %). `loops` passes, or with
time_based=1 passes until `runtime` is over. `runtime` also stops a job that has not finished.
Under `--scale F` the runtime is divided by F, as the file sizes are (docs/scaling.md: a scaled run
is the full-size run with time compressed F-fold), so a time-based run reads the same number of
passes over its scaled file as the full-size run over its file.

The kernel side is tierlab's: buffered I/O only (direct=0; O_DIRECT is not modelled and direct=1 is
refused), page-cache reads through readahead (fio's fadvise_hint=1 default tells the kernel
POSIX_FADV_RANDOM or POSIX_FADV_SEQUENTIAL, as fio does), the block device of the machine
(core/blkdev.py), and the I/O engine per task (core/fileio.py): psync/sync wait for every read,
io_uring keeps up to `iodepth` requests in flight.

Files. A job reads its own file, or `nrfiles` files with the job's size split between them (fio's
jobname.N.0, .1, ...), each I/O's file chosen by `file_service_type` (roundrobin[:N], sequential,
random[:N]; FileService), each file with its own random map; or one shared file (`filename`).

Start and statistics. `startdelay` (a time, or a range drawn per job) delays a job's start after
the phase start; `ramp_time` runs a job that long before its statistics start (calls completing
earlier are not in its latencies, bytes or runtime); `runtime` counts after the ramp. Both are
divided by --scale, as runtime is (Chunk.start_offsets_ns, Chunk.ramp_ns, task.stats_from).

Phases. The file is taken as already laid out (fio creates missing files by writing them, then
fsyncs and, with invalidate=1, drops them from the page cache: its only effect is time before the
job starts). A simulation starts with an empty page cache, which is what invalidate=1 gives; so
invalidate=0 changes nothing unless pre_read=1 (which, as in fio, clears invalidate). pre_read=1 is
the load phase: every file is read once sequentially in `bs` calls before the jobs start. The jobs
then start together (Chunk.start_phase: statistics start there) and `runtime` counts from there.

time_based: the chunk generator receives the simulation's Progress when its next chunk is asked
for (workloads/base.py) and keeps generating passes until every job's runtime is over; the engine
stops a job at its runtime (task.stop_at) and drops the rest of its input.

Output (`Result.summary`, `fio_json()`): fio's --output-format=json shape, "jobs": one entry per job
with "read"/"write": io_bytes, io_kbytes, bw_bytes, bw (KiB/s), iops, runtime (ms), total_ios and
"clat_ns" {min, max, mean, stddev, N, percentile {"99.000000": ns, ...}} from fio's log-linear
buckets (min/max/mean are bucket values, within fio's ~0.8 % bucket error); "aggregate" is the
same shape over all jobs (as group_reporting=1 would print); "bw_log" is the aggregate throughput
over time from the MARK every `log_ios` I/Os of each job (tierlab's own; fio's is write_bw_log).
A completion latency is a call's time from its start to its completion (fileio.py).
"""
from __future__ import annotations

from typing import Iterator

import numpy as np

from ..core.fileio import FIO_PERCENTILES, clat_percentiles, plat_idx_to_val
from ..core.ops import OP_MARK, OP_READ, OP_SYSCALL_END, OP_WRITE
from ..core.state import IODEPTH_MAX
from ..errors import ConfigError
from ..units import PAGE_SIZE, parse_number
from . import fio_dist
from .base import (
    MAX_TASKS, NO_OPS, Chunk, Param, Process, Region, Workload, choice_param, int_param, low_water,
    policy_param, size_param,
)

RW = {  # fio rw= : (random, read share in %: None = rwmixread)
    "read": (False, 100), "write": (False, 0), "randread": (True, 100), "randwrite": (True, 0),
    "rw": (False, None), "readwrite": (False, None), "randrw": (True, None),
}
ENGINES = ("psync", "sync", "io_uring")
MAX_IOS_PER_CHUNK = 1 << 16     # I/Os per job per chunk of a time_based run (checked between chunks)
BW_LOG_BINS = 20


def _runtime(v, key="runtime"):
    """fio's time format: a number of seconds, or with a unit suffix (us, ms, s, m, h)."""
    s = str(v).strip().lower()
    for suffix, mult in (("us", 1e3), ("ms", 1e6), ("s", 1e9), ("m", 60e9), ("h", 3600e9)):
        if s.endswith(suffix) and s != suffix:
            return int(parse_number(s[:-len(suffix)], key, 0, 1e9, "a time such as 10, 500ms or 2m") * mult)
    return int(parse_number(s, key, 0, 1e9, "a time such as 10, 500ms or 2m") * 1e9)


def _delay_range(v, key="startdelay"):
    """fio's irange of times: 'T' or 'LO-HI' (ns, unscaled)."""
    text = str(v if v not in (None, "") else 0).strip()
    lo, _, hi = text.partition("-")
    a = _runtime(lo, key)
    b = _runtime(hi, key) if hi else a
    if b < a:
        raise ConfigError(f"{key}: {v!r}: the range's end is before its start; accepted: a time or LO-HI")
    return a, b


SERVICE_TYPES = ("roundrobin", "sequential", "random")


def _service(v, key="file_service_type"):
    """fio's file_service_type: roundrobin[:N], sequential, random[:N] (N I/Os before switching)."""
    name, _, n = str(v).strip().partition(":")
    if name not in SERVICE_TYPES:
        raise ConfigError(f"{key}: {v!r} is not modelled; accepted: roundrobin[:N], sequential, random[:N] "
                          "(fio's zipf, pareto, normal and gauss file choices are not)")
    if n and name == "sequential":
        raise ConfigError(f"{key}: {v!r}: sequential takes no :N; accepted: roundrobin[:N], sequential, random[:N]")
    return name, int(parse_number(n, key, 1, 1 << 30, "a count of I/Os >= 1")) if n else 1


def _direct(v, key="direct"):
    if str(v) not in ("0", "1"):
        raise ConfigError(f"{key}: {v!r} is not accepted; accepted: 0")
    if str(v) == "1":
        raise ConfigError("direct: direct=1 (O_DIRECT) is not modelled: tierlab simulates buffered I/O through "
                          "the page cache; accepted: 0")
    return 0


def _filename(v, key="filename"):
    return str(v or "")


class Fio(Workload):
    name = "fio"
    description = ("fio jobs of buffered read()/write() or io_uring I/O (rw, bs, size, numjobs, ioengine, "
                   "iodepth, time_based, runtime, pre_read); summary in fio's JSON shape")
    params = {
        "rw": choice_param("read", tuple(RW), "I/O pattern (fio rw=)"),
        "rwmixread": int_param(50, "reads in % of the I/Os of rw/randrw", lo=0, hi=100),
        "bs": size_param("4KiB", "bytes per I/O, a multiple of 4KiB", scaled=False),
        "size": size_param("1GiB", "file size and I/O per pass of each job"),
        "numjobs": int_param(1, "jobs (tasks), each with its own file unless filename is given", lo=1,
                             hi=MAX_TASKS),
        "filename": Param("", _filename, "any name: all jobs share one file (default: a file per job)"),
        "ioengine": choice_param("psync", ENGINES, "psync/sync: each read waits; io_uring: iodepth in flight"),
        "iodepth": int_param(1, f"I/Os in flight per job with io_uring (1-{IODEPTH_MAX})", lo=1, hi=IODEPTH_MAX),
        "direct": Param(0, _direct, "0 only: buffered I/O (O_DIRECT is not modelled)"),
        "invalidate": int_param(1, "1: the files start uncached (a simulation's page cache starts empty)",
                                lo=0, hi=1),
        "pre_read": int_param(0, "1: read every file once before the jobs start (clears invalidate)", lo=0, hi=1),
        "fadvise_hint": int_param(1, "1: POSIX_FADV_RANDOM/SEQUENTIAL on the files by the pattern", lo=0, hi=1),
        "time_based": int_param(0, "1: repeat passes until runtime is over", lo=0, hi=1),
        "runtime": Param(None, lambda v, key="runtime": None if v in (None, "") else _runtime(v, key),
                         "job runtime (e.g. 10, 500ms, 2m; divided by --scale, like the file sizes); "
                         "needed by time_based", scaled=True, scaled_min=1),
        "ramp_time": Param(None, lambda v, key="ramp_time": None if v in (None, "", 0, "0") else _runtime(v, key),
                           "time before statistics start, per job from its start (fio's ramp_time: calls "
                           "completing earlier are not reported; a runtime comes on top; divided by --scale)",
                           scaled=True, scaled_min=1),
        "startdelay": Param(None, lambda v, key="startdelay": _delay_range(v, key),
                            "delay of each job's start after the others are ready: a time, or a range "
                            "lo-hi drawn per job (fio's irange; divided by --scale)"),
        "nrfiles": int_param(1, "files per job, the job's size split between them", lo=1, hi=4096),
        "file_service_type": Param("roundrobin", lambda v, key="file_service_type": _service(v, key),
                                   "how a job with nrfiles > 1 picks the file of each I/O: roundrobin[:N] "
                                   "(N I/Os per file in turn), sequential (one file after the other), random[:N]"),
        "loops": int_param(1, "passes over the file (without time_based)", lo=1),
        "file_policy": policy_param("default", "memory policy of the page cache, e.g. bind:1 (numactl --membind)"),
        "norandommap": int_param(0, "1: random blocks drawn uniformly, repeats allowed (no random map)", lo=0, hi=1),
        "random_distribution": Param("random", fio_dist.parse,
                                     "the blocks of random I/O: random (uniform), zipf[:theta], pareto[:h], "
                                     "normal[:dev] (fio's generators and hash; workloads/fio_dist.py)"),
        "log_ios": int_param(1024, "a MARK every log_ios I/Os of each job (the throughput log)", lo=1),
    }
    access_params = ("size", "numjobs", "loops")

    def validate(self):
        if self.bs % PAGE_SIZE:
            raise ConfigError(f"bs: {self.raw.get('bs', self.bs)!r} is not accepted; accepted: a multiple of 4KiB "
                              "(tierlab reads and writes whole pages)")
        if self.size < self.bs:
            raise ConfigError(f"size: {self.raw.get('size', self.size)!r} is smaller than bs; accepted: at least bs")
        if self.time_based and self.runtime is None:
            raise ConfigError("time_based: time_based=1 needs runtime (e.g. runtime=10s)")
        if self.runtime == 0:
            raise ConfigError("runtime: 0 is not accepted; accepted: a time > 0, or leave it out")
        if self.nrfiles > 1 and self.shared:
            raise ConfigError("nrfiles: more than one file with filename (one shared file) is not modelled; "
                              "accepted: nrfiles=1 with filename, or leave filename out")
        if self.nblocks < 1:
            raise ConfigError(f"nrfiles: {self.nrfiles} files of size {self.raw.get('size', self.size)!r} leave "
                              "less than one bs block per file; accepted: at most size / bs files")

    # ---- layout ---------------------------------------------------------------------------------
    @property
    def nr_tasks(self) -> int:
        return self.numjobs

    @property
    def shared(self) -> bool:
        return bool(self.filename)

    @property
    def bs_pages(self) -> int:
        return self.bs // PAGE_SIZE

    @property
    def nblocks(self) -> int:
        """bs blocks per file (the job's size split between its nrfiles files, as fio does)."""
        return self.size // self.nrfiles // self.bs

    @property
    def file_pages(self) -> int:
        return self.nblocks * self.bs_pages

    def regions(self) -> list[Region]:
        pol, nodes = self.file_policy
        random, _ = RW[self.rw]
        advice = ("random" if random else "sequential") if self.fadvise_hint else "normal"
        if self.shared:
            return [Region(self.filename, "file", self.file_pages, pol, nodes, advice=advice)]
        return [Region(f"fio.{j}.{i}", "file", self.file_pages, pol, nodes, advice=advice)
                for j in range(self.numjobs) for i in range(self.nrfiles)]

    def processes(self) -> list[Process]:
        """fio forks a process per job: one process of one thread each, reading its files."""
        names = [r.name for r in self.regions()]
        nf = self.nrfiles
        return [Process(f"fio.{j}", files=tuple(names[:1] if self.shared else names[j * nf:(j + 1) * nf]))
                for j in range(self.numjobs)]

    def file_base(self, job: int, file: int = 0) -> int:
        return 0 if self.shared else (job * self.nrfiles + file) * self.file_pages

    def task_iodepth(self) -> list[int]:
        return [self.iodepth if self.ioengine == "io_uring" else 0] * self.numjobs

    def nr_marks(self) -> int:
        return 2

    def nr_accesses(self) -> int | None:
        if self.time_based:
            return None
        pre = self.file_pages * (1 if self.shared else self.numjobs * self.nrfiles) if self.pre_read else 0
        return pre + self.numjobs * self.loops * self.nrfiles * self.file_pages

    # ---- the access stream ----------------------------------------------------------------------
    def chunks(self, seed: int) -> Iterator[Chunk]:
        if self.pre_read:
            yield from self._pre_read_chunks()
        T, bsp = self.numjobs, self.bs_pages
        per = max(1, self.chunk_accesses // (T * bsp))
        if self.time_based:
            per = min(per, MAX_IOS_PER_CHUNK)
        total = None if self.time_based else self.loops * self.nblocks * self.nrfiles
        rngs = [np.random.default_rng([seed, j, 1]) for j in range(T)]
        offs = [np.random.default_rng([seed, j, 3]) for j in range(T)]     # norandommap's offsets
        dist, param = self.random_distribution
        dists = [None if dist == "random" else
                 fio_dist.BlockDistribution(dist, param, self.nblocks, np.random.default_rng([seed, j, 4]))
                 for j in range(T)]
        files = [FileService(self.nrfiles, self.nblocks, *self.file_service_type,
                             np.random.default_rng([seed, j, 5])) for j in range(T)]
        done = np.zeros(T, np.int64)  # I/Os generated per job so far
        first = True
        progress = None
        while total is None or (done < total).any():
            # each job's next `per` I/Os, for the jobs below the low-water mark (fewer than `per`
            # I/Os buffered: workloads.base.low_water) that still run, so a job that runs slower
            # or starts later (startdelay) is not given the others' pace in advance
            want = low_water(progress, per * bsp, T)
            if progress is not None:
                want &= ~progress.stopped
            n = np.where(want, per if total is None else np.minimum(per, total - done), 0)
            parts = [self._ios(j, int(done[j]), int(n[j]), seed, rngs[j], offs[j], dists[j], files[j])
                     if n[j] else NO_OPS for j in range(T)]
            done += n
            offsets = np.zeros(T + 1, np.int64)
            np.cumsum(n * bsp, out=offsets[1:])
            chunk = Chunk(offsets, np.concatenate([p for p, _ in parts]), np.concatenate([o for _, o in parts]),
                          start_phase=first, runtime_ns=self.runtime if first else None,
                          ended=None if total is None else done >= total)
            if first:
                chunk.start_offsets_ns = self.start_delays(seed) if self.startdelay[1] else None
                chunk.ramp_ns = self.ramp_time or 0
            first = False
            progress = yield chunk
            if progress is not None and bool(progress.stopped.all()):
                return

    def start_delays(self, seed: int) -> np.ndarray:
        """Each job's startdelay (ns, scaled): the value, or drawn uniformly from its range."""
        lo, hi = self.startdelay
        d = [lo if hi == lo else int(np.random.default_rng([seed, j, 6]).integers(lo, hi + 1))
             for j in range(self.numjobs)]
        return (np.array(d, np.float64) / float(self.scale)).astype(np.int64)

    def _pre_read_chunks(self) -> Iterator[Chunk]:
        """Each file read once sequentially in bs calls (job j reads file j; a shared file job 0)."""
        T, bsp = self.numjobs, self.bs_pages
        readers = [0] if self.shared else list(range(T))
        step = max(bsp, (self.chunk_accesses // len(readers)) // bsp * bsp)
        F = self.file_pages * self.nrfiles           # a job's files are consecutive slots: read in turn
        for lo in range(0, F, step):
            hi = min(F, lo + step)
            offs, pages, ops = [0], [], []
            for j in range(T):
                if j in readers:
                    pg = self.file_base(j) + np.arange(lo, hi, dtype=np.int64)
                    op = np.full(hi - lo, OP_READ, np.uint8)
                    op[bsp - 1::bsp] |= OP_SYSCALL_END
                    if hi == F:
                        op[-1] |= OP_MARK
                    pages.append(pg)
                    ops.append(op)
                offs.append(offs[-1] + (hi - lo if j in readers else 0))
            yield Chunk(np.array(offs, np.int64), np.concatenate(pages), np.concatenate(ops))

    def _ios(self, job: int, start: int, n: int, seed: int, rng, offs, dist, files) -> tuple[np.ndarray, np.ndarray]:
        """Pages and ops of I/Os [start, start + n) of a job's stream (`offs`: the job's generator of
        norandommap offsets; `dist`: its fio_dist.BlockDistribution, None for random; `files`: its
        FileService; all drawn in stream order)."""
        random, reads = RW[self.rw]
        nb, bsp = self.nblocks, self.bs_pages
        j = np.arange(start, start + n, dtype=np.int64)
        f, q = files.take(j)                        # each I/O's file, and its place in that file's stream
        idx = q % nb
        if random and dist is not None:
            blocks = dist.blocks(n)                 # fio takes these without its random map
        elif random and self.norandommap:
            blocks = offs.integers(0, nb, n, dtype=np.int64)
        elif random:
            # a random map per file and pass (one file: keyed as before nrfiles existed)
            blocks = np.empty(n, np.int64)
            passes = q // nb
            for fi, ps in sorted(set(zip(f.tolist(), passes.tolist()))):
                sel = (passes == ps) & (f == fi)
                key = [seed, job, 2, ps] if self.nrfiles == 1 else [seed, job, 2, ps, fi]
                blocks[sel] = random_map(idx[sel], nb, np.random.default_rng(key))
        else:
            blocks = idx
        share = self.rwmixread if reads is None else reads
        if share == 100:
            kind = np.full(n, OP_READ, np.uint8)
        elif share == 0:
            kind = np.full(n, OP_WRITE, np.uint8)
        else:
            kind = np.where(rng.random(n) * 100 < share, OP_READ, OP_WRITE).astype(np.uint8)
        base = self.file_base(job) + f * self.file_pages
        pages = (base[:, None] + blocks[:, None] * bsp + np.arange(bsp, dtype=np.int64)).reshape(-1)
        ops = np.repeat(kind, bsp).reshape(n, bsp)
        ops[:, -1] |= OP_SYSCALL_END
        ops[(j + 1) % self.log_ios == 0, -1] |= OP_MARK
        return pages, ops.reshape(-1)

    # ---- fio's report ---------------------------------------------------------------------------
    def summary(self, result, phase_start_ns: int) -> dict:
        delays = self.start_delays(int(result.config.get("seed", 0))) if self.startdelay[1] else 0
        starts = phase_start_ns + np.zeros(self.numjobs, np.int64) + delays + (self.ramp_time or 0)
        return fio_json(result, starts, self.bs, self.log_ios, self.numjobs)


class FileService:
    """Which of a job's nrfiles files each I/O goes to (fio's file_service_type), and its place in
    that file's own stream (its sequential offset or random-map position). A pass of the job is a
    pass over every file (nrfiles * nblocks I/Os); within it, as in fio, a file that has had all its
    blocks is not picked again: roundrobin:N takes N I/Os from each file in turn (the last turn of
    each file shorter when N does not divide its blocks), sequential a whole file then the next,
    random:N groups of N I/Os of the files in a random order (a shuffle of every file's groups: fio
    picks uniformly among the files not yet done, which is close to it). With one file every I/O
    is file 0 at its stream index."""

    def __init__(self, nrfiles: int, nblocks: int, kind: str, per: int, rng):
        self.nf, self.nb, self.kind, self.per, self.rng = nrfiles, nblocks, kind, per, rng
        self.pass_no, self.table = -1, None         # random: the current pass's (file, place) per I/O

    def take(self, j: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        nf, nb = self.nf, self.nb
        if nf == 1:
            return np.zeros(j.shape[0], np.int64), j
        ps, r = j // (nf * nb), j % (nf * nb)
        if self.kind == "sequential":
            f, q = r // nb, r % nb
        elif self.kind == "roundrobin":
            f, q = self._roundrobin(r)
        else:
            f, q = np.empty_like(r), np.empty_like(r)
            for p in np.unique(ps).tolist():        # passes come in order: each table drawn once
                sel = ps == p
                if p != self.pass_no:
                    self.pass_no, self.table = p, self._shuffled_pass()
                f[sel], q[sel] = self.table[0][r[sel]], self.table[1][r[sel]]
        return f, ps * nb + q

    def _roundrobin(self, r):
        nf, nb, N = self.nf, self.nb, self.per
        full = (nb // N) * N * nf                  # I/Os in whole turns of N
        t = nb % N                                 # the last, shorter turn of each file
        f = np.where(r < full, (r // N) % nf, (r - full) // max(t, 1))
        q = np.where(r < full, (r // (N * nf)) * N + r % N, (nb // N) * N + (r - full) % max(t, 1))
        return f, q

    def _shuffled_pass(self):
        nf, nb, N = self.nf, self.nb, self.per
        turns = -(-nb // N)
        groups = self.rng.permutation(np.repeat(np.arange(nf, dtype=np.int64), turns))
        sizes = np.full(groups.shape[0], N, np.int64)
        # each file's last turn (its turns-th occurrence in the order) holds what is left
        nth = np.zeros(groups.shape[0], np.int64)
        seen = np.zeros(nf, np.int64)
        for i, g in enumerate(groups.tolist()):
            nth[i] = seen[g]
            seen[g] += 1
        sizes[nth == turns - 1] = nb - (turns - 1) * N
        f = np.repeat(groups, sizes)
        q = np.repeat(nth * N, sizes) + (np.arange(f.shape[0]) - np.repeat(np.cumsum(sizes) - sizes, sizes))
        return f, q


def random_map(idx: np.ndarray, n: int, rng) -> np.ndarray:
    """Block of each position idx (< n) of a pass: a random permutation of range(n) without a
    table (fio's random map hits every block once per pass; its lfsr generator does it without
    memory too): a keyed bijection of k-bit integers (odd multiplies, xor-shifts, adds mod 2**k,
    2**k >= n) with cycle walking back into range(n)."""
    k = max(1, int(n - 1).bit_length())
    mask = np.uint64((1 << k) - 1)
    keys = [(np.uint64(int(rng.integers(0, 1 << 62)) * 2 + 1), np.uint64(max(1, k // 2)),
             np.uint64(int(rng.integers(0, 1 << 62)))) for _ in range(3)]

    def f(x):
        for m, r, c in keys:
            x = (x * m) & mask
            x ^= x >> r
            x = (x + c) & mask
        return x

    y = f(idx.astype(np.uint64))
    out = y >= np.uint64(n)
    while out.any():
        y[out] = f(y[out])
        out = y >= np.uint64(n)
    return y.astype(np.int64)


def _clat(hist: np.ndarray) -> dict:
    nr = int(hist.sum())
    if nr == 0:
        return {"min": 0, "max": 0, "mean": 0.0, "stddev": 0.0, "N": 0}
    nz = np.flatnonzero(hist)
    vals = np.array([plat_idx_to_val(int(i)) for i in nz])
    w = hist[nz].astype(np.float64)
    mean = float((vals * w).sum() / nr)
    return {"min": int(vals[0]), "max": int(vals[-1]), "mean": mean,
            "stddev": float(np.sqrt((w * (vals - mean) ** 2).sum() / nr)), "N": nr,
            "percentile": {f"{p:f}": int(v) for p, v in clat_percentiles(hist, FIO_PERCENTILES).items()}}


def _dir_stats(hist: np.ndarray, bs: int, runtime_ns: float) -> dict:
    ios = int(hist.sum())
    nbytes = ios * bs
    sec = runtime_ns / 1e9
    return {"io_bytes": nbytes, "io_kbytes": nbytes // 1024, "bw_bytes": int(nbytes / sec) if sec > 0 else 0,
            "bw": int(nbytes / 1024 / sec) if sec > 0 else 0, "iops": ios / sec if sec > 0 else 0.0,
            "runtime": int(runtime_ns / 1e6), "total_ios": ios, "clat_ns": _clat(hist)}


def fio_json(result, starts_ns, bs: int, log_ios: int, numjobs: int) -> dict:
    """fio's --output-format=json shape (the parts tierlab models) from a Result: per job, the
    aggregate, and the aggregate throughput log. `starts_ns`: when each job's statistics start
    (the phase start, plus its startdelay and ramp_time; one number: the same for every job). See
    the module docstring."""
    hist = result.clat_hist[:numjobs]
    ends = result.io_done_s.to_numpy()[:numjobs] * 1e9      # fio waits for the I/Os in flight
    starts = np.broadcast_to(np.asarray(starts_ns, np.float64), (numjobs,))
    runtimes = np.maximum(ends - starts, 0.0)
    phase_start_ns = float(starts.min()) if numjobs else 0.0
    jobs = []
    for j in range(numjobs):
        jobs.append({"jobname": "fio", "groupid": 0, "job_runtime": int(runtimes[j] / 1e6),
                     "read": _dir_stats(hist[j, 0], bs, runtimes[j]),
                     "write": _dir_stats(hist[j, 1], bs, runtimes[j])})
    agg_rt = float(runtimes.max()) if numjobs else 0.0
    aggregate = {"jobname": "All jobs", "groupid": 0, "job_runtime": int(agg_rt / 1e6),
                 "read": _dir_stats(hist[:, 0].sum(axis=0), bs, agg_rt),
                 "write": _dir_stats(hist[:, 1].sum(axis=0), bs, agg_rt)}
    return {"fio version": "tierlab-fio", "jobs": jobs, "aggregate": aggregate,
            "bw_log": bw_log(result, phase_start_ns, log_ios * bs, numjobs)}


def bw_log(result, phase_start_ns: int, bytes_per_mark: int, numjobs: int, bins: int = BW_LOG_BINS) -> list[dict]:
    """Aggregate throughput over the run: the jobs' marks after the phase start, counted in `bins`
    equal intervals up to the last mark. [{"t_s": interval end, "MBps": ...}]"""
    m = result.marks_s
    t = np.sort(m[m.task < numjobs].time_s.to_numpy() * 1e9)
    t = t[t > phase_start_ns]
    if len(t) == 0:
        return []
    edges = np.linspace(phase_start_ns, t[-1], bins + 1)
    counts, _ = np.histogram(t, bins=edges)
    width = (edges[1] - edges[0]) / 1e9
    return [{"t_s": float((e - phase_start_ns) / 1e9), "MBps": float(c * bytes_per_mark / width / 1e6)}
            for e, c in zip(edges[1:], counts)]


__all__ = ["Fio", "fio_json", "random_map"]
