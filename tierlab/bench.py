"""Benchmarks of the simulator itself (host wall time; `tierlab bench`).

Measured, each after a JIT warm-up run on a tiny input, through the public API
(`tierlab.api.build`), so engine changes show up here:

* ``file-read``: seed 000's shape on the two-tier `dram-cxl-1tb` machine scaled down: a file bound to
  the CXL node read in several cycles, with demotion, tiering-mode NUMA balancing and page-cache
  promotion enabled.
* ``random-read``: 4 KiB random read() over a file twice the size of node 0 on `qemu-2node`, bound
  to node 0 so kswapd demotes page cache to node 1 (memory pressure), demotion_enabled=1.
* ``random-read-mglru``, ``random-read-buddy``: the same with the multi-gen LRU, and with physical frames
  from the buddy allocator (page_alloc_model="buddy").
* ``hot-chunks``: seed 002's microbenchmark on `bergamo-cxl` scaled down (48 chunk visits): the hint-fault
  path with the NUMA scanner running in tiering mode (mainline's time-based latency), with promotion
  and demotion.
* ``libcachesim``: tierlab's exact LRU (`tierlab.core.reference`) against libCacheSim's LRU on one
  zipf trace: equal miss ratios, and libCacheSim's wall time / tierlab's (``speedup`` > 1 means
  tierlab is faster). Skipped when libcachesim is not installed (it is a dev extra).
* ``startup``: wall time of ``python -m tierlab run`` on a small run in a subprocess, cold (an empty
  temporary NUMBA_CACHE_DIR, so every kernel is compiled) and warm (again, with that cache filled).
  Both runs may write Python's bytecode cache (PYTHONDONTWRITEBYTECODE is dropped for them), as a
  user's runs do: the warm run then reads tierlab's ~90 modules as bytecode rather than compiling
  them from source (0.15 s here).

Wall time never enters a simulation result; these numbers only describe the host and the engine.
"""
from __future__ import annotations

import json
import math
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

# name, config (tierlab.api.build), warm-up overrides; sizes for full and --quick runs
_FILE_READ = {
    "machine": "dram-cxl-1tb", "workload": "file-read",
    "params": {"file_size": "128GiB", "cycles": 5, "file_policy": "bind:1"},
    "knobs": {"demotion_enabled": 1, "numa_balancing": 2, "pagecache_promotion_enabled": 1},
    "seed": 1,
}
_RANDOM_READ = {
    "machine": "qemu-2node", "workload": "random-read",
    "params": {"file_size": "2GiB", "policy": "bind:0"},
    "knobs": {"demotion_enabled": 1},
    "seed": 7,
}
_HOT_CHUNKS = {
    "machine": "bergamo-cxl", "workload": "hot-chunks",
    "params": {"policy": "bind|numa_balancing:1,2", "cpunodebind": "1", "visits": 48},
    "knobs": {"demotion_enabled": 1, "numa_balancing": 2},
    "seed": 0,
}
_XSBENCH = {
    "machine": "qemu-2node", "workload": "xsbench", "scale": 64,
    "params": {"cpunodebind": "0"},
    "knobs": {"numa_balancing": 2, "demotion_enabled": 1, "migrc": "on", "migration_entry_ad": 0},
    "seed": 1,
}
SIZES = {
    # file-read: scale divides the 1 TB machine and the 128 GiB file; random-read: accesses
    "full": {"file_read_scale": 16, "random_read_scale": 1, "random_read_accesses": 5_000_000, "hot_chunks_scale": 64,
             "xsbench_particles": 5_000_000,
             "lcs": dict(n_requests=10_000_000, n_pages=1_000_000, capacity=100_000)},
    "quick": {"file_read_scale": 128, "random_read_scale": 2, "random_read_accesses": 1_000_000, "hot_chunks_scale": 128,
              "xsbench_particles": 1_000_000,
              "lcs": dict(n_requests=1_000_000, n_pages=100_000, capacity=10_000)},
}
STARTUP_ARGS = ["run", "--machine", "qemu-2node", "--workload", "random-read", "--param", "file_size=64MiB",
                "--param", "accesses=10000", "--set", "demotion_enabled=1", "--format", "json", "--no-progress"]


