"""Real Redis in the guest (issue #29): Debian's redis-server under a memtier-like load (kv_load.c),
so the kernel's NUMA-balancing counters can be read for seed 002's memtier run.

- `ensure_redis_layer()`: Debian's `redis-server`/`redis-tools` and the libraries apt does not
  have on the host by default (`libjemalloc2`, `liblzf1`) downloaded with `apt-get download` into
  the oracle's cache and extracted with `dpkg -x` (nothing is installed on the host). The binaries,
  every library `ldd` names (from the extracted tree or the host) and the dynamic loader go into a
  second cpio archive, cached by its contents, with the wrapper script `/bin/tierlab-redis-memtier`
  (`WRAPPER`). The kernel unpacks it after the base initramfs.
- `boot_redis()`: the base initramfs + this layer + the per-run /run.sh (guest.run_script with the
  wrapper as the program), a fresh writable ext4 disk for Redis's `dir` (BGSAVE's dump.rdb and the
  log) as /dev/vda, and QEMU as guest.qemu_argv makes it.

The wrapper brings up loopback, mounts the disk read-write on /data, starts redis-server under
tierlab-numa-exec (CPU list and memory policy), waits for PING, optionally sets up kprobe/tracepoint
histograms per process (hint faults: do_numa_page; candidates: numa_migrate_check's return value;
PTEs protected: change_prot_numa's return; migrations: mm_migrate_pages; VMA skips:
sched_skip_vma_numa), runs tierlab-kv-load with its own CPU list and policy, samples node free
memory, Redis's BGSAVE child and a few vmstat counters every `sample_s` seconds with shell builtins
only, and at the end prints Redis's INFO, numa_maps, both processes' /proc/PID/sched and the
histograms, then stops itself (SIGSTOP) so the run script's "after" dump follows.
"""
from __future__ import annotations

import os
import re
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from ..errors import ConfigError
from ..kernel import Kernel
from ..machine import Machine
from ..workloads.memtier import Memtier, jemalloc_size_class, sds_alloc_bytes
from . import build, guest
from .build import Unavailable, _digest, _run, cache_dir, download_deb, require_tool
from .console import PREFIX, _blocks, parse_console

REDIS_PACKAGES = ("redis-server", "redis-tools", "libjemalloc2", "liblzf1")
REDIS_BINARIES = ("usr/bin/redis-server", "usr/bin/redis-cli")
LIB_PATH = "/lib/x86_64-linux-gnu:/usr/lib/x86_64-linux-gnu"
DATA_DISK_MB = 2048

