"""tierlab's own guest kernel: Debian's Linux 6.12 source with a small committed config, for the
counters Debian's binary kernel lacks (CONFIG_DEBUG_TLBFLUSH's nr_tlb_*) and, later, the seeds'
patch series.

The source is Debian's `linux-source-6.12` package (/usr/src/linux-source-6.12.tar.xz, the Debian
patches already applied). The kernel is configured from nothing: `make allnoconfig` with
`kernel.config` as KCONFIG_ALLCONFIG, so every option it has is in the fragment, selected by one
that is, or an option without a prompt at its own default. Kconfig drops a requested option whose dependencies are unmet without a
word; `check_config` compares the resulting .config with the fragment and stops naming the first
option that did not survive. Everything is built in (CONFIG_MODULES off): the guest's init loads
the modules its kernel lists, and this one lists none.

The bzImage is cached under `cache_dir()/kernel/tierlab-6.12-<key>` with the key the hash of the
source package's version, the fragment's text and the patches in `patches/series` (quilt's format:
one file name a line, applied in order with `patch -p1`; none yet). A second call with the same
inputs returns the cached kernel without touching make. The build runs at nice 19 with one job
per CPU (it is background work beside the simulations), shows a progress bar over the objects it
compiles against the count of the last build, and records its wall time in `build.json`.

Pick it with `TIERLAB_ORACLE_KERNEL=tierlab-6.12` or `tierlab oracle --kernel tierlab-6.12`.

Patched variants. `tierlab-6.12+<set>` is the same kernel with the patch set `patches/<set>/`
applied after the base series (`patches/<set>/series`, quilt's format again): e.g.
`tierlab-6.12+fault-count`, seed 002's fault-count hint-fault-latency RFC, and
`tierlab-6.12+migrc`, seed 004's MIGRC series (v8, x86 patches), and
`tierlab-6.12+pagecache-promotion`, seed 000's page-cache promotion RFC (v3). Each set is a
`PatchSet` in PATCH_SETS, which also says what the patched kernel is to the model: the model
knobs its code fixes (applied to the model's side of every comparison, refused if set otherwise),
the knobs 6.12 lacks that it has a path for, and the knobs of 6.12 it removes. A variant builds
with LOCALVERSION `-tierlab-<set>` (uname -r names it) and is cached apart under
`tierlab-6.12+<set>-<key>`, its key the plain kernel's inputs plus its LOCALVERSION and its own
patches (name and bytes); the plain kernel's key is computed as before, so a built plain kernel
stays valid.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import ConfigError, TierlabError
from .build import GuestKernel, Unavailable, _digest, _kernel_from_dir, _run, cache_dir, require_tool

NAME = "tierlab-6.12"          # the kernel choice that means this kernel
SOURCE_PACKAGE = "linux-source-6.12"
SOURCE_TARBALL = Path("/usr/src/linux-source-6.12.tar.xz")
FRAGMENT = Path(__file__).parent / "kernel.config"
PATCH_DIR = Path(__file__).parent / "patches"
BASE_CONFIG = "allnoconfig"    # everything off but what the fragment asks for (and what that selects)
LOCALVERSION = "-tierlab"      # uname -r: 6.12.N-tierlab
BUILD_NICE = 19
# The progress bar's total before any build has run here: the CC/AS steps of 6.12.117 with the
# first kernel.config (counted 2026-11-28). Later builds use the count of the last one.
ESTIMATED_STEPS = 1181
# Host tools the build runs, with the Debian package that has each.
BUILD_TOOLS = (("make", "make"), ("gcc", "gcc"), ("flex", "flex"), ("bison", "bison"), ("bc", "bc"),
               ("perl", "perl"), ("xz", "xz-utils"), ("patch", "patch"))
BUILD_HEADERS = (("/usr/include/gelf.h", "libelf-dev"),)     # objtool (the ORC unwinder) reads ELF
_STEP = re.compile(r"^\s+(CC|AS)\s")
_OPTION = re.compile(r"^(CONFIG_[A-Za-z0-9_]+)=(.+)$")
_NOT_SET = re.compile(r"^# (CONFIG_[A-Za-z0-9_]+) is not set$")


@dataclass(frozen=True)
class PatchSet:
    """A named patch set (`patches/<name>/series`) and what the kernel it makes means to the model."""
    name: str                      # tierlab-6.12+<name>
    title: str                     # the series as posted (subject, author, date)
    model_knobs: dict = field(default_factory=dict)   # model knobs the patched code fixes (name -> value)
    knob_paths: dict = field(default_factory=dict)    # knobs Linux 6.12 lacks that this kernel has (name -> path)
    removed: tuple = ()            # knobs of Linux 6.12 this kernel no longer has

    @property
    def kernel_name(self) -> str:
        return f"{NAME}+{self.name}"

    @property
    def localversion(self) -> str:
        return f"{LOCALVERSION}-{self.name}"

    @property
    def patch_dir(self) -> Path:
        return PATCH_DIR / self.name


PATCH_SETS = {s.name: s for s in (
    PatchSet("fault-count",
             "Bharata B Rao, [RFC PATCH 0/2] Hot page promotion optimization for large address space "
             "(2024-03-27; seed 002): fault-count based NUMA hint fault latency, and the restamp of "
             "already PROT_NONE entries during scanning",
             model_knobs={"hint_fault_latency": "fault_count", "scan_restamp_protnone": 1},
             knob_paths={"fault_count_threshold": "/sys/kernel/debug/sched/numa_balancing/fault_count_threshold"},
             removed=("hot_threshold_ms",)),
    PatchSet("migrc",
             "Byungchul Park, [PATCH v8 0/8] Reduce TLB flushes by 94% by improving folio migration "
             "(2024-02-19; seed 004): MIGRC, which defers the TLB flush of a demotion or NUMA promotion of a "
             "small folio mapped only by clean read-only PTEs, keeping the source folio until a later flush "
             "covers its CPUs, a write fault or allocation pressure frees it; no knob (the kernel runs it on)",
             model_knobs={"migrc": 1}),
    PatchSet("pagecache-promotion",
             "Gregory Price, [RFC v3 PATCH 0/5] Promotion of Unmapped Page Cache Folios. (six patches; "
             "2025-01-07; seed 000): folio_mark_accessed() on an active, referenced page-cache folio of a "
             "lower tier queues it on the task's list (capped at the promotion rate limit's number of pages) "
             "for a task_work that migrates the list to the local node; switch "
             "/sys/kernel/mm/numa/pagecache_promotion_enabled (default off), classic LRU only",
             model_knobs={"pagecache_promotion_cap": "rate_limit", "pagecache_promotion_order": "add_tail",
                          "pagecache_promotion_lru_gen": "off"},
             knob_paths={"pagecache_promotion_enabled": "/sys/kernel/mm/numa/pagecache_promotion_enabled"}),
)}


def kernel_names() -> list[str]:
    """Every name of tierlab's kernels: the plain build and each patched variant."""
    return [NAME] + [s.kernel_name for s in PATCH_SETS.values()]


