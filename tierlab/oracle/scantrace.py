"""The NUMA scanner's pace in the guest (`--trace-scan`): every task_numa_work() call and every
placement, with the task's numa_scan_period, from kprobes.

What the kernel has (Linux 6.12, kernel/sched/fair.c): task_numa_work() is a task_work callback
(`struct callback_head *work`, which is &current->numa_work) and is never inlined; task_numa_placement()
and update_task_scan_period() are static and inlined into task_numa_fault(), whose arguments do not
include the task. task_scan_max(p) is a function of its own, and task_numa_placement() calls it
first thing after it has decided to run (`p->numa_scan_period_max = task_scan_max(p)`), so a probe
on it marks each placement with the period *before* that placement's update; the update's result is
what the next task_numa_work() call (or the next placement) reads. task_numa_work() also calls
task_scan_max() when the task's period is still 0, and update_task_scan_period() calls it again in
its +/- tenths branch (the clamp), never in its doubling branch.

Kprobe fetch args cannot name `current`, so the task's fields are read at offsets from
task_numa_work's `work` argument (task_struct.numa_work) and from task_scan_max's `p`; the offsets
come from the kernel's BTF (`.BTF` of the vmlinux inside the bzImage, read on the host), so this
needs a kernel with CONFIG_DEBUG_INFO_BTF: Debian's package has it, tierlab's own build (no debug
info) does not and is refused.

Probes (events kprobes/<name>):
- tl_tnw  (task_numa_work entry): period, pmax (numa_scan_period_max), tseq (p->numa_scan_seq),
  seq (mm->numa_scan_seq), next (mm->numa_next_scan), jif (jiffies)
- tl_tnwr (its return): period, seq, next: a call that scanned moved `next` (it sets
  mm->numa_next_scan = now + period before scanning); one that returned early did not
- tl_tsm  (task_scan_max entry): period, tseq, seq, jif: a placement when tseq == seq (the placement
  has just copied the mm's seq into the task) and it did not come from task_numa_work
- tl_tsmr (its return): ret, the ceiling computed (for the RSS then)
"""
from __future__ import annotations

import json
import re
import shlex
import shutil
import struct
import subprocess
import tempfile
from pathlib import Path

import pandas as pd

from ..errors import ConfigError

PROBES = ("tl_tnw", "tl_tnwr", "tl_tsm", "tl_tsmr")
TASK_FIELDS = ("numa_scan_period", "numa_scan_period_max", "numa_scan_seq", "numa_work", "mm")
MM_FIELDS = ("numa_scan_seq", "numa_next_scan")
OFFSETS_FILE = "scan-offsets.json"


# ---------------------------------------------------------------------------------------------
# struct offsets from the kernel's BTF

_MAGICS = ((b"\x28\xb5\x2f\xfd", ["zstd", "-dcq"]), (b"\xfd7zXZ\x00", ["xz", "-dcq"]),
           (b"\x1f\x8b\x08\x00", ["gzip", "-dcq"]))


def vmlinux_from_bzimage(bzimage: Path, dest: Path) -> Path:
    """The ELF vmlinux inside a bzImage (its compressed payload, decompressed with the tool of its
    format; trailing bytes after the stream are ignored), written to `dest`."""
    data = bzimage.read_bytes()
    for magic, argv in _MAGICS:
        i = data.find(magic)
        if i < 0 or shutil.which(argv[0]) is None:
            continue
        out = subprocess.run(argv, input=data[i:], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL).stdout
        if out[:4] == b"\x7fELF":
            dest.write_bytes(out)
            return dest
    raise ConfigError(f"--trace-scan: cannot find a zstd/xz/gzip vmlinux in {bzimage}")