WRAPPER = r"""#!/bin/sh
# tierlab-redis-memtier (tierlab/oracle/redis.py): redis-server + tierlab-kv-load, then SIGSTOP.
save=none; redis_cpus=0; redis_policy=default; client_cpus=; client_policy=default
conns=8; threads=1; pipeline=32; requests=1000; key_max=9999; data_size=20000; ratio=1:1; seed=1
report_s=5; sample_s=2; trace=1; fill=0
for a in "$@"; do case "$a" in *=*) eval "${a%%=*}=\${a#*=}";; esac; done
export LD_LIBRARY_PATH=__LIB_PATH__
ip link set lo up 2>/dev/null || ifconfig lo 127.0.0.1 up
mkdir -p /data
mount -t ext4 /dev/vda /data || echo "@@tierlab error cannot mount /dev/vda read-write"
echo 1 > /proc/sys/vm/overcommit_memory
echo "@@tierlab setting /proc/sys/vm/overcommit_memory $(cat /proc/sys/vm/overcommit_memory)"
{
  echo "bind 127.0.0.1"; echo "port 6379"; echo "protected-mode no"; echo "daemonize no"
  echo "dir /data"; echo "logfile /data/redis.log"; echo "appendonly no"; echo "maxclients 10000"
  echo "enable-debug-command local"
  case "$save" in
    none) echo 'save ""';;
    default) ;;
    *) echo "save $save";;
  esac
} > /tmp/redis.conf
echo "@@tierlab begin redis.conf run"; cat /tmp/redis.conf; echo "@@tierlab end"
mkfifo /tmp/rtick; exec 5<>/tmp/rtick
/bin/tierlab-numa-exec cpus=$redis_cpus policy=$redis_policy -- /usr/bin/redis-server /tmp/redis.conf &
rpid=$!
i=0
until /usr/bin/redis-cli ping > /dev/null 2>&1; do
  i=$((i + 1)); [ $i -gt 600 ] && { echo "@@tierlab error redis-server did not answer PING"; break; }
  read -t 0.1 -u 5 _
done
echo "@@tierlab redis pid $rpid"
if [ "$fill" = 1 ]; then
  # every key SET once, in order, with NUMA balancing off; the measured run starts on a full dataset
  nb=$(cat /proc/sys/kernel/numa_balancing); echo 0 > /proc/sys/kernel/numa_balancing
  /bin/tierlab-kv-load cpus=$client_cpus policy=$client_policy conns=$conns threads=$threads pipeline=$pipeline \
    requests=$(( (key_max + conns) / conns )) key_max=$key_max data_size=$data_size ratio=1:0 sequential=1 marks=0
  echo 1 > /proc/sys/vm/stat_refresh
  echo "@@tierlab begin vmstat fill"; cat /proc/vmstat; echo "@@tierlab end"
  echo $nb > /proc/sys/kernel/numa_balancing
fi
T=/sys/kernel/debug/tracing
if [ "$trace" = 1 ]; then
  [ -d $T ] || { mount -t tracefs tracefs /sys/kernel/tracing; T=/sys/kernel/tracing; }
  probe() { echo "$1" >> $T/kprobe_events 2>/dev/null || echo "@@tierlab error kprobe '$1' refused"; }
  probe 'r:tl_check numa_migrate_check ret=$retval:s32'
  probe 'r:tl_prot change_prot_numa ret=$retval:s64'
  # where the hint faults are: the faulting address (numa_migrate_check's third argument, read at
  # entry by the return probe) in 2 MiB buckets, with the result (candidate or not)
  probe 'r:tl_addr numa_migrate_check ret=$retval:s32 addr=$arg3:x64'
  hist() { echo "$2" > $T/events/$1/trigger 2>/dev/null || echo "@@tierlab error trigger on $1 refused"; }
  hist kprobes/tl_check 'hist:keys=common_pid.execname,ret'
  hist kprobes/tl_prot 'hist:keys=common_pid.execname:vals=hitcount,ret'
  hist kprobes/tl_addr 'hist:keys=common_pid.execname,ret,addr.buckets=2097152:sort=addr'
  hist migrate/mm_migrate_pages 'hist:keys=common_pid.execname,reason:vals=hitcount,succeeded,failed'
  hist sched/sched_skip_vma_numa 'hist:keys=common_pid.execname,reason'
fi
sampler() {
  while [ ! -e /tmp/stop-sampler ]; do
    read up _ < /proc/uptime
    line="@@tierlab sample $up"
    for n in 0 1; do
      while read _ _ k v _; do [ "$k" = MemFree: ] && line="$line node${n}_free_kb=$v"; done < /sys/devices/system/node/node$n/meminfo
    done
    ch=; read ch < /proc/$rpid/task/$rpid/children 2>/dev/null
    line="$line child=${ch:-none}"
    while read k v _; do
      case $k in VmRSS:|RssAnon:) line="$line redis_${k%:}_kb=$v";; esac
    done < /proc/$rpid/status
    while read k v; do
      case $k in numa_pte_updates|numa_hint_faults|pgpromote_candidate|pgpromote_success|pgdemote_kswapd|pgdemote_direct|numa_pages_migrated) line="$line $k=$v";; esac
    done < /proc/vmstat
    echo "$line"
    read -t $sample_s -u 5 _
  done
}
sampler &
spid=$!
/bin/tierlab-kv-load cpus=$client_cpus policy=$client_policy conns=$conns threads=$threads pipeline=$pipeline \
  requests=$requests key_max=$key_max data_size=$data_size ratio=$ratio seed=$seed report_s=$report_s stop=1 &
cpid=$!
while read -r _ _ s _ < /proc/$cpid/stat 2>/dev/null && [ "$s" != T ] && [ "$s" != Z ]; do
  read -t 0.2 -u 5 _
done
: > /tmp/stop-sampler
echo "@@tierlab client pid $cpid state $s"
for p in $rpid $cpid; do
  for t in /proc/$p/task/*; do
    echo "@@tierlab begin proc$p.task${t##*/}.sched after"; cat $t/sched; echo "@@tierlab end"
  done
  echo "@@tierlab begin proc$p.numa_maps after"; cat /proc/$p/numa_maps; echo "@@tierlab end"
  echo "@@tierlab begin proc$p.maps after"; cat /proc/$p/maps; echo "@@tierlab end"
  echo "@@tierlab begin proc$p.status after"; cat /proc/$p/status; echo "@@tierlab end"
done
echo "@@tierlab begin redis.info after"
/usr/bin/redis-cli info persistence; /usr/bin/redis-cli info stats; /usr/bin/redis-cli info memory
/usr/bin/redis-cli info clients; /usr/bin/redis-cli dbsize
echo "@@tierlab end"
# where Redis's small objects are: DEBUG OBJECT prints a key's robj address ("at:0x...")
echo "@@tierlab begin redis.debug after"
for k in 0 1 2 5000 10000 15000; do /usr/bin/redis-cli debug object memtier-$k; done
echo "@@tierlab end"
echo "@@tierlab begin redis.log after"; grep -E "Background saving|DB saved|Fork|WARNING|error|Error" /data/redis.log; echo "@@tierlab end"
if [ "$trace" = 1 ]; then
  for e in kprobes/tl_check kprobes/tl_addr kprobes/tl_prot migrate/mm_migrate_pages sched/sched_skip_vma_numa; do
    echo "@@tierlab begin hist.${e##*/} after"; grep -v '^#' $T/events/$e/hist | grep .; echo "@@tierlab end"
  done
fi
kill -STOP $$
"""


