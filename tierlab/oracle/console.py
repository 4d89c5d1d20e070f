"""Reading a guest's serial console into tierlab's Result shape.

The guest's run script (tierlab.oracle.guest.run_script) and programs print lines starting with
``@@tierlab``; everything else on the console (firmware, kernel messages) is ignored:

    @@tierlab kernel RELEASE                 uname -r
    @@tierlab setting PATH VALUE             a guest setting as read back
    @@tierlab knob NAME VALUE                a knob as read back (tierlab.kernel names)
    @@tierlab tier ID NODELIST               /sys/devices/virtual/memory_tiering/memory_tierID
    @@tierlab begin WHAT WHEN ... @@tierlab end
        WHAT is vmstat (/proc/vmstat), zoneinfo (/proc/zoneinfo), interrupts (the TLB line of
        /proc/interrupts), nodeN.meminfo / nodeN.vmstat (/sys/devices/system/node) or taskT.sched
        (/proc/PID/task/T/sched, after only), WHEN is before or after the workload
    @@tierlab start NS / mark TASK INDEX NS / done NS CHECKSUM     the program's clock
    @@tierlab begin kprobe_profile before|after, begin trace_stats after   the decision probes
        (guest.DECISION_PROBES, when the run asked for them): numa_should_migrate_calls and
        numa_latency_rejects in `counters`
    @@tierlab begin scantrace after, begin scantrace_stats after   the scanner probes (--trace-scan,
        scantrace.py): `scan_trace`
    @@tierlab exit STATUS                    the program's exit status
    @@tierlab error TEXT                     something went wrong in the guest

`parse_console(text)` returns a `GuestResult`: `counters` is every name /proc/vmstat printed, as
after - before (so event counters count the workload only; for gauges such as nr_free_pages it is
the change), `vmstat_before`/`vmstat_after` the raw values, `node_counters` the same per node from
nodeN/vmstat, `nodes` the per-node values after the workload (node vmstat names, pages) and
`meminfo` the per-node meminfo (kB), `zones` each zone's free pages, watermarks, managed pages and
lowmem protection after the workload (`zones_before`: before), `marks_s` the programs' marks in
seconds since its start.

The TLB line of /proc/interrupts ("TLB shootdowns", per CPU) counts what the kernel counts as
nr_tlb_remote_flush_received: x86's flush_tlb_func() increments irq_tlb_count and that vm event at
the same place, for every flush it runs for another CPU. Kernels without CONFIG_DEBUG_TLBFLUSH
(Debian's) have no nr_tlb_* in /proc/vmstat, so the sum over CPUs becomes that counter.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

import pandas as pd

PREFIX = "@@tierlab "
_NODE_BLOCK = re.compile(r"^node(\d+)\.(meminfo|vmstat)$")
_MEMINFO = re.compile(r"^Node\s+\d+\s+([^:]+):\s+(\d+)(?:\s+kB)?\s*$")
_VMSTAT = re.compile(r"^([a-z0-9_]+)\s+(-?\d+)\s*$")


class ConsoleError(ValueError):
    """The transcript lacks part of a result (the message says which)."""


@dataclass
class GuestResult:
    counters: pd.Series                # every /proc/vmstat name: after - before
    vmstat_before: pd.Series
    vmstat_after: pd.Series
    node_counters: pd.DataFrame        # node x nodeN/vmstat name: after - before
    nodes: pd.DataFrame                # node x nodeN/vmstat name: after
    meminfo: pd.DataFrame              # node x meminfo field (kB), after
    meminfo_before: pd.DataFrame
    marks_s: pd.DataFrame              # task, mark, time_s (since the program's start)
    zones: pd.DataFrame                # (node, zone) x free, min, low, high, promo, managed, ...: after
    zones_before: pd.DataFrame
    run_time_s: float                  # the program's start to done (guest clock; TCG time, not a machine's)
    kernel: str = ""
    knobs: dict = field(default_factory=dict)
    settings: dict = field(default_factory=dict)
    tiers: dict = field(default_factory=dict)     # memory tier id -> node list text
    exit_status: int | None = None
    errors: list = field(default_factory=list)
    numa_scan_seq: int | None = None   # mm->numa_scan_seq after the workload: NUMA scanner passes completed
    # per-size THP stats (hugepages-<size>kB/stats/*) after - before, indexed like the model's Result.mthp
    mthp: pd.DataFrame = field(default_factory=pd.DataFrame)
    # --trace-scan: the scanner probes' events (scantrace.parse_scan_trace), empty without them
    scan_trace: pd.DataFrame = field(default_factory=pd.DataFrame)
    task_ids: list = field(default_factory=list)  # the workload's threads (from the taskT.sched dumps)

    def node_tier(self) -> dict[int, int]:
        """node -> memory tier id, as the guest placed them."""
        out = {}
        for tier, nodelist in self.tiers.items():
            for part in nodelist.split(","):
                if part:
                    lo, _, hi = part.partition("-")
                    for n in range(int(lo), int(hi or lo) + 1):
                        out[n] = tier
        return out

    def to_dict(self) -> dict:
        return {"kernel": self.kernel, "counters": {k: int(v) for k, v in self.counters.items()},
                "node_counters": {str(i): {k: int(v) for k, v in row.items()} for i, row in self.node_counters.iterrows()},
                "meminfo_kB": {str(i): {k: int(v) for k, v in row.items()} for i, row in self.meminfo.iterrows()},
                "marks_s": self.marks_s.to_dict(orient="list"), "run_time_s": self.run_time_s,
                "knobs": self.knobs, "settings": self.settings, "tiers": self.tiers,
                "numa_scan_seq": self.numa_scan_seq, "exit_status": self.exit_status, "errors": self.errors}


def _mthp(blocks: dict) -> pd.DataFrame:
    """`mthp.<size>kB before/after` blocks (one `stat value` line per file of hugepages-<size>kB/stats):
    after - before, index hugepages-<size>kB (smallest size first), one column per stat."""
    rows = {}
    for (what, when), body in blocks.items():
        if what.startswith("mthp.") and when == "after" and ("mthp." + what[5:], "before") in blocks:
            after, before = _pairs(body, _VMSTAT), _pairs(blocks[(what, "before")], _VMSTAT)
            rows[f"hugepages-{what[5:]}"] = {k: v - before.get(k, 0) for k, v in after.items()}
    df = pd.DataFrame.from_dict(rows, orient="index")
    return df.loc[sorted(df.index, key=lambda i: int(i[10:-2]))] if len(df) else df


def _blocks(lines: list[str]) -> dict[tuple[str, str], list[str]]:
    out: dict[tuple[str, str], list[str]] = {}
    cur = None
    for ln in lines:
        if ln.startswith(PREFIX + "begin "):
            parts = ln[len(PREFIX) + 6:].split()
            cur = (parts[0], parts[1] if len(parts) > 1 else "")
            out[cur] = []
        elif ln.startswith(PREFIX + "end"):
            cur = None
        elif cur is not None:
            out[cur].append(ln)
    return out


def _pairs(lines: list[str], pattern: re.Pattern) -> dict[str, int]:
    """name -> value for the lines `pattern` matches (group 1 the name, group 2 the number)."""
    return {m.group(1).strip(): int(m.group(2)) for m in map(pattern.match, lines) if m}


_ZONE_HEAD = re.compile(r"^Node\s+(\d+),\s+zone\s+(\S+)")
_ZONE_FIELDS = ("free", "boost", "min", "low", "high", "promo", "spanned", "present", "managed")


def _zoneinfo(lines: list[str] | None) -> pd.DataFrame:
    """/proc/zoneinfo: one row per zone (node, zone) with its pages and watermarks and
    `protection_movable`, its lowmem reserve against allocations that may use ZONE_MOVABLE (x86-64)."""
    rows, cur = [], None
    for ln in lines or []:
        m = _ZONE_HEAD.match(ln)
        if m:
            cur = {"node": int(m.group(1)), "zone": m.group(2)}
            rows.append(cur)
            continue
        if cur is None:
            continue
        words = ln.split()
        if words[:2] == ["pages", "free"]:
            cur["free"] = int(words[2])
        elif len(words) == 2 and words[0] in _ZONE_FIELDS and words[1].lstrip("-").isdigit():
            cur[words[0]] = int(words[1])
        elif words and words[0] == "protection:":
            # lowmem_reserve[] by the allocation's highest zone: DMA, DMA32, Normal, Movable, Device
            cur["protection_movable"] = int(ln.split("(")[1].rstrip(")").split(",")[3])
    df = pd.DataFrame(rows)
    return df.set_index(["node", "zone"]) if len(df) else df


def _tlb_shootdowns(lines: list[str] | None) -> int | None:
    """The sum over CPUs of /proc/interrupts' "TLB:" line, or None without one."""
    for ln in lines or []:
        words = ln.split()
        if words and words[0] == "TLB:":
            return sum(int(w) for w in words[1:] if w.isdigit())
    return None