def bench_configs(quick: bool = False) -> list[tuple[str, dict]]:
    z = SIZES["quick" if quick else "full"]
    fr = {**_FILE_READ, "scale": z["file_read_scale"]}
    rr = {**_RANDOM_READ, "scale": z["random_read_scale"],
          "params": {**_RANDOM_READ["params"], "accesses": z["random_read_accesses"]}}
    hc = {**_HOT_CHUNKS, "scale": z["hot_chunks_scale"]}
    # the same random reads under pressure with the multi-gen LRU (issue 12: within 1.5x of the classic LRU)
    rr_mglru = {**rr, "knobs": {**rr["knobs"], "lru_gen": "y"}}
    # seed 004's shape, counting flushes only and then with every CPU's TLBs simulated (tlb_hw.py)
    xs = {**_XSBENCH, "params": {**_XSBENCH["params"], "particles": z["xsbench_particles"]}}
    xs_tlb = {**xs, "tlb_model": "set_assoc"}
    # the same random reads with frames from the buddy allocator and its per-CPU lists (buddy.py)
    rr_buddy = {**rr, "page_alloc_model": "buddy"}
    return [("file-read", fr), ("random-read", rr), ("random-read-mglru", rr_mglru), ("random-read-buddy", rr_buddy),
            ("hot-chunks", hc), ("xsbench", xs), ("xsbench-tlb", xs_tlb)]


def _tiny(config: dict) -> dict:
    """The same machine/workload/knobs, small enough to run in well under a second once compiled."""
    c = json.loads(json.dumps(config))
    c["scale"] = float(c.get("scale", 1)) * 64
    if "accesses" in c["params"]:
        c["params"]["accesses"] = 10_000
    if "cycles" in c["params"]:
        c["params"]["cycles"] = 2
    if "particles" in c["params"]:
        c["params"]["particles"] = 100_000
    return c


def measure(config: dict, warmup: bool = True) -> dict:
    """Wall time of build + run + result for one config; sim_accesses counts accesses executed."""
    from .api import build

    if warmup:
        build(_tiny(config)).run().result()
    n = [0]

    def count(k: int) -> None:
        n[0] += k

    t0 = time.perf_counter()
    sim = build(config)
    sim.run(progress=count)
    res = sim.result()
    wall = time.perf_counter() - t0
    return {"sim_accesses": int(n[0]), "wall_s": wall, "accesses_per_s": n[0] / wall if wall > 0 else math.inf,
            "sim_time_s": res.sim_time_s, "config": config}


def zipf_trace(n_requests: int, n_pages: int, alpha: float = 1.0, seed: int = 0) -> np.ndarray:
    """Deterministic zipf(alpha) page trace; page ranks are shuffled so hot pages are not 0, 1, ..."""
    rng = np.random.default_rng(seed)
    cdf = np.cumsum(1.0 / np.arange(1, n_pages + 1, dtype=np.float64) ** alpha)
    cdf /= cdf[-1]
    ranks = np.minimum(np.searchsorted(cdf, rng.random(n_requests)), n_pages - 1)
    return rng.permutation(n_pages).astype(np.int64)[ranks]


def compare_with_libcachesim(n_requests: int = 10_000_000, n_pages: int = 1_000_000,
                             capacity: int = 100_000, seed: int = 0, *, alpha: float = 1.0,
                             sparse_ids: bool = False, repeats: int = 1,
                             libcachesim_hashpower: int | None = None) -> dict:
    """Time tierlab's exact LRU against libCacheSim's LRU on the same zipf trace (host wall time).

    Both sides run the same requests with unit-size objects, so the miss ratios must be identical.
    libCacheSim side: its fastest Python path, ``process_trace`` on a C ``TraceReader`` over an
    oracleGeneral file (the request loop runs in C); writing the file is not timed, opening the
    reader, building the cache and running the trace are. tierlab side: ``reference.simulate``
    after a JIT warm-up, page-id remapping included. sparse_ids relabels pages to huge scattered
    int64 ids (tierlab's hash-remap path); each side's time is the best of ``repeats`` runs;
    libcachesim_hashpower defaults to a table sized for ``capacity`` (log2 + 1), which ran faster
    here than libCacheSim's default of 24."""
    import libcachesim as lcs

    from .core import reference
    from .trace import write_oracle_general

    pages = zipf_trace(n_requests, n_pages, alpha=alpha, seed=seed)
    if sparse_ids:
        pages = pages * np.int64(0x9E3779B97F4A7C1) + np.int64(-(2**61))
    if libcachesim_hashpower is None:
        libcachesim_hashpower = max(10, math.ceil(math.log2(capacity)) + 1)

    # JIT warm-up on the trace itself: a prefix can take the other page-id remapping path (direct
    # ids or the hash), whose kernel would then compile inside the timed run
    reference.simulate(pages, capacity, "lru")
    tierlab_wall_s = math.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        counts = reference.simulate(pages, capacity, "lru")
        tierlab_wall_s = min(tierlab_wall_s, time.perf_counter() - t0)

    d = tempfile.mkdtemp(prefix="tierlab-lcs-")
    path = os.path.join(d, "trace.oracleGeneral")
    try:
        write_oracle_general(path, pages)
        lcs_wall_s = math.inf
        for _ in range(repeats):
            t0 = time.perf_counter()
            reader = lcs.TraceReader(path, lcs.TraceType.ORACLE_GENERAL_TRACE)
            cache = lcs.LRU(capacity, hashpower=libcachesim_hashpower)
            lcs_miss_ratio, _ = cache.process_trace(reader)
            lcs_wall_s = min(lcs_wall_s, time.perf_counter() - t0)
            del reader, cache
    finally:
        shutil.rmtree(d, ignore_errors=True)
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