def _download(packages, log=None) -> list[Path]:
    return [download_deb(pkg, f"downloading {pkg} (Debian 12 has it in main)", log, " (apt-get download)")
            for pkg in packages]


_LDD_LINE = re.compile(r"^\s*(\S+)(?:\s+=>\s+(\S+))?\s+\(0x[0-9a-f]+\)\s*$")


def _ldd(binary: Path, libdir: Path) -> dict[str, Path]:
    """guest path -> host file, for every library `ldd` resolves (the extracted packages' first)."""
    require_tool("ldd", "libc-bin")
    env = dict(os.environ, LD_LIBRARY_PATH=str(libdir))
    r = _run(["ldd", str(binary)], f"ldd {binary.name}", env=env)
    out = {}
    for ln in r.stdout.splitlines():
        if "not found" in ln:
            raise Unavailable(f"ldd {binary.name}: {ln.strip()} (a library missing on the host)")
        m = _LDD_LINE.match(ln)
        if not m:
            continue
        name, where = m.group(1), m.group(2)
        if where is None:             # the loader (or linux-vdso, which has no file)
            if name.startswith("/"):
                out[name] = Path(name).resolve()
            continue
        host = Path(where)
        guest_path = ("/usr/lib/x86_64-linux-gnu/" + host.name) if str(host).startswith(str(libdir)) \
            else "/lib/x86_64-linux-gnu/" + host.name
        out[guest_path] = host.resolve()
    return out


def ensure_redis_layer(log=None) -> Path:
    """A gzip'd cpio archive with redis-server, redis-cli, their libraries, the loader and the
    wrapper script (cached by the packages and the wrapper)."""
    debs = _download(REDIS_PACKAGES, log)
    wrapper = WRAPPER.replace("__LIB_PATH__", LIB_PATH)
    key = _digest("redis-layer-1", wrapper, *[d.name for d in debs])
    out = cache_dir() / "initramfs" / f"redis-{key}.cpio.gz"
    if out.exists():
        return out
    require_tool("dpkg", "dpkg")
    with tempfile.TemporaryDirectory(dir=cache_dir()) as tmp:
        ex = Path(tmp) / "x"
        for d in debs:
            _run(["dpkg", "-x", str(d), str(ex)], f"extracting {d.name}")
        libdir = ex / "usr" / "lib" / "x86_64-linux-gnu"
        root = Path(tmp) / "root"
        files: dict[str, Path] = {}
        for b in REDIS_BINARIES:
            src = (ex / b).resolve()
            if not src.exists():
                raise Unavailable(f"the Redis packages hold no {b}")
            files["/" + b] = src
            files.update(_ldd(src, libdir))
        for gpath, src in files.items():
            dst = root / gpath.lstrip("/")
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(src, dst)
            os.chmod(dst, 0o755)
        (root / "bin").mkdir(exist_ok=True)
        (root / "bin" / "tierlab-redis-memtier").write_text(wrapper)
        os.chmod(root / "bin" / "tierlab-redis-memtier", 0o755)
        out.parent.mkdir(parents=True, exist_ok=True)
        part = Path(tmp) / "layer.cpio.gz"
        with open(part, "wb") as f:
            build._cpio(root, f, compress=True)
        os.replace(part, out)
    return out