def btf_struct_offsets(btf: bytes, wanted: dict[str, tuple[str, ...]]) -> dict[str, dict[str, int]]:
    """Byte offsets of members of structs from raw BTF (anonymous struct/union members flattened):
    {struct: {member: offset}} for the `wanted` members of each struct."""
    magic, _ver, _flags, hlen, toff, tlen, soff, slen = struct.unpack_from("<HBBIIIII", btf)
    if magic != 0xEB9F:
        raise ConfigError("--trace-scan: the kernel's .BTF section is not BTF")
    types, strs = btf[hlen + toff:hlen + toff + tlen], btf[hlen + soff:hlen + soff + slen]

    def name(o):
        return strs[o:strs.index(b"\0", o)].decode()
    table = [None]
    i = 0
    extra = {1: 4, 3: 12, 6: 8, 13: 8, 14: 4, 15: 12, 17: 4, 19: 12}   # per kind: fixed or per vlen
    per_vlen = {6, 13, 15, 19}
    while i < len(types):
        n, info, _ = struct.unpack_from("<III", types, i)
        i += 12
        vlen, kind, kflag = info & 0xFFFF, (info >> 24) & 0x1F, info >> 31
        members = []
        if kind in (4, 5):
            for _ in range(vlen):
                mn, mt, mo = struct.unpack_from("<III", types, i)
                i += 12
                members.append((name(mn), mt, (mo & 0xFFFFFF) if kflag else mo))
        elif kind in extra:
            i += extra[kind] * (vlen if kind in per_vlen else 1)
        table.append((kind, name(n), members))

    def flat(tid, base):
        for mn, mt, off in table[tid][2]:
            if mn == "" and table[mt][0] in (4, 5):
                yield from flat(mt, base + off)
            else:
                yield mn, base + off
    out = {}
    for sname, fields in wanted.items():
        tid = next((k for k, t in enumerate(table) if t and t[0] == 4 and t[1] == sname), None)
        if tid is None:
            raise ConfigError(f"--trace-scan: the kernel's BTF has no struct {sname}")
        bits = dict(flat(tid, 0))
        missing = [f for f in fields if f not in bits]
        if missing:
            raise ConfigError(f"--trace-scan: struct {sname} has no {', '.join(missing)} (CONFIG_NUMA_BALANCING off?)")
        out[sname] = {f: bits[f] // 8 for f in fields}
    return out


def scan_offsets(kernel_dir: Path, vmlinuz: Path) -> dict[str, dict[str, int]]:
    """task_struct's and mm_struct's scanner fields for the guest kernel, from its BTF; cached in
    `kernel_dir`/scan-offsets.json. A kernel without BTF is refused (module docstring)."""
    cached = kernel_dir / OFFSETS_FILE
    if cached.exists():
        return json.loads(cached.read_text())
    if shutil.which("objcopy") is None:
        raise ConfigError("--trace-scan: needs objcopy (binutils) to read the kernel's BTF")
    with tempfile.TemporaryDirectory(prefix="tierlab-btf-") as tmp:
        vm = vmlinux_from_bzimage(vmlinuz, Path(tmp) / "vmlinux")
        raw = Path(tmp) / "btf"
        subprocess.run(["objcopy", "-O", "binary", "--only-section=.BTF", str(vm), str(raw)], check=True,
                       stderr=subprocess.DEVNULL)
        btf = raw.read_bytes() if raw.exists() else b""
    if not btf:
        raise ConfigError(f"--trace-scan: the guest's kernel ({vmlinuz.parent.name}) has no BTF (CONFIG_DEBUG_INFO_BTF), "
                          "which the probes need to find the task's scan period; use Debian's kernel package "
                          "(the default --kernel)")
    offs = btf_struct_offsets(btf, {"task_struct": TASK_FIELDS, "mm_struct": MM_FIELDS})
    cached.write_text(json.dumps(offs, indent=1))
    return offs


# ---------------------------------------------------------------------------------------------
# the guest side


def _at(off: int, arg: str) -> str:
    return f"{'+' if off >= 0 else '-'}{abs(off)}({arg})"


def probe_defs(offs: dict[str, dict[str, int]]) -> list[str]:
    """kprobe_events lines for PROBES (module docstring)."""
    t, m = offs["task_struct"], offs["mm_struct"]
    w = t["numa_work"]
    mm_w = _at(t["mm"] - w, "$arg1")           # p->mm from &p->numa_work
    mm_p = _at(t["mm"], "$arg1")
    tnw = (f"period={_at(t['numa_scan_period'] - w, '$arg1')}:u32 pmax={_at(t['numa_scan_period_max'] - w, '$arg1')}:u32 "
           f"tseq={_at(t['numa_scan_seq'] - w, '$arg1')}:s32 seq={_at(m['numa_scan_seq'], mm_w)}:s32 "
           f"next={_at(m['numa_next_scan'], mm_w)}:u64")
    tnwr = (f"period={_at(t['numa_scan_period'] - w, '$arg1')}:u32 seq={_at(m['numa_scan_seq'], mm_w)}:s32 "
            f"next={_at(m['numa_next_scan'], mm_w)}:u64")
    tsm = (f"period={_at(t['numa_scan_period'], '$arg1')}:u32 tseq={_at(t['numa_scan_seq'], '$arg1')}:s32 "
           f"seq={_at(m['numa_scan_seq'], mm_p)}:s32")
    return [f"p:tl_tnw task_numa_work {tnw} jif=@jiffies_64:u64",
            f"r:tl_tnwr task_numa_work {tnwr} jif=@jiffies_64:u64",
            f"p:tl_tsm task_scan_max {tsm} jif=@jiffies_64:u64",
            "r:tl_tsmr task_scan_max ret=$retval:u32"]


def scan_probe_lines(offs: dict[str, dict[str, int]]) -> tuple[list[str], list[str], list[str], list[str]]:
    """Shell lines: set up the probes (before the 'before' dump), clear the buffer (just before the
    workload, a builtin), stop (right after it) and print the trace (at the very end, after the
    'after' dump, so that cat's faults stay out of the counters)."""
    setup = ["T=/sys/kernel/debug/tracing",
             "sprobe() { echo \"$1\" >> $T/kprobe_events 2>/dev/null || echo \"@@tierlab error kprobe '$1' refused\"; }",
             "echo 8192 > $T/buffer_size_kb"]
    setup += [f"sprobe {shlex.quote(d)}" for d in probe_defs(offs)]
    setup += [f"echo 1 > $T/events/kprobes/{p}/enable" for p in PROBES]
    start = ["echo > $T/trace"]
    stop = [f"echo 0 > $T/events/kprobes/{p}/enable" for p in PROBES]
    final = ["echo \"@@tierlab begin scantrace after\"; cat $T/trace; echo '@@tierlab end'",
             "echo \"@@tierlab begin scantrace_stats after\"; cat $T/per_cpu/cpu*/stats; echo '@@tierlab end'"]
    return setup, start, stop, final


# ---------------------------------------------------------------------------------------------
# parsing

_LINE = re.compile(r"^\s*(?P<comm>.+?)-(?P<pid>\d+)\s+\[(?P<cpu>\d+)\]\s+(?:\S+\s+)?(?P<ts>\d+\.\d+):\s+"
                   r"(?P<event>tl_\w+):\s+\((?P<where>[^)]*)\)(?P<rest>.*)$")
_KV = re.compile(r"(\w+)=(\S+)")


def parse_scan_trace(lines: list[str]) -> pd.DataFrame:
    """The probes' events from `cat trace`: one row per event with pid, comm, cpu, time_s (the
    trace clock), event and its fields (period, pmax, tseq, seq, next, jif, ret; NaN where the
    event has none), in trace order."""
    rows = []
    for ln in lines:
        m = _LINE.match(ln)
        if not m:
            continue
        row = {"pid": int(m["pid"]), "comm": m["comm"].strip(), "cpu": int(m["cpu"]), "time_s": float(m["ts"]),
               "event": m["event"], "where": m["where"].split(" <- ")[0].split("+")[0]}
        for k, v in _KV.findall(m["rest"]):
            row[k] = int(v, 0)
        rows.append(row)
    cols = ["pid", "comm", "cpu", "time_s", "event", "where", "period", "pmax", "tseq", "seq", "next", "jif", "ret"]
    df = pd.DataFrame(rows)
    for c in cols:
        if c not in df.columns:
            df[c] = pd.Series(dtype="float64")
    return df[cols]


def scan_calls(trace: pd.DataFrame, pid: int | None = None) -> pd.DataFrame:
    """task_numa_work() calls of one task (`pid`, default: the task with the most calls): entry and
    return paired, one row per call with time_s, jif, period (at entry), seq (the mm's, at entry),
    next_before / next_after (mm->numa_next_scan), scanned (the call moved next: it was not before
    numa_next_scan and won the cmpxchg) and period_after."""
    tnw = trace[trace.event == "tl_tnw"]
    if tnw.empty:
        return pd.DataFrame(columns=["time_s", "jif", "period", "seq", "next_before", "next_after", "scanned",
                                     "period_after"])
    pid = int(tnw.pid.value_counts().idxmax()) if pid is None else pid
    ev = trace[(trace.pid == pid) & trace.event.isin(["tl_tnw", "tl_tnwr"])]
    rows, cur = [], None
    for r in ev.itertuples():
        if r.event == "tl_tnw":
            cur = {"time_s": r.time_s, "jif": int(r.jif), "period": int(r.period), "seq": int(r.seq),
                   "next_before": int(r.next)}
        elif cur is not None:
            cur.update(next_after=int(r.next), scanned=int(r.next) != cur["next_before"],
                       period_after=int(r.period), seq_after=int(r.seq))
            rows.append(cur)
            cur = None
    return pd.DataFrame(rows)


def placements(trace: pd.DataFrame, pid: int | None = None) -> pd.DataFrame:
    """The task's placements: a task_scan_max() call whose return lands in task_numa_fault() (where
    task_numa_placement() is inlined; the calls from init_numa_balancing() at a clone and from
    task_numa_work() are left out, and so is the second call of one update, the +/- tenths
    branch's clamp, at the same jiffy and pass). One row each with time_s, jif, seq, period_before
    (the period the placement starts from), pmax (task_scan_max's result), and period_after (the
    period the next placement or task_numa_work call reads; None when the trace ends first)."""
    pid = int(trace[trace.event == "tl_tnw"].pid.value_counts().idxmax()) if pid is None else pid
    ev = trace[trace.pid == pid]
    rows, pending = [], None
    for r in ev.itertuples():
        if r.event == "tl_tnw":
            if rows and rows[-1]["period_after"] is None:
                rows[-1]["period_after"] = int(r.period)
        elif r.event == "tl_tsm":
            pending = r
        elif r.event == "tl_tsmr" and pending is not None:
            if r.where == "task_numa_fault":
                last = rows[-1] if rows else None
                if last is None or last["jif"] != int(pending.jif) or last["seq"] != int(pending.seq):
                    if last is not None and last["period_after"] is None:
                        last["period_after"] = int(pending.period)
                    rows.append({"time_s": pending.time_s, "jif": int(pending.jif), "seq": int(pending.seq),
                                 "period_before": int(pending.period), "pmax": int(r.ret), "period_after": None})
            pending = None
    return pd.DataFrame(rows, columns=["time_s", "jif", "seq", "period_before", "pmax", "period_after"])


# ---------------------------------------------------------------------------------------------
# the rule


def predict_periods(start_ms: int, n: int, pmax_ms: int, rule: str = "double",
                    pmin_ms: int = 0) -> list[int]:
    """The period after each of `n` placements from `start_ms`: rule 'double' (Linux's branch for no
    local and no shared fault recorded: min(pmax, 2 x period)) or 'tenths' (+3/10 of the period,
    rounded up to whole tenths, clamped to [pmin, pmax]: every recorded fault private)."""
    out, p = [], start_ms
    for _ in range(n):
        if rule == "double":
            p = min(pmax_ms, p << 1)
        else:
            p = min(max(p + 3 * (-(-p // 10)), pmin_ms), pmax_ms)
        out.append(p)
    return out


def workload_pid(guest) -> int | None:
    """The workload's thread with the most task_numa_work calls (guest.task_ids), else any task's."""
    tr = guest.scan_trace
    if tr.empty or not (tr.event == "tl_tnw").any():
        return None
    counts = tr[tr.event == "tl_tnw"].pid.value_counts()
    ours = [p for p in counts.index if p in set(guest.task_ids)]
    return int(ours[0]) if ours else int(counts.idxmax())


def rule_check(pl: pd.DataFrame) -> dict:
    """Per placement whose result is known: does the period follow Linux's doubling
    (min(pmax, 2 x before)) or the +3/10 step (model: every recorded fault private)?"""
    known = pl.dropna(subset=["period_after"])
    def follows(r, rule):
        return int(r.period_after) == predict_periods(int(r.period_before), 1, int(r.pmax), rule)[0]
    dbl = [follows(r, "double") for r in known.itertuples()]
    ten = [follows(r, "tenths") for r in known.itertuples()]
    return {"placements_known": len(known), "doubling": sum(dbl), "tenths": sum(ten)}


def scan_summary(guest) -> dict:
    """What the scanner trace says for the workload's task: its task_numa_work calls (time, jiffies,
    period, whether it scanned, the mm's pass), the placements and the period after each, and how
    many placements follow the doubling rule and the +3/10 rule."""
    pid = workload_pid(guest)
    if pid is None:
        return {"pid": None, "calls": 0, "scanned": 0, "start_ms": None, "periods_ms": [], "placements": [],
                "call_list": [], "check": {}}
    calls = scan_calls(guest.scan_trace, pid)
    pl = placements(guest.scan_trace, pid)
    start = int(calls.period.iloc[0]) if len(calls) else None
    periods = [int(p) for p in pl.period_after.dropna()]
    return {"pid": pid, "calls": len(calls), "scanned": int(calls.scanned.sum()) if len(calls) else 0,
            "start_ms": start, "periods_ms": periods,
            "placements": [{k: (None if pd.isna(v) else (float(v) if k == "time_s" else int(v)))
                            for k, v in r.items()} for r in pl.to_dict(orient="records")],
            "call_list": [{"time_s": float(r.time_s), "jif": int(r.jif), "period": int(r.period), "seq": int(r.seq),
                           "scanned": bool(r.scanned)} for r in calls.itertuples()],
            "check": rule_check(pl)}


def format_scan(guest) -> list[str]:
    """Text lines for `tierlab oracle --trace-scan`: the calls and the placements."""
    s = scan_summary(guest)
    if s["pid"] is None:
        return ["scanner trace: no task_numa_work call recorded"]
    out = [f"scanner trace (task {s['pid']}): {s['calls']} task_numa_work calls, {s['scanned']} scanned",
           "  time_s    jiffies       period_ms  mm_seq  scanned"]
    t0 = s["call_list"][0]["jif"] if s["call_list"] else 0
    for c in s["call_list"]:
        out.append(f"  {c['time_s']:8.3f}  +{c['jif'] - t0:<10d}  {c['period']:9d}  {c['seq']:6d}  {'yes' if c['scanned'] else 'no'}")
    out.append("  placements (mm_seq: period before -> after, ceiling task_scan_max):")
    for p in s["placements"]:
        after = "?" if p["period_after"] is None else p["period_after"]
        out.append(f"  {p['time_s']:8.3f}  seq {p['seq']}: {p['period_before']} -> {after} ms (max {p['pmax']})")
    c = s["check"]
    if c.get("placements_known"):
        out.append(f"  rule: {c['doubling']} of {c['placements_known']} placements doubled the period, "
                   f"{c['tenths']} added 3/10")
    return out
