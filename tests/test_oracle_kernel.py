"""tierlab.oracle.kernel: the config fragment, the check that names a dropped option, the cache
key, the kernel choice; and one guest run on our kernel, only when it is already built (no test
builds a kernel: that takes many minutes, `tierlab oracle --kernel tierlab-6.12 ...` does it once)."""
from __future__ import annotations

import pytest

from tierlab.errors import ConfigError
from tierlab.oracle import build, kernel, suite


def test_parse_config_reads_values_and_not_set_lines():
    cfg = kernel.parse_config("# a comment\n\nCONFIG_NUMA=y\nCONFIG_NR_CPUS=64\n"
                              "CONFIG_LOCALVERSION=\"-x\"\n# CONFIG_MODULES is not set\n")
    assert cfg == {"CONFIG_NUMA": "y", "CONFIG_NR_CPUS": "64", "CONFIG_LOCALVERSION": "\"-x\"",
                   "CONFIG_MODULES": "n"}


def test_parse_config_names_a_bad_line():
    with pytest.raises(kernel.KernelConfigError, match=r"frag:2: 'NUMA=y' is not a config line; accepted"):
        kernel.parse_config("CONFIG_SMP=y\nNUMA=y\n", "frag")


def test_committed_fragment_asks_for_what_the_oracle_needs():
    frag = kernel.parse_config(kernel.FRAGMENT.read_text())
    for opt in ("CONFIG_NUMA", "CONFIG_NUMA_BALANCING", "CONFIG_MIGRATION", "CONFIG_ACPI_HMAT", "CONFIG_LRU_GEN",
                "CONFIG_LRU_GEN_ENABLED", "CONFIG_TRANSPARENT_HUGEPAGE", "CONFIG_VIRTIO_PCI", "CONFIG_VIRTIO_BLK",
                "CONFIG_EXT4_FS", "CONFIG_DEVTMPFS", "CONFIG_DEBUG_FS", "CONFIG_KPROBES", "CONFIG_FTRACE",
                "CONFIG_DEBUG_TLBFLUSH", "CONFIG_SCHED_DEBUG", "CONFIG_VM_EVENT_COUNTERS"):
        assert frag[opt] == "y", opt
    assert frag["CONFIG_MODULES"] == "n"           # everything built in: the init loads no modules


def test_check_config_names_a_dropped_option():
    frag = {"CONFIG_NUMA": "y", "CONFIG_DEBUG_TLBFLUSH": "y", "CONFIG_MODULES": "n"}
    kernel.check_config(frag, {"CONFIG_NUMA": "y", "CONFIG_DEBUG_TLBFLUSH": "y"})   # absent = n
    with pytest.raises(kernel.KernelConfigError, match=r"CONFIG_DEBUG_TLBFLUSH=y was asked for but the configured "
                                                       r"kernel has CONFIG_DEBUG_TLBFLUSH=n: Kconfig dropped it"):
        kernel.check_config(frag, {"CONFIG_NUMA": "y"})
    with pytest.raises(kernel.KernelConfigError, match=r"CONFIG_MODULES=n .* has CONFIG_MODULES=y"):
        kernel.check_config(frag, {"CONFIG_NUMA": "y", "CONFIG_DEBUG_TLBFLUSH": "y", "CONFIG_MODULES": "y"})
    with pytest.raises(kernel.KernelConfigError, match=r"CONFIG_NR_CPUS=64 .* has CONFIG_NR_CPUS=8"):
        kernel.check_config({"CONFIG_NR_CPUS": "64"}, {"CONFIG_NR_CPUS": "8"})


def test_cache_key_follows_version_fragment_and_patches():
    base = kernel.kernel_key("6.12.117-1~deb12u1", "CONFIG_NUMA=y\n", [])
    assert base == kernel.kernel_key("6.12.117-1~deb12u1", "CONFIG_NUMA=y\n", [])
    others = {kernel.kernel_key("6.12.118-1~deb12u1", "CONFIG_NUMA=y\n", []),
              kernel.kernel_key("6.12.117-1~deb12u1", "CONFIG_NUMA=y\nCONFIG_SMP=y\n", []),
              kernel.kernel_key("6.12.117-1~deb12u1", "CONFIG_NUMA=y\n", [("0001-a.patch", b"x")]),
              kernel.kernel_key("6.12.117-1~deb12u1", "CONFIG_NUMA=y\n", [("0001-a.patch", b"y")]),
              kernel.kernel_key("6.12.117-1~deb12u1", "CONFIG_NUMA=y\n", [("0001-b.patch", b"x")])}
    assert base not in others and len(others) == 5


def test_patch_series(tmp_path):
    assert kernel.patch_series(tmp_path) == []                       # no series file: no patches
    (tmp_path / "a.patch").write_text("x")
    (tmp_path / "b.patch").write_text("y")
    (tmp_path / "series").write_text("# MIGRC\nb.patch\n\na.patch  # second\n")
    assert [p.name for p in kernel.patch_series(tmp_path)] == ["b.patch", "a.patch"]
    (tmp_path / "series").write_text("a.patch\nc.patch\n")
    with pytest.raises(kernel.KernelConfigError, match=r"series:2: patch 'c.patch' not found"):
        kernel.patch_series(tmp_path)


def test_second_call_returns_the_cached_kernel_without_building(tmp_path, monkeypatch, cached_kernel_dir):
    monkeypatch.setenv(build.CACHE_ENV, str(tmp_path))
    monkeypatch.setattr(kernel, "source_version", lambda: "6.12.117-1~deb12u1")
    key = kernel.kernel_key("6.12.117-1~deb12u1", kernel.FRAGMENT.read_text(),
                            [(p.name, p.read_bytes()) for p in kernel.patch_series()])
    d = cached_kernel_dir(kernel.kernel_dir(key), "6.12.117-tierlab")
    k = build.ensure_kernel(name="tierlab-6.12")
    assert k.vmlinuz == d / "vmlinuz" and k.modules == () and k.release == "6.12.117-tierlab"
    assert kernel.cached_kernel() == k