def _data_disk(path: Path) -> Path:
    mkfs = require_tool("mkfs.ext4", "e2fsprogs")
    with open(path, "wb") as f:
        f.truncate(DATA_DISK_MB << 20)
    _run([mkfs, "-q", "-F", "-b", "4096", "-L", "redisdata", str(path)], "making Redis's ext4 data disk")
    return path


@dataclass
class RedisBoot:
    transcript: str
    wall_s: float
    argv: list


def boot_redis(machine: Machine, args: dict, kernel: Kernel, guest_settings: dict | None = None,
               timeout_s: float = 3600, nice: int = 10, log=None) -> RedisBoot:
    """Boot `machine` (a guest.guest_machine) with Redis and kv_load; `args` go to the wrapper."""
    settings = dict(guest.MODEL_GUEST_SETTINGS if guest_settings is None else guest_settings)
    argv_words = [f"{k}={v}" for k, v in args.items()]
    script = guest.run_script("redis-memtier", argv_words, kernel, settings, disk=False)
    guest.require_qemu()
    gk = build.ensure_kernel(log)
    base = build.ensure_base_initramfs(gk, log)
    layer = ensure_redis_layer(log)
    with tempfile.TemporaryDirectory(prefix="tierlab-redis-", dir=cache_dir()) as tmp:
        tmp = Path(tmp)
        # base + Redis layer as one "base" for run_initramfs (each archive padded to 512 bytes)
        combined = tmp / "base.cpio.gz"
        data = base.read_bytes()
        combined.write_bytes(data + b"\0" * (-len(data) % 512) + layer.read_bytes())
        initrd = build.run_initramfs(combined, script, tmp / "initrd")
        disk = _data_disk(tmp / "data.img")
        argv = guest.qemu_argv(machine, gk.vmlinuz, initrd, None)
        argv += ["-drive", f"file={disk},format=raw,if=virtio"]
        if log:
            log(f"booting {gk.release} with Redis under QEMU (tcg): "
                + ", ".join(f"node{i} {nd.capacity_bytes >> 20} MiB cpus={nd.cpus}" for i, nd in enumerate(machine.nodes)))
        t0 = time.monotonic()
        text = guest.run_qemu(["nice", "-n", str(nice)] + argv, tmp / "console.txt", timeout_s)
    return RedisBoot(transcript=text, wall_s=time.monotonic() - t0, argv=argv)


# ---------------------------------------------------------------------------------------------
# reading the wrapper's output


def _hist(lines: list[str]) -> list[dict]:
    """A hist trigger's entries: [{key: value, ..., 'hitcount': n, ...}]."""
    rows = []
    for ln in lines:
        ln = ln.strip()
        if not ln.startswith("{"):
            continue
        keys, _, vals = ln.partition("}")
        row = {}
        for part in keys.strip("{ ").split(","):
            k, _, v = part.partition(":")
            row[k.strip()] = v.strip()
        for k, v in re.findall(r"(\w+):\s*(-?\d+)", vals):
            row[k] = int(v)
        rows.append(row)
    return rows


def _lines(text: str) -> list[str]:
    """The console's lines, each cut to its @@tierlab tag when it has one (console noise before it)."""
    return [ln[ln.index(PREFIX):] if PREFIX in ln else ln.rstrip("\r") for ln in text.splitlines()]


def _comm(pidname: str, parent: str | None = None) -> str:
    # "redis-server    [    123]" -> "redis-server"; with `parent` (Redis's pid), another
    # redis-server pid is a BGSAVE child (Redis 7 renames its argv, not its comm)
    comm = pidname.split("[")[0].strip() or pidname
    if parent is not None and comm == "redis-server":
        pid = pidname.split("[")[-1].strip(" ]")
        if pid != parent:
            return "redis-server (BGSAVE children)"
    return comm


