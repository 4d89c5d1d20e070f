"""Contended locks (core/locks.py): a hand-worked race for a file's xa_lock between two tasks, the
lock table of the Result, and that one task alone (with its kswapd) hardly ever waits."""
from __future__ import annotations

import dataclasses

import pytest

from simkit import DRAM, READ, chunk, machine
from tierlab.api import Simulation, run_config
from tierlab.core.costs import COSTS
from tierlab.kernel import Kernel
from tierlab.workloads.base import Region

from simkit import Scripted
from strategies import FREE_DEVICE


def unlimited_bandwidth(m, read_latency_us=0.0):
    """Unlimited memory bandwidth, and a block device whose reads take `read_latency_us` and never
    queue (the hand-worked cases count the lock, not the device)."""
    dev = dataclasses.replace(FREE_DEVICE, read_latency_us=read_latency_us)
    return dataclasses.replace(m, nodes=tuple(dataclasses.replace(n, bandwidth_GBps=float("inf")) for n in m.nodes),
                               devices=(dev,))


def test_two_tasks_missing_in_one_file_at_once_serialise_on_its_xa_lock():
    """Every kernel cost 0 but the page-cache insertion, 1024 ns, of which the xa_lock is held for
    all 1024 (xa_lock_ns = 1024: whole 128-ns bins of the lock's calendar); the copy of a page
    costs the machine's 200 ns. Task 0 (CPU 0, run first) and task 1 (CPU 1) each read one page of
    the same file at t = 0: task 0 holds the lock over [0, 1024) and ends at 1024 + 200; task 1
    waits 1024 ns for it, holds it over [1024, 2048) and ends at 2048 + 200."""
    costs = {k: 0.0 for k in COSTS} | {"pagecache_insert_ns": 1024.0, "xa_lock_ns": 1024.0,
                                       "util_window_ns": COSTS["util_window_ns"][0]}
    m = unlimited_bandwidth(machine((256, 2, DRAM)))
    sim = Simulation(m, Kernel(lru_batch_size=1, read_ahead_kb=0), Scripted([Region("f", "file", 8)], nr_tasks=2),
                     costs=costs)
    sim.run(chunks=[chunk([(0, READ)], [(1, READ)])])
    res = sim.result()
    assert list(res.task_times_s * 1e9) == [1224.0, 2248.0]
    xa = res.locks[res.locks.lock == "xa_lock"].iloc[0]
    assert (xa["of"], xa.acquisitions, xa.hold_ns, xa.wait_ns, xa.contended) == ("f", 2, 2048.0, 1024.0, 1)
    lru = res.locks[res.locks.lock == "lru_lock"].iloc[0]
    assert lru.acquisitions == 2 and lru.wait_ns == 0.0      # lru_add drains, zero-cost holds


def test_later_in_virtual_time_does_not_wait_for_a_hold_that_ended():
    """The same with a 500-ns device read after each insertion, but task 1 first reads a page of a
    second file (g: its own lock), which takes it to 1024 + 500 + 200 = 1724: by then task 0 has
    released f's lock (it held it over [0, 1024)), so neither task waits."""
    costs = {k: 0.0 for k in COSTS} | {"pagecache_insert_ns": 1024.0, "xa_lock_ns": 1024.0,
                                       "util_window_ns": COSTS["util_window_ns"][0]}
    m = unlimited_bandwidth(machine((256, 2, DRAM)), read_latency_us=0.5)
    sim = Simulation(m, Kernel(lru_batch_size=1, read_ahead_kb=0),
                     Scripted([Region("f", "file", 8), Region("g", "file", 8)], nr_tasks=2), costs=costs)
    sim.run(chunks=[chunk([(0, READ)], [(8, READ), (1, READ)])])
    res = sim.result()
    assert list(res.task_times_s * 1e9) == [1724.0, 3448.0]
    assert res.locks.wait_ns.sum() == 0.0


def test_one_task_hardly_waits():
    """A random read of a file twice node 0's size, bound to node 0: the task's faults insert into
    the page cache and drain lru_add batches while kswapd isolates, evicts and puts back on the
    same node: the only contention is task against its kswapd."""
    res = run_config({"machine": "qemu-2node", "workload": "random-read", "scale": 16,
                      "params": {"file_size": "2GiB", "policy": "bind:0", "accesses": 30_000, "io": "read"},
                      "knobs": {}, "seed": 3})
    locks = res.locks.set_index(["lock", "of"])
    assert locks.acquisitions.sum() > 1000 and res.counters["pgsteal_kswapd"] > 0
    assert locks.wait_ns.sum() < 1e-3 * res.sim_time_s * 1e9
    assert locks.beyond.sum() == 0