def test_missing_source_names_the_package(monkeypatch, tmp_path):
    monkeypatch.setattr(kernel, "SOURCE_TARBALL", tmp_path / "linux-source-6.12.tar.xz")
    with pytest.raises(build.Unavailable, match=r"not found; install the Debian package linux-source-6.12 "
                                                r"\(apt-get install linux-source-6.12\)"):
        kernel.source_version()
    assert kernel.cached_kernel() is None          # the guest test's check: builds nothing, raises nothing


def test_kernel_choice_names_what_is_accepted(monkeypatch):
    assert build.kernel_package("tierlab-6.12") == "tierlab-6.12"
    assert build.kernel_package("linux-image-6.12.117+deb12-amd64-unsigned").startswith("linux-image-6.12.117")
    with pytest.raises(ConfigError, match=r"--kernel: 'tierlab' is not a kernel the oracle can boot; accepted: tierlab-6.12"):
        build.kernel_package("tierlab")
    monkeypatch.setenv(build.KERNEL_ENV, "linux-6.1")
    with pytest.raises(ConfigError, match=r"TIERLAB_ORACLE_KERNEL: 'linux-6.1' is not"):
        build.kernel_package()


def test_base_initramfs_lists_no_modules_for_a_kernel_with_them_built_in(tmp_path, monkeypatch):
    """Our kernel has no modules: the initramfs's /lib/modules/order is empty, so the init's insmod
    loop does nothing."""
    import gzip
    import subprocess
    try:
        build.find_busybox()
        build.require_tool("cpio", "cpio")
        build.ensure_programs()
    except build.Unavailable as e:
        pytest.skip(f"the initramfs cannot be built here: {e}")
    monkeypatch.setenv(build.CACHE_ENV, str(tmp_path))
    k = build.GuestKernel(package="tierlab-6.12-x", release="6.12.117-tierlab", vmlinuz=tmp_path / "v",
                          config=tmp_path / "c", modules=())
    out = build.ensure_base_initramfs(k)
    listing = subprocess.run(["cpio", "-it", "--quiet"], input=gzip.decompress(out.read_bytes()),
                             capture_output=True).stdout.decode().split()
    assert "lib/modules/order" in listing and not [n for n in listing if n.endswith(".ko")]
    order = subprocess.run(["cpio", "-i", "--to-stdout", "--quiet", "lib/modules/order"],
                           input=gzip.decompress(out.read_bytes()), capture_output=True).stdout
    assert order.strip() == b""


def test_demotion_entry_shows_the_tlb_counters_the_guest_has():
    """The four nr_tlb_* rows are shown (not judged) in the demotion entries; a shown row the guest's
    kernel lacks (Debian's has only the received count, from /proc/interrupts) is left out."""
    mech = suite.MECHANISMS["demotion"]
    assert set(suite.TLB_COUNTERS) <= set(mech.shown) and not set(suite.TLB_COUNTERS) & set(mech.counters)
    e = next(x for x in suite.ENTRIES if x.mechanism == "demotion")
    base = {c: 100 for c in mech.rows}
    debian = dict(base, nr_tlb_remote_flush=None, nr_tlb_local_flush_all=None, nr_tlb_local_flush_one=None)
    model = dict(base, nr_tlb_remote_flush=150)
    r = suite.EntryResult(e, guest=[debian, debian], model=model)
    names = [row["counter"] for row in r.rows()]
    assert "nr_tlb_remote_flush_received" in names and "nr_tlb_remote_flush" not in names
    r = suite.EntryResult(e, guest=[base, base], model=model)
    rows = {row["counter"]: row for row in r.rows()}
    assert set(suite.TLB_COUNTERS) <= set(rows)
    assert rows["nr_tlb_remote_flush"]["ratio"] == 1.5 and not rows["nr_tlb_remote_flush"]["judged"]


# ---- a real guest on our kernel ------------------------------------------------------------

def test_guest_on_our_kernel_has_the_tlb_counters(own_kernel):
    """A short demotion run on our kernel: demotion happens, /proc/vmstat has CONFIG_DEBUG_TLBFLUSH's
    four counters, and its received count is /proc/interrupts' TLB shootdowns within a few: the dump
    reads /proc/vmstat before /proc/interrupts, so a shootdown between the two reads counts in one
    only (seen: 2 of 162), and flush_tlb_all()'s receipts count in /proc/vmstat only."""
    import re
    from tierlab.oracle import run_oracle
    from tierlab.oracle.console import _tlb_shootdowns
    run = run_oracle("random-read", {"target": "anon", "file_size": "1536MiB", "policy": "bind:0",
                                     "accesses": 20_000}, {"demotion_enabled": 1}, machine="qemu-2node",
                     scale=8, timeout_s=300, guest_kernel=kernel.NAME)
    g = run.guest
    assert g.kernel == own_kernel.release and run.warnings == []
    assert g.counters["pgdemote_kswapd"] + g.counters["pgdemote_direct"] > 10_000
    for c in suite.TLB_COUNTERS:
        assert c in g.vmstat_after.index, c
    assert g.counters["nr_tlb_local_flush_one"] > 0

    def irq(when):
        body = re.search(rf"@@tierlab begin interrupts {when}\r?\n(.*?)@@tierlab end", run.transcript, re.S).group(1)
        return _tlb_shootdowns(body.splitlines())
    assert abs(irq("after") - irq("before") - g.counters["nr_tlb_remote_flush_received"]) <= 10
