"""Anonymous-memory lifecycles of real programs, replayed: the machinery of anon-build and anon-browser.

The recordings are the tables `python -m tierlab.trace.vmalog` derives from strace + perf logs
(data/anon/README.md): per process, its anonymous VMAs (size, map and unmap time, how it ended),
the touched pages of each as runs with the time of their first touch, and the heap's brk() steps.
A process becomes a list of events in time order:

* MAP (an anon mmap, or the heap's first growth: the region slot is mapped over its first pages),
* BRK (the heap's end moves; a shrink zaps the tail),
* TOUCH (a run of consecutive pages stored to in ascending order: the first touch of each page,
  which is the anon fault the recording saw),
* UNMAP (munmap; VMAs that lived to the process's end are torn down by its exit, exit_mmap),

either exactly as recorded (`source=trace`) or drawn from the recorded distributions
(`source=dist`: each VMA an independent draw of a recorded VMA row of the same program and kind:
its size, touched share, number of touched runs and lifetime share, jointly; see `draw_process`).

Events become ops (workloads.base control ops and OP_STORE accesses) on region slots. Each VMA
gets a slot of the smallest power-of-two size class that holds its largest extent, from a pool
that the processes of one *lane* share one after another (a slot is free again after its VMA's
munmap or its process's exit): the generator knows every page id before the engine runs it, and no
two processes that may run at once share a slot. Slots are laid out in decreasing class size, so
each starts naturally aligned to its class.

Simplifications, named: a VMA starts aligned to its size class (the recorded start within a 2 MiB
frame is kept in data/anon/vmas.csv as `start_mod_512` but not replayed); touches are stores in
ascending page order within a run (the recording has first-touch times per run, not the order
inside it); a page is touched once (later accesses, and faults again after MADV_DONTNEED, are not
in the recording); the CPU time between events is the recorded wall time under strace and perf
(inflated; `user_time` scales it, 0 leaves it out).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
import pandas as pd

from ..core.ops import OP_CPU, OP_STORE
from ..errors import ConfigError
from ..reproduce import DATA_DIR
from .base import Region, control_op

EV_MAP, EV_BRK, EV_TOUCH, EV_UNMAP = 0, 1, 2, 3
KINDS = ("mmap", "mprotect", "brk")       # VMA kinds replayed (reservations fault nothing)
MAX_CLASS = 1 << 30


@dataclass(eq=False)
class Recording:
    procs: pd.DataFrame
    vmas: pd.DataFrame
    touches: pd.DataFrame
    steps: pd.DataFrame
    _by_proc: dict | None = None

    def by_proc(self) -> dict:
        """proc -> (program, lifetime, its replayed VMA rows as tuples, {vma: touch runs (offset,
        pages, t_ms)}, its brk steps (t_ms, heap_pages)), built once."""
        if self._by_proc is None:
            v = self.vmas[self.vmas["kind"].isin(KINDS)]
            rows: dict = {}
            for r in v.itertuples():
                rows.setdefault(r.proc, []).append(r)
            runs = {k: (o, n, t) for k, o, n, t in _split_by(self.touches["vma"].to_numpy(), self.touches["offset"],
                                                             self.touches["pages"], self.touches["t_ms"])}
            steps = {k: (t, n) for k, t, n in _split_by(self.steps["proc"].to_numpy(), self.steps["t_ms"],
                                                         self.steps["heap_pages"])}
            none = (np.empty(0), np.empty(0, np.int64))
            life = dict(zip(self.procs["proc"], self.procs["lifetime_ms"]))
            comm = dict(zip(self.procs["proc"], self.procs["comm"].astype(str)))
            self._by_proc = {pr: (comm[pr], float(life[pr]), rows.get(pr, []),
                                  {r.vma: runs[r.vma] for r in rows.get(pr, []) if r.vma in runs},
                                  steps.get(pr, none)) for pr in self.procs["proc"]}
        return self._by_proc


@lru_cache(maxsize=4)
def load_recording(run: str) -> Recording:
    """The tables of one recorded run (data/anon/*.csv, rows of `run`)."""
    d = DATA_DIR / "anon"
    try:
        procs = pd.read_csv(d / "procs.csv", keep_default_na=False)
        vmas = pd.read_csv(d / "vmas.csv")
        touches = pd.read_csv(d / "touches.csv.gz")
        steps = pd.read_csv(d / "brk_steps.csv")
    except FileNotFoundError as e:
        raise ConfigError(f"recording: {e.filename} is missing (set TIERLAB_DATA to the repository's data/ "
                          f"directory)") from None
    runs = sorted(set(procs["run"]))
    if run not in runs:
        raise ConfigError(f"recording: {run!r} is not a recorded run; accepted: {', '.join(runs)}")
    pick = (lambda df: df[df["run"] == run].reset_index(drop=True))
    return Recording(pick(procs), pick(vmas), pick(touches), pick(steps))


def _split_by(key: np.ndarray, *cols):
    """(key value, col slices...) per key value of `key`, rows in file order within each."""
    o = np.argsort(key, kind="stable")
    key = key[o]
    arrays = [np.asarray(c)[o] for c in cols]
    if key.size == 0:
        return
    starts = np.r_[0, np.flatnonzero(key[1:] != key[:-1]) + 1, key.size]
    for a, b in zip(starts[:-1], starts[1:]):
        yield (key[a].item(), *(x[a:b] for x in arrays))


@dataclass
class ProcEvents:
    """One process: its program, lifetime (ms) and events (t_ms, kind, vma, a, b), in time order.
    MAP: a = pages mapped; BRK: a = new heap length; TOUCH: a = first page, b = pages; UNMAP.
    `extent`: the largest length of each vma (its slot must hold it)."""
    comm: str
    lifetime_ms: float
    events: list = field(default_factory=list)
    extent: dict = field(default_factory=dict)

    def sort(self):
        # at equal times: map, then brk, then touches, then unmap (a VMA's order of life)
        self.events.sort(key=lambda e: (e[0], e[1]))
        return self


def recorded_process(rec: Recording, proc: int) -> ProcEvents:
    """The events of recorded process `proc`, as recorded."""
    comm, life, rows, runs, (times, lens) = rec.by_proc()[proc]
    pe = ProcEvents(comm, life)
    for r in rows:
        m0, m1 = float(r.map_ms), float(r.unmap_ms)
        if r.kind == "brk":
            if lens.size == 0 or lens.max() <= 0:
                continue
            pe.extent[r.vma] = int(max(lens.max(), r.pages))
            first = int(np.argmax(lens > 0))
            pe.events.append((float(times[first]), EV_MAP, r.vma, int(lens[first]), 0))
            for t, n in zip(times[first + 1:], lens[first + 1:]):
                pe.events.append((float(t), EV_BRK, r.vma, max(1, int(n)), 0))
        else:
            pe.extent[r.vma] = int(r.pages)
            pe.events.append((m0, EV_MAP, r.vma, int(r.pages), 0))
            if r.unmapped_by not in ("exit", "exec"):
                pe.events.append((m1, EV_UNMAP, r.vma, 0, 0))
        if r.vma in runs:
            for off, n, t in zip(*runs[r.vma]):
                t = min(max(float(t), m0), m1) if r.kind != "brk" else float(t)
                pe.events.append((t, EV_TOUCH, r.vma, int(off), int(n)))
    return pe.sort()


def touch_runs(rng, pages: int, touched: int, runs: int) -> list[tuple[int, int]]:
    """`touched` of `pages` pages as `runs` runs (offset, length) of near-equal length, in
    increasing offset order, the gaps between them drawn at random (a uniform random composition
    of the untouched pages)."""
    touched = min(max(touched, 0), pages)
    if touched == 0:
        return []
    runs = min(max(runs, 1), touched, pages - touched + 1)
    lens = np.full(runs, touched // runs)
    lens[: touched % runs] += 1
    free = pages - touched
    # gaps before each run (the first may be 0), inner gaps >= 1: stars and bars
    inner = runs - 1
    cuts = np.sort(rng.choice(free - inner + runs, runs, replace=False)) if runs else np.empty(0, int)
    gaps = np.diff(np.r_[-1, cuts]) - 1
    gaps[1:] += 1
    offs = np.cumsum(gaps + np.r_[0, lens[:-1]])
    return [(int(o), int(n)) for o, n in zip(offs, lens)]


def draw_process(rec: Recording, comm: str, rng, vma_rows: dict, proc_rows: dict) -> ProcEvents:
    """A process of program `comm` drawn from the recording's distributions: its lifetime and its
    number of VMAs of each kind are those of a recorded process of that program drawn at random; each
    VMA is a recorded VMA of the same program and kind drawn at random (size, touched pages, touched
    runs, map and unmap time as shares of its process's lifetime, whether it was unmapped before the
    exit), its touched pages laid out by touch_runs in a random order of the runs; the heap grows by
    brk steps of the drawn heap's recorded sizes."""
    procs = proc_rows[comm]
    p = procs[int(rng.integers(len(procs)))]
    life = max(float(p["lifetime_ms"]), 1e-3)
    pe = ProcEvents(comm, life)
    counts = p["_counts"]
    vid = 0
    for kind in KINDS:
        rows = vma_rows.get((comm, kind))
        if rows is None or not counts.get(kind, 0):
            continue
        for _ in range(counts[kind]):
            r = rows[int(rng.integers(len(rows)))]
            plife = max(float(r["_life"]), 1e-3)
            t0 = float(r["map_ms"]) / plife * life
            t1 = float(r["unmap_ms"]) / plife * life
            pages = int(r["pages"])
            if kind == "brk":
                steps = r["_steps"]
                if not len(steps):
                    continue
                pe.extent[vid] = int(max(pages, max(steps)))
                st = np.linspace(t0, t1, len(steps) + 1)[:-1]
                pe.events.append((st[0], EV_MAP, vid, int(steps[0]), 0))
                pe.events += [(t, EV_BRK, vid, max(1, int(n)), 0) for t, n in zip(st[1:], steps[1:])]
            else:
                pe.extent[vid] = pages
                pe.events.append((t0, EV_MAP, vid, pages, 0))
                if r["unmapped_by"] not in ("exit", "exec"):
                    pe.events.append((t1, EV_UNMAP, vid, 0, 0))
            runs = touch_runs(rng, pe.extent[vid] if kind == "brk" else pages, int(r["touched_pages"]),
                              int(r["touched_runs"]))
            if runs:
                times = np.sort(rng.uniform(t0, t1, len(runs)))
                order = rng.permutation(len(runs))
                for t, k in zip(times, order):
                    off, n = runs[k]
                    pe.events.append((float(t), EV_TOUCH, vid, off, n))
            vid += 1
    return pe.sort()


def dist_tables(rec: Recording) -> tuple[dict, dict]:
    """The recording indexed for draw_process: VMA rows (dicts) per (program, kind) with their
    process's lifetime and (heaps) the heap lengths after each brk step; process rows per program
    with their VMA counts per kind."""
    life = rec.procs.set_index("proc")["lifetime_ms"]
    comm = rec.procs.set_index("proc")["comm"]
    v = rec.vmas[rec.vmas["kind"].isin(KINDS)].copy()
    v["_life"] = v["proc"].map(life)
    v["_comm"] = v["proc"].map(comm)
    steps = {k: g["heap_pages"].to_numpy() for k, g in rec.steps.groupby("proc")}
    v["_steps"] = [steps.get(pr, np.empty(0, int)) if k == "brk" else None for pr, k in zip(v["proc"], v["kind"])]
    vma_rows = {key: g.to_dict("records") for key, g in v.groupby(["_comm", "kind"])}
    cnt = v.groupby(["proc", "kind"]).size().unstack(fill_value=0)
    proc_rows = {}
    for c, g in rec.procs.groupby("comm"):
        g = g.copy()
        g["_counts"] = [cnt.loc[pr].to_dict() if pr in cnt.index else {} for pr in g["proc"]]
        proc_rows[c] = g.to_dict("records")
    return vma_rows, proc_rows


def size_class(pages: int) -> int:
    return 1 << max(0, int(pages - 1).bit_length())


class SlotPool:
    """Region slots by size class for one lane; processes of the lane take them one after another."""

    def __init__(self):
        self.count: dict[int, int] = {}    # class -> slots the lane needs
        self.free: dict[int, list[int]] = {}

    def take(self, cls: int) -> int:
        f = self.free.setdefault(cls, [])
        if f:
            return f.pop()
        self.count[cls] = self.count.get(cls, 0) + 1
        return self.count[cls] - 1

    def give(self, cls: int, i: int) -> None:
        self.free[cls].append(i)


def plan_slots(pe: ProcEvents, pool: SlotPool) -> dict:
    """Assign a (class, index) slot of `pool` to each MAP of `pe` (freed at its UNMAP and at the
    end): {event index: (class, index)} for MAP events, and vma -> the same for the others."""
    cur, out = {}, {}
    for k, (_, kind, vma, _, _) in enumerate(pe.events):
        if kind == EV_MAP:
            cls = size_class(pe.extent[vma])
            if cls > MAX_CLASS:
                raise ConfigError(f"recording: a VMA of {pe.extent[vma]} pages is larger than the largest slot")
            cur[vma] = (cls, pool.take(cls))
            out[k] = cur[vma]
        elif kind == EV_UNMAP:
            pool.give(*cur[vma])
            out[k] = cur.pop(vma)
        else:
            out[k] = cur.get(vma)
    for s in cur.values():
        pool.give(*s)
    return out


def lay_out(pools: list[SlotPool]) -> tuple[list[Region], dict]:
    """Regions for every lane's slots, largest class first (so each slot starts aligned to its
    class), and (lane, class, index) -> (region index, first page id)."""
    keys = sorted(((c, lane, i) for lane, p in enumerate(pools) for c, n in p.count.items() for i in range(n)),
                  key=lambda k: (-k[0], k[1], k[2]))
    regions, where, base = [], {}, 0
    for r, (c, lane, i) in enumerate(keys):
        regions.append(Region(f"l{lane}c{c}s{i}", "anon", c))
        where[(lane, c, i)] = (r, base)
        base += c
    return regions, where


def process_ops(pe: ProcEvents, slots: dict, lane: int, where: dict, user_time: float,
                exit_op: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """The op stream of one process: control ops and stores; CPU work of `user_time` x the recorded
    gap (ns) before each event; the exit last."""
    pages, ops = [], []
    heap_len: dict = {}
    last_t = 0.0

    def ctl(kind, slot=0, n=0):
        pg, op = control_op(kind, slot, n)
        pages.append(np.array([pg], np.int64))
        ops.append(np.array([op], np.uint8))

    for k, (t, kind, vma, a, b) in enumerate(pe.events):
        if user_time > 0 and t > last_t:
            ns = int((t - last_t) * 1e6 * user_time)
            if ns > 0:
                pages.append(np.array([ns], np.int64))
                ops.append(np.array([OP_CPU], np.uint8))
        last_t = max(last_t, t)
        s = slots[k]
        if s is None:
            continue
        r, base = where[(lane, s[0], s[1])]
        if kind == EV_MAP:
            ctl("mmap", r, a)
            heap_len[vma] = a
        elif kind == EV_BRK:
            ctl("brk", r, a)
            heap_len[vma] = a
        elif kind == EV_UNMAP:
            ctl("munmap", r)
            heap_len.pop(vma, None)
        else:
            if vma not in heap_len:
                continue                       # a touch after its VMA went (clamped times): none
            if a + b > heap_len[vma]:          # a heap touch past the recorded end at that moment
                heap_len[vma] = min(a + b, s[0], pe.extent[vma])
                ctl("brk", r, heap_len[vma])
                b = max(0, min(b, heap_len[vma] - a))
            pages.append(np.arange(base + a, base + a + b, dtype=np.int64))
            ops.append(np.full(b, OP_STORE, np.uint8))
    if exit_op:
        ctl("exit")
    if not pages:
        return np.empty(0, np.int64), np.empty(0, np.uint8)
    return np.concatenate(pages), np.concatenate(ops)
