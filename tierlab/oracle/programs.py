"""tierlab workloads as guest programs: which C program (programs/*.c) runs a workload, with which
arguments, over which files.

The programs do what the workload's docstring describes (tierlab/workloads/*.py), with the
parameters as the workload parsed them (sizes after --scale); their random numbers are their own
(the same laws, not numpy's sequences). Only these workloads have a program so far.
"""
from __future__ import annotations

from ..errors import ConfigError
from ..units import PAGE_SIZE
from ..workloads.base import Workload


def _policy(value: tuple[str, tuple[int, ...]]) -> str:
    name, nodes = value
    return name if not nodes else f"{name}:{','.join(map(str, nodes))}"


def _file_read(w, seed: int):
    # The guest reads in the model's call length (task work, so page-cache promotion, runs once a
    # call); its buffer is then a call long, not the model's buffer divided by --scale.
    files = {f"file{t}": w.file_pages * PAGE_SIZE for t in range(w.tasks)}
    args = {"file_size": w.file_pages * PAGE_SIZE, "read_size": w.pages_per_call * PAGE_SIZE,
            "cycles": w.cycles, "tasks": w.tasks, "file_policy": _policy(w.file_policy),
            "buffer_policy": _policy(w.buffer_policy), "warmup": w.warmup}
    return "file-read", args, files


def _random_read(w, seed: int):
    if w.dist not in ("uniform", "zipf"):
        raise ConfigError(f"dist: the guest program random_read.c draws uniform or zipf pages; "
                          f"dist={w.dist} has no guest counterpart")
    files = {} if w.target == "anon" else {"data": w.pages * PAGE_SIZE}
    args = {"file_size": w.pages * PAGE_SIZE, "accesses": w.accesses, "tasks": w.tasks, "dist": w.dist,
            "zipf_theta": w.zipf_theta, "target": w.target, "io": w.io, "policy": _policy(w.policy),
            "prefault": w.prefault, "mmap": w.mmap, "seed": seed}
    return "random-read", args, files


def _hot_chunks(w, seed: int):
    args = {"total": w.pages * PAGE_SIZE, "chunk": w.chunk_pages * PAGE_SIZE, "visits": w.visits,
            "iterations": w.iterations, "accesses": w.pass_accesses, "policy": _policy(w.policy),
            "cpunodebind": ",".join(map(str, w.cpunodebind)), "seed": seed}
    return "hot-chunks", args, {}


PROGRAMS = {"file-read": _file_read, "random-read": _random_read, "hot-chunks": _hot_chunks}


def guest_program(workload: Workload, seed: int = 0, extra: dict | None = None) -> tuple[str, list[str], dict[str, int]]:
    """(program name, its key=value arguments, files the disk must hold: name -> bytes). `extra`
    adds or replaces program arguments the workload has no param for (see the program's header)."""
    fn = PROGRAMS.get(workload.name)
    if fn is None:
        raise ConfigError(f"oracle: workload {workload.name!r} has no guest program yet; accepted: "
                          f"{', '.join(sorted(PROGRAMS))}")
    program, args, files = fn(workload, seed)
    args = {"dir": "/mnt", **args, **(extra or {})}
    return program, [f"{k}={v}" for k, v in args.items()], files
