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
    ("10ms:drop_caches 4", "drop_caches 1\\|2\\|3"),
    ("10ms:set_mempolicy interleave", "needs nodes"),
])
def test_bad_events_are_refused_before_the_run_naming_the_event(event, says):
    cfg = copy.deepcopy(BASE)
    cfg["at"] = [event]
    with pytest.raises(ConfigError, match=says):
        build(cfg)


def test_every_action_parses():
    cfg = copy.deepcopy(BASE)
    cfg["at"] = ["1ms:drop_caches 3", "2ms:set_mempolicy preferred:1 task=1", "3ms:mbind 0 interleave:0,1 move",
                 "4ms:migratepages 0,1 0", "5ms:set numa_balancing=2,hot_threshold_ms=500"]
    _, r = run(cfg)
    assert r.events.applied.all()


def test_at_must_be_a_list():
    cfg = copy.deepcopy(BASE)
    cfg["at"] = "10ms:set numa_balancing=2"
    with pytest.raises(ConfigError, match="at: expected a list"):
        build(cfg)


def test_a_sweep_varies_the_run_script(tmp_path):
    """`at` in a sweep's grid: one run without events, one that moves the file mapping to CXL and
    switches tiering on; the rows differ in promotions, and the stored config carries the events."""
    from tierlab import sweep as S
    spec = tmp_path / "events.toml"
    spec.write_text('''name = "events"
[base]
machine = "qemu-2node"
workload = "random-read"
scale = 64
seed = 1
[base.params]
file_size = "256MiB"
accesses = "40000"
io = "mmap"
prefault = "1"
[base.knobs]
scan_delay_ms = 0
[grid]
at = [[], ["phase:1:move_pages 0 1", "0.5s:set numa_balancing=2"]]
''')
    df = S.run_sweep(str(spec), tmp_path / "out", executor="serial", progress=False)
    assert len(df) == 2
    promoted = sorted(df["pgpromote_success"].tolist())
    assert promoted[0] == 0 and promoted[1] > 0
    moved = df["pgmigrate_success"].max()
    assert moved >= (256 << 20) // 4096 // 64      # the mapped file's pages moved, then promoted back


def test_a_file_mapping_moved_to_cxl_is_promoted_back_and_the_time_to_finish_is_read_off():
    """A mmap'd file populated on DRAM, moved to CXL at the read phase's start, promoted back by
    NUMA balancing with no memory pressure; the time series says when the promotions were done."""
    cfg = {"machine": "qemu-2node", "workload": "random-read", "scale": 64, "seed": 1,
           "params": {"file_size": "256MiB", "accesses": "40000", "io": "mmap", "prefault": "1"},
           "knobs": {"scan_delay_ms": 0}, "sample_interval_ms": 5,
           "at": ["phase:1:move_pages 0 1", "0.5s:set numa_balancing=2"]}
    sim, r = run(cfg)
    pages = (256 << 20) // 4096 // 64
    st = sim.move_pages_status().loc[0]
    assert st["moved"] == pages
    assert r.counters["pgdemote_kswapd"] == 0
    ts = r.timeseries
    done = ts.time_s[ts.pgpromote_success >= 0.9 * r.counters["pgpromote_success"]].iloc[0]
    assert r.counters["pgpromote_success"] > 0.5 * pages
    assert r.events.time_s.iloc[1] < done <= r.sim_time_s


def test_kill_stops_one_process_and_tears_its_memory_down():
    """fio with two jobs (a process each): `kill fio.1` at 5 ms ends job 1 there while job 0 runs its
    20 ms; killing random-read's one process at task 0's first mark frees its anon region."""
    cfg = {"machine": "qemu-2node", "workload": "fio", "scale": 1, "seed": 1,
           "params": {"rw": "randread", "size": "4MiB", "numjobs": "2", "time_based": "1", "runtime": "20ms"},
           "at": ["5ms:kill fio.1"]}
    sim, r = run(cfg)
    assert r.events.applied.all()
    assert sim.state.task["dead"].tolist() == [0, 1]
    assert r.task_times_s[1] == pytest.approx(0.005, abs=0.0005)
    assert r.task_times_s[0] == pytest.approx(0.020, abs=0.001)
    cfg = copy.deepcopy(BASE)
    cfg["at"] = ["mark:0:1:kill 0"]
    sim, r = run(cfg)
    assert (sim.state.task["dead"] == 1).all() and int(sim.state.mm[0]["rss_anon"]) == 0
    c2 = copy.deepcopy(BASE)
    c2["at"] = ["10ms:kill nobody"]
    with pytest.raises(ConfigError, match="accepted processes"):
        build(c2)
    # a call issued by a task that has exited by then stops the run saying so
    cfg = {"machine": "qemu-2node", "workload": "fio", "scale": 1, "seed": 1,
           "params": {"rw": "randread", "size": "4MiB", "numjobs": "2", "time_based": "1", "runtime": "20ms"},
           "at": ["5ms:kill fio.1", "10ms:drop_caches 1 task=1"]}
    with pytest.raises(ConfigError, match="task 1 has exited at 10.000 ms"):
        run(cfg)


def test_a_kill_or_a_call_waits_for_the_system_call_under_way():
    """move_pages of 3,072 pages goes a migration batch per step (~2.7 ms): a kill 0.5 ms into it
    lets the call finish (the signal is taken at the return to user) and then tears the process
    down; a drop_caches issued by the same task then runs after the move, not inside it."""
    cfg = {"machine": "qemu-2node", "workload": "random-read", "scale": 64, "seed": 1,
           "params": {"file_size": "768MiB", "accesses": "200000", "tasks": "2", "target": "anon",
                      "policy": "bind:0"},
           "at": ["phase:1:move_pages 0 1"]}
    sim, r = run(cfg)
    t1 = float(r.events.time_s[0])
    at = f"{(t1 + 0.5e-3) * 64 * 1e3:.6f}ms"
    for extra, dead in ((f"{at}:kill 0", [1, 1]), (f"{at}:drop_caches 1", [0, 0])):
        sim, r = run({**cfg, "at": cfg["at"] + [extra]})
        assert r.events.applied.all()
        assert int(sim.move_pages_status()["moved"].sum()) == 3072 == int(r.counters["pgmigrate_success"])
        assert (sim.state.task["ctrl_next"] == 0).all()
        assert sim.state.task["dead"].tolist() == dead
        assert int(sim.state.mm[0]["rss_anon"]) == (0 if dead[0] else 3072)
