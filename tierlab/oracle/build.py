"""Building the guest: the Linux 6.12 kernel and modules from Debian's package, the workload
programs (gcc -static), a busybox initramfs and an ext4 disk image holding the workload's files.

Everything is cached under `cache_dir()` (``$TIERLAB_ORACLE_CACHE`` or ``~/.cache/tierlab/oracle``),
keyed by its inputs: the kernel by its package name, the programs by their sources and the
compiler's version, the base initramfs by the kernel, busybox, programs and init script, the disk
image by the files it holds. A second run with the same inputs only boots. Per-run settings (knobs,
the workload's command line) are a tiny second cpio archive appended to the cached base (the kernel
unpacks concatenated archives in order), so they never invalidate the cache.

The kernel is Debian's binary package, or tierlab's own build of Debian's 6.12 source with a
committed config (`kernel.py`, chosen by the name `tierlab-6.12`); `ensure_kernel` gives either.

A missing piece (qemu, busybox-static, cpio, gcc's static libc, mkfs.ext4, the kernel package)
raises `Unavailable`, whose message names the piece and the package that provides it.
"""
from __future__ import annotations

import gzip
import hashlib
import lzma
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ..errors import ConfigError, TierlabError

CACHE_ENV = "TIERLAB_ORACLE_CACHE"
KERNEL_ENV = "TIERLAB_ORACLE_KERNEL"     # a package name, e.g. linux-image-6.12.117+deb12-amd64-unsigned, tierlab-6.12 or tierlab-6.12+fault-count
KERNEL_PACKAGE_RE = re.compile(r"^linux-image-6\.12\.\d+\+deb12-amd64-unsigned$")
PROGRAM_DIR = Path(__file__).parent / "programs"
# Modules the init loads, in this order, with their `depends=` resolved from the .ko files:
# crc32c_generic first because ext4 and jbd2 ask for it only as a soft dependency
# ("softdep pre: crypto-crc32c"), which busybox's insmod does not follow.
ROOT_MODULES = ("crc32c_generic", "virtio_blk", "ext4")
BUSYBOX_PATHS = ("/bin/busybox", "/usr/bin/busybox")

INIT = r"""#!/bin/busybox sh
# tierlab oracle guest init: mount, load the disk's modules (none for a kernel with them built in),
# run /run.sh (the per-run script), power off.
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t debugfs debugfs /sys/kernel/debug
for m in $(cat /lib/modules/order); do insmod /lib/modules/$m.ko || echo "@@tierlab error insmod $m"; done
echo "@@tierlab boot $(cut -d' ' -f1 /proc/uptime)"
. /run.sh
echo "@@tierlab poweroff"
poweroff -f
"""


class Unavailable(TierlabError):
    """Something the guest needs cannot be had on this machine (the message says what and how)."""


def cache_dir() -> Path:
    d = Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "tierlab" / "oracle")
    d.mkdir(parents=True, exist_ok=True)
    return d


def download_deb(package: str, what: str, log=None, note: str = "") -> Path:
    """The newest cached .deb of `package` in cache_dir()/debs, fetched with `apt-get download` the
    first time (nothing is installed). `what` names the step in an error, `note` adds to the log
    line (e.g. its size)."""
    ddir = cache_dir() / "debs"
    ddir.mkdir(parents=True, exist_ok=True)
    debs = sorted(ddir.glob(f"{package}_*.deb"))
    if not debs:
        require_tool("apt-get", "apt")
        if log:
            log(f"downloading {package}{note} ...")
        _run(["apt-get", "download", package], what, cwd=ddir)
        debs = sorted(ddir.glob(f"{package}_*.deb"))
        if not debs:
            raise Unavailable(f"apt-get download {package} left no .deb in {ddir}")
    return debs[-1]


def _digest(*parts) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p if isinstance(p, bytes) else str(p).encode())
        h.update(b"\0")
    return h.hexdigest()[:16]


def _run(argv, what: str, **kw) -> subprocess.CompletedProcess:
    try:
        r = subprocess.run(argv, capture_output=True, text=True, **kw)
    except FileNotFoundError:
        raise Unavailable(f"{what}: {argv[0]} not found") from None
    if r.returncode != 0:
        raise Unavailable(f"{what}: `{' '.join(map(str, argv))}` failed: {(r.stderr or r.stdout).strip()[-500:]}")
    return r


