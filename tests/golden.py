"""Golden counters: a few canonical runs whose every nonzero vmstat counter and sim_time_s are stored
in tests/golden/NAME.json and must come out bit-identical (tests/test_golden.py).

    python tests/golden.py            # run every canonical run, print a per-counter diff old -> new
    python tests/golden.py NAME ...   # only these runs
    python tests/golden.py --accept   # ... and rewrite the files with the new values

A change that is meant to change results (a fixed model, a new mechanism) shows up here as a diff the
reviewer reads; a change that is not meant to (a restructure, a speed-up) must show none.

Each run is either an `api.build` config (what `python -m tierlab run` takes) or a scripted scenario
(simkit) for what the workloads cannot express (large folios, several regions).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
GOLDEN_DIR = HERE / "golden"
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

# name: api.build config. Each < 5 s warm on 2 cores.
CONFIG_RUNS = {
    # `make demo` scaled down 16x: random reads of a file bound to node 0, kswapd demotes to node 1
    "demo-random-read-demotion": {
        "machine": "qemu-2node", "workload": "random-read", "scale": 16, "seed": 7,
        "params": {"file_size": "2GiB", "accesses": "200000", "policy": "bind:0"},
        "knobs": {"demotion_enabled": 1},
    },
    # seed 004 shape: XSBench's 16 threads on qemu-2node, tiering + demotion, MIGRC deferring the
    # demotion flushes of pages made clean by their first migration
    "xsbench-migrc": {
        "machine": "qemu-2node", "workload": "xsbench", "scale": 64, "seed": 1,
        "params": {"particles": "500000", "cpunodebind": "0"},
        "knobs": {"numa_balancing": 2, "demotion_enabled": 1, "migrc": "on", "migration_entry_ad": 0},
    },
    # seed 000 shape: a CXL-bound file read in cycles, page-cache promotion on, dram-cxl-1tb / 1024
    "file-read-pagecache-promotion": {
        "machine": "dram-cxl-1tb", "workload": "file-read", "scale": 1024, "seed": 1,
        "params": {"file_size": "128GiB", "cycles": "3", "file_policy": "bind:1"},
        "knobs": {"numa_balancing": 2, "pagecache_promotion_enabled": 1},
    },
    # anon zipf loads over more than node 0 holds: spill to CXL, hint faults, promotion + demotion
    "anon-zipf-hint-fault-promotion": {
        "machine": "qemu-2node", "workload": "random-read", "scale": 64, "seed": 3,
        "params": {"file_size": "2GiB", "accesses": "1000000", "target": "anon", "dist": "zipf"},
        "knobs": {"numa_balancing": 2, "demotion_enabled": 1, "scan_delay_ms": 0,
                  "scan_period_min_ms": 640, "scan_size_mb": 256},
    },
    # mmap'd file, uniform reads, tiering hint faults on the spilled part
    "mmap-random-read-tiering": {
        "machine": "qemu-2node", "workload": "random-read", "scale": 64, "seed": 5,
        "params": {"file_size": "1GiB", "accesses": "600000", "io": "mmap", "prefault": "1"},
        "knobs": {"numa_balancing": 2, "demotion_enabled": 1, "scan_delay_ms": 0,
                  "scan_period_min_ms": 640, "scan_size_mb": 256},
    },
    # anon larger than the one node: swap out / swap in, workingset refaults
    "anon-swap-single-node": {
        "machine": "altra-1node", "workload": "random-read", "scale": 4096, "seed": 11,
        "params": {"file_size": "384GiB", "accesses": "400000", "target": "anon", "dist": "zipf"},
        "knobs": {"swap_size": "256GiB"},
    },
    # three tasks reading one file with pread() on a two-node machine (scheduler interleaving)
    "multi-task-pread": {
        "machine": "qemu-2node", "workload": "random-read", "scale": 32, "seed": 13,
        "params": {"file_size": "2GiB", "accesses": "200000", "tasks": "3", "io": "read",
                   "dist": "zipf", "policy": "bind:0"},
        "knobs": {"demotion_enabled": 1, "lru_batch_size": 15},
    },
    # the multi-gen LRU: zipf pread() page cache under pressure (tiers, the PID controller, refaults)
    "mglru-multi-task-pread": {
        "machine": "qemu-2node", "workload": "random-read", "scale": 32, "seed": 13,
        "params": {"file_size": "2GiB", "accesses": "200000", "tasks": "3", "io": "read",
                   "dist": "zipf", "policy": "bind:0"},
        "knobs": {"demotion_enabled": 1, "lru_batch_size": 15, "lru_gen": "y"},
    },
    # the multi-gen LRU with anon zipf spilling to CXL: the page-table walk, look-around, demotion
    "mglru-anon-zipf-tiering": {
        "machine": "qemu-2node", "workload": "random-read", "scale": 64, "seed": 3,
        "params": {"file_size": "2GiB", "accesses": "1000000", "target": "anon", "dist": "zipf"},
        "knobs": {"numa_balancing": 2, "demotion_enabled": 1, "scan_delay_ms": 0,
                  "scan_period_min_ms": 640, "scan_size_mb": 256, "lru_gen": "y"},
    },
}

SCRIPTED_RUNS = ("large-folios-mixed",)


def _large_folios_mixed():
    """Order-2 anon and order-2 mmap'd file folios plus order-1 read() page cache on a DRAM node and a
    CXL node; demotion, swap and tiering hint faults; two tasks on two CPUs."""
    from simkit import CXL, DRAM, machine, make_sim
    from tierlab.core.ops import OP_LOAD, OP_READ, OP_STORE, OP_SYSCALL_END
    from tierlab.workloads.base import Chunk, Region

    m = machine((512, 2, DRAM), (1024, 0, CXL))
    regions = [Region("anon", "anon", 640, order=2), Region("mfile", "file", 512, order=2, mapped=True),
               Region("cache", "file", 512, order=1)]
    config = {"machine": "simkit 2 nodes: 512 pages DRAM (2 CPUs) + 1024 pages CXL",
              "regions": [dict(name=r.name, kind=r.kind, pages=r.pages, order=r.order, mapped=r.mapped)
                          for r in regions],
              "knobs": dict(demotion_enabled=1, numa_balancing=2, swap_size=256, lru_batch_size=8,
                            scan_delay_ms=0, scan_period_min_ms=1, scan_size_mb=1),
              "seed": 17, "nr_tasks": 2, "accesses": "2 tasks x 3 chunks x 6000, numpy seed 17"}
    sim = make_sim(m, regions, nr_tasks=2, seed=17, **config["knobs"])
    rng = np.random.default_rng(17)
    bases = np.cumsum([0] + [r.pages for r in regions])
    for _ in range(3):
        offs, pages, ops = [0], [], []
        for _t in range(2):
            reg = rng.integers(0, 3, 6000)
            off = (rng.zipf(1.3, 6000) - 1) % np.array([r.pages for r in regions])[reg]
            pg = bases[reg] + off
            write = rng.random(6000) < 0.2
            op = np.where(reg == 2, OP_READ | OP_SYSCALL_END, np.where(write, OP_STORE, OP_LOAD))
            pages.append(pg)
            ops.append(op)
            offs.append(offs[-1] + 6000)
        sim.run(chunks=[Chunk(np.array(offs, np.int64), np.concatenate(pages).astype(np.int64),
                              np.concatenate(ops).astype(np.uint8))])
    return config, sim.result()


def run_one(name: str) -> dict:
    """Run a canonical run; returns {"config", "sim_time_s", "counters"} (nonzero counters only)."""
    if name in CONFIG_RUNS:
        from tierlab.api import run_config
        config = CONFIG_RUNS[name]
        res = run_config(config)
    elif name == "large-folios-mixed":
        config, res = _large_folios_mixed()
    else:
        raise KeyError(f"unknown golden run {name!r}; known: {', '.join(names())}")
    return {"config": config, "sim_time_s": float(res.sim_time_s),
            "counters": {k: int(v) for k, v in res.counters.items() if int(v) != 0}}


def names() -> list[str]:
    return list(CONFIG_RUNS) + list(SCRIPTED_RUNS)


def path_of(name: str) -> Path:
    return GOLDEN_DIR / f"{name}.json"


def load(name: str) -> dict | None:
    p = path_of(name)
    return json.loads(p.read_text()) if p.exists() else None


def diff(old: dict | None, new: dict) -> list[str]:
    """Human-readable differences old -> new (empty when identical)."""
    if old is None:
        return ["(no golden file yet)"]
    out = []
    if old.get("config") != new["config"]:
        out.append(f"config: {json.dumps(old.get('config'))} -> {json.dumps(new['config'])}")
    if old.get("sim_time_s") != new["sim_time_s"]:
        out.append(f"sim_time_s: {old.get('sim_time_s')!r} -> {new['sim_time_s']!r}")
    oc, nc = old.get("counters", {}), new["counters"]
    for k in sorted(set(oc) | set(nc)):
        a, b = oc.get(k, 0), nc.get(k, 0)
        if a != b:
            rel = f" ({(b - a) / a:+.2%})" if a else ""
            out.append(f"{k}: {a} -> {b}{rel}")
    return out


def main(argv: list[str]) -> int:
    accept = "--accept" in argv
    wanted = [a for a in argv if not a.startswith("--")] or names()
    changed = 0
    for name in wanted:
        new = run_one(name)
        d = diff(load(name), new)
        if d:
            changed += 1
            print(f"{name}: {len(d)} difference(s)")
            for line in d:
                print(f"  {line}")
            if accept:
                GOLDEN_DIR.mkdir(exist_ok=True)
                path_of(name).write_text(json.dumps(new, indent=1, sort_keys=True) + "\n")
                print(f"  accepted -> {path_of(name).relative_to(HERE.parent)}")
        else:
            print(f"{name}: identical")
    if changed and not accept:
        print(f"\n{changed} run(s) differ; `python tests/golden.py --accept` rewrites the golden files")
    return 1 if changed and not accept else 0


if __name__ == "__main__":
    sys.path.insert(0, str(HERE.parent))
    raise SystemExit(main(sys.argv[1:]))
