"""Run-script events (tierlab/events.py): checked before the run naming the event, applied at their
moment whatever the chunking, recorded in the config so build(result.config) repeats the run, and
listed in Result.events and the time series."""
from __future__ import annotations

import copy

import numpy as np
import pytest

from tierlab.api import build
from tierlab.errors import ConfigError

BASE = {"machine": "qemu-2node", "workload": "random-read", "scale": 64, "seed": 3,
        "params": {"file_size": "1GiB", "accesses": "200000", "target": "anon", "dist": "zipf", "tasks": "2"},
        "knobs": {"scan_delay_ms": 0}, "sample_interval_ms": 5,
        "at": ["mark:0:1:move_pages 0 1", "1.5s:set numa_balancing=2"]}


def run(cfg, per_task=None):
    sim = build(cfg)
    if per_task is not None:
        sim.workload.chunk_accesses = per_task * sim.workload.nr_tasks
    sim.run()
    return sim, sim.result()


def test_populate_move_to_cxl_then_numa_balancing_promotes_with_no_pressure():
    """The experiment #33 asked for: the anon region is populated on DRAM, moved to the CXL node by
    move_pages at task 0's first mark, and NUMA balancing's tiering mode switched on at 1.5 s
    (23.4 ms at scale 64) promotes it back; nothing is demoted (no memory pressure)."""
    sim, r = run(BASE)
    st = sim.move_pages_status().loc[0]
    assert st["moved"] > 0 and st["moved"] + st["on_node"] == 4096
    assert r.counters["pgmigrate_success"] >= st["moved"]
    assert r.counters["pgpromote_success"] > 0
    assert r.counters["pgdemote_kswapd"] == 0 and r.counters["pgdemote_direct"] == 0
    assert list(r.events.event) == BASE["at"] and r.events.applied.all()
    assert r.events.time_s.iloc[1] == pytest.approx(1.5 / 64, abs=1e-4)
    assert set(r.timeseries.event[r.timeseries.event != ""]) == set(BASE["at"])
    # the config carries the events and the knobs as given (not as the event left them)
    assert r.config["at"] == BASE["at"] and "numa_balancing" not in r.config["knobs"]
    r2 = build(r.config).run().result()
    assert r2.counters.equals(r.counters)


def test_events_apply_the_same_whatever_the_chunk_size():
    _, a = run(BASE, 1 << 12)
    _, b = run(BASE, 1 << 20)
    assert a.counters.equals(b.counters)
    assert a.events.time_s.tolist() == b.events.time_s.tolist()


def test_an_event_whose_moment_never_comes_is_listed_as_not_applied():
    cfg = copy.deepcopy(BASE)
    cfg["at"] = ["phase:9:set numa_balancing=0"]
    _, r = run(cfg)
    assert r.events.applied.tolist() == [False] and np.isnan(r.events.time_s.iloc[0])


@pytest.mark.parametrize("event, says", [
    ("soon:set numa_balancing=2", "time"),
    ("10ms:reboot", "action 'reboot'"),
    ("10ms:set numa_balancing=7", "numa_balancing"),
    ("10ms:set no_such_knob=1", "no_such_knob"),
    ("10ms:move_pages heap 1", "region 'heap'"),
    ("10ms:move_pages 0 5", "node '5'"),
    ("mark:9:1:move_pages 0 1", "task '9'"),
    ("phase:x:set numa_balancing=2", "phase number"),
    ("10ms:mbind 0 bind", "needs nodes"),
    ("10ms:mbind 0 sideways:1", "not a memory policy"),
    ("10ms:migratepages 0", "migratepages FROM"),
    ("10ms:move_pages 0 1 task=4", "task '4'"),
])
def test_bad_events_are_refused_before_the_run_naming_the_event(event, says):
    cfg = copy.deepcopy(BASE)
    cfg["at"] = [event]
    with pytest.raises(ConfigError, match=says):
        build(cfg)


def test_at_must_be_a_list():
    cfg = copy.deepcopy(BASE)
    cfg["at"] = "10ms:set numa_balancing=2"
    with pytest.raises(ConfigError, match="at: expected a list"):
        build(cfg)