# enum numa_vmaskip_reason (include/linux/sched/numa_balancing.h, 6.12)
SKIP_REASONS = {"0": "unsuitable", "1": "shared_ro", "2": "inaccessible", "3": "scan_delay", "4": "pid_inactive",
                "5": "ignore_pid", "6": "seq_completed"}


def per_process(text: str) -> dict:
    """Per command name (comm): hint faults, candidates (numa_migrate_check returned node 0),
    PTEs protected and scan calls, NUMA-misplaced migrations, VMA skips by reason."""
    lines = _lines(text)
    blocks = _blocks(lines)
    parent = next((ln.split()[-1] for ln in lines if ln.startswith(PREFIX + "redis pid ")), None)
    out: dict[str, dict] = {}

    def acc(comm, key, n):
        out.setdefault(comm, {})
        out[comm][key] = out[comm].get(key, 0) + n

    # numa_migrate_check() runs once per hint fault (do_numa_page is inlined, so it is the probe
    # point) and counts numa_hint_faults; it returns the promotion target (node 0 here) when the
    # folio passed the hot threshold (pgpromote_candidate), else NUMA_NO_NODE
    for r in _hist(blocks.get(("hist.tl_check", "after"), [])):
        ret = int(r.get("ret", "-1"))
        if ret >= 1 << 31:           # the hist prints the s32 as an unsigned 64-bit number
            ret -= 1 << 64 if ret >= 1 << 63 else 1 << 32
        comm = _comm(r.get("common_pid", "?"), parent)
        acc(comm, "hint_faults", r["hitcount"])
        if ret >= 0:
            acc(comm, "candidates", r["hitcount"])
    for r in _hist(blocks.get(("hist.tl_prot", "after"), [])):
        comm = _comm(r.get("common_pid", "?"), parent)
        acc(comm, "pte_updates", r.get("ret", 0))
        acc(comm, "change_prot_numa_calls", r["hitcount"])
    for r in _hist(blocks.get(("hist.mm_migrate_pages", "after"), [])):
        # reason: enum migrate_reason (5 MR_NUMA_MISPLACED: promotion here; 8 MR_DEMOTION)
        reason = {"5": "promote", "8": "demote"}.get(r.get("reason", "?").strip(), "reason" + r.get("reason", "?").strip())
        comm = _comm(r.get("common_pid", "?"), parent)
        acc(comm, f"{reason}_ok", r.get("succeeded", 0))
        acc(comm, f"{reason}_failed", r.get("failed", 0))
    for r in _hist(blocks.get(("hist.sched_skip_vma_numa", "after"), [])):
        reason = SKIP_REASONS.get(r.get("reason", "?").strip(), r.get("reason", "?").strip())
        acc(_comm(r.get("common_pid", "?"), parent), f"skip_{reason}", r["hitcount"])
    return out


def fault_vmas(text: str, comm: str = "redis-server") -> list[dict]:
    """Redis's hint faults and candidates per VMA (from /proc/PID/maps and the tl_addr histogram:
    the faulting address in 2 MiB buckets), largest first; the parent's faults only (a BGSAVE
    child's are left out: its VMAs are the parent's at the fork, but it has exited by then)."""
    lines = _lines(text)
    blocks = _blocks(lines)
    pid = next((ln.split()[-1] for ln in lines if ln.startswith(PREFIX + "redis pid ")), None)
    vmas = []
    for ln in blocks.get((f"proc{pid}.maps", "after"), []):
        m = re.match(r"^([0-9a-f]+)-([0-9a-f]+)\s+(\S+)\s+\S+\s+\S+\s+\S+\s*(.*)$", ln.strip())
        if m:
            vmas.append({"start": int(m.group(1), 16), "end": int(m.group(2), 16), "perms": m.group(3),
                         "name": m.group(4).strip() or "[anon]", "hint_faults": 0, "candidates": 0})
    other = {"start": 0, "end": 0, "perms": "", "name": "(not mapped at the end)", "hint_faults": 0, "candidates": 0}
    for r in _hist(blocks.get(("hist.tl_addr", "after"), [])):
        if _comm(r.get("common_pid", "?"), pid) != comm:     # the parent's only: the maps are its
            continue
        nums = re.findall(r"\d+", r.get("addr", ""))
        if not nums:
            continue
        lo = int(nums[0])
        ret = int(r.get("ret", "-1"))
        v = next((v for v in vmas if v["start"] <= lo < v["end"] or lo <= v["start"] < lo + (2 << 20)), other)
        v["hint_faults"] += r["hitcount"]
        if ret < 1 << 31:
            v["candidates"] += r["hitcount"]
    out = [dict(v, size_mb=(v["end"] - v["start"]) / 2**20) for v in vmas + [other] if v["hint_faults"]]
    return sorted(out, key=lambda v: -v["hint_faults"])