def bench_libcachesim(quick: bool = False) -> dict:
    try:
        import libcachesim  # noqa: F401
    except ImportError:
        return {"skipped": "libcachesim is not installed (pip install -e '.[dev]')"}
    out = compare_with_libcachesim(**SIZES["quick" if quick else "full"]["lcs"])
    keys = ("trace_requests", "tierlab_miss_ratio", "libcachesim_miss_ratio", "speedup",
            "tierlab_wall_s", "libcachesim_wall_s", "n_pages", "capacity")
    return {k: out[k] for k in keys if k in out}


def _cold_env(cache: str) -> dict:
    """A child's environment with an empty numba cache at `cache`; Python may write its bytecode, as a
    user's runs do (this environment may set PYTHONDONTWRITEBYTECODE)."""
    env = {**os.environ, "NUMBA_CACHE_DIR": cache}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def bench_startup(args: list[str] | None = None) -> dict:
    """Cold (empty NUMBA_CACHE_DIR) and warm (same dir, filled) wall time of `python -m tierlab run`."""
    args = list(args or STARTUP_ARGS)
    cmd = [sys.executable, "-m", "tierlab"] + args
    cache = tempfile.mkdtemp(prefix="tierlab-bench-numba-")
    env = _cold_env(cache)
    try:
        times = []
        for _ in range(2):
            t0 = time.perf_counter()
            p = subprocess.run(cmd, env=env, capture_output=True, text=True)
            times.append(time.perf_counter() - t0)
            if p.returncode != 0:
                raise RuntimeError(f"{' '.join(cmd)} exited with {p.returncode}: {p.stderr.strip()[-2000:]}")
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    return {"cold_start_s": times[0], "warm_start_s": times[1], "command": "python -m tierlab " + " ".join(args)}


_COMPILE_CHILD = """
import json, sys, time
t0 = time.perf_counter()
from tierlab import api
from tierlab.cli import run_config_from_args, build_parser
from tierlab.jitcache import CompileRecorder
args = build_parser().parse_args(json.loads(sys.argv[1]))
with CompileRecorder() as rec:
    sim = api.build(run_config_from_args(args))
    sim.run()
print(json.dumps({"wall_s": time.perf_counter() - t0, "kernels": rec.kernels, "top_level": rec.top_level}))
"""


def bench_compile(args: list[str] | None = None, top: int = 12) -> dict:
    """A cold compile (empty NUMBA_CACHE_DIR, in a child process) of what `python -m tierlab run`
    with STARTUP_ARGS compiles, timed from numba's compile events: seconds per entry point (a
    compile nothing else was compiling around: engine.run with the call tree below it, the
    workload's fillers), the kernels compiled, the `top` kernels by their own compile time; and the
    engine's size as the compile budget counts it (tierlab/codesize.py)."""
    from .codesize import measure
    args = list(args or STARTUP_ARGS)
    cache = tempfile.mkdtemp(prefix="tierlab-bench-numba-")
    env = _cold_env(cache)
    try:
        p = subprocess.run([sys.executable, "-c", _COMPILE_CHILD, json.dumps(args)], env=env,
                           capture_output=True, text=True)
        if p.returncode != 0:
            raise RuntimeError(f"the compile benchmark's child exited with {p.returncode}: {p.stderr.strip()[-2000:]}")
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    child = json.loads(p.stdout.strip().splitlines()[-1])
    own = sorted(child["kernels"], key=lambda k: -k[2])[:top]
    return {"command": "python -m tierlab " + " ".join(args), "wall_s": child["wall_s"],
            "kernels_compiled": len(child["kernels"]),
            "entry_points_s": {name: s for name, s in child["top_level"]},
            "top_kernels_own_s": {name: s for name, _, s in own},
            "size": measure()}


def bench_reproduction(scale: float = 1.0) -> dict:
    """Wall time of the seed 000 reproduction (full size at scale 1: ~2.7 G simulated page reads,
    the 50-cycle promoting run alone 1.7 G), after a small warm-up run fills the JIT cache: with the
    default worker process (jobs=2, the figure the issue's target is about) and serially (jobs=1),
    one after the other in the same run, so the ratio is measured on the same machine state."""
    from .reproduce import run_reproduction
    run_reproduction("pagecache-promotion-128g", scale=256, steady_cycles=1, cycles=4, jobs=1)
    out = {"name": "pagecache-promotion-128g", "scale": scale}
    for jobs in (2, 1):
        t = time.perf_counter()
        df = run_reproduction("pagecache-promotion-128g", scale=scale, jobs=jobs)
        out["wall_s" if jobs == 2 else "serial_wall_s"] = time.perf_counter() - t
    out["predicted_max_abs_rel_error"] = float(df[df.role == "predicted"].rel_error.abs().max())
    return out