def _frame(per_node: dict[int, dict[str, int]]) -> pd.DataFrame:
    df = pd.DataFrame.from_dict(per_node, orient="index").sort_index().fillna(0).astype("int64")
    df.index.name = "node"
    return df


def parse_console(text: str) -> GuestResult:
    """A GuestResult from a console transcript (see the module docstring)."""
    lines = [ln.rstrip("\r") for ln in text.replace("\r\n", "\n").split("\n")]
    lines = _cut_noise(lines)
    tagged = [ln for ln in lines if ln.startswith(PREFIX)]
    blocks = _blocks(lines)
    for when in ("before", "after"):
        if ("vmstat", when) not in blocks:
            raise ConsoleError(f"no /proc/vmstat dump '{when}' the workload in the transcript "
                               f"(the guest stopped early?); errors: {_errors(tagged) or 'none'}")
    before, after = _pairs(blocks[("vmstat", "before")], _VMSTAT), _pairs(blocks[("vmstat", "after")], _VMSTAT)
    if set(before) != set(after) or not before:
        raise ConsoleError("the /proc/vmstat dumps before and after differ in their names (a garbled line?)")
    names = list(after)
    vb = pd.Series(before, dtype="int64")[names]
    va = pd.Series(after, dtype="int64")[names]
    per: dict[tuple[str, str], dict[int, dict[str, int]]] = {}
    for (what, when), body in blocks.items():
        m = _NODE_BLOCK.match(what)
        if m:
            pattern = _MEMINFO if m.group(2) == "meminfo" else _VMSTAT
            per.setdefault((m.group(2), when), {})[int(m.group(1))] = _pairs(body, pattern)
    for key in (("vmstat", "before"), ("vmstat", "after"), ("meminfo", "before"), ("meminfo", "after")):
        if key not in per:
            raise ConsoleError(f"no per-node {key[0]} dump '{key[1]}' the workload in the transcript")
    nb, na = _frame(per[("vmstat", "before")]), _frame(per[("vmstat", "after")])

    counters = (va - vb).rename(None)
    tlb = [_tlb_shootdowns(blocks.get(("interrupts", when))) for when in ("before", "after")]
    if "nr_tlb_remote_flush_received" not in counters.index and None not in tlb:
        counters["nr_tlb_remote_flush_received"] = tlb[1] - tlb[0]
    res = GuestResult(counters=counters, vmstat_before=vb, vmstat_after=va,
                      node_counters=na - nb, nodes=na, meminfo=_frame(per[("meminfo", "after")]),
                      meminfo_before=_frame(per[("meminfo", "before")]),
                      zones=_zoneinfo(blocks.get(("zoneinfo", "after"))),
                      zones_before=_zoneinfo(blocks.get(("zoneinfo", "before"))),
                      marks_s=pd.DataFrame(columns=["task", "mark", "time_s"]), run_time_s=float("nan"))
    res.mthp = _mthp(blocks)
    _decisions(blocks, res)
    if ("scantrace", "after") in blocks:
        from .scantrace import parse_scan_trace
        res.scan_trace = parse_scan_trace(blocks[("scantrace", "after")])
        lost = sum(int(m.group(2)) for m in map(_STAT.match, (ln.strip() for ln in blocks.get(("scantrace_stats", "after"), [])))
                   if m and m.group(1) == "overrun")
        if lost:
            res.errors.append(f"the scanner trace lost {lost} events (ring buffer overrun)")
    for (what, when), body in blocks.items():
        if what.startswith("task") and what.endswith(".sched"):
            res.task_ids.append(int(what[4:-6]))
            for ln in body:
                if ln.startswith("mm->numa_scan_seq"):
                    res.numa_scan_seq = int(ln.split(":")[1])
    start = done = None
    marks = []
    for ln in tagged:
        word, _, rest = ln[len(PREFIX):].partition(" ")
        parts = rest.split()
        if word == "kernel" and parts:
            res.kernel = parts[0]
        elif word == "knob" and parts:
            res.knobs[parts[0]] = " ".join(parts[1:])
        elif word == "setting" and parts:
            res.settings[parts[0]] = " ".join(parts[1:])
        elif word == "tier" and len(parts) >= 1:
            res.tiers[int(parts[0])] = parts[1] if len(parts) > 1 else ""
        elif word == "start" and parts:
            start = int(parts[0])
        elif word == "done" and parts:
            done = int(parts[0])
        elif word == "mark" and len(parts) == 3:
            marks.append((int(parts[0]), int(parts[1]), int(parts[2])))
        elif word == "exit" and parts:
            res.exit_status = int(parts[0])
        elif word == "error":
            res.errors.append(rest)
    if start is not None:
        res.marks_s = pd.DataFrame([(t, i, (ns - start) / 1e9) for t, i, ns in sorted(marks)],
                                   columns=["task", "mark", "time_s"])
        if done is not None:
            res.run_time_s = (done - start) / 1e9
    return res


