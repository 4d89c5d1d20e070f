"""Small helpers for hand-worked engine tests: tiny machines, scripted workloads, list walking.

Everything here drives the public pieces (Machine.from_dict, Kernel, Simulation, Chunk) and reads
`sim.state`; nothing patches the engine.
"""
from __future__ import annotations

import numpy as np

from tierlab.api import Simulation
from tierlab.core import state as st
from tierlab.core.ops import OP_LOAD, OP_READ, OP_STORE, OP_SYSCALL_END, OP_WRITE  # noqa: F401
from tierlab.core.vmstat import VMSTAT_NAMES
from tierlab.kernel import Kernel
from tierlab.machine import Machine
from tierlab.workloads.base import Chunk, Region, Workload

READ = OP_READ | OP_SYSCALL_END
WRITE = OP_WRITE | OP_SYSCALL_END
LOAD = OP_LOAD
STORE = OP_STORE

DRAM = 576
CXL = 2880


def machine(*nodes, distance=None, name="tiny"):
    """nodes: (pages, cpus, adistance) tuples. Every node has the same access costs."""
    d = {
        "name": name,
        "nodes": [
            {"name": f"n{i}", "capacity": f"{pages}pages", "cpus": cpus, "adistance": adist,
             "seq_4k_ns": 200.0, "rand_line_ns": 100.0, "write_line_ns": 110.0, "bandwidth_GBps": 100.0}
            for i, (pages, cpus, adist) in enumerate(nodes)
        ],
    }
    if distance is not None:
        d["distance"] = distance
    return Machine.from_dict(d)


class Scripted(Workload):
    """A workload whose accesses are given by the test (sim.run(chunks=...))."""
    name = "scripted"
    params = {}

    def __init__(self, regions, nr_tasks=1):
        super().__init__()
        self._regions = list(regions)
        self._nr_tasks = nr_tasks

    @property
    def nr_tasks(self):
        return self._nr_tasks

    def regions(self):
        return self._regions

    def chunks(self, seed):
        return iter(())

    def nr_marks(self):
        return 4


def make_sim(mach, regions, nr_tasks=1, seed=0, tlb_model="off", page_alloc_model="counts", **knobs):
    return Simulation(mach, Kernel(**knobs), Scripted(regions, nr_tasks), seed=seed, tlb_model=tlb_model,
                      page_alloc_model=page_alloc_model)


def chunk(*per_task):
    """per_task: one sequence of (page, op) per task."""
    offs = [0]
    pages, ops = [], []
    for seq in per_task:
        for pg, op in seq:
            pages.append(int(pg))
            ops.append(int(op))
        offs.append(len(pages))
    return Chunk(np.array(offs, np.int64), np.array(pages, np.int64), np.array(ops, np.uint8))


def run(sim, *per_task):
    sim.run(chunks=[chunk(*per_task)])
    return sim


def seq(pages, op):
    return [(int(p), op) for p in pages]


def base(sim, region):
    return int(sim.state.regions.start[region])


def counters(sim):
    """Global counters by kernel name."""
    tot = sim.state.counters.sum(axis=0)
    return {n: int(tot[i]) for i, n in enumerate(VMSTAT_NAMES)}


def node_counter(sim, nid, name):
    return int(sim.state.counters[nid, VMSTAT_NAMES.index(name)])


def lru_list(s, nid, lru):
    """Folio heads on a list, newest (head) first, following `next` from the sentinel."""
    sent = st.lru_sentinel(s, nid, lru)
    out = []
    x = int(s.pages.next[sent])
    guard = 0
    while x != sent:
        out.append(x)
        x = int(s.pages.next[x])
        guard += 1
        assert guard <= s.pages.node.shape[0], "list does not return to its sentinel"
    return out


def lru_list_backwards(s, nid, lru):
    sent = st.lru_sentinel(s, nid, lru)
    out = []
    x = int(s.pages.prev[sent])
    guard = 0
    while x != sent:
        out.append(x)
        x = int(s.pages.prev[x])
        guard += 1
        assert guard <= s.pages.node.shape[0], "list does not return to its sentinel"
    return out[::-1]


def where(s, page):
    """(node, lru) of a folio on an LRU list, or None."""
    for nid in range(s.pgdat["free"].shape[0]):
        for lru in range(st.NR_LRU_LISTS):
            if page in lru_list(s, nid, lru):
                return nid, lru
    return None


def has(s, page, flag):
    return bool(s.pages.flags[page] & flag)


def has2(s, page, flag):
    return bool(s.pages.flags2[page] & flag)


def present(s, page):
    return has2(s, page, st.F2_PRESENT)


# --------------------------------------------------------------------------------------------
# Accessors for per-page and per-list state. New tests read engine internals only through these, so
# a change of the state layout (e.g. arrays moving into named groups) is fixed here alone.
# --------------------------------------------------------------------------------------------

def page_arrays(sim):
    """Per page: node, flags, flags2, folio order (low nibble) and stamp, as Python lists."""
    s = sim.state
    return {"node": s.pages.node.tolist(), "flags": s.pages.flags.tolist(), "flags2": s.pages.flags2.tolist(),
            "order": (s.pages.order & st.ORDER_MASK).tolist(), "stamp": s.pages.stamp.tolist()}


def lru_lists(sim):
    """[node][lru] -> folio heads, newest first (lru in kernel order: inactive/active anon, file)."""
    s = sim.state
    return [[lru_list(s, nid, lru) for lru in range(st.NR_LRU_LISTS)] for nid in range(s.pgdat["free"].shape[0])]


def lru_batches(sim):
    """Per CPU: the folio heads in its lru_add batch, in insertion order."""
    s = sim.state
    return [[int(x) for x in s.cpu["lru_batch"][c, :int(s.cpu["lru_batch_len"][c])]] for c in range(s.cpu["lru_batch_len"].shape[0])]


def promo_lists(sim):
    """Per task: the folios on its page-cache promotion list, first to be migrated first."""
    s = sim.state
    out = []
    for t in range(s.task["promo_count"].shape[0]):
        sent = st.promo_sentinel(s, t)
        lst, x = [], int(s.pages.next[sent])
        while x != sent:
            lst.append(x)
            x = int(s.pages.next[x])
        out.append(lst)
    return out


def swap_used(sim):
    return int(sim.state.sys[0]["nr_swap_used"])


def lru_batch_capacity():
    return st.LRU_BATCH_MAX


def pte_state(sim, page):
    """The PTE state of the folio holding `page` (memory.py): present (a real folio mapped; "zero"
    for the shared zero page, False when unmapped), writable, dirty, young, protnone."""
    s = sim.state
    o = int(s.pages.order[page]) & int(st.ORDER_MASK)
    head = page & ~((1 << o) - 1)
    f, f2 = int(s.pages.flags[head]), int(s.pages.flags2[head])
    mapped = bool(f2 & st.F2_MAPPED)
    present = ("zero" if not f2 & st.F2_PRESENT else True) if mapped else False
    return {"present": present, "writable": mapped and bool(f2 & st.F2_PTE_WRITE),
            "dirty": mapped and bool(f & st.PG_DIRTY), "young": mapped and bool(f & st.PG_YOUNG),
            "protnone": mapped and bool(f & st.PG_PROTNONE)}
