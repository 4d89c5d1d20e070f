"""Booting the guest: a QEMU machine derived from a tierlab machine preset, the per-run script (guest
settings, knobs, the workload program) and the console transcript.

The guest machine (`guest_machine`): the preset's nodes with their capacities (after `scale`, rounded
down to 2 MiB, QEMU's granularity here), their SLIT distances, CPUs only on the preset's CPU nodes
but at most `cpus` vCPUs in all (TCG runs each vCPU as a host thread; this machine has few cores),
and HMAT latency/bandwidth entries. The model places a node in a memory tier by its `adistance`; a
6.12 guest computes a CPU-less node's adistance from HMAT as mt_perf_to_adistance() does:
576 * (latency / DRAM latency) * (DRAM bandwidth / bandwidth). So each node's HMAT bandwidth is the
preset's `bandwidth_GBps` and its latency is chosen so that this product gives the preset's
adistance (`hmat_numbers`); for a preset whose numbers already agree with its adistance this is the
preset's own latency. QEMU emulates no latency or bandwidth: these numbers only place the tiers.

Guest settings the model has no knob for are fixed to what the model does (`MODEL_GUEST_SETTINGS`),
and every knob the model reads is written, defaults included (Debian's kernel boots with
numa_balancing=1 on a NUMA machine; the model's default is 0). A suite entry can override the guest
settings (e.g. MGLRU on), which is how mechanisms the model does not have yet are added.
"""
from __future__ import annotations

import dataclasses
import shlex
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import ConfigError
from ..kernel import KNOBS, Kernel
from ..machine import Machine
from . import build
from .build import Unavailable

QEMU = "qemu-system-x86_64"
# The opt-in instruction-counting mode (`--icount`): under TCG with -icount, the guest's clock is a
# function of the instructions executed, one every 2^shift ns (shift=0: 1 ns each, so a guest
# second is 10^9 instructions), and all vCPUs run in turn in one host thread; sleep=off makes an
# idle guest's clock jump to its next timer instead of waiting in real time. Not the default: it
# changes the kswapd/direct split the suite's tables were measured with (docs/oracle.md).
ICOUNT_REPEATABLE = "shift=0,sleep=off"
MEMTIER_ADISTANCE_DRAM = 576
NODE_ALIGN = 2 << 20
DEFAULT_CPUS = 2

# What the model assumes and a 6.12 kernel must be told (path -> value, written before the knobs):
MODEL_GUEST_SETTINGS = {
    "/sys/kernel/mm/lru_gen/enabled": "0",       # the model has the classic active/inactive LRU (Debian: MGLRU on)
    "/proc/sys/vm/watermark_boost_factor": "0",  # the model does not boost watermarks after fragmentation events
}
# Kernel command line: quiet console; THP off from boot (the model's workloads fault 4 KiB folios;
# with THP on, khugepaged also raises min_free_kbytes); no zeroing on allocation (only TCG time);
# nokaslr: with physical KASLR the kernel image lands on node 0 or node 1 by chance, and node 0's
# managed memory changed by 15% between boots.
CMDLINE = ("console=ttyS0 quiet loglevel=1 panic=-1 nokaslr transparent_hugepage=never init_on_alloc=0")
# Knobs the model has that Linux 6.12 has not (the page-cache promotion RFC, the hint-fault-count RFC):
# only their defaults run.
NOT_IN_KERNEL = ("pagecache_promotion_enabled", "pagecache_promotion_cap", "pagecache_promotion_order",
                 "hint_fault_latency", "fault_count_threshold", "scan_restamp_protnone")


# ---------------------------------------------------------------------------------------------
# the machine