def patch_set_of(name: str | None, key: str = "--kernel") -> PatchSet | None:
    """The patch set a kernel name picks: None for the plain `tierlab-6.12` and for anything that
    is not one of tierlab's kernels (a Debian package name); a `tierlab-6.12+<set>` whose set is
    unknown stops, naming `key` and the accepted names."""
    if not name or not name.startswith(NAME):
        return None
    if name == NAME:
        return None
    if not name.startswith(NAME + "+") or name[len(NAME) + 1:] not in PATCH_SETS:
        raise ConfigError(f"{key}: {name!r} is not one of tierlab's kernels; accepted: {', '.join(kernel_names())}")
    return PATCH_SETS[name[len(NAME) + 1:]]


class KernelConfigError(TierlabError):
    """The config fragment cannot be read, or the configured kernel lacks an option it asks for."""


# ---------------------------------------------------------------------------------------------
# the config


def parse_config(text: str, source: str = "kernel.config") -> dict[str, str]:
    """Option -> value of a Kconfig file or fragment: `CONFIG_X=value` lines, and `# CONFIG_X is
    not set` as 'n'. Other comments and blank lines are skipped; anything else stops, naming the
    line."""
    out: dict[str, str] = {}
    for i, line in enumerate(text.splitlines(), 1):
        s = line.strip()
        m = _OPTION.match(s)
        if m:
            out[m.group(1)] = m.group(2)
            continue
        m = _NOT_SET.match(s)
        if m:
            out[m.group(1)] = "n"
            continue
        if s and not s.startswith("#"):
            raise KernelConfigError(f"{source}:{i}: {s!r} is not a config line; accepted: CONFIG_NAME=value, "
                                    "'# CONFIG_NAME is not set', comments starting with '#', blank lines")
    return out


def check_config(fragment: dict[str, str], config: dict[str, str], source: str = "kernel.config") -> None:
    """Stop naming the first option of `fragment` whose value the configured kernel (`config`) does
    not have. An option missing from .config is off ('n')."""
    for name, want in fragment.items():
        got = config.get(name, "n")
        if got != want:
            raise KernelConfigError(
                f"{source}: {name}={want} was asked for but the configured kernel has {name}={got}: Kconfig "
                f"dropped it because its dependencies are unmet (or no such option exists in this source); "
                f"add what its 'depends on' needs to {source}")


# ---------------------------------------------------------------------------------------------
# inputs and the cache key


