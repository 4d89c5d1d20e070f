"""`anon-build`: a kernel-compile-like job mix, `jobs` at a time: many short-lived processes whose
anonymous memory (brk heaps, anon mmaps) is mapped, partly touched and torn down by their exit.

The processes are those of a recorded `make -j8 mm/` of Debian's linux-source-6.1 (defconfig), every
program the build exec'd except make itself (cc1, gcc, as, sh, fixdep, objtool, nm, rm, ...), in the
order they started (data/anon/README.md says how it was recorded). `source=trace` replays each
process's anonymous VMAs and first touches as recorded; `source=dist` draws each process from the
recorded distributions (workloads._anon.draw_process: the program from the recorded mix, then its
VMAs); `procs` processes in all (0: as many as the recording has; more cycles through it).

Concurrency: the processes run in waves of `jobs` (the kernel seed's tables: 8 and 80), one process
per job slot, each wave a chunk; a process maps the region slots its job slot's previous process
freed. `waves=free` (the default) starts a job slot's next process when its previous one has
exited (Process.after: make's job server waits for a child and forks the next), the CPUs staying
busy; the processes are placed round-robin on the CPUs (workloads.base.Process: the CPU with the
fewest tasks so far), so when `jobs` is a multiple of the CPU count a job slot's processes all run
on one CPU, one after another; otherwise a slot's next process starts on its own CPU at the
previous one's exit, or later if that CPU is busy. `waves=phase` starts each wave when the last
process of the previous one has exited (a Chunk phase): idle CPUs while a wave's slowest process
finishes (make -j8 of the recording on 2 CPUs: 56 % busy with phases, 95 % free, user_time=0.05).
Make itself picks the next job for whichever slot frees first; here the order of the processes is
the recorded start order and their slots are fixed round-robin. Each process is one task with its
own mm.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Iterator

import numpy as np

from ..errors import ConfigError
from ._anon import SlotPool, dist_tables, draw_process, lay_out, load_recording, plan_slots, process_ops, recorded_process
from .base import MAX_TASKS, Chunk, Param, Process, Region, Workload, choice_param, float_param, int_param

SKIP = ("", "make")    # not replayed: the copy of make a child runs until its execve, and make itself


def recording_param(default: str) -> Param:
    return Param(default, str, "recorded run in data/anon (procs.csv `run`): kbuild, cc1 or node")


def draw_seed_param() -> Param:
    return int_param(1, "random stream of source=dist (sizes and layout are drawn before the run)", lo=0,
                     hi=(1 << 63) - 1)


def user_time_param() -> Param:
    return float_param(0.0, "CPU work between events, as a share of the recorded gaps (0: none)", lo=0.0, hi=1e3)


class AnonReplay(Workload):
    """Processes replayed from a recording (the shared part of anon-build and anon-browser)."""
    control_ops = True

    def validate(self):
        if self.scale != 1:
            raise ConfigError(f"scale: {self.name} replays recorded VMA sizes, which --scale does not shrink; "
                              f"accepted: 1 (pick a machine of the size wanted instead)")
        load_recording(self.recording)

    def _programs(self, rec):
        return rec.procs[~rec.procs["comm"].isin(SKIP)].sort_values(["start_s", "proc"])

    def _plan(self):
        """(ProcEvents per process, their slots (plan_slots), the regions, slot -> region and base),
        computed once from the params (deterministic: source=dist draws with the `draw_seed` param,
        so regions() and chunks() agree). Process i is in job slot (lane) i % nr_lanes."""
        if getattr(self, "_planned", None) is not None:
            return self._planned
        rec = load_recording(self.recording)
        progs = self._programs(rec)
        if progs.empty:
            raise ConfigError(f"recording: {self.recording!r} has no process to replay")
        n = self.procs or len(progs)
        if self.source == "trace":
            ids = progs["proc"].to_numpy()
            pes = [recorded_process(rec, int(ids[i % len(ids)])) for i in range(n)]
        else:
            rng = np.random.default_rng(self.draw_seed)
            vma_rows, proc_rows = dist_tables(rec)
            comms = progs["comm"].to_numpy()
            pes = [draw_process(rec, str(comms[int(rng.integers(len(comms)))]), rng, vma_rows, proc_rows)
                   for _ in range(n)]
        lanes = self.nr_lanes
        pools = [SlotPool() for _ in range(lanes)]
        slots = [plan_slots(pe, pools[i % lanes]) for i, pe in enumerate(pes)]
        regions, where = lay_out(pools)
        if not regions:
            regions = [Region("unused", "anon", 1)]
        self._planned = (pes, slots, regions, where)
        return self._planned

    @property
    def nr_tasks(self) -> int:
        return len(self._plan()[0])

    def regions(self) -> list[Region]:
        return self._plan()[2]

    def processes(self) -> list[Process]:
        return [Process(f"{pe.comm}.{i}") for i, pe in enumerate(self._plan()[0])]

    def process_ops(self, i):
        """(pages, ops) of process i: its control ops and stores, its exit last (_anon.process_ops)."""
        pes, slots, _, where = self._plan()
        return process_ops(pes[i], slots[i], i % self.nr_lanes, where, self.user_time)


class AnonBuild(AnonReplay):
    name = "anon-build"
    description = ("kernel-compile-like job mix: `jobs` short-lived processes at a time (recorded make -j8 of "
                   "linux mm/) mapping brk/mmap heaps, touching part of them and exiting")
    params = {
        "jobs": int_param(8, "processes alive at once (make -jN); the seed's tables: 8 and 80", lo=1, hi=MAX_TASKS),
        "procs": int_param(0, "processes in all (0: those of the recording)", lo=0, hi=MAX_TASKS),
        "source": choice_param("trace", ("trace", "dist"), "replay the recorded processes, or draw them from "
                               "the recorded distributions"),
        "recording": recording_param("kbuild"),
        "draw_seed": draw_seed_param(),
        "user_time": user_time_param(),
        "waves": choice_param("free", ("free", "phase"), "free: a CPU starts the next wave's processes when "
                              "its own are done; phase: a wave starts when the previous one has exited"),
    }
    access_params = ("procs", "recording")

    def validate(self):
        super().validate()
        n = self.procs or len(self._programs(load_recording(self.recording)))
        if n > MAX_TASKS:
            raise ConfigError(f"procs: the recording {self.recording!r} has {n} processes; accepted: at most "
                              f"{MAX_TASKS} (set procs)")

    @property
    def nr_lanes(self) -> int:
        return self.jobs

    def processes(self) -> list[Process]:
        """With waves=free a job slot's next process starts when its previous one has exited."""
        procs = super().processes()
        if self.waves != "free":
            return procs
        return [replace(pr, after=procs[i - self.jobs].name) if i >= self.jobs else pr for i, pr in enumerate(procs)]

    def nr_accesses(self) -> int | None:
        return None

    def chunks(self, seed: int) -> Iterator[Chunk]:
        T = self.nr_tasks
        for w0 in range(0, T, self.jobs):
            offsets = np.zeros(T + 1, np.int64)
            pages, ops = [], []
            for i in range(w0, min(T, w0 + self.jobs)):
                pg, op = self.process_ops(i)
                offsets[i + 1] = pg.shape[0]
                pages.append(pg)
                ops.append(op)
            offsets = np.cumsum(offsets)
            yield Chunk(offsets, np.concatenate(pages), np.concatenate(ops),
                        start_phase=w0 > 0 and self.waves == "phase")