def summary(text: str) -> dict:
    """The run's numbers: vmstat deltas, ratios, ops/s, BGSAVEs, per-process split, samples."""
    g = parse_console(text)
    c = g.counters
    blocks = _blocks(_lines(text))
    lines = [ln[len(PREFIX):] for ln in _lines(text) if ln.startswith(PREFIX)]
    res = {}
    for ln in lines:
        if ln.startswith("kv-result "):
            res = {k: float(v) for k, v in (w.split("=") for w in ln.split()[1:])}
    info = {}
    for ln in blocks.get(("redis.info", "after"), []):
        k, _, v = ln.strip().partition(":")
        if v:
            info[k] = v
    log = blocks.get(("redis.log", "after"), [])
    samples = [ln for ln in lines if ln.startswith("sample ")]
    names = ("numa_pte_updates", "numa_hint_faults", "pgpromote_candidate", "pgpromote_success",
             "pgdemote_kswapd", "pgdemote_direct", "numa_pages_migrated", "pgmigrate_fail",
             "pgmigrate_success", "pgfault", "pgscan_kswapd", "pgsteal_kswapd", "pgactivate")
    cnt = {n: int(c.get(n, 0)) for n in names}
    fill = {}
    for ln in blocks.get(("vmstat", "fill"), []):
        k, _, v = ln.strip().partition(" ")
        if v.strip().lstrip("-").isdigit():
            fill[k] = int(v)
    if fill:   # the measured run only: after - the fill's end
        cnt = {n: int(g.vmstat_after.get(n, 0)) - fill.get(n, 0) for n in names}
    seqs = {}
    for (what, when), body in blocks.items():
        if what.startswith("proc") and what.endswith(".sched"):
            for ln in body:
                m = re.match(r"^mm->numa_scan_seq\s*:\s*(\d+)", ln.strip())
                if m:
                    seqs[what.split(".")[0]] = int(m.group(1))
    hf = max(cnt["numa_hint_faults"], 1)
    cand = max(cnt["pgpromote_candidate"], 1)
    return {
        "counters": cnt,
        "candidates_per_hint_fault": cnt["pgpromote_candidate"] / hf,
        "promoted_per_candidate": cnt["pgpromote_success"] / cand,
        "pte_updates_per_hint_fault": cnt["numa_pte_updates"] / hf,
        "client": res,
        "run_time_s": g.run_time_s,
        "bgsaves_started": sum("Background saving started" in ln for ln in log),
        "bgsaves_done": sum("Background saving terminated with success" in ln for ln in log),
        "redis_info": {k: info[k] for k in ("rdb_saves", "total_forks", "used_memory", "used_memory_rss",
                                            "rdb_last_bgsave_time_sec", "latest_fork_usec", "db0",
                                            "connected_clients", "mem_clients_normal",
                                            "keyspace_hits", "keyspace_misses") if k in info},
        "numa_scan_seq": seqs,
        "redis_pid": next((ln.split()[-1] for ln in lines if ln.startswith("redis pid ")), None),
        "per_process": per_process(text),
        "fault_vmas": fault_vmas(text),
        "samples": samples,
        "errors": g.errors,
        "knobs": g.knobs,
        "node_free_kb_before": {int(n): int(v) for n, v in g.meminfo_before.get("MemFree", {}).items()}
        if "MemFree" in g.meminfo_before else {},
    }


# ---------------------------------------------------------------------------------------------
# the `tierlab oracle redis-memtier` entry