def source_version() -> str:
    """The installed linux-source-6.12 package's version (e.g. 6.12.117-1~deb12u1)."""
    if not SOURCE_TARBALL.exists():
        raise Unavailable(f"{SOURCE_TARBALL} not found; install the Debian package {SOURCE_PACKAGE} "
                          f"(apt-get install {SOURCE_PACKAGE})")
    require_tool("dpkg-query", "dpkg")
    r = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", SOURCE_PACKAGE], capture_output=True, text=True)
    if r.returncode != 0 or not r.stdout.strip():
        raise Unavailable(f"{SOURCE_TARBALL} exists but dpkg does not know {SOURCE_PACKAGE}; reinstall it "
                          f"(apt-get install --reinstall {SOURCE_PACKAGE})")
    return r.stdout.strip()


def patch_series(patch_dir: Path = PATCH_DIR) -> list[Path]:
    """The patches of `patch_dir/series` in order (none when there is no series file)."""
    series = patch_dir / "series"
    if not series.exists():
        return []
    out = []
    for i, line in enumerate(series.read_text().splitlines(), 1):
        name = line.split("#", 1)[0].strip()
        if not name:
            continue
        p = patch_dir / name
        if not p.is_file():
            raise KernelConfigError(f"{series}:{i}: patch {name!r} not found in {patch_dir}")
        out.append(p)
    return out


def kernel_key(version: str, fragment_text: str, patches: list[tuple[str, bytes]],
               localversion: str = LOCALVERSION) -> str:
    """The cache key: the source version, the fragment's text, the LOCALVERSION and each patch
    (name and bytes). The plain kernel's key is what it always was (its LOCALVERSION, its series)."""
    return _digest(BASE_CONFIG, localversion, version, fragment_text, *[x for p in patches for x in p])


def all_patches(pset: PatchSet | None = None) -> list[Path]:
    """The patches a kernel applies, in order: the base series, then the set's."""
    return patch_series() + (patch_series(pset.patch_dir) if pset else [])


def patch_inputs(pset: PatchSet | None = None) -> list[tuple[str, bytes]]:
    """(name, bytes) of each patch for the key: a base patch by its file name (as always), a set's
    as <set>/<file name>."""
    out = [(p.name, p.read_bytes()) for p in patch_series()]
    if pset is not None:
        out += [(f"{pset.name}/{p.name}", p.read_bytes()) for p in patch_series(pset.patch_dir)]
    return out


def variant_key(version: str, fragment_text: str, pset: PatchSet | None = None) -> str:
    """The cache key of the plain kernel (pset None) or of a patched variant."""
    if pset is None:
        return kernel_key(version, fragment_text, patch_inputs())
    return kernel_key(version, fragment_text, patch_inputs(pset), pset.localversion)


def kernel_dir(key: str, pset: PatchSet | None = None) -> Path:
    return cache_dir() / "kernel" / f"{pset.kernel_name if pset else NAME}-{key}"


def build_hint(pset: PatchSet | None = None) -> str:
    """The command that builds (and caches) a kernel, for skip messages."""
    arg = f', patch_set="{pset.name}"' if pset else ""
    return f"python -c 'from tierlab.oracle import kernel; kernel.ensure_own_kernel(print{arg})'"


def cached_kernel(pset: PatchSet | str | None = None) -> GuestKernel | None:
    """Our kernel (or the variant with patch set `pset`) for the current inputs if it is already
    built, else None (builds nothing)."""
    if isinstance(pset, str):
        pset = PATCH_SETS[pset]
    try:
        key = variant_key(source_version(), FRAGMENT.read_text(), pset)
    except Unavailable:
        return None
    return _kernel_from_dir(kernel_dir(key, pset))


# ---------------------------------------------------------------------------------------------
# building


def _require_build_tools() -> None:
    for tool, package in BUILD_TOOLS:
        require_tool(tool, package)
    for header, package in BUILD_HEADERS:
        if not os.path.exists(header):
            raise Unavailable(f"{header} not found; install the Debian package {package} (apt-get install {package})")


def _last_steps() -> int:
    """Objects compiled by the most recent build of our kernel here, or the estimate."""
    stats = sorted((cache_dir() / "kernel").glob(f"{NAME}-*/build.json"), key=lambda p: p.stat().st_mtime)
    for p in reversed(stats):
        try:
            return int(json.loads(p.read_text())["steps"])
        except (ValueError, KeyError):
            continue
    return ESTIMATED_STEPS


def _make(argv: list[str], cwd: Path, log_path: Path, total: int, what: str) -> int:
    """Run make, its output to `log_path`, with a progress bar over the CC/AS lines; the count."""
    from tqdm import tqdm
    steps = 0
    with open(log_path, "a") as logf, tqdm(total=total, unit="obj", desc=what, file=sys.stderr,
                                           dynamic_ncols=True, leave=True) as bar:
        proc = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                errors="replace")
        for line in proc.stdout:
            logf.write(line)
            if _STEP.match(line):
                steps += 1
                if steps > bar.total:
                    bar.total = steps
                bar.update(1)
        proc.wait()
    if proc.returncode != 0:
        tail = log_path.read_text(errors="replace")[-2000:]
        raise Unavailable(f"building {what} failed (`{' '.join(argv)}`, status {proc.returncode}); "
                          f"the log is {log_path}; its tail:\n{tail}")
    return steps