def require_tool(name: str, package: str) -> str:
    path = shutil.which(name) or next((p for p in (f"/usr/sbin/{name}", f"/sbin/{name}") if os.access(p, os.X_OK)), None)
    if path is None:
        raise Unavailable(f"{name} not found; install the Debian package {package} (apt-get install {package})")
    return path


# ---------------------------------------------------------------------------------------------
# kernel


@dataclass(frozen=True)
class GuestKernel:
    package: str          # the Debian package it came from, or tierlab-6.12-<key> (kernel.py)
    release: str          # uname -r, e.g. 6.12.117+deb12-amd64
    vmlinuz: Path
    config: Path
    modules: tuple[Path, ...]   # decompressed .ko files in load order (none: all built in)


def _kernel_from_dir(d: Path) -> GuestKernel | None:
    order = d / "modules" / "order"
    if not order.exists():
        return None
    release = (d / "release").read_text().strip()
    return GuestKernel(package=d.name, release=release, vmlinuz=d / "vmlinuz", config=d / "config",
                       modules=tuple(d / "modules" / f"{m}.ko" for m in order.read_text().split()))


def _version_key(name: str) -> tuple[int, ...]:
    m = re.search(r"6\.12\.(\d+)", name)
    return (int(m.group(1)),) if m else (-1,)


def kernel_choice(name: str | None = None) -> str | None:
    """The kernel named by `name` or $TIERLAB_ORACLE_KERNEL, checked, without looking anything up
    (None when neither names one: kernel_package then picks a Debian package)."""
    return kernel_package(name) if (name or os.environ.get(KERNEL_ENV)) else None


def kernel_package(name: str | None = None) -> str:
    """The kernel to use: `name`, else $TIERLAB_ORACLE_KERNEL, else the newest Debian package
    already cached (extracted or downloaded), else the newest linux-image-6.12.*+deb12-amd64-unsigned
    apt knows. A name is a package of that form, `tierlab-6.12` (our build, kernel.py) or
    `tierlab-6.12+<set>` (our build with a patch set of kernel.PATCH_SETS)."""
    from .kernel import kernel_names, patch_set_of
    key = "--kernel" if name else KERNEL_ENV
    name = name or os.environ.get(KERNEL_ENV)
    if name:
        patch_set_of(name, key)        # a tierlab-6.12+<set> with an unknown set stops here, naming the sets
        if name not in kernel_names() and not KERNEL_PACKAGE_RE.match(name):
            raise ConfigError(f"{key}: {name!r} is not a kernel the oracle can boot; accepted: "
                              f"{', '.join(kernel_names())} (tierlab's own build of linux-source-6.12, plain or "
                              "with a patch set) or a Debian package linux-image-6.12.N+deb12-amd64-unsigned")
        return name
    kdir, ddir = cache_dir() / "kernel", cache_dir() / "debs"
    cached = [p.name for p in kdir.glob("linux-image-*") if _kernel_from_dir(p)] if kdir.exists() else []
    cached += [p.name.split("_")[0] for p in ddir.glob("linux-image-*.deb")] if ddir.exists() else []
    if cached:
        return max(cached, key=_version_key)
    require_tool("apt-cache", "apt")
    out = _run(["apt-cache", "search", "--names-only", r"^linux-image-6\.12\..*amd64-unsigned$"],
               "looking up the Linux 6.12 kernel package").stdout
    names = [ln.split()[0] for ln in out.splitlines() if ln.split() and KERNEL_PACKAGE_RE.match(ln.split()[0])]
    if not names:
        raise Unavailable("no linux-image-6.12.*+deb12-amd64-unsigned package known to apt (Debian 12 "
                          "bookworm with its updates has them; run apt-get update, or set "
                          f"{KERNEL_ENV} to a package name)")
    return max(names, key=_version_key)


def _modinfo(ko: bytes, key: str) -> list[str]:
    return [v.decode() for v in re.findall(b"\0" + key.encode() + b"=([^\0]*)", ko)]