def guest_machine(machine: Machine, cpus: int = DEFAULT_CPUS) -> Machine:
    """`machine` as the guest is booted: capacities rounded down to 2 MiB, at most `cpus` vCPUs
    (each CPU node keeps at least one, the rest go to CPU nodes in order)."""
    cpu_nodes = [i for i, nd in enumerate(machine.nodes) if nd.cpus > 0]
    if cpus < len(cpu_nodes):
        raise ConfigError(f"cpus: {cpus} is too few; the machine has {len(cpu_nodes)} nodes with CPUs and each needs one")
    give = {i: 1 for i in cpu_nodes}
    left = cpus - len(cpu_nodes)
    for i in cpu_nodes:
        extra = min(left, machine.nodes[i].cpus - 1)
        give[i] += extra
        left -= extra
    nodes = []
    for i, nd in enumerate(machine.nodes):
        cap = nd.capacity_bytes // NODE_ALIGN * NODE_ALIGN
        if cap < 64 << 20:
            raise ConfigError(f"machine: node{i} has {nd.capacity_bytes >> 20} MiB; a guest node needs at "
                              "least 64 MiB (use a smaller --scale)")
        nodes.append(dataclasses.replace(nd, capacity_bytes=cap, cpus=give.get(i, 0)))
    return dataclasses.replace(machine, nodes=tuple(nodes))


def hmat_numbers(machine: Machine) -> list[tuple[int, int]]:
    """(latency ns, bandwidth MB/s) per node for QEMU's HMAT, such that the kernel's
    mt_perf_to_adistance() computes each node's preset adistance (see the module docstring)."""
    ref = next(nd for nd in machine.nodes if nd.cpus > 0)
    out = []
    for nd in machine.nodes:
        bw = max(1, round(nd.bandwidth_GBps * 1000))
        ratio = nd.adistance / MEMTIER_ADISTANCE_DRAM * (bw / round(ref.bandwidth_GBps * 1000))
        out.append((max(1, round(ref.rand_line_ns * ratio)), bw))
    return out


def qemu_argv(machine: Machine, kernel: Path, initrd: Path, disk: Path | None, accel: str = "tcg",
              icount: str | None = None) -> list[str]:
    """The QEMU command line for `machine` (already a `guest_machine`); `icount`: QEMU's -icount
    option (see ICOUNT_REPEATABLE), TCG only."""
    if icount and accel.split(",")[0] != "tcg":
        raise ConfigError(f"--icount: QEMU counts instructions only under TCG, not --accel {accel}; "
                          "accepted: --icount with --accel tcg (the default)")
    cpus = [nd.cpus for nd in machine.nodes]
    total_mb = sum(nd.capacity_bytes for nd in machine.nodes) >> 20
    argv = [QEMU, "-machine", "q35,hmat=on", "-cpu", "max", "-smp", str(sum(cpus)), "-m", f"{total_mb}M",
            "-nodefaults", "-display", "none", "-serial", "stdio", "-no-reboot"]
    argv += ["-accel", accel]
    if icount:
        argv += ["-icount", icount]
    first = 0
    cpu_nodes = [i for i, c in enumerate(cpus) if c]
    for i, nd in enumerate(machine.nodes):
        argv += ["-object", f"memory-backend-ram,id=m{i},size={nd.capacity_bytes >> 20}M"]
        node = f"node,nodeid={i},memdev=m{i}"
        if cpus[i]:
            node += f",cpus={first}-{first + cpus[i] - 1}"
            first += cpus[i]
        # a CPU-less node's local initiator is its nearest CPU node
        init = i if cpus[i] else min(cpu_nodes, key=lambda c: (machine.distance[i][c], c))
        argv += ["-numa", node + f",initiator={init}"]
    n = machine.nr_nodes
    for i in range(n):
        for j in range(n):
            if i != j:
                argv += ["-numa", f"dist,src={i},dst={j},val={machine.distance[i][j]}"]
    hmat = hmat_numbers(machine)
    for i in cpu_nodes:
        for j in range(n):
            lat, bw = hmat[j]
            lat = max(1, round(lat * machine.distance[i][j] / machine.distance[j][j])) if i != j and cpus[j] else lat
            for kind, val in (("access-latency", f"latency={lat}"), ("access-bandwidth", f"bandwidth={bw}M")):
                argv += ["-numa", f"hmat-lb,initiator={i},target={j},hierarchy=memory,data-type={kind},{val}"]
    argv += ["-kernel", str(kernel), "-initrd", str(initrd), "-append", CMDLINE]
    if disk is not None:
        argv += ["-drive", f"file={disk},format=raw,if=virtio,readonly=on"]
    return argv