def ensure_own_kernel(log=None, jobs: int | None = None, patch_set: PatchSet | str | None = None) -> GuestKernel:
    """Our kernel, built on first use (minutes: see docs/oracle.md) and cached by its inputs; with
    `patch_set` (a PatchSet or its name) the variant with that set applied."""
    if isinstance(patch_set, str):
        if patch_set not in PATCH_SETS:
            raise ConfigError(f"patch_set: {patch_set!r} is not a patch set; accepted: {', '.join(PATCH_SETS)}")
        patch_set = PATCH_SETS[patch_set]
    pset = patch_set
    name = pset.kernel_name if pset else NAME
    localversion = pset.localversion if pset else LOCALVERSION
    version = source_version()
    fragment_text = FRAGMENT.read_text()
    fragment = parse_config(fragment_text, FRAGMENT.name)
    patches = all_patches(pset)
    key = variant_key(version, fragment_text, pset)
    kdir = kernel_dir(key, pset)
    k = _kernel_from_dir(kdir)
    if k is not None:
        return k
    _require_build_tools()
    jobs = jobs or os.cpu_count() or 1
    work = cache_dir() / "kernel-build"
    work.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    log_path = work / f"{key}.log"          # kept where a failed build's message says
    log_path.write_text("")
    with tempfile.TemporaryDirectory(dir=work, prefix=f"{key}-") as tmp:
        tmp = Path(tmp)
        if log:
            log(f"unpacking {SOURCE_TARBALL.name} ({version}) ...")
        _run(["tar", "-xJf", str(SOURCE_TARBALL), "-C", str(tmp)], f"unpacking {SOURCE_TARBALL}")
        src = next(tmp.glob("linux-source-*"), None)
        if src is None:
            raise Unavailable(f"{SOURCE_TARBALL} holds no linux-source-* directory")
        for p in patches:
            if log:
                log(f"applying {p.name} ...")
            _run(["patch", "-p1", "--forward", "--batch", "-i", str(p)], f"applying {p.name}", cwd=src)
        out = tmp / "out"
        make = ["nice", "-n", str(BUILD_NICE), "make", f"O={out}", "ARCH=x86_64", f"LOCALVERSION={localversion}"]
        _run(make + [f"KCONFIG_ALLCONFIG={FRAGMENT}", BASE_CONFIG], f"configuring {name} ({BASE_CONFIG} + {FRAGMENT.name})",
             cwd=src)
        try:
            check_config(fragment, parse_config((out / ".config").read_text(), ".config"), FRAGMENT.name)
        except KernelConfigError as e:
            shutil.copy(out / ".config", work / f"{key}.config")
            raise KernelConfigError(f"{e} (the configured .config is kept in {work / f'{key}.config'})") from None
        if log:
            log(f"building {name} ({version}, key {key}) with make -j{jobs} at nice {BUILD_NICE}; log in {log_path}")
        steps = _make(make + [f"-j{jobs}", "bzImage"], src, log_path, _last_steps(), name)
        release = _run(make + ["-s", "kernelrelease"], "reading the kernel release", cwd=src).stdout.strip()
        seconds = time.monotonic() - t0
        stage = tmp / "stage"
        (stage / "modules").mkdir(parents=True)
        shutil.copy(out / "arch" / "x86" / "boot" / "bzImage", stage / "vmlinuz")
        shutil.copy(out / ".config", stage / "config")
        shutil.move(log_path, stage / "build.log")
        (stage / "modules" / "order").write_text("")      # everything is built in
        (stage / "release").write_text(release + "\n")
        (stage / "build.json").write_text(json.dumps({
            "source_version": version, "key": key, "name": name, "localversion": localversion,
            "patch_set": pset.name if pset else None,
            "patches": [f"{p.parent.name}/{p.name}" if p.parent != PATCH_DIR else p.name for p in patches], "jobs": jobs,
            "nice": BUILD_NICE, "steps": steps, "seconds": round(seconds, 1), "cpus": os.cpu_count(),
            "bzImage_bytes": (stage / "vmlinuz").stat().st_size}, indent=2) + "\n")
        kdir.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.rename(stage, kdir)
        except OSError:          # another build finished first
            pass
    if log:
        log(f"built {name} {release} in {seconds / 60:.1f} min ({steps} objects, -j{jobs}); cached in {kdir}")
    k = _kernel_from_dir(kdir)
    assert k is not None
    return k
