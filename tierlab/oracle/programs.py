"""tierlab workloads as guest programs: which C program (programs/*.c) runs a workload, with which
arguments, over which files.

The programs do what the workload's docstring describes (tierlab/workloads/*.py), with the
parameters as the workload parsed them (sizes after --scale); their random numbers are their own
(the same laws, not numpy's sequences). Only these workloads have a program so far.
"""
from __future__ import annotations

import numpy as np

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


def _xsbench(w, seed: int):
    from ..workloads.xsbench import MAT_DIST
    mats = ";".join(",".join(str(int(k)) for k in m) for m in w.materials())
    args = {"n_iso": w.n_isotopes, "n_gp": w.n_gridpoints, "particles": w.nr_particles, "lookups": w.lookups,
            "threads": w.threads, "mats": mats, "mat_dist": ",".join(f"{p:g}" for p in MAT_DIST),
            "write_share": f"{w.write_share:g}", "cpunodebind": ",".join(map(str, w.cpunodebind)), "seed": seed}
    return "xsbench", args, {}


def _fio(w, seed: int):
    """fio.c: buffered reads with the psync/sync or io_uring engine. What the program cannot do
    the same way is refused by name: writes (the guest's disk is mounted read-only, and the model's
    writeback is not what this compares), time-based or runtime-limited jobs (the guest's clock is
    TCG's, many times slower than the simulated machine's: the same runtime would be a different
    number of I/Os), ramp_time, startdelay and nrfiles > 1."""
    if w.rw not in ("read", "randread"):
        raise ConfigError(f"rw: the guest program fio.c only reads; rw={w.rw} has no guest counterpart "
                          f"(accepted: read, randread)")
    for name, bad in (("time_based", w.time_based), ("runtime", w.runtime is not None),
                      ("ramp_time", bool(w.ramp_time)), ("startdelay", bool(w.startdelay[1]))):
        if bad:
            raise ConfigError(f"{name}: fio.c runs a fixed number of I/Os (loops x size / bs); a time set in the "
                              f"model's clock has no guest counterpart (TCG's clock is not the machine's); "
                              f"accepted: leave {name} out")
    if w.nrfiles != 1:
        raise ConfigError(f"nrfiles: fio.c reads one file per job; nrfiles={w.nrfiles} has no guest "
                          f"counterpart (accepted: 1)")
    dist, param = w.random_distribution
    name = "fio.shared" if w.shared else None
    files = {name: w.file_pages * PAGE_SIZE} if name else \
        {f"fio.{j}.0": w.file_pages * PAGE_SIZE for j in range(w.numjobs)}
    args = {"size": w.file_pages * PAGE_SIZE, "bs": w.bs, "numjobs": w.numjobs, "rw": w.rw,
            "ioengine": w.ioengine, "iodepth": w.iodepth, "loops": w.loops, "norandommap": w.norandommap,
            "dist": dist, "dist_param": f"{param:g}", "fadvise_hint": w.fadvise_hint, "pre_read": w.pre_read,
            "shared": int(w.shared), "file_policy": _policy(w.file_policy), "log_ios": w.log_ios, "seed": seed}
    return "fio", args, files


# anon_replay.c's record kinds
REC_STORE, REC_MMAP, REC_MUNMAP, REC_RESIZE = 0, 1, 2, 3


def anon_ops(w) -> bytes:
    """The op file of anon_replay.c for a recorded anon workload (anon-build, anon-browser): every
    process's control ops and stores in the order the workload gives them, process after process,
    each process's exit written as the munmap of the regions it still has mapped."""
    from ..core.ops import CTRL_BRK, CTRL_EXIT, CTRL_KIND_MASK, CTRL_MMAP, CTRL_MUNMAP, OP_CTRL, OP_STORE, ctrl_unpack
    sizes = np.array([r.pages for r in w.regions()], np.int64)
    start = np.concatenate([[0], np.cumsum(sizes)])
    recs = []
    for i in range(w.nr_tasks):
        pages, ops = w.process_ops(i)
        live = set()
        ctrl = np.flatnonzero(ops & OP_CTRL)
        bounds = np.concatenate([[-1], ctrl, [len(ops)]])
        for k in range(len(bounds) - 1):
            lo, hi = bounds[k] + 1, bounds[k + 1]
            if hi > lo:                     # a run of accesses: stores, grouped by region and run
                pg = pages[lo:hi]
                if not np.all(ops[lo:hi] == OP_STORE):
                    raise ConfigError(f"oracle: {w.name} has an access other than a store; anon_replay.c "
                                      f"replays stores only")
                reg = np.searchsorted(start, pg, side="right") - 1
                cut = np.flatnonzero((np.diff(pg) != 1) | (np.diff(reg) != 0)) + 1
                for a, b in zip(np.concatenate([[0], cut]), np.concatenate([cut, [len(pg)]])):
                    r = int(reg[a])
                    recs.append((REC_STORE, r, int(pg[a] - start[r]), int(b - a)))
            if hi >= len(ops):
                break
            op, arg = int(ops[hi]), int(pages[hi])
            kind, (slot, n) = op & CTRL_KIND_MASK, ctrl_unpack(arg)
            if kind == CTRL_MMAP:
                recs.append((REC_MMAP, slot, 0, n or int(sizes[slot])))
                live.add(slot)
            elif kind == CTRL_BRK:
                recs.append((REC_RESIZE, slot, 0, n))
                (live.add if n else live.discard)(slot)
            elif kind == CTRL_MUNMAP:
                recs.append((REC_MUNMAP, slot, 0, 0))
                live.discard(slot)
            elif kind == CTRL_EXIT:
                recs += [(REC_MUNMAP, r, 0, 0) for r in sorted(live)]
                live.clear()
            else:
                raise ConfigError(f"oracle: {w.name} has a control op anon_replay.c does not replay "
                                  f"(kind {kind}); accepted: mmap, munmap, brk, exit")
    head = np.concatenate([[len(sizes)], start]).astype("<i8").tobytes()
    return b"TLANON01" + head + np.array(recs, "<i8").reshape(-1, 4).tobytes()


def _anon_replay(w, seed: int):
    if w.user_time:
        raise ConfigError("user_time: the guest program replays the VMA calls and touches only; accepted: 0")
    return "anon-replay", {"ops": "/mnt/anon-ops.bin"}, {"anon-ops.bin": anon_ops(w)}


PROGRAMS = {"file-read": _file_read, "random-read": _random_read, "hot-chunks": _hot_chunks, "xsbench": _xsbench,
            "fio": _fio, "anon-build": _anon_replay, "anon-browser": _anon_replay}


def guest_program(workload: Workload, seed: int = 0, extra: dict | None = None) -> tuple[str, list[str], dict]:
    """(program name, its key=value arguments, files the disk must hold: name -> size in bytes (random
    contents) or the contents themselves). `extra`
    adds or replaces program arguments the workload has no param for (see the program's header)."""
    fn = PROGRAMS.get(workload.name)
    if fn is None:
        raise ConfigError(f"oracle: workload {workload.name!r} has no guest program yet; accepted: "
                          f"{', '.join(sorted(PROGRAMS))}")
    program, args, files = fn(workload, seed)
    args = {"dir": "/mnt", **args, **(extra or {})}
    return program, [f"{k}={v}" for k, v in args.items()], files