# ---------------------------------------------------------------------------------------------
# the run script


def _fmt(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else repr(float(v))


def knob_path(name: str, pset=None) -> str | None:
    """Where the guest's kernel has knob `name` (None: nowhere it can be written): its path in
    Linux 6.12, or in the patched kernel of `pset` (a kernel.PatchSet) the set's own paths, and none
    for the knobs it removes or fixes in code."""
    knob = KNOBS[name]
    if pset is not None:
        if name in pset.knob_paths:
            return pset.knob_paths[name]
        if name in pset.removed or name in pset.model_knobs:
            return None
    if name in NOT_IN_KERNEL or not knob.where.startswith("/"):
        return None
    return knob.where


def knob_writes(kernel: Kernel, pset=None) -> list[tuple[str, str, str]]:
    """(name, path, value) for every knob to write in the guest: every knob with a sysfs/sysctl/
    debugfs path, at its value in `kernel` (min_free_kbytes only when set, else the kernel's own
    computation stands). Knobs without a path in Linux 6.12 must be at their defaults. With `pset`
    (the guest boots tierlab-6.12+<set>) the set's knobs are written at its paths, the knobs it
    removes must be at their defaults and those its code fixes at the set's values."""
    out = mthp_writes(kernel)
    set_ = kernel.to_dict()
    for name, knob in KNOBS.items():
        if name in MTHP_KNOBS:
            continue
        if pset is not None and name in pset.model_knobs:
            want = Kernel(**{name: pset.model_knobs[name]}).get(name)
            if kernel.get(name) != want:
                raise ConfigError(f"{name}: the guest's kernel {pset.kernel_name} has it fixed at "
                                  f"{pset.model_knobs[name]} by its patches; the oracle accepts only that value there")
            continue
        path = knob_path(name, pset)
        if path is None:
            if name in set_ and set_[name] != knob.default:
                where = f"{pset.kernel_name} removed it" if pset is not None and name in pset.removed else \
                    f"Linux 6.12 has no such setting ({knob.where})"
                sets = [s.kernel_name for s in _patch_sets() if name in s.knob_paths or name in s.model_knobs]
                raise ConfigError(f"{name}: {where}; the oracle runs it only at its default {_fmt(knob.default)}"
                                  + (f" (or on a kernel that has it: --kernel {' or '.join(sets)})" if sets else ""))
            continue
        if knob.default is None and name not in set_:
            continue
        out.append((name, path, _fmt(kernel.get(name))))
    # numa_balancing last: the scanner starts with its debugfs settings already in place
    out.sort(key=lambda t: t[0] == "numa_balancing")
    return out


# The anon fault order policies Linux 6.12 has (seed 001's v1/v2 were never merged; multi-size THP
# was), as the model's anon_folio_orders values, and where the mthp policy's orders go.
MTHP_KNOBS = ("anon_folio_orders", "huge_anon_orders_always")
ANON_ORDERS_IN_KERNEL = {0: "region", 1: "baseline-4k", 5: "mthp"}
THP_DIR = "/sys/kernel/mm/transparent_hugepage"
MTHP_ORDERS = range(2, 10)


def mthp_writes(kernel: Kernel) -> list[tuple[str, str, str]]:
    """The per-size THP switches (hugepages-<size>kB/enabled) for the model's anon fault order
    policy: mthp writes `always` for the orders of huge_anon_orders_always and `never` for the
    others; baseline-4k `never` for all; region (the default) leaves the guest as booted
    (transparent_hugepage=never). v1, v2 and v2-simple-order are refused."""
    pol = int(kernel.get("anon_folio_orders"))
    if pol not in ANON_ORDERS_IN_KERNEL:
        raise ConfigError(f"anon_folio_orders: Linux 6.12 has multi-size THP, not seed 001's earlier policies; "
                          f"the oracle accepts {', '.join(ANON_ORDERS_IN_KERNEL.values())}")
    if pol == 0:
        return []
    mask = int(kernel.get("huge_anon_orders_always")) if pol == 5 else 0
    return [("huge_anon_orders_always", f"{THP_DIR}/hugepages-{4 << o}kB/enabled",
             "always" if mask >> o & 1 else "never") for o in MTHP_ORDERS]


def _device_path(path: str, disk: bool) -> str:
    """A knob path of the block device files live on (/sys/block/<dev>/...): the guest's disk
    (vda), or '' when the guest has none (the files are then in its initramfs)."""
    if "<dev>" not in path:
        return path
    return path.replace("<dev>", "vda") if disk else ""


def _patch_sets():
    from .kernel import PATCH_SETS
    return PATCH_SETS.values()


# The RFC's own debugging counts (seed 002's cover letter: how often should_numa_migrate_memory()
# was invoked, and how often it refused a slow-tier folio), from two return probes on it: one whose
# filter never matches, so kprobe_profile's hit count is every call and nothing is recorded, and
# one that records only refusals of folios on the slow nodes (its third argument, src_nid), so the
# ring buffer's entries (+ overruns) count them. Linux 6.12's tiering branch refuses a slow-tier
# folio for its latency or for the promotion rate limit (a candidate past the limit); the count
# is both, and at the default limit (65,536 MB/s) the second cannot happen in this guest.
# tierlab's kernel has no CONFIG_HIST_TRIGGERS (and its config is part of the plain kernel's cache
# key), hence counts from kprobe_profile and the buffer's stats instead of a histogram.
DECISION_PROBES = ("tl_snm_all", "tl_snm_rej")


def decision_probe_lines(slow_nodes: list[int]) -> tuple[list[str], list[str], list[str]]:
    """Shell lines: set the probes up and read their hit counts (before the 'before' dump), clear
    the ring buffer (just before the workload), stop and print (right after it)."""
    if not slow_nodes:
        raise ConfigError("count_decisions: the machine has no CPU-less (slow-tier) node to count refusals on")
    src = " || ".join(f"src == {n}" for n in slow_nodes)
    setup = [
        "T=/sys/kernel/debug/tracing",
        "dprobe() { echo \"$1\" >> $T/kprobe_events 2>/dev/null || echo \"@@tierlab error kprobe '$1' refused\"; }",
        "dprobe 'r:tl_snm_all should_numa_migrate_memory ret=$retval:u8'",
        "dprobe 'r:tl_snm_rej should_numa_migrate_memory src=$arg3:s32 ret=$retval:u8'",
        "w $T/events/kprobes/tl_snm_all/filter 'ret == 2'",
        f"w $T/events/kprobes/tl_snm_rej/filter {shlex.quote(f'ret == 0 && ({src})')}",
        "w $T/events/kprobes/tl_snm_all/enable 1",
        "w $T/events/kprobes/tl_snm_rej/enable 1",
        # before the 'before' dump: the cat's own faults stay out of the workload's counters
        "echo \"@@tierlab begin kprobe_profile before\"; cat $T/kprobe_profile; echo '@@tierlab end'",
    ]
    start = ["echo > $T/trace"]      # the shell's builtin: no fork between the dump and the workload
    stop = [
        "echo 0 > $T/events/kprobes/tl_snm_all/enable; echo 0 > $T/events/kprobes/tl_snm_rej/enable",
        "echo \"@@tierlab begin kprobe_profile after\"; cat $T/kprobe_profile; echo '@@tierlab end'",
        "echo \"@@tierlab begin trace_stats after\"; cat $T/per_cpu/cpu*/stats; echo '@@tierlab end'",
    ]
    return setup, start, stop


def run_script(program: str, args: list[str], kernel: Kernel, guest_settings: dict[str, str],
               disk: bool, pset=None, decisions: list[int] | None = None, scan_offsets: dict | None = None) -> str:
    """/run.sh: mount the disk, write settings and knobs (and report them), dump the counters
    before, run the workload, dump them after. Lines the host parses start with @@tierlab.
    `decisions`: the slow nodes on which to count should_numa_migrate_memory()'s refusals
    (DECISION_PROBES; with every call), or None for no probes. `scan_offsets`: the kernel's struct
    offsets for the scanner probes (scantrace.py, --trace-scan), or None."""
    probe_setup, probe_start, probe_stop = decision_probe_lines(decisions) if decisions is not None else ([], [], [])
    probe_final = []
    if scan_offsets is not None:
        from .scantrace import scan_probe_lines
        s_setup, s_start, s_stop, probe_final = scan_probe_lines(scan_offsets)
        probe_setup, probe_start, probe_stop = probe_setup + s_setup, probe_start + s_start, probe_stop + s_stop
    lines = [
        "w() { printf '%s' \"$2\" > \"$1\" || echo \"@@tierlab error cannot write $2 to $1\"; }",
        "dump() {",
        "  echo 1 > /proc/sys/vm/stat_refresh",
        "  echo \"@@tierlab begin vmstat $1\"; cat /proc/vmstat; echo '@@tierlab end'",
        "  echo \"@@tierlab begin zoneinfo $1\"; cat /proc/zoneinfo; echo '@@tierlab end'",
        "  echo \"@@tierlab begin interrupts $1\"; grep '^ *TLB:' /proc/interrupts; echo '@@tierlab end'",
        f"  for d in {THP_DIR}/hugepages-*kB; do",
        "    echo \"@@tierlab begin mthp.${d##*hugepages-} $1\"",
        # the shell's own read, not $(cat): a fork per file would add its faults to the counters
        "    for f in $d/stats/*; do read v < $f; echo \"${f##*/} $v\"; done; echo '@@tierlab end'",
        "  done",
        "  for n in /sys/devices/system/node/node[0-9]*; do",
        "    for f in meminfo vmstat; do",
        "      echo \"@@tierlab begin ${n##*/}.$f $1\"; cat $n/$f; echo '@@tierlab end'",
        "    done",
        "  done",
        "}",
        "echo \"@@tierlab kernel $(uname -r)\"",
    ]
    if disk:
        lines.append("mount -t ext4 -o ro /dev/vda /mnt || echo '@@tierlab error cannot mount /dev/vda'")
    for path, value in guest_settings.items():
        lines.append(f"w {shlex.quote(path)} {shlex.quote(value)}")
    for name, path, value in knob_writes(kernel, pset):
        if _device_path(path, disk):
            lines.append(f"w {shlex.quote(_device_path(path, disk))} {shlex.quote(value)}")
    for path in list(guest_settings) + [path for _, path, _ in mthp_writes(kernel)]:
        lines.append(f"echo \"@@tierlab setting {path} $(cat {shlex.quote(path)})\"")
    for name in KNOBS:
        path = knob_path(name, pset)
        if path is not None and _device_path(path, disk):
            lines.append(f"echo \"@@tierlab knob {name} $(cat {shlex.quote(_device_path(path, disk))})\"")
    lines += [
        "for t in /sys/devices/virtual/memory_tiering/memory_tier*; do",
        "  echo \"@@tierlab tier ${t##*memory_tier} $(cat $t/nodelist)\"",
        "done",
        *probe_setup,
        "dump before",
        *probe_start,
        # the program stops itself (SIGSTOP) when done, so "after" sees its memory still mapped, as
        # the model's final state does; then it is killed. A program that fails exits instead.
        " ".join([shlex.quote(f"/bin/tierlab-{program}")] + [shlex.quote(a) for a in args]) + " &",
        "pid=$!",
        # polled with shell builtins only: a $(cut) or a sleep forks, and the child's faults would
        # count (~40 per fork); the 0.1 s wait is a timed read of a FIFO no one writes
        "mkfifo /tmp/tick; exec 3<>/tmp/tick",
        "while read -r _ _ s _ < /proc/$pid/stat 2>/dev/null && [ \"$s\" != T ] && [ \"$s\" != Z ]; do",
        "  read -t 0.1 -u 3 _",
        "done",
        *probe_stop,
        "if [ \"$s\" = T ]; then",
        "  echo '@@tierlab exit 0'; dump after",
        "  for t in /proc/$pid/task/*; do",
        "    echo \"@@tierlab begin task${t##*/}.sched after\"; cat $t/sched; echo '@@tierlab end'",
        "  done",
        "  kill -9 $pid; wait $pid 2>/dev/null",
        "else",
        "  wait $pid; echo \"@@tierlab exit $?\"; dump after",
        "fi",
        *probe_final,
    ]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------
# booting


@dataclass
class Boot:
    transcript: str
    wall_s: float
    argv: list[str] = field(default_factory=list)
    kernel_package: str = ""


def require_qemu() -> str:
    return build.require_tool(QEMU, "qemu-system-x86")


def boot(machine: Machine, program: str, args: list[str], files: dict, kernel: Kernel,
         guest_settings: dict[str, str] | None = None, timeout_s: float = 900, accel: str = "tcg",
         log=None, guest_kernel: str | None = None, icount: str | None = None,
         count_decisions: bool = False, trace_scan: bool = False) -> Boot:
    """Build (or take from the cache) everything, boot `machine` (a `guest_machine`) on
    `guest_kernel` (build.kernel_package's choice), run `program` with `args` over a disk holding
    `files`, and return the console transcript."""
    from .kernel import patch_set_of
    settings = dict(MODEL_GUEST_SETTINGS if guest_settings is None else guest_settings)
    pset = patch_set_of(build.kernel_choice(guest_kernel))
    slow = [i for i, nd in enumerate(machine.nodes) if nd.cpus == 0] if count_decisions else None
    script = run_script(program, args, kernel, settings, disk=bool(files), pset=pset,
                        decisions=slow)  # refuses bad knobs first
    require_qemu()
    gk = build.ensure_kernel(log, guest_kernel)
    if trace_scan:
        from .scantrace import scan_offsets
        script = run_script(program, args, kernel, settings, disk=bool(files), pset=pset, decisions=slow,
                            scan_offsets=scan_offsets(gk.vmlinuz.parent, gk.vmlinuz))
    base = build.ensure_base_initramfs(gk, log)
    disk = build.ensure_disk(files, log)
    with tempfile.TemporaryDirectory(prefix="tierlab-oracle-") as tmp:
        initrd = build.run_initramfs(base, script, Path(tmp) / "initrd")
        argv = qemu_argv(machine, gk.vmlinuz, initrd, disk, accel, icount)
        if log:
            log(f"booting {gk.release} under QEMU ({accel}{', icount ' + icount if icount else ''}): "
                + ", ".join(f"node{i} {nd.capacity_bytes >> 20} MiB cpus={nd.cpus}" for i, nd in enumerate(machine.nodes)))
        t0 = time.monotonic()
        text = run_qemu(argv, Path(tmp) / "console.txt", timeout_s)
    return Boot(transcript=text, wall_s=time.monotonic() - t0, argv=argv, kernel_package=gk.package)


def run_qemu(argv: list[str], out_path: Path, timeout_s: float) -> str:
    """Run QEMU (`argv`) to its end with the serial console in `out_path`; returns the console's
    text. A guest past `timeout_s` is killed (GuestError with the console's tail); QEMU failing is
    Unavailable."""
    with open(out_path, "wb") as out:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            tail = out_path.read_text(errors="replace")[-2000:]
            raise GuestError(f"the guest did not finish within {timeout_s:.0f} s; console tail:\n{tail}") from None
    text = out_path.read_bytes().decode(errors="replace")
    if proc.returncode != 0:
        raise Unavailable(f"{QEMU} exited with status {proc.returncode}: {text[-1500:]}")
    return text


class GuestError(RuntimeError):
    """The guest ran but did not produce a complete result (the message holds the console's tail)."""