_PROFILE = re.compile(r"^\s*(\S+)\s+(\d+)\s+(\d+)\s*$")
_STAT = re.compile(r"^(entries|overrun):\s+(\d+)\s*$")


def _decisions(blocks: dict, res: GuestResult) -> None:
    """The decision probes' counts (guest.DECISION_PROBES), when the run had them, as the model's
    counters: numa_should_migrate_calls (tl_snm_all's hits over the workload, from kprobe_profile)
    and numa_latency_rejects (tl_snm_rej's recorded events: the ring buffer's entries + overruns
    over every CPU, the buffer cleared as the workload starts). A probe missed for want of a
    kretprobe instance (kprobe_profile's third column) is an error: the count would be short."""
    if ("kprobe_profile", "after") not in blocks:
        return
    prof = {w: {m.group(1): (int(m.group(2)), int(m.group(3)))
                for m in map(_PROFILE.match, blocks.get(("kprobe_profile", w), [])) if m} for w in ("before", "after")}
    if "tl_snm_all" not in prof["after"]:
        res.errors.append("the decision probe tl_snm_all is not in kprobe_profile")
        return
    hits, missed = prof["after"]["tl_snm_all"]
    hits0, missed0 = prof["before"].get("tl_snm_all", (0, 0))
    miss_rej = prof["after"].get("tl_snm_rej", (0, 0))[1] - prof["before"].get("tl_snm_rej", (0, 0))[1]
    if missed - missed0 or miss_rej:
        res.errors.append(f"the decision probes missed {missed - missed0} / {miss_rej} returns (kretprobe maxactive)")
    n = 0
    for ln in blocks.get(("trace_stats", "after"), []):
        m = _STAT.match(ln.strip())
        if m:
            n += int(m.group(2))
    res.counters["numa_should_migrate_calls"] = hits - hits0
    res.counters["numa_latency_rejects"] = n


def _cut_noise(lines: list[str]) -> list[str]:
    """Lines with any console noise before an @@tierlab tag cut off (a kernel message that
    interrupted a line leaves the tag mid-line)."""
    return [ln[ln.index(PREFIX):] if PREFIX in ln else ln for ln in lines]


def _errors(tagged: list[str]) -> str:
    return "; ".join(ln[len(PREFIX) + 6:] for ln in tagged if ln.startswith(PREFIX + "error"))