def run_bench(quick: bool = False, startup: bool = True, libcachesim: bool = True, log=None,
              reproduction: bool | None = None, compile_only: bool = False) -> dict:
    """All benchmarks; the JSON shape of `tierlab bench --format json`."""
    import numba

    def say(msg: str) -> None:
        if log is not None:
            print(f"bench: {msg}", file=log, flush=True)

    report: dict = {"quick": bool(quick),
                    "host": {"python": platform.python_version(), "numba": numba.__version__,
                             "numpy": np.__version__, "cpus": os.cpu_count(), "machine": platform.machine()},
                    "benchmarks": []}
    if compile_only:
        say("cold compile of `python -m tierlab run` (empty numba cache), timed per kernel ...")
        report["compile"] = bench_compile()
        if startup:
            say("start-up of `python -m tierlab run`, cold then warm ...")
            report["startup"] = bench_startup()
        return report
    for name, cfg in bench_configs(quick):
        say(f"{name} (warm-up, then measured) ...")
        r = measure(cfg)
        report["benchmarks"].append({"name": name, **r})
        say(f"{name}: {r['sim_accesses']:,} accesses in {r['wall_s']:.2f} s")
    if reproduction if reproduction is not None else not quick:
        rscale = 1.0 if not quick else 64.0
        where = "at full size" if rscale == 1 else f"at scale {rscale:g}"
        say(f"seed 000 reproduction {where}, 2 processes then serial ...")
        rp = report["reproduction"] = bench_reproduction(rscale)
        say(f"reproduction: {rp['wall_s']:.1f} s, serial {rp['serial_wall_s']:.1f} s")
    if libcachesim:
        say("libCacheSim comparison ...")
        report["libcachesim"] = bench_libcachesim(quick)
    if startup:
        say("start-up of `python -m tierlab run`, cold (empty numba cache; compiles) then warm ...")
        report["startup"] = bench_startup()
    return report


def format_bench(report: dict) -> str:
    lines = []
    if report["benchmarks"]:
        lines.append(f"{'benchmark':<14} {'sim accesses':>14} {'wall s':>9} {'accesses/s':>14} {'sim time s':>11}")
    for b in report["benchmarks"]:
        lines.append(f"{b['name']:<14} {b['sim_accesses']:>14,d} {b['wall_s']:>9.3f} "
                     f"{b['accesses_per_s']:>14,.0f} {b['sim_time_s']:>11.4f}")
    lc = report.get("libcachesim")
    if lc is not None:
        lines.append("")
        if "skipped" in lc:
            lines.append(f"libCacheSim: skipped: {lc['skipped']}")
        else:
            same = "equal" if lc["tierlab_miss_ratio"] == lc["libcachesim_miss_ratio"] else "DIFFERENT"
            lines.append(f"libCacheSim LRU, {lc['trace_requests']:,} zipf requests: miss ratio tierlab "
                         f"{lc['tierlab_miss_ratio']:.6f} vs libCacheSim {lc['libcachesim_miss_ratio']:.6f} "
                         f"({same}); tierlab {lc['speedup']:.2f}x libCacheSim's speed")
    rp = report.get("reproduction")
    if rp is not None:
        lines.append("")
        lines.append(f"reproduce {rp['name']} at scale {rp['scale']:g}: {rp['wall_s']:.1f} s wall "
                     f"(2 processes), {rp['serial_wall_s']:.1f} s serial")
    co = report.get("compile")
    if co is not None:
        lines.append(f"cold compile: {co['wall_s']:.1f} s wall, {co['kernels_compiled']} kernels: {co['command']}")
        lines.append("  per entry point (s, its call tree included): " + ", ".join(
            f"{k} {v:.1f}" for k, v in co["entry_points_s"].items()))
        lines.append("  kernels by their own compile (s): " + ", ".join(
            f"{k} {v:.1f}" for k, v in co["top_kernels_own_s"].items()))
        z = co["size"]
        lines.append(f"  size (compile budget, AST nodes): {z['kernels']} kernels ({z['inline_leaves']} inlined "
                     f"leaves), {z['own_nodes']:,} own nodes; engine.run reaches {z['run_units']} kernels, "
                     f"{z['run_expanded_nodes']:,} nodes with leaves expanded")
    su = report.get("startup")
    if su is not None:
        lines.append("")
        lines.append(f"start-up: cold {su['cold_start_s']:.1f} s (empty numba cache), warm "
                     f"{su['warm_start_s']:.1f} s: {su['command']}")
    return "\n".join(lines)