def seed_002() -> dict:
    """Seed 002's default column (Redis + memtier, 6.9-era kernel, numa_balancing=2, demotion on), as
    data/hint_fault_memtier.csv has it: {metric: published}."""
    from ..reproduce import published
    pub = published("hint_fault_memtier.csv")
    col = pub[pub.experiment == "hint-fault-memtier-default"]
    return dict(zip(col.metric, col.published.astype(float)))


# The cases (wrapper arguments); --param overrides any of them.
CASES = {
    "no-fork": {"save": "none"},                       # redis-server --save "" --appendonly no
    "bgsave-default": {"save": "default"},             # Redis 7's built-in 3600 1 300 100 60 10000
    "bgsave-continuous": {"save": "1 1"},              # a BGSAVE child alive most of the time, as the
                                                       # seed's 205 GB snapshots (minutes each, 60 s apart) were
    "client-memory": {"save": "none", "conns": 48, "pipeline": 400},   # in-flight SETs ~half the dataset
    # every key SET once with NUMA balancing off first: the measured run starts on a full heap
    "no-fork-filled": {"save": "none", "fill": 1},
    "bgsave-continuous-filled": {"save": "1 1", "fill": 1},
}
DATA_SIZE = Memtier.params["data_size"].default       # memtier's -d, the seed's 20,000 bytes
VALUE_ALLOC = jemalloc_size_class(sds_alloc_bytes(DATA_SIZE))   # a value's allocation (20480)
DATASET_PER_NODE0 = 1.6  # the seed: 205 GB of values over a ~126 GB DRAM node
SETS_PER_KEY = 12        # the seed: 128 M SETs over 10 M keys
# hot_threshold_ms for the guest: the seed's mean key re-access (~190 s) against its threshold
# (1000 ms, auto-raised to 2 s) is ~95; the guest re-accesses a key every ~7 s at scale 1/4
GUEST_HOT_THRESHOLD_MS = 50