def ensure_kernel(log=None, name: str | None = None) -> GuestKernel:
    """The guest kernel (`kernel_package(name)`) and its modules: Debian's, downloaded (apt-get
    download) and extracted (dpkg -x) into the cache on first use, nothing installed on the host;
    or ours, built on first use (kernel.ensure_own_kernel)."""
    from . import kernel as own
    package = kernel_package(name)
    if package in own.kernel_names():
        return own.ensure_own_kernel(log, patch_set=own.patch_set_of(package))
    kdir = cache_dir() / "kernel" / package
    k = _kernel_from_dir(kdir)
    if k is not None:
        return k
    deb = download_deb(package, f"downloading {package}", log, " (apt-get download, ~110 MB)")
    require_tool("dpkg", "dpkg")
    with tempfile.TemporaryDirectory(dir=cache_dir()) as tmp:
        if log:
            log(f"extracting {deb.name} ...")
        _run(["dpkg", "-x", str(deb), tmp], f"extracting {deb.name}")
        boot = Path(tmp) / "boot"
        vmlinuz = next(boot.glob("vmlinuz-*"), None)
        if vmlinuz is None:
            raise Unavailable(f"{deb.name} holds no boot/vmlinuz-*")
        release = vmlinuz.name[len("vmlinuz-"):]
        mods = {p.name.split(".ko")[0].replace("-", "_"): p
                for p in (Path(tmp) / "lib" / "modules" / release).rglob("*.ko*")}
        order: list[str] = []
        blobs: dict[str, bytes] = {}

        def add(name: str):
            if name in order:
                return
            if name not in mods:
                raise Unavailable(f"{package} has no module {name}")
            p = mods[name]
            data = lzma.decompress(p.read_bytes()) if p.name.endswith(".xz") else p.read_bytes()
            for dep in ",".join(_modinfo(data, "depends")).split(","):
                if dep:
                    add(dep.replace("-", "_"))
            blobs[name] = data
            order.append(name)

        for m in ROOT_MODULES:
            add(m)
        stage = Path(tmp) / "stage"
        (stage / "modules").mkdir(parents=True)
        shutil.copy(vmlinuz, stage / "vmlinuz")
        shutil.copy(boot / f"config-{release}", stage / "config")
        for name, data in blobs.items():
            (stage / "modules" / f"{name}.ko").write_bytes(data)
        (stage / "modules" / "order").write_text("\n".join(order) + "\n")
        (stage / "release").write_text(release + "\n")
        kdir.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.rename(stage, kdir)
        except OSError:          # another run extracted it first
            pass
    k = _kernel_from_dir(kdir)
    assert k is not None
    return k


# ---------------------------------------------------------------------------------------------
# programs, busybox, initramfs


def program_sources() -> list[Path]:
    return sorted(PROGRAM_DIR.glob("*.[ch]"))


def ensure_programs(log=None) -> dict[str, Path]:
    """Every programs/*.c compiled with `gcc -static -O2` (cached by sources and gcc version)."""
    gcc = require_tool("gcc", "gcc")
    version = _run([gcc, "--version"], "gcc --version").stdout.splitlines()[0]
    srcs = program_sources()
    key = _digest(version, *[(p.name, p.read_bytes()) for p in srcs])
    out = cache_dir() / "programs" / key
    mains = [p for p in srcs if p.suffix == ".c"]
    if not all((out / p.stem).exists() for p in mains):
        tmp = Path(tempfile.mkdtemp(dir=cache_dir()))
        try:
            for src in mains:
                if log:
                    log(f"compiling {src.name} (gcc -static) ...")
                _run([gcc, "-static", "-O2", "-Wall", "-o", str(tmp / src.stem), str(src), "-lpthread", "-lm"],
                     f"compiling {src.name} statically (needs gcc and libc6-dev)")
            out.parent.mkdir(parents=True, exist_ok=True)
            if not out.exists():
                os.rename(tmp, out)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return {p.stem: out / p.stem for p in mains}


def _is_static_elf(path: Path) -> bool:
    """True if the ELF file has no PT_INTERP program header (runs without a dynamic loader)."""
    data = path.read_bytes()
    if data[:4] != b"\x7fELF" or data[4] != 2:
        return False
    phoff = int.from_bytes(data[0x20:0x28], "little")
    phentsize = int.from_bytes(data[0x36:0x38], "little")
    phnum = int.from_bytes(data[0x38:0x3a], "little")
    return all(int.from_bytes(data[phoff + i * phentsize:phoff + i * phentsize + 4], "little") != 3
               for i in range(phnum))


def find_busybox() -> Path:
    for p in BUSYBOX_PATHS:
        if os.path.exists(p) and _is_static_elf(Path(p)):
            return Path(p)
    raise Unavailable("no statically linked busybox found (apt-get install busybox-static)")


