"""Hypothesis strategies that build a whole scenario -- machine, regions, knobs, tasks and their
access streams -- from small drawn pieces, so a failure shrinks to a small machine and a short
stream (not an opaque seed).

A Scenario is plain data; `build_sim(scn)` makes the Simulation and `scn.chunks` are lists (one per
chunk) of per-task lists of (page, op).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np
from hypothesis import strategies as hs

from simkit import CXL, DRAM
from tierlab.api import Simulation
from tierlab.core.costs import COSTS
from tierlab.core.ops import OP_LOAD, OP_READ, OP_STORE, OP_STREAM, OP_SYSCALL_END, OP_WRITE
from tierlab.kernel import Kernel
from tierlab.machine import Device, Machine
from tierlab.workloads.base import Chunk, Region

from simkit import Scripted

LOWER = 4000          # a third tier below CXL


@dataclass
class Scenario:
    nodes: list                 # (pages, cpus, adistance)
    regions: list               # Region
    knobs: dict
    nr_tasks: int
    chunks: list                # [chunk][task] -> [(page, op)]
    seed: int = 0
    zero_cost: bool = False     # every time-model cost 0 (the reference model's regime)
    notes: dict = field(default_factory=dict)

    def __repr__(self):         # what hypothesis prints for a falsifying example
        regs = [(r.name, r.kind, r.pages, r.policy, r.nodes, r.order, r.mapped, r.advice) for r in self.regions]
        return (f"Scenario(nodes={self.nodes}, regions={regs}, knobs={self.knobs}, nr_tasks={self.nr_tasks}, "
                f"seed={self.seed}, zero_cost={self.zero_cost}, chunks={self.chunks})")


FREE_DEVICE = Device(name="free", read_latency_us=0.0, write_latency_us=0.0, read_bandwidth_GBps=1e30,
                     write_bandwidth_GBps=1e30, read_iops=1e30, write_iops=1e30, queue_depth=1 << 40,
                     max_sectors_kb=128)


def make_machine(nodes, zero_cost=False):
    m = Machine.from_dict({
        "name": "hyp",
        "nodes": [{"name": f"n{i}", "capacity": f"{pages}pages", "cpus": cpus, "adistance": adist,
                   "seq_4k_ns": 200.0, "rand_line_ns": 100.0, "write_line_ns": 110.0,
                   "bandwidth_GBps": 100.0} for i, (pages, cpus, adist) in enumerate(nodes)],
    })
    if zero_cost:
        # from_dict() rightly refuses free memory accesses; the reference model's regime needs them
        # (and unlimited bandwidth: all clocks stay at 0, so every byte lands in one calendar bin),
        # and a device whose reads complete at once
        m = dataclasses.replace(m, nodes=tuple(dataclasses.replace(n, seq_4k_ns=0.0, rand_line_ns=0.0,
                                                                   write_line_ns=0.0, bandwidth_GBps=float("inf"))
                                               for n in m.nodes),
                                devices=(FREE_DEVICE,))
    return m


def build_sim(scn: Scenario) -> Simulation:
    costs = {k: 0.0 for k in COSTS} if scn.zero_cost else None
    if costs is not None:
        costs["util_window_ns"] = COSTS["util_window_ns"][0]
    return Simulation(make_machine(scn.nodes, scn.zero_cost), Kernel(**scn.knobs),
                      Scripted(scn.regions, scn.nr_tasks), seed=scn.seed, costs=costs)


def to_chunk(per_task) -> Chunk:
    offs, pages, ops = [0], [], []
    for seq in per_task:
        for pg, op in seq:
            pages.append(pg)
            ops.append(op)
        offs.append(len(pages))
    return Chunk(np.array(offs, np.int64), np.array(pages, np.int64), np.array(ops, np.uint8))


@hs.composite
def machines(draw):
    nn = draw(hs.integers(1, 3))
    nodes = [(draw(hs.integers(32, 256)), draw(hs.integers(1, 2)), DRAM)]
    for _ in range(1, nn):
        nodes.append((draw(hs.integers(16, 384)), draw(hs.sampled_from([0, 0, 1])),
                       draw(hs.sampled_from([CXL, CXL, DRAM, LOWER]))))
    return nodes


@hs.composite
def region_lists(draw, nr_nodes, total_pages):
    regions = []
    for i in range(draw(hs.integers(1, 3))):
        kind = draw(hs.sampled_from(["anon", "file", "mapped"]))
        order = draw(hs.sampled_from([0, 0, 1, 2]))
        pages = draw(hs.integers(4, max(8, total_pages * 3 // 2)))
        policy = draw(hs.sampled_from(["default", "default", "bind", "preferred", "interleave"]))
        nodes = ()
        if policy != "default":
            perm = draw(hs.permutations(range(nr_nodes)))
            nodes = tuple(perm[:draw(hs.integers(1, nr_nodes))])
            if policy == "preferred":
                nodes = nodes[:1]
        advice = "normal" if kind == "anon" else draw(hs.sampled_from(["normal", "normal", "random", "sequential"]))
        regions.append(Region(f"r{i}", "anon" if kind == "anon" else "file", pages, policy, nodes,
                              order=order, mapped=kind == "mapped", advice=advice))
    return regions


def _ops_for(region):
    if region.kind == "anon":
        return [OP_LOAD, OP_STORE]
    reads = [OP_READ | OP_SYSCALL_END, OP_READ | OP_SYSCALL_END, OP_READ, OP_WRITE | OP_SYSCALL_END]
    return reads + ([OP_LOAD, OP_STORE, OP_LOAD | OP_STREAM] if region.mapped else [])


@hs.composite
def access_stream(draw, regions, max_pattern=40, max_reps=30):
    """A pattern of (region, offset, op) repeated `reps` times, each repetition shifted by `shift`
    pages within its region (so a repetition can touch new pages). Shrinks to short patterns."""
    bases = np.cumsum([0] + [r.pages for r in regions]).tolist()
    pattern = draw(hs.lists(hs.tuples(hs.integers(0, len(regions) - 1), hs.integers(0, 10**6),
                                      hs.integers(0, 5)), min_size=1, max_size=max_pattern))
    reps = draw(hs.integers(1, max_reps))
    shift = draw(hs.integers(0, 64))
    out = []
    # optional sequential passes over whole regions first (fill memory, spill, reclaim)
    for r, opi in draw(hs.lists(hs.tuples(hs.integers(0, len(regions) - 1), hs.integers(0, 5)), max_size=3)):
        ops = _ops_for(regions[r])
        out += [(bases[r] + i, ops[opi % len(ops)]) for i in range(regions[r].pages)]
    for k in range(reps):
        for r, off, opi in pattern:
            reg = regions[r]
            ops = _ops_for(reg)
            out.append((bases[r] + (off + k * shift) % reg.pages, ops[opi % len(ops)]))
    return out


@hs.composite
def knob_sets(draw, anon_pages):
    return dict(
        demotion_enabled=draw(hs.sampled_from([0, 1])),
        numa_balancing=draw(hs.sampled_from([0, 2])),
        swap_size=draw(hs.sampled_from([0, 16, 2 * anon_pages + 64])),
        pagecache_promotion_enabled=draw(hs.sampled_from([0, 1])),
        lru_batch_size=draw(hs.sampled_from([1, 4, 15, 31])),
        swappiness=draw(hs.sampled_from([0, 60, 100, 200])),
        watermark_scale_factor=draw(hs.sampled_from([10, 200, 1000])),
        hot_threshold_ms=draw(hs.sampled_from([1, 1000])),
        promote_rate_limit_MBps=draw(hs.sampled_from([0, 1, 65536])),
        pagecache_promotion_cap=draw(hs.sampled_from([0, 1])),
        pagecache_promotion_order=draw(hs.sampled_from([0, 1])),
    )


@hs.composite
def tiering_setups(draw):
    """DRAM + CPU-less CXL, page cache (read() or mmap) on CXL or spilling to it, tiering and
    page-cache promotion on: exercises the promotion decision and its rate limit."""
    dram = draw(hs.integers(64, 256))
    nodes = [(dram, draw(hs.integers(1, 2)), DRAM), (draw(hs.integers(64, 512)), 0, CXL)]
    regions = [Region("f", "file", draw(hs.integers(8, dram * 2)), *draw(hs.sampled_from(
        [("default", ()), ("bind", (1,)), ("preferred", (1,))])), order=draw(hs.sampled_from([0, 0, 1, 2])),
        mapped=draw(hs.booleans()))]
    if draw(hs.booleans()):
        regions.append(Region("a", "anon", draw(hs.integers(4, dram)), order=draw(hs.sampled_from([0, 2]))))
    return nodes, regions


@hs.composite
def scenarios(draw, zero_cost=False, max_tasks=3, max_chunks=3, numa_scan=False, tiering=False, lru_gen=False):
    if tiering:
        nodes, regions = draw(tiering_setups())
    else:
        nodes = draw(machines())
        regions = draw(region_lists(len(nodes), sum(n[0] for n in nodes)))
    anon = sum(r.pages for r in regions if r.kind == "anon")
    knobs = draw(knob_sets(anon))
    if tiering:
        knobs.update(numa_balancing=2, pagecache_promotion_enabled=1)
    if lru_gen:
        knobs.update(lru_gen=draw(hs.sampled_from([1, 3, 7])),
                     pagecache_promotion_lru_gen=draw(hs.sampled_from([0, 1, 2])))
    if numa_scan and knobs["numa_balancing"]:
        knobs.update(scan_delay_ms=0, scan_period_min_ms=1, scan_size_mb=1)
    nr_tasks = draw(hs.integers(1, max_tasks))
    streams = [draw(access_stream(regions)) for _ in range(nr_tasks)]
    parts = draw(hs.integers(1, max_chunks))
    chunks = []
    for k in range(parts):
        chunks.append([s[len(s) * k // parts: len(s) * (k + 1) // parts] for s in streams])
    return Scenario(nodes, regions, knobs, nr_tasks, chunks, seed=draw(hs.integers(0, 1000)),
                    zero_cost=zero_cost)