def case_args(machine: Machine, case: str, params: dict) -> dict:
    """The wrapper's arguments for `case` on `machine` (a guest_machine), `params` on top: unless
    given, a key space whose values (jemalloc's allocation of data_size bytes) are 1.6x node 0, and
    12 SETs per key (as many GETs)."""
    if case not in CASES:
        raise ConfigError(f"redis-memtier: case {case!r}; accepted: {', '.join(CASES)}")
    a = {"conns": 8, "pipeline": 32, "threads": 1, "data_size": DATA_SIZE, "ratio": "1:1", "report_s": 10,
         "sample_s": 5, "redis_cpus": 0, "client_cpus": 1 if machine.nodes[0].cpus > 1 else 0,
         "redis_policy": "default", "client_policy": "default", "trace": 1, **CASES[case]}
    a.update({k: v for k, v in params.items() if k != "case"})
    value_alloc = jemalloc_size_class(sds_alloc_bytes(int(a["data_size"])))
    keys = int(params.get("keys", DATASET_PER_NODE0 * machine.nodes[0].capacity_bytes // value_alloc))
    a.pop("keys", None)
    a.setdefault("key_max", keys - 1)
    a.setdefault("requests", 2 * SETS_PER_KEY * (int(a["key_max"]) + 1) // int(a["conns"]))
    return a


def format_summary(name: str, s: dict) -> str:
    c = s["counters"]
    seed = seed_002()
    rows = [("candidates / hint faults", s["candidates_per_hint_fault"], seed["pgpromote_candidate"] / seed["numa_hint_faults"]),
            ("promoted / candidates", s["promoted_per_candidate"], seed["pgpromote_success"] / seed["pgpromote_candidate"]),
            ("pte updates / hint fault", s["pte_updates_per_hint_fault"], seed["numa_pte_updates"] / seed["numa_hint_faults"])]
    out = [f"redis-memtier {name}: {s['client'].get('ops', 0):,.0f} ops in {s['run_time_s']:.0f} s of guest time "
           f"({s['client'].get('ops_per_s', 0):,.0f}/s), BGSAVEs started {s['bgsaves_started']}, "
           f"numa_scan_seq {s['numa_scan_seq']}"]
    out.append(f"{'counter':28s} {'guest':>12s} {'seed 002':>12s}")
    for k in ("numa_pte_updates", "numa_hint_faults", "pgpromote_candidate", "pgpromote_success", "pgdemote_kswapd",
              "pgdemote_direct", "numa_pages_migrated", "pgmigrate_fail"):
        sv = seed.get(k)
        out.append(f"{k:28s} {c.get(k, 0):>12,d} {'' if sv is None else f'{sv:,.0f}':>12s}")
    for label, g, sd in rows:
        out.append(f"{label:28s} {g:>12.3f} {sd:>12.3f}")
    if s.get("fault_vmas"):
        out.append("redis-server's hint faults by VMA (start, size, hint faults, candidates):")
        for v in s["fault_vmas"][:6]:
            out.append(f"  {v['start']:#x} {v['size_mb']:8.1f} MiB {v['name'][:24]:24s} {v['hint_faults']:>9,d} {v['candidates']:>7,d}")
    out.append("per process (kprobe/tracepoint histograms):")
    for comm, d in sorted(s["per_process"].items()):
        out.append(f"  {comm:18s} " + " ".join(f"{k}={v:,d}" for k, v in sorted(d.items())))
    if s["errors"]:
        out.append("guest errors: " + "; ".join(s["errors"]))
    return "\n".join(out)


def run_case(case: str, params: dict | None = None, knobs: dict | None = None, machine: str = "qemu-2node",
             scale: float = 4, cpus: int = 2, timeout_s: float = 3600, log=None) -> tuple[dict, str]:
    """Boot the guest for `case`; (summary, transcript)."""
    m = guest.guest_machine(Machine.load(machine).scaled(scale), cpus)
    k = {"numa_balancing": 2, "demotion_enabled": 1, "hot_threshold_ms": GUEST_HOT_THRESHOLD_MS, **(knobs or {})}
    args = case_args(m, case, params or {})
    b = boot_redis(m, args, Kernel(**k), timeout_s=timeout_s, log=log)
    s = summary(b.transcript)
    s.update(wall_s=b.wall_s, args=args, knobs_set=k, case=case)
    return s, b.transcript


def cmd_redis_memtier(args, params: dict, knobs: dict) -> int:
    """`tierlab oracle redis-memtier --scale 4 --param case=no-fork ...` (guest only: shown, not
    compared). --scale as given (the oracle's default is 1: node 0 of 1 GiB, ~84,000 keys, about
    4x the guest time of --scale 4, which the measured table in docs/oracle.md used)."""
    import json
    case = params.get("case", "no-fork")
    s, transcript = run_case(case, params, knobs, machine=args.machine, scale=args.scale,
                             cpus=args.cpus, timeout_s=max(args.timeout, 3600),
                             log=lambda t: print(t, file=__import__("sys").stderr, flush=True))
    if args.transcript:
        Path(args.transcript).write_text(transcript)
    if args.format == "json":
        print(json.dumps(s, indent=1, default=str))
    else:
        print(format_summary(case, s))
    return 0


def main(argv=None) -> int:
    """python -m tierlab.oracle.redis --scale 4 --set hot_threshold_ms=100 --arg key_max=19999 ..."""
    import argparse
    import json
    ap = argparse.ArgumentParser(prog="python -m tierlab.oracle.redis")
    ap.add_argument("--machine", default="qemu-2node")
    ap.add_argument("--scale", type=float, default=4)
    ap.add_argument("--cpus", type=int, default=2)
    ap.add_argument("--set", action="append", default=[], help="a kernel knob NAME=VALUE")
    ap.add_argument("--arg", action="append", default=[], help="a wrapper argument NAME=VALUE")
    ap.add_argument("--transcript", help="write the console here")
    ap.add_argument("--timeout", type=float, default=3600)
    a = ap.parse_args(argv)
    m = guest.guest_machine(Machine.load(a.machine).scaled(a.scale), a.cpus)
    knobs = {"numa_balancing": 2, "demotion_enabled": 1}
    for kv in a.set:
        k, _, v = kv.partition("=")
        knobs[k] = float(v) if "." in v else int(v)
    args = dict(kv.partition("=")[::2] for kv in a.arg)
    b = boot_redis(m, args, Kernel(**knobs), timeout_s=a.timeout, log=lambda s: print(s, flush=True))
    if a.transcript:
        Path(a.transcript).write_text(b.transcript)
    s = summary(b.transcript)
    s["wall_s"] = b.wall_s
    s["args"] = args
    s["knobs_set"] = knobs
    print(json.dumps(s, indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
