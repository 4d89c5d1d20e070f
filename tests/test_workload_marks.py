"""Each workload's MARKs are where its docstring says they are (Result.marks_s: task, mark, time_s)."""
import numpy as np
import pytest

from tierlab import api


def marks(cfg):
    m = api.build(cfg).run().result().marks_s
    return {t: g.sort_values("mark").time_s.to_numpy() for t, g in m.groupby("task")}


def increasing(x):
    return bool(np.all(np.diff(x) > 0))


@pytest.mark.parametrize("warmup", [0, 1])
def test_file_read_marks_each_cycle_and_the_warm_up(warmup):
    m = marks(dict(machine="qemu-2node", workload="file-read", scale=256,
                   params={"file_size": "64MiB", "cycles": 3, "warmup": warmup, "tasks": 2}))
    assert sorted(m) == [0, 1] and all(len(x) == 3 + warmup and increasing(x) for x in m.values())


def test_random_read_marks_the_prefault_and_each_tasks_end():
    m = marks(dict(machine="qemu-2node", workload="random-read", scale=64,
                   params={"file_size": "64MiB", "accesses": 2000, "prefault": 1, "tasks": 2}))
    assert len(m[0]) == 2 and increasing(m[0]) and len(m[1]) == 1       # only task 0 prefaults


@pytest.mark.parametrize("target", ["file", "anon"])
def test_random_read_tasks_start_reading_after_the_prefault(target):
    """The prefault is a phase of its own (#33): task 1, on a CPU of its own, starts its reads
    when task 0 has populated the region, not at time 0."""
    sim = api.build(dict(machine="qemu-2node", workload="random-read", scale=64,
                         params={"file_size": "64MiB", "accesses": 2000, "prefault": 1, "tasks": 2, "target": target}))
    res = sim.run().result()
    m = res.marks_s
    prefault_end = m[(m.task == 0) & (m.mark == 0)].time_s.item()
    tasks = res.tasks.set_index("name")
    assert tasks.cpu["task0"] != tasks.cpu["task1"]
    assert sim.phase_start_ns / 1e9 >= prefault_end
    end1 = m[m.task == 1].time_s.item()
    assert end1 - tasks.runtime_s["task1"] >= prefault_end - 1e-9     # it ran only after the barrier


def test_hot_chunks_marks_the_fill_and_each_visit():
    m = marks(dict(machine="bergamo-cxl", workload="hot-chunks", scale=1024, params={"visits": 3}))
    assert list(m) == [0] and len(m[0]) == 1 + 3 and increasing(m[0])


def test_xsbench_marks_each_threads_initialisation_and_last_lookup():
    m = marks(dict(machine="qemu-2node", workload="xsbench", scale=64, params={"particles": 2000, "threads": 2}))
    assert sorted(m) == [0, 1] and all(len(x) == 2 and increasing(x) for x in m.values())
    # the lookup phase: from the last initialisation MARK to the last MARK
    assert max(x[1] for x in m.values()) > max(x[0] for x in m.values())


def test_anon_pressure_marks_the_readers_cycles_and_the_hogs_grows_and_holds():
    m = marks(dict(machine="qemu-2node", workload="anon-pressure", scale=256, params={"cycles": 2, "rounds": 2}))
    assert len(m[0]) == 1 + 2 and increasing(m[0])        # the warm pass, then each cycle
    assert len(m[1]) == 2 * 2 and increasing(m[1])        # each round: end of grow, end of hold


@pytest.mark.parametrize("pre_read", [0, 1])
def test_fio_marks_every_log_ios_ios_and_the_pre_read(pre_read):
    m = marks(dict(machine="qemu-2node", workload="fio", scale=64,
                   params={"rw": "randread", "size": "64MiB", "numjobs": 2, "log_ios": 64, "pre_read": pre_read}))
    ios = (64 << 20) // 64 // 4096                        # one pass of the scaled file, 4 KiB I/Os
    assert all(len(x) == pre_read + ios // 64 and increasing(x) for x in m.values())
