"""Wall-clock comparison of tierlab's exact LRU with libCacheSim's LRU on one zipf trace.

Host wall time (time.perf_counter) of the machine running tierlab, not simulated time.  Both sides
run the same requests with unit-size objects, so the miss ratios must be identical.

libCacheSim side: its fastest Python path, ``CacheBase.process_trace`` on a C ``TraceReader`` over
an oracleGeneral binary file (the whole request loop runs in C via ``c_process_trace``).  The
per-request ``cache.get(Request)`` API is about 10x slower than that (a Python call per request), so
it is not used.  Writing the trace file is not timed; opening the reader, building the cache and
running the trace are.  tierlab side: ``simulate(pages, capacity, "lru")`` after a JIT warm-up,
including page-id remapping.

Run: ``python -m benchmarks.libcachesim_compare``.
"""

from __future__ import annotations

import math
import os
import tempfile
import time

import numpy as np

from tierlab.core import reference
from tierlab.trace import ORACLE_GENERAL_DTYPE



def zipf_trace(n_requests: int, n_pages: int, alpha: float = 1.0, seed: int = 0) -> np.ndarray:
    """Deterministic zipf(alpha) page trace; page ranks are shuffled so hot pages are not 0, 1, ..."""
    rng = np.random.default_rng(seed)
    cdf = np.cumsum(1.0 / np.arange(1, n_pages + 1, dtype=np.float64) ** alpha)
    cdf /= cdf[-1]
    ranks = np.minimum(np.searchsorted(cdf, rng.random(n_requests)), n_pages - 1)
    return rng.permutation(n_pages).astype(np.int64)[ranks]


def write_oracle_general(pages: np.ndarray, path: str) -> None:
    """Write pages as a libCacheSim oracleGeneral trace of size-1 objects."""
    rec = np.zeros(pages.shape[0], dtype=ORACLE_GENERAL_DTYPE)
    rec["clock_time"] = np.arange(pages.shape[0]) // 1000
    rec["obj_id"] = pages.astype(np.int64, copy=False).view(np.uint64)
    rec["obj_size"] = 1  # cache size in bytes == capacity in objects
    rec["next_access_vtime"] = -1
    rec.tofile(path)


def compare_with_libcachesim(n_requests: int = 10_000_000, n_pages: int = 1_000_000,
                             capacity: int = 100_000, seed: int = 0, *, alpha: float = 1.0,
                             sparse_ids: bool = False, repeats: int = 1,
                             libcachesim_hashpower: int | None = None) -> dict:
    """Time tierlab's exact LRU against libCacheSim's LRU on the same zipf trace.

    sparse_ids relabels pages to huge, scattered int64 ids, which sends tierlab through its hash
    remap instead of the direct-id path.  Each side's wall time is the best of ``repeats`` runs.
    libcachesim_hashpower defaults to a table sized for ``capacity`` objects (log2 + 1), which ran
    faster here than libCacheSim's default of 24.
    """
    import libcachesim as lcs

    pages = zipf_trace(n_requests, n_pages, alpha=alpha, seed=seed)
    if sparse_ids:
        pages = pages * np.int64(0x9E3779B97F4A7C1) + np.int64(-(2**61))
    if libcachesim_hashpower is None:
        libcachesim_hashpower = max(10, math.ceil(math.log2(capacity)) + 1)

    reference.simulate(pages[:1000], 10, "lru")  # JIT warm-up (loads the on-disk cache)
    tierlab_wall_s = math.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        counts = reference.simulate(pages, capacity, "lru")
        tierlab_wall_s = min(tierlab_wall_s, time.perf_counter() - t0)

    fd, path = tempfile.mkstemp(suffix=".oracleGeneral")
    os.close(fd)
    try:
        write_oracle_general(pages, path)
        lcs_wall_s = math.inf
        for _ in range(repeats):
            t0 = time.perf_counter()
            reader = lcs.TraceReader(path, lcs.TraceType.ORACLE_GENERAL_TRACE)
            cache = lcs.LRU(capacity, hashpower=libcachesim_hashpower)
            lcs_miss_ratio, _ = cache.process_trace(reader)
            lcs_wall_s = min(lcs_wall_s, time.perf_counter() - t0)
            del reader, cache
    finally:
        os.unlink(path)

    return {
        "trace_requests": int(n_requests),
        # libCacheSim reports 1 - hits/requests; the same formula makes equal counts give
        # bit-identical floats (misses/requests can differ in the last ulp).
        "tierlab_miss_ratio": 1.0 - counts.nr_hits / counts.nr_requests,
        "libcachesim_miss_ratio": float(lcs_miss_ratio),
        "speedup": lcs_wall_s / tierlab_wall_s,
        "tierlab_wall_s": tierlab_wall_s,
        "libcachesim_wall_s": lcs_wall_s,
        "libcachesim_api": (f"libcachesim {lcs.__version__} LRU(capacity, hashpower="
                            f"{libcachesim_hashpower}).process_trace(TraceReader(oracleGeneral "
                            "binary file)) -> C c_process_trace loop"),
        "n_pages": int(n_pages),
        "capacity": int(capacity),
        "sparse_ids": bool(sparse_ids),
        "tierlab_misses": counts.nr_misses,
        "libcachesim_misses": round(float(lcs_miss_ratio) * n_requests),
    }


if __name__ == "__main__":
    for sparse in (False, True):
        for key, value in compare_with_libcachesim(sparse_ids=sparse, repeats=3).items():
            print(f"{key:24s} {value}")
        print()