def _cpio(root: Path, out, compress: bool) -> None:
    """root's tree as a newc cpio archive (GNU cpio, --reproducible), gzip'd if `compress`."""
    cpio = require_tool("cpio", "cpio")
    names = sorted(str(p.relative_to(root)) for p in root.rglob("*"))
    r = subprocess.run([cpio, "-o", "-H", "newc", "--quiet", "--reproducible", "-R", "0:0"],
                       input="\n".join(names).encode(), cwd=root, capture_output=True)
    if r.returncode != 0:
        raise Unavailable(f"cpio failed: {r.stderr.decode().strip()}")
    out.write(gzip.compress(r.stdout, compresslevel=6, mtime=0) if compress else r.stdout)


def ensure_base_initramfs(kernel: GuestKernel, log=None) -> Path:
    """busybox, the kernel's modules, the workload programs and /init, as a cached .cpio.gz."""
    busybox = find_busybox()
    programs = ensure_programs(log)
    key = _digest(kernel.release, busybox.read_bytes(), INIT,
                  *[(m.name, m.read_bytes()) for m in kernel.modules],
                  *[(n, p.read_bytes()) for n, p in sorted(programs.items())])
    out = cache_dir() / "initramfs" / f"base-{key}.cpio.gz"
    if out.exists():
        return out
    if log:
        log("building the initramfs ...")
    with tempfile.TemporaryDirectory(dir=cache_dir()) as tmp:
        root = Path(tmp) / "root"
        for d in ("bin", "proc", "sys", "dev", "mnt", "tmp", "lib/modules"):
            (root / d).mkdir(parents=True)
        shutil.copy(busybox, root / "bin" / "busybox")
        for name, p in programs.items():
            shutil.copy(p, root / "bin" / f"tierlab-{name.replace('_', '-')}")
        for m in kernel.modules:
            shutil.copy(m, root / "lib" / "modules" / m.name)
        (root / "lib" / "modules" / "order").write_text("\n".join(m.stem for m in kernel.modules) + "\n")
        (root / "init").write_text(INIT)
        os.chmod(root / "init", 0o755)
        out.parent.mkdir(parents=True, exist_ok=True)
        part = Path(tmp) / "base.cpio.gz"
        with open(part, "wb") as f:
            _cpio(root, f, compress=True)
        os.replace(part, out)
    return out


def run_initramfs(base: Path, run_script: str, dest: Path) -> Path:
    """The cached base followed by a small archive holding /run.sh (this run's settings)."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "run.sh").write_text(run_script)
        with open(dest, "wb") as f:
            data = base.read_bytes()
            # the kernel looks for the next archive's cpio magic only at a 4-byte aligned offset
            # (zeros between archives are skipped)
            f.write(data + b"\0" * (-len(data) % 512))
            _cpio(root, f, compress=False)
    return dest


# ---------------------------------------------------------------------------------------------
# disk image

DISK_FORMAT = 1     # bump when the way the image is made changes


def ensure_disk(files: dict[str, int | bytes], log=None) -> Path | None:
    """An ext4 image (mkfs.ext4 -d) holding `files`: name -> size in bytes (filled with random
    bytes: no holes, so every page is read from the disk) or the file's contents (bytes); None
    when there are no files."""
    if not files:
        return None
    key = _digest(DISK_FORMAT, *sorted((k, hashlib.sha256(v).hexdigest() if isinstance(v, bytes) else v)
                                       for k, v in files.items()))
    out = cache_dir() / "disks" / f"disk-{key}.img"
    if out.exists():
        return out
    mkfs = require_tool("mkfs.ext4", "e2fsprogs")
    total = sum(len(v) if isinstance(v, bytes) else v for v in files.values())
    if log:
        log(f"making an ext4 image with {len(files)} file(s), {total / 2**20:.0f} MiB ...")
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
        stage = Path(tmp) / "files"
        stage.mkdir()
        block = os.urandom(1 << 20)
        for name, size in files.items():
            if isinstance(size, bytes):
                (stage / name).write_bytes(size)
                continue
            with open(stage / name, "wb") as f:
                left = size
                while left > 0:
                    f.write(block[:min(left, len(block))])
                    left -= len(block)
        img = Path(tmp) / "disk.img"
        with open(img, "wb") as f:
            f.truncate(int(total * 1.05) + (64 << 20))
        _run([mkfs, "-q", "-F", "-b", "4096", "-m", "0", "-L", "tierlab", "-d", str(stage), str(img)],
             "making the ext4 image (mkfs.ext4 -d needs e2fsprogs >= 1.43)")
        os.replace(img, out)
    return out
