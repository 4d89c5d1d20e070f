"""Anonymous memory of real programs: VMAs from an strace log joined with page faults from perf.

Reads the two logs `data/anon/record.sh` writes for one run:

* `strace -f -ttt -e trace=memory,process`: per thread id and wall time, mmap / munmap / brk /
  mremap (address, length, flags, result), clone / clone3 / fork / vfork (the child's id, and
  whether it is a thread: CLONE_THREAD), execve (a new address space) and the exits
  (`+++ exited with N +++`, `+++ killed by ...`). strace prints a call interrupted by another
  thread's line as `<unfinished ...>` and its end as `<... NAME resumed>`; the two halves are joined
  and the call is dated at its end (when its result is known).
* `perf script -F pid,tid,time,addr` of `perf record -k realtime -e page-faults -c 1 -d`: one line
  per page fault with the faulting address, on the same wall clock as strace.

and returns tables (pandas DataFrames):

* `procs`: one row per *process instance* = a thread group between two execve's (or from its fork
  to its first execve, or to its exit): `comm` (the basename of the program it exec'd, '' before
  any exec), start (fork or execve) and end (exit or the next execve) times, its anon VMAs and
  syscalls counted, the pages it faulted in its anon VMAs.
* `vmas`: one row per anonymous VMA: kind `mmap` (an anonymous mmap with some access), `reserve`
  (an anonymous PROT_NONE mmap: address space that faults nothing until committed), `mprotect` (a
  range of a reservation made writable by mprotect, the way V8 commits its heap pages: a VMA of its
  own, as the kernel splits it off) or `brk` (the heap, from its first brk() to its highest end),
  its size, where it starts within a 2 MiB frame (`start_mod_512`, pages), when it was mapped and
  unmapped relative to its process's start (`munmap`, `exit`, `exec`, `fixed` when a MAP_FIXED
  mmap replaced it, `mremap`, `mprotect` when made PROT_NONE again), the pages touched (faulted at
  least once: the first touch of an anon page is a fault, a read on a never-written page maps the
  zero page and a later write faults again; each page counts once), the runs of consecutive
  touched pages, the first and last touch.
* `touches`: the touched pages of every VMA as runs (vma, page offset in the VMA, length, time of
  the run's first touch from its process's start), in the order of their first touch.
* `brk_steps`: every brk() that moved the heap's end: when, by how many pages (negative: a
  shrink) and the heap's size after it.

Attribution: a fault belongs to the anonymous VMA of the faulting thread's process that covered the
address at that time (the latest mapped, when a MAP_FIXED mmap replaced part of an older one).
Faults on file mappings, the main thread's stack and the copy of the parent's address space a
forked child runs in until its execve belong to no anon VMA here and are only counted per process
(`faults`). A munmap or PROT_NONE mprotect that removes a VMA's head or tail trims it and one that
removes its middle splits it in two (both keep the map time; the size recorded is the last one);
partial unmaps are counted (`partial_unmaps`). mremap is counted and ends the old VMA; the new
range is a new VMA of kind `mmap`. Simplifications: adjacent VMAs the kernel would merge (vma_merge,
e.g. two commits of neighbouring ranges) stay two records; MADV_DONTNEED / MADV_FREE are counted
per process (`madvise_free`) but the pages they drop stay touched (a page faulted again after it
counts once).
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

PAGE = 4096
_LINE = re.compile(r"^(\d+)\s+(\d+\.\d+)\s+(.*)$")
_CALL = re.compile(r"^(\w+)\((.*)\)\s+=\s+(-?\w+)")
_RESUMED = re.compile(r"^<\.\.\. (\w+) resumed>(.*)$")


def _int(x: str) -> int:
    x = x.strip()
    return int(x, 16) if x.startswith("0x") else int(x) if x.lstrip("-").isdigit() else 0


def strace_calls(path: str):
    """(tid, t, name, args, ret) of every finished call in an strace -f -ttt log, unfinished and
    resumed halves joined, plus ('exit', ...) for `+++ exited/killed +++` lines."""
    pending: dict[int, str] = {}
    with open(path, errors="replace") as f:
        for line in f:
            m = _LINE.match(line.rstrip("\n"))
            if not m:
                continue
            tid, t, rest = int(m.group(1)), float(m.group(2)), m.group(3)
            if rest.startswith("+++"):
                yield tid, t, "exit", "", 0
                continue
            if rest.endswith("<unfinished ...>"):
                pending[tid] = rest[: -len("<unfinished ...>")].rstrip()
                continue
            r = _RESUMED.match(rest)
            if r:
                head = pending.pop(tid, r.group(1) + "(")
                rest = head + r.group(2).lstrip(",")
            c = _CALL.match(rest)
            if c:
                yield tid, t, c.group(1), c.group(2), c.group(3)


def _split_args(args: str) -> list[str]:
    out, depth, cur = [], 0, []
    for ch in args:
        if ch in "{[(":
            depth += 1
        elif ch in "}])":
            depth -= 1
        if ch == "," and depth == 0:
            out.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    out.append("".join(cur).strip())
    return out


@dataclass
class _Proc:
    key: int
    tgid: int
    comm: str
    start: float
    end: float = np.nan
    counts: dict = field(default_factory=lambda: dict(mmap_anon=0, mmap_file=0, munmap=0, partial_unmaps=0,
                                                      brk=0, mremap=0, mprotect_commit=0, madvise_free=0))
    heap: int = -1          # vma index of the heap
    brk0: int = 0
    brk: int = 0
    merged: bool = False    # a thread's early calls, given to its process


class _Log:
    """Replays the syscalls: process instances, anon VMAs (with [t_map, t_unmap) lifetimes)."""

    def __init__(self):
        self.procs: list[_Proc] = []
        self.cur: dict[int, int] = {}        # tgid -> current process instance
        self.tgid: dict[int, int] = {}       # tid -> tgid
        self.live: dict[int, list[int]] = {}  # process instance -> live vma ids
        self.v = dict(proc=[], kind=[], start=[], end=[], t_map=[], t_unmap=[], how=[])
        self.brk_steps: list[tuple[int, int]] = []

    def proc_of(self, tid: int, t: float) -> _Proc:
        g = self.tgid.setdefault(tid, tid)
        if g not in self.cur:
            self._new(g, "", t)
        return self.procs[self.cur[g]]

    def _new(self, tgid, comm, t):
        p = _Proc(len(self.procs), tgid, comm, t)
        self.procs.append(p)
        self.cur[tgid] = p.key
        self.live[p.key] = []
        return p

    def _vma(self, p, kind, start, end, t):
        v = self.v
        i = len(v["proc"])
        for k, x in zip(("proc", "kind", "start", "end", "t_map", "t_unmap", "how"),
                        (p.key, kind, start, end, t, np.inf, "")):
            v[k].append(x)
        self.live[p.key].append(i)
        return i

    def _end(self, i, t, how):
        if self.v["t_unmap"][i] == np.inf:
            self.v["t_unmap"][i] = t
            self.v["how"][i] = how

    def _cut(self, p, lo, hi, t, how, kinds=("mmap", "mprotect", "brk", "reserve")):
        """[lo, hi) leaves the live records of `kinds`: a record wholly inside ends; one that loses
        its head or tail is trimmed; one with a hole in the middle is split (the tail becomes a
        new record with the same map time, the kernel's __split_vma)."""
        v = self.v
        keep = []
        for i in list(self.live[p.key]):
            s, e = v["start"][i], v["end"][i]
            if hi <= s or lo >= e or v["kind"][i] not in kinds:
                keep.append(i)
            elif lo <= s and hi >= e:
                self._end(i, t, how)
            else:
                p.counts["partial_unmaps"] += how == "munmap"
                keep.append(i)
                if lo <= s:
                    v["start"][i] = hi
                elif hi >= e:
                    v["end"][i] = lo
                else:
                    v["end"][i] = lo
                    j = self._vma(p, v["kind"][i], hi, e, v["t_map"][i])
                    self.live[p.key].remove(j)
                    keep.append(j)
        self.live[p.key] = keep

    def _covered(self, p, lo, hi, kinds) -> bool:
        """[lo, hi) lies in one live record of `kinds`."""
        v = self.v
        return any(v["kind"][i] in kinds and v["start"][i] <= lo and hi <= v["end"][i] for i in self.live[p.key])

    def _finish(self, p, t, how):
        for i in self.live[p.key]:
            self._end(i, t, how)
        self.live[p.key] = []
        p.end = t

    def call(self, tid, t, name, args, ret):
        p = self.proc_of(tid, t)
        if name == "exit":
            if tid == p.tgid:       # a thread group ends with its leader (the others' exits end nothing)
                self._finish(p, t, "exit")
            return
        if ret.startswith("-") or ret == "?":
            return
        a = _split_args(args)
        if name == "execve":
            self._finish(p, t, "exec")
            prog = a[0].strip('"') if a else ""
            self._new(p.tgid, os.path.basename(prog), t)
            return
        if name in ("clone", "clone3", "fork", "vfork"):
            child = _int(ret)
            if child > 0:
                # the child's own lines may come before this return (then it has an instance already)
                thread = "CLONE_THREAD" in args
                early = self.cur.get(child)
                self.tgid[child] = p.tgid if thread else child
                if thread and early is not None:
                    # its early calls went to an instance of its own: they are the process's
                    for i in self.live.pop(early):
                        self.v["proc"][i] = p.key
                        self.live[p.key].append(i)
                    for k, n in self.procs[early].counts.items():
                        p.counts[k] += n
                    self.procs[early].merged = True
                    del self.cur[child]
                elif not thread and early is None:
                    self._new(child, "", t)
            return
        if name == "mmap" and len(a) >= 4:
            addr, length, flags = _int(ret), _int(a[1]), a[3]
            end = addr + (length + PAGE - 1) // PAGE * PAGE
            if "MAP_FIXED" in flags:
                self._cut(p, addr, end, t, "fixed")
            if "MAP_ANONYMOUS" in flags:
                p.counts["mmap_anon"] += 1
                self._vma(p, "reserve" if a[2].strip() == "PROT_NONE" else "mmap", addr, end, t)
            else:
                p.counts["mmap_file"] += 1
        elif name == "munmap" and len(a) >= 2:
            lo = _int(a[0])
            p.counts["munmap"] += 1
            self._cut(p, lo, lo + (_int(a[1]) + PAGE - 1) // PAGE * PAGE, t, "munmap")
        elif name == "mprotect" and len(a) >= 3:
            lo = _int(a[0])
            hi = lo + (_int(a[1]) + PAGE - 1) // PAGE * PAGE
            if a[2].strip() == "PROT_NONE":
                self._cut(p, lo, hi, t, "mprotect", ("mmap", "mprotect"))
            elif "PROT_WRITE" in a[2] and self._covered(p, lo, hi, ("reserve",)) and \
                    not self._covered(p, lo, hi, ("mmap", "mprotect")):
                p.counts["mprotect_commit"] += 1
                self._vma(p, "mprotect", lo, hi, t)
        elif name == "madvise" and len(a) >= 3 and a[2].strip() in ("MADV_DONTNEED", "MADV_FREE"):
            p.counts["madvise_free"] += 1
        elif name == "mremap" and len(a) >= 3:
            p.counts["mremap"] += 1
            old, oldlen, newlen = _int(a[0]), _int(a[1]), _int(a[2])
            new = _int(ret)
            self._cut(p, old, old + oldlen, t, "mremap")
            self._vma(p, "mmap", new, new + (newlen + PAGE - 1) // PAGE * PAGE, t)
        elif name == "brk":
            new = _int(ret)
            if p.heap < 0:
                p.brk0 = p.brk = new
                p.heap = self._vma(p, "brk", new, new, t)
                return
            if new != p.brk:
                p.counts["brk"] += 1
                self.brk_steps.append((p.key, t, (new - p.brk) // PAGE, (new - p.brk0) // PAGE))
                p.brk = new
                self.v["end"][p.heap] = max(self.v["end"][p.heap], new)


def read_faults(path: str) -> pd.DataFrame:
    """`perf script -F pid,tid,time,addr` lines -> DataFrame tid, t, addr."""
    df = pd.read_csv(path, sep=r"\s+", header=None, names=["ids", "t", "addr"], dtype=str)
    tid = df["ids"].str.split("/", n=1).str[1].astype(np.int64)
    t = df["t"].str.rstrip(":").astype(np.float64)
    addr = np.array([int(x, 16) for x in df["addr"]], dtype=np.uint64)
    return pd.DataFrame({"tid": tid, "t": t, "addr": addr})


def _runs(pages: np.ndarray):
    """Runs of consecutive values in `pages` (any order) -> (starts, lengths) in sorted order."""
    p = np.unique(pages)
    if p.size == 0:
        return p, p
    brk = np.flatnonzero(np.diff(p) != 1) + 1
    starts = np.r_[0, brk]
    return p[starts], np.diff(np.r_[starts, p.size])


def analyse(strace_path: str, faults_path: str, run: str):
    """The run's tables (procs, vmas, touches, brk_steps), see the module docstring."""
    log = _Log()
    for ev in strace_calls(strace_path):
        log.call(*ev)
    procs = pd.DataFrame([dict(proc=p.key, tgid=p.tgid, comm=p.comm, start=p.start, end=p.end, **p.counts)
                          for p in log.procs if not p.merged])
    tend = procs["end"].max()
    procs["end"] = procs["end"].fillna(tend)
    v = pd.DataFrame(log.v)
    v["t_unmap"] = v["t_unmap"].replace(np.inf, np.nan)
    v["t_unmap"] = v["t_unmap"].fillna(v["proc"].map(procs.set_index("proc")["end"]))
    v = v[v["end"] > v["start"]].reset_index(drop=True)
    v["vma"] = np.arange(len(v))
    v["pages"] = (v["end"] - v["start"]) // PAGE

    f = read_faults(faults_path)
    f["tgid"] = f["tid"].map(lambda x: log.tgid.get(x, x))
    # the process instance of each fault: the tgid's instance that started last at or before it
    inst = procs.sort_values("start")
    f = f.sort_values("t")
    f["proc"] = -1
    for g, idx in f.groupby("tgid").groups.items():
        ps = inst[inst["tgid"] == g]
        if ps.empty:
            continue
        k = np.searchsorted(ps["start"].to_numpy(), f.loc[idx, "t"].to_numpy(), side="right") - 1
        f.loc[idx, "proc"] = np.where(k >= 0, ps["proc"].to_numpy()[np.maximum(k, 0)], -1)
    procs["faults"] = procs["proc"].map(f.groupby("proc").size()).fillna(0).astype(np.int64)

    f["vma"] = -1
    for pk, idx in f[f["proc"] >= 0].groupby("proc").groups.items():
        vv = v[(v["proc"] == pk) & (v["kind"] != "reserve")]
        if vv.empty:
            continue
        s, e = vv["start"].to_numpy(np.uint64), vv["end"].to_numpy(np.uint64)
        tm, tu = vv["t_map"].to_numpy(), vv["t_unmap"].to_numpy()
        ids = vv["vma"].to_numpy()
        a, t = f.loc[idx, "addr"].to_numpy(np.uint64), f.loc[idx, "t"].to_numpy()
        out = np.full(a.size, -1, np.int64)
        for b in range(0, a.size, 4096):
            aa, tt = a[b:b + 4096, None], t[b:b + 4096, None]
            m = (s <= aa) & (aa < e) & (tm <= tt) & (tt <= tu)
            best = np.where(m, tm, -np.inf).argmax(axis=1)
            out[b:b + 4096] = np.where(m.any(axis=1), ids[best], -1)
        f.loc[idx, "vma"] = out
    f = f[f["vma"] >= 0].copy()
    f["page"] = ((f["addr"].to_numpy(np.uint64) - v["start"].to_numpy(np.uint64)[f["vma"].to_numpy()]) // PAGE).astype(np.int64)
    first = f.drop_duplicates(["vma", "page"])   # sorted by time: each page's first touch

    rows, trows = [], []
    pstart_of = procs.set_index("proc")["start"].to_dict()
    for vid, g in first.groupby("vma", sort=True):
        pg, tt = g["page"].to_numpy(), g["t"].to_numpy()
        st, ln = _runs(pg)
        # each run's first touch (the earliest of its pages'); runs listed in that order
        run_t = np.full(st.size, np.inf)
        np.minimum.at(run_t, np.searchsorted(st, pg, side="right") - 1, tt)
        p0 = pstart_of[v.at[vid, "proc"]]
        for r in np.argsort(run_t, kind="stable"):
            trows.append((vid, int(st[r]), int(ln[r]), round((run_t[r] - p0) * 1e3, 3)))
        rows.append((vid, g["page"].nunique(), st.size, g["t"].min(), g["t"].max()))
    tv = pd.DataFrame(rows, columns=["vma", "touched_pages", "touched_runs", "first_touch", "last_touch"])
    v = v.merge(tv, on="vma", how="left")
    v[["touched_pages", "touched_runs"]] = v[["touched_pages", "touched_runs"]].fillna(0).astype(np.int64)
    pstart = v["proc"].map(procs.set_index("proc")["start"])
    out_v = pd.DataFrame({
        "run": run, "proc": v["proc"], "vma": v["vma"], "kind": v["kind"], "pages": v["pages"],
        "start_mod_512": (v["start"] // PAGE) % 512,
        "map_ms": ((v["t_map"] - pstart) * 1e3).round(3), "unmap_ms": ((v["t_unmap"] - pstart) * 1e3).round(3),
        "unmapped_by": v["how"].replace("", "exit"), "touched_pages": v["touched_pages"],
        "touched_runs": v["touched_runs"],
        "first_touch_ms": ((v["first_touch"] - pstart) * 1e3).round(3),
        "last_touch_ms": ((v["last_touch"] - pstart) * 1e3).round(3)})
    procs["anon_touched_pages"] = procs["proc"].map(out_v.groupby("proc")["touched_pages"].sum()).fillna(0).astype(np.int64)
    procs["heap_pages"] = procs["proc"].map(out_v[out_v["kind"] == "brk"].set_index("proc")["pages"]).fillna(0).astype(np.int64)
    t0 = procs["start"].min()
    out_p = procs.assign(run=run, start_s=(procs["start"] - t0).round(6),
                         lifetime_ms=((procs["end"] - procs["start"]) * 1e3).round(3))
    out_p = out_p[["run", "proc", "tgid", "comm", "start_s", "lifetime_ms", "mmap_anon", "mmap_file", "munmap",
                   "partial_unmaps", "brk", "mremap", "mprotect_commit", "madvise_free", "faults", "anon_touched_pages", "heap_pages"]]
    touches = pd.DataFrame(trows, columns=["vma", "offset", "pages", "t_ms"])
    touches.insert(0, "run", run)
    steps = pd.DataFrame(log.brk_steps, columns=["proc", "t", "pages", "heap_pages"])
    steps.insert(0, "run", run)
    steps.insert(2, "t_ms", ((steps["t"] - steps["proc"].map(pstart_of)) * 1e3).round(3))
    steps = steps.drop(columns="t")
    return out_p, out_v, touches, steps


def main(argv=None) -> int:
    """python -m tierlab.trace.vmalog OUTDIR RUN=PREFIX ...: analyse PREFIX.strace + PREFIX.faults of
    each run and write OUTDIR/{procs,vmas,brk_steps,summary}.csv and OUTDIR/touches.csv.gz (all runs)."""
    import argparse
    ap = argparse.ArgumentParser(prog="python -m tierlab.trace.vmalog", description=main.__doc__)
    ap.add_argument("outdir")
    ap.add_argument("runs", nargs="+", metavar="RUN=PREFIX")
    a = ap.parse_args(argv)
    tabs = [[], [], [], []]
    for spec in a.runs:
        run, _, prefix = spec.partition("=")
        for acc, df in zip(tabs, analyse(prefix + ".strace", prefix + ".faults", run)):
            acc.append(df)
    names = ("procs.csv", "vmas.csv", "touches.csv.gz", "brk_steps.csv")
    full = [pd.concat(acc, ignore_index=True) for acc in tabs]
    for df, name in zip(full, names):
        df.to_csv(os.path.join(a.outdir, name), index=False)
    summarize(full[0], full[1], full[3]).to_csv(os.path.join(a.outdir, "summary.csv"), index=False,
                                                float_format="%.6g")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


QUANTILES = (0.1, 0.25, 0.5, 0.75, 0.9, 0.99)


def _alive(procs: pd.DataFrame) -> pd.Series:
    """Share of the run's time with k processes alive (k = 0, 1, ...), from their start and lifetime."""
    t0 = procs["start_s"].to_numpy()
    t1 = t0 + procs["lifetime_ms"].to_numpy() / 1e3
    ts = np.r_[t0, t1]
    d = np.r_[np.ones(t0.size, np.int64), -np.ones(t1.size, np.int64)]
    o = np.lexsort((d, ts))   # at equal times the end first
    ts, k = ts[o], np.cumsum(d[o])
    dt = np.diff(ts)
    share = pd.Series(dt, index=k[:-1]).groupby(level=0).sum()
    return share / share.sum()


def summarize(procs: pd.DataFrame, vmas: pd.DataFrame, steps: pd.DataFrame) -> pd.DataFrame:
    """The distributions, one row per (run, what, group): count, mean and quantiles. `what`:
    vma_pages and touched_share by VMA kind (reservations left out of touched_share), touched_runs,
    brk_step_pages (growths), lifetime_ms, anon_touched_pages and munmaps_per_s per program, and
    alive_share (share of the run's time with `group` processes alive, programs that exec'd)."""
    rows = []

    def add(run, what, group, x):
        x = np.asarray(x, np.float64)
        if x.size:
            rows.append(dict(run=run, what=what, group=group, count=x.size, mean=x.mean(),
                             **{f"q{int(q * 100)}": np.quantile(x, q) for q in QUANTILES}))

    for run, v in vmas.groupby("run", sort=False):
        for kind, g in v.groupby("kind"):
            add(run, "vma_pages", kind, g["pages"])
            if kind != "reserve":
                add(run, "touched_share", kind, g["touched_pages"] / g["pages"])
                add(run, "touched_runs", kind, g.loc[g["touched_pages"] > 0, "touched_runs"])
    for run, s in steps.groupby("run", sort=False):
        add(run, "brk_step_pages", "grow", s.loc[s["pages"] > 0, "pages"])
        add(run, "brk_step_pages", "shrink", -s.loc[s["pages"] < 0, "pages"])
    for run, p in procs.groupby("run", sort=False):
        p = p[p["comm"].astype(str) != ""]
        for comm, g in p.groupby("comm"):
            if len(g) >= 3 or g["anon_touched_pages"].sum() > 1000:
                add(run, "lifetime_ms", comm, g["lifetime_ms"])
                add(run, "anon_touched_pages", comm, g["anon_touched_pages"])
                add(run, "munmaps_per_s", comm, g["munmap"] / np.maximum(g["lifetime_ms"], 1e-3) * 1e3)
        for k, share in _alive(p).items():
            rows.append(dict(run=run, what="alive_share", group=str(k), count=1, mean=share))
    return pd.DataFrame(rows)
