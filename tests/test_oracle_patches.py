"""tierlab.oracle's patched kernels (kernel.PATCH_SETS): the fault-count series (seed 002), the
MIGRC series (seed 004) and the page-cache promotion RFC (seed 000) parse, name their source mails
and apply cleanly to Debian's linux-source-6.12 (skipped when the source is not installed); a
variant's cache key differs from the plain kernel's and the plain key is what it always was; the
choice by name; what the guest writes and the model runs on a patched kernel; the decision
probes' counts. One guest run on each patched kernel, only when it is already built (no test
builds a kernel)."""
from __future__ import annotations

import hashlib
import re
import subprocess
import tarfile

import pytest

from tierlab.errors import ConfigError
from tierlab.kernel import Kernel
from tierlab.oracle import build, console, guest, kernel

FC = kernel.PATCH_SETS["fault-count"]
MIGRC = kernel.PATCH_SETS["migrc"]
PCP = kernel.PATCH_SETS["pagecache-promotion"]
VERSION = "6.12.117-1~deb12u1"
# the committed kernel.config's sha256 (first 16 hex digits) when the plain kernel built on
# 2026-11-28 got the key 063788966272a40a; the pin below holds while the fragment is that text
FRAGMENT_SHA = "26269ff6a4f5b16c"
PLAIN_KEY = "063788966272a40a"
# the MIGRC kernel built on 2026-11-28 (docs/oracle.md, "MIGRC on tierlab's kernel"): its key holds
# while the fragment is that text and the patches in patches/migrc/ are the ones it was built from
MIGRC_KEY = "19641718d0be8fa4"
# the page-cache promotion kernel built on 2026-11-28 (docs/oracle.md, "Page-cache promotion on
# tierlab's kernel"): the same holds for patches/pagecache-promotion/
PCP_KEY = "f9b2ffb55e37562d"


def _patched_files(p) -> list[str]:
    return re.findall(r"^\+\+\+ b/(\S+)$", p.read_text(), re.M)


def _check_mail_headers(pset, mails, author: str) -> list:
    """pset's series holds one patch per mail, in order, each headed by its mail's subject,
    Message-ID and author and a port note, and nothing in the header looks like a hunk. Returns
    the patches."""
    patches = kernel.patch_series(pset.patch_dir)
    assert [p.name[:5] for p in patches] == [f"000{i}-" for i in range(1, len(mails) + 1)]
    for p, (mid, subject) in zip(patches, mails):
        head = p.read_text().split("\ndiff --git ", 1)[0]
        assert f"Subject:    {subject}" in head and f"Message-ID: {mid}" in head, p.name
        assert f"From:       {author}" in head, p.name
        assert "Port notes, hunk by hunk" in head, p.name
        assert not re.search(r"^(---|\+\+\+|@@) ", head, re.M), p.name     # nothing in the note looks like a hunk
    return patches


def _model_kernel_of(monkeypatch, workload, params, knobs, kernel_name):
    """The Kernel run_oracle hands the guest for `kernel_name` (its boot is stopped before QEMU)."""
    from tierlab.oracle import compare
    seen = {}

    class Stop(Exception):
        pass

    def boot(m, program, args, files, kern, settings, **kw):
        seen["kernel"] = kern
        raise Stop
    monkeypatch.setattr(compare.guest_mod, "boot", boot)
    with pytest.raises(Stop):
        compare.run_oracle(workload, params, knobs, scale=4, guest_kernel=kernel_name)
    return seen["kernel"]


def _apply_to_debian_source(pset, tmp_path):
    """Extract only the files pset's patches touch from /usr/src/linux-source-6.12.tar.xz, apply the
    series with the build's own `patch` call, each without offset or fuzz, and return the tree."""
    if not kernel.SOURCE_TARBALL.exists():
        pytest.skip(f"{kernel.SOURCE_TARBALL} not installed (apt-get install {kernel.SOURCE_PACKAGE})")
    try:
        build.require_tool("patch", "patch")
    except build.Unavailable as e:
        pytest.skip(str(e))
    patches = kernel.all_patches(pset)
    wanted = {f for p in patches for f in _patched_files(p)}
    with tarfile.open(kernel.SOURCE_TARBALL) as tar:
        members = [m for m in tar if m.name.split("/", 1)[-1] in wanted]
        tar.extractall(tmp_path, members=members, filter="data")
    src = next(tmp_path.glob("linux-source-*"))
    assert {m.name.split("/", 1)[1] for m in members} == wanted
    for p in patches:
        r = subprocess.run(["patch", "-p1", "--forward", "--batch", "-i", str(p)], cwd=src, capture_output=True,
                           text=True)
        assert r.returncode == 0 and "offset" not in r.stdout and "fuzz" not in r.stdout, r.stdout + r.stderr
    return src


def test_fault_count_series_lists_the_two_rfc_patches_with_their_mails():
    patches = _check_mail_headers(FC, [
        ("<20240327160237.2355-2-bharata@amd.com>",
         "[RFC PATCH 1/2] sched/numa: Fault count based NUMA hint fault latency"),
        ("<20240327160237.2355-3-bharata@amd.com>",
         "[RFC PATCH 2/2] mm: Update hint fault count for pages that are skipped during scanning")],
        "Bharata B Rao <bharata@amd.com>")
    assert all("Mar 2024" in p.read_text().split("\ndiff --git ", 1)[0] for p in patches)
    assert set(_patched_files(patches[0])) == {
        "include/linux/mm.h", "include/linux/mm_types.h", "kernel/sched/debug.c", "kernel/sched/fair.c",
        "kernel/sched/sched.h", "mm/huge_memory.c", "mm/memory.c", "mm/mprotect.c"}
    assert set(_patched_files(patches[1])) == {"mm/huge_memory.c", "mm/mprotect.c"}
    # the base series (patches/series) stays empty: the plain kernel applies nothing
    assert kernel.patch_series() == []


@pytest.mark.long          # ~15 s reading through the xz: in `make test`, not in `make test-fast`
def test_fault_count_series_applies_to_the_debian_source(tmp_path):
    """The series applies to Debian's source (_apply_to_debian_source), and the patched files say
    what the two patches do."""
    src = _apply_to_debian_source(FC, tmp_path)
    fair = (src / "kernel/sched/fair.c").read_text()
    assert "numa_promotion_adjust_threshold" not in fair and "sysctl_numa_balancing_fault_count_threshold = 1000000" in fair
    assert "atomic_set(&mm->hint_faults, 0);" in fair
    for f in ("mm/mprotect.c", "mm/huge_memory.c", "kernel/sched/fair.c", "include/linux/mm.h"):
        assert "folio_xchg_access_time" not in (src / f).read_text(), f
    mprotect = (src / "mm/mprotect.c").read_text()
    assert mprotect.index("folio_xchg_fault_count") < mprotect.index("if (pte_protnone(oldpte))")   # patch 2
    huge = (src / "mm/huge_memory.c").read_text()
    assert huge.index("folio_xchg_fault_count") < huge.index("if (pmd_protnone(*pmd))")
    assert "atomic_inc(&vma->vm_mm->hint_faults);" in (src / "mm/memory.c").read_text()
    assert '"fault_count_threshold"' in (src / "kernel/sched/debug.c").read_text()


MIGRC_MAILS = [   # (Message-ID, subject) of each ported mail, in the series' order; 2/8 (arm64) is not ported
    ("<20240219060407.25254-2-byungchul@sk.com>", "[PATCH v8 1/8] x86/tlb: Add APIs manipulating tlb batch's arch data"),
    ("<20240219060407.25254-4-byungchul@sk.com>",
     "[PATCH v8 3/8] mm/rmap: Recognize read-only TLB entries during batched TLB flush"),
    ("<20240219060407.25254-5-byungchul@sk.com>",
     "[PATCH v8 4/8] x86/tlb, mm/rmap: Separate arch_tlbbatch_clear() out of arch_tlbbatch_flush()"),
    ("<20240219060407.25254-6-byungchul@sk.com>",
     "[PATCH v8 5/8] mm: Separate move/undo doing on folio list from migrate_pages_batch()"),
    ("<20240219060407.25254-7-byungchul@sk.com>",
     "[PATCH v8 6/8] mm: Add APIs to free a folio directly to the buddy bypassing pcp"),
    ("<20240122010040.74346-8-byungchul@sk.com>",          # v7: v8's own mail of 7/8 was not found; same code
     "[PATCH v7 7/8] mm: Defer TLB flush by keeping both src and dst folios at migration"),
    ("<20240219060407.25254-9-byungchul@sk.com>", "[PATCH v8 8/8] mm: Pause migrc mechanism at high memory pressure"),
]


def test_migrc_series_lists_the_seven_x86_patches_with_their_mails():
    patches = _check_mail_headers(MIGRC, MIGRC_MAILS, "Byungchul Park <byungchul@sk.com>")
    assert "2/8" in patches[0].read_text().split("\ndiff --git ", 1)[0]      # the arm64 patch: why not ported
    files = [set(_patched_files(p)) for p in patches]
    assert files == [
        {"arch/x86/include/asm/tlbflush.h"},
        {"include/linux/sched.h", "mm/internal.h", "mm/rmap.c"},
        {"arch/x86/mm/tlb.c", "mm/rmap.c"},
        {"mm/migrate.c"},
        {"include/linux/mm.h", "mm/internal.h", "mm/page_alloc.c", "mm/swap.c"},
        {"include/linux/mmzone.h", "include/linux/sched.h", "mm/internal.h", "mm/memory.c", "mm/migrate.c",
         "mm/page_alloc.c", "mm/rmap.c"},
        {"mm/internal.h", "mm/migrate.c", "mm/page_alloc.c"}]
    assert MIGRC.model_knobs == {"migrc": 1} and not MIGRC.knob_paths and not MIGRC.removed   # no knob since v4


@pytest.mark.long          # reads through the xz like the fault-count check
def test_migrc_series_applies_to_the_debian_source(tmp_path):
    src = _apply_to_debian_source(MIGRC, tmp_path)
    tlb = (src / "arch/x86/mm/tlb.c").read_text()
    flush = tlb[tlb.index("void arch_tlbbatch_flush("):]
    assert "cpumask_clear(&batch->cpumask)" not in flush[:flush.index("\n}\n")]          # 4/8
    rmap = (src / "mm/rmap.c").read_text()
    body = rmap[rmap.index("void try_to_unmap_flush(void)"):]
    body = body[:body.index("\n}\n")]
    assert [body.index(x) for x in ("fold_ubc(tlb_ubc, tlb_ubc_ro)", "migrc_flush_start()", "arch_tlbbatch_flush(",
                                    "migrc_flush_end(tlb_ubc)", "arch_tlbbatch_clear(")] == sorted(
        body.index(x) for x in ("fold_ubc(tlb_ubc, tlb_ubc_ro)", "migrc_flush_start()", "arch_tlbbatch_flush(",
                                "migrc_flush_end(tlb_ubc)", "arch_tlbbatch_clear("))
    assert "can_migrc_fail();" in rmap and "tlb_ubc = &current->tlb_ubc_ro;" in rmap
    migrate = (src / "mm/migrate.c").read_text()
    assert "(reason == MR_DEMOTION || reason == MR_NUMA_MISPLACED) &&\n\t\t   !migrc_paused();" in migrate
    assert "can_migrc = do_migrc && can_migrc_test() && !is_large;" in migrate
    assert "migrc_flush_free_folios();" in (src / "mm/memory.c").read_text()
    page_alloc = (src / "mm/page_alloc.c").read_text()
    assert page_alloc.count("migrc_pending_nr_in_zone(") == 3 and "__free_pages_ok(page, order, FPI_TO_TAIL);" in page_alloc
    assert page_alloc.index("migrc_flush_free_folios() &&") < page_alloc.index("if (cond_accept_memory(zone, order))")
    assert "free_pages_nopcp(&folio->page, 0);" in (src / "mm/swap.c").read_text()


PCP_MAILS = [   # (Message-ID, subject) of each ported mail, in the series' order
    ("<20250107000346.1338481-2-gourry@gourry.net>",
     "[PATCH v3 1/6] migrate: Allow migrate_misplaced_folio_prepare() to accept a NULL VMA."),
    ("<20250107000346.1338481-3-gourry@gourry.net>",
     "[PATCH v3 2/6] memory: move conditionally defined enums use inside ifdef tags"),
    ("<20250107000346.1338481-4-gourry@gourry.net>",
     "[PATCH v3 3/6] memory: allow non-fault migration in numa_migrate_check path"),
    ("<20250107000346.1338481-5-gourry@gourry.net>", "[PATCH v3 4/6] vmstat: add page-cache numa hints"),
    ("<20250107000346.1338481-6-gourry@gourry.net>", "[PATCH v3 5/6] migrate: implement migrate_misplaced_folio_batch"),
    ("<20250107000346.1338481-7-gourry@gourry.net>", "[PATCH v3 6/6] migrate,sysfs: add pagecache promotion"),
]


def test_pagecache_promotion_series_lists_the_six_patches_with_their_mails():
    patches = _check_mail_headers(PCP, PCP_MAILS, "Gregory Price <gourry@gourry.net>")
    for p in patches:
        head = p.read_text().split("\ndiff --git ", 1)[0]
        assert "Jan 2025" in head and "<20250107000346.1338481-1-gourry@gourry.net>" in head   # the cover
    files = [set(_patched_files(p)) for p in patches]
    assert files == [
        {"mm/migrate.c"},
        {"mm/memory.c"},
        {"mm/memory.c", "mm/mempolicy.c"},
        {"include/linux/vm_event_item.h", "mm/memcontrol.c", "mm/memory.c", "mm/vmstat.c"},
        {"include/linux/migrate.h", "mm/migrate.c"},
        {"Documentation/ABI/testing/sysfs-kernel-mm-numa", "include/linux/memory-tiers.h", "include/linux/migrate.h",
         "include/linux/sched.h", "include/linux/sched/sysctl.h", "init/init_task.c", "kernel/sched/fair.c",
         "mm/memory-tiers.c", "mm/migrate.c", "mm/swap.c"}]
    # each mail's diffstat (insertions, deletions); the cover's 15 files
    bodies = [p.read_text().split("\ndiff --git ", 1)[1] for p in patches]
    assert [(len(re.findall(r"^\+(?!\+\+ )", b, re.M)), len(re.findall(r"^-(?!-- )", b, re.M))) for b in bodies] == [
        (1, 1), (2, 2), (31, 18), (14, 3), (36, 0), (147, 1)]
    assert len(set().union(*files)) == 15
    assert PCP.knob_paths == {"pagecache_promotion_enabled": "/sys/kernel/mm/numa/pagecache_promotion_enabled"}
    assert PCP.model_knobs == {"pagecache_promotion_cap": "rate_limit", "pagecache_promotion_order": "add_tail",
                               "pagecache_promotion_lru_gen": "off"} and not PCP.removed


@pytest.mark.long          # reads through the xz like the fault-count check
def test_pagecache_promotion_series_applies_to_the_debian_source(tmp_path):
    src = _apply_to_debian_source(PCP, tmp_path)
    swap = (src / "mm/swap.c").read_text()
    fma = swap[swap.index("void folio_mark_accessed(struct folio *folio)"):]
    fma = fma[:fma.index("\n}\n")]
    # the hook is the last branch of the referenced/active test, after MGLRU's early return
    assert fma.index("lru_gen_enabled()") < fma.index("workingset_activation(folio);") < fma.index(
        "promotion_candidate(folio);")
    assert "numa_pagecache_promotion_enabled" in fma and "NUMA_BALANCING_MEMORY_TIERING" in fma
    migrate = (src / "mm/migrate.c").read_text()
    assert "int migrate_misplaced_folio_batch(struct list_head *folio_list, int node)" in migrate
    cand = migrate[migrate.index("void promotion_candidate(struct folio *folio)"):]
    assert [cand.index(x) for x in ("node_is_toptier(nid)", "sysctl_numa_balancing_promote_rate_limit",
                                    "numa_migrate_check(folio, NULL,", "migrate_misplaced_folio_prepare(folio, NULL,",
                                    "task_work_add(task, work, TWA_RESUME)", "list_add_tail(&folio->lru")] == sorted(
        cand.index(x) for x in ("node_is_toptier(nid)", "sysctl_numa_balancing_promote_rate_limit",
                                "numa_migrate_check(folio, NULL,", "migrate_misplaced_folio_prepare(folio, NULL,",
                                "task_work_add(task, work, TWA_RESUME)", "list_add_tail(&folio->lru"))
    assert "if (vma && (vma->vm_flags & VM_EXEC) &&" in migrate                          # 1/6
    assert "count_vm_numa_event(NUMA_HINT_TYPE(vmf));" in (src / "mm/memory.c").read_text()   # 4/6
    assert "pol = get_task_policy(current);" in (src / "mm/mempolicy.c").read_text()      # 3/6
    assert '"numa_hint_page_cache",' in (src / "mm/vmstat.c").read_text()
    assert "__ATTR_RW(pagecache_promotion_enabled)" in (src / "mm/memory-tiers.c").read_text()
    fair = (src / "kernel/sched/fair.c").read_text()
    assert "init_task_work(&p->numa_promo_work, task_numa_promotion_work);" in fair
    assert "\nunsigned int sysctl_numa_balancing_promote_rate_limit = 65536;" in fair
    header = (src / "include/linux/migrate.h").read_text()
    assert header.index("struct vm_area_struct *vma,\n\t\t\t   int node);\nint migrate_misplaced_folio_batch(") > 0


def test_variant_key_differs_and_the_plain_key_is_unchanged():
    frag = kernel.FRAGMENT.read_text()
    plain = kernel.variant_key(VERSION, frag)
    # the plain kernel's key is the formula it always had: config base, LOCALVERSION, version,
    # fragment, the base series (empty)
    assert plain == build._digest(kernel.BASE_CONFIG, "-tierlab", VERSION, frag)
    assert plain == kernel.kernel_key(VERSION, frag, [])
    if hashlib.sha256(frag.encode()).hexdigest()[:16] == FRAGMENT_SHA:
        assert plain == PLAIN_KEY               # the plain kernel built on 2026-11-28 stays valid
        assert kernel.variant_key(VERSION, frag, MIGRC) == MIGRC_KEY    # and so does the MIGRC kernel
        assert kernel.variant_key(VERSION, frag, PCP) == PCP_KEY        # and the page-cache promotion one
    fc = kernel.variant_key(VERSION, frag, FC)
    assert fc != plain
    assert kernel.kernel_dir(fc, FC).name == f"tierlab-6.12+fault-count-{fc}"
    assert kernel.kernel_dir(plain).name == f"tierlab-6.12-{plain}"
    assert FC.localversion == "-tierlab-fault-count"
    mg = kernel.variant_key(VERSION, frag, MIGRC)
    assert mg not in (plain, fc)
    assert kernel.kernel_dir(mg, MIGRC).name == f"tierlab-6.12+migrc-{mg}"
    assert MIGRC.localversion == "-tierlab-migrc"
    pc = kernel.variant_key(VERSION, frag, PCP)
    assert pc not in (plain, fc, mg)
    assert kernel.kernel_dir(pc, PCP).name == f"tierlab-6.12+pagecache-promotion-{pc}"
    assert PCP.localversion == "-tierlab-pagecache-promotion"


def test_cached_variant_is_found_apart_from_the_plain_kernel(tmp_path, monkeypatch, cached_kernel_dir):
    monkeypatch.setenv(build.CACHE_ENV, str(tmp_path))
    monkeypatch.setattr(kernel, "source_version", lambda: VERSION)
    key = kernel.variant_key(VERSION, kernel.FRAGMENT.read_text(), FC)
    d = cached_kernel_dir(kernel.kernel_dir(key, FC), "6.12.117-tierlab-fault-count")
    assert kernel.cached_kernel() is None                   # the plain kernel is not built here
    k = build.ensure_kernel(name="tierlab-6.12+fault-count")
    assert k.package == d.name and k.release == "6.12.117-tierlab-fault-count"
    assert kernel.cached_kernel("fault-count") == k


def test_kernel_choice_by_name_and_a_bad_name(monkeypatch):
    monkeypatch.delenv(build.KERNEL_ENV, raising=False)
    assert build.kernel_package("tierlab-6.12+fault-count") == "tierlab-6.12+fault-count"
    assert kernel.patch_set_of("tierlab-6.12+fault-count") is FC
    assert kernel.patch_set_of("tierlab-6.12") is None
    assert kernel.patch_set_of("linux-image-6.12.117+deb12-amd64-unsigned") is None
    assert build.kernel_choice() is None
    assert kernel.patch_set_of("tierlab-6.12+migrc") is MIGRC
    for bad in ("tierlab-6.12+nope", "tierlab-6.12+", "tierlab-6.12-fault-count"):
        with pytest.raises(ConfigError, match=r"--kernel: '.*' is not one of tierlab's kernels; accepted: "
                                              r"tierlab-6.12, tierlab-6.12\+fault-count, tierlab-6.12\+migrc, "
                                              r"tierlab-6.12\+pagecache-promotion$"):
            build.kernel_package(bad)
    monkeypatch.setenv(build.KERNEL_ENV, "tierlab-6.12+migrc-v7")
    with pytest.raises(ConfigError, match=r"TIERLAB_ORACLE_KERNEL: 'tierlab-6.12\+migrc-v7' is not one of tierlab's "
                                          r"kernels; accepted: tierlab-6.12, tierlab-6.12\+fault-count, "
                                          r"tierlab-6.12\+migrc, tierlab-6.12\+pagecache-promotion$"):
        build.kernel_choice()
    monkeypatch.setenv(build.KERNEL_ENV, "tierlab-6.12+fault-count")
    assert build.kernel_choice() == "tierlab-6.12+fault-count"
    with pytest.raises(ConfigError, match=r"patch_set: 'nope' is not a patch set; accepted: fault-count, migrc, "
                                          r"pagecache-promotion$"):
        kernel.ensure_own_kernel(patch_set="nope")


def test_patched_guest_writes_the_sets_knobs_and_refuses_what_it_removed():
    k = Kernel(numa_balancing=2, demotion_enabled=1, hint_fault_latency="fault_count", scan_restamp_protnone=1,
               fault_count_threshold=5000)
    writes = {name: (path, value) for name, path, value in guest.knob_writes(k, FC)}
    assert writes["fault_count_threshold"] == ("/sys/kernel/debug/sched/numa_balancing/fault_count_threshold", "5000")
    assert "hot_threshold_ms" not in writes and "hint_fault_latency" not in writes
    assert "hot_threshold_ms" in {n for n, _, _ in guest.knob_writes(Kernel(numa_balancing=2))}
    script = guest.run_script("hot-chunks", [], k, {}, disk=False, pset=FC)
    assert "fault_count_threshold" in script and "hot_threshold_ms" not in script
    with pytest.raises(ConfigError, match=r"hot_threshold_ms: tierlab-6.12\+fault-count removed it; the oracle runs "
                                          r"it only at its default 1000"):
        guest.knob_writes(Kernel(numa_balancing=2, hot_threshold_ms=50, hint_fault_latency="fault_count",
                                 scan_restamp_protnone=1), FC)
    with pytest.raises(ConfigError, match=r"scan_restamp_protnone: the guest's kernel tierlab-6.12\+fault-count has it "
                                          r"fixed at 1 by its patches"):
        guest.knob_writes(Kernel(numa_balancing=2, hint_fault_latency="fault_count"), FC)
    with pytest.raises(ConfigError, match=r"hint_fault_latency: Linux 6.12 has no such setting .* \(or on a kernel "
                                          r"that has it: --kernel tierlab-6.12\+fault-count\)"):
        guest.knob_writes(Kernel(numa_balancing=2, hint_fault_latency="fault_count"))


def test_model_side_runs_the_sets_knobs(monkeypatch):
    """run_oracle on the patched kernel hands the guest (and so the model) the set's knobs."""
    from tierlab.oracle import compare
    seen = {}

    class Stop(Exception):
        pass

    def boot(m, program, args, files, kern, settings, **kw):
        seen["kernel"], seen["kw"] = kern, kw
        raise Stop
    monkeypatch.setattr(compare.guest_mod, "boot", boot)
    with pytest.raises(Stop):
        compare.run_oracle("hot-chunks", {"total": "64MiB", "chunk": "16MiB", "visits": 1, "iterations": 1},
                           {"numa_balancing": 2}, scale=4, guest_kernel="tierlab-6.12+fault-count",
                           count_decisions=True)
    assert seen["kernel"].get("hint_fault_latency") == 1 and seen["kernel"].get("scan_restamp_protnone") == 1
    assert seen["kw"]["count_decisions"] is True
    with pytest.raises(Stop):
        compare.run_oracle("hot-chunks", {"total": "64MiB", "chunk": "16MiB", "visits": 1, "iterations": 1},
                           {"numa_balancing": 2}, scale=4, guest_kernel="tierlab-6.12")
    assert seen["kernel"].get("hint_fault_latency") == 0


def test_migrc_guest_has_no_knob_and_the_model_runs_migrc_on(monkeypatch):
    """The MIGRC kernel has no knob (the series dropped migrc_enable in v4): the guest writes
    nothing for it, refuses migrc=0 there and migrc=1 on the plain kernel (naming the MIGRC kernel),
    and run_oracle hands the model migrc=1."""
    k = Kernel(numa_balancing=2, demotion_enabled=1, migrc=1)
    writes = guest.knob_writes(k, MIGRC)
    assert "migrc" not in {n for n, _, _ in writes}
    assert {n for n, _, _ in writes} == {n for n, _, _ in guest.knob_writes(Kernel(numa_balancing=2,
                                                                                   demotion_enabled=1))}
    with pytest.raises(ConfigError, match=r"migrc: the guest's kernel tierlab-6.12\+migrc has it fixed at 1"):
        guest.knob_writes(Kernel(numa_balancing=2, migrc=0), MIGRC)
    with pytest.raises(ConfigError, match=r"migrc: Linux 6.12 has no such setting .* \(or on a kernel that has it: "
                                          r"--kernel tierlab-6.12\+migrc\)"):
        guest.knob_writes(k)
    kern = _model_kernel_of(monkeypatch, "hot-chunks", {"total": "64MiB", "chunk": "16MiB", "visits": 1,
                                                        "iterations": 1},
                            {"numa_balancing": 2, "demotion_enabled": 1}, "tierlab-6.12+migrc")
    assert kern.get("migrc") == 1


def test_pagecache_promotion_guest_writes_the_switch_and_the_model_runs_v3(monkeypatch):
    """The page-cache promotion kernel has the RFC's sysfs switch: the guest writes
    pagecache_promotion_enabled there (the plain kernel refuses it, naming this kernel); its code
    is v3's (the per-task cap, list_add_tail, nothing under MGLRU), so other values of those model
    knobs are refused; run_oracle hands the model the switch and v3's values."""
    k = Kernel(numa_balancing=2, demotion_enabled=1, pagecache_promotion_enabled=1)
    writes = {name: (path, value) for name, path, value in guest.knob_writes(k, PCP)}
    assert writes["pagecache_promotion_enabled"] == ("/sys/kernel/mm/numa/pagecache_promotion_enabled", "1")
    assert not {"pagecache_promotion_cap", "pagecache_promotion_order", "pagecache_promotion_lru_gen"} & set(writes)
    script = guest.run_script("file-read", [], k, {}, disk=False, pset=PCP)
    assert "@@tierlab knob pagecache_promotion_enabled $(cat /sys/kernel/mm/numa/pagecache_promotion_enabled)" in script
    assert "pagecache_promotion_enabled" not in guest.run_script("file-read", [], Kernel(numa_balancing=2), {},
                                                                 disk=False)
    with pytest.raises(ConfigError, match=r"pagecache_promotion_enabled: Linux 6.12 has no such setting .* \(or on a "
                                          r"kernel that has it: --kernel tierlab-6.12\+pagecache-promotion\)"):
        guest.knob_writes(k)
    for name, value in (("pagecache_promotion_cap", "unlimited"), ("pagecache_promotion_order", "add"),
                        ("pagecache_promotion_lru_gen", "refs")):
        with pytest.raises(ConfigError, match=rf"{name}: the guest's kernel tierlab-6.12\+pagecache-promotion has it "
                                              r"fixed at"):
            guest.knob_writes(Kernel(numa_balancing=2, pagecache_promotion_enabled=1, **{name: value}), PCP)
    kern = _model_kernel_of(monkeypatch, "file-read", {"file_size": "64MiB", "cycles": 1},
                            {"numa_balancing": 2, "demotion_enabled": 1, "pagecache_promotion_enabled": 1},
                            PCP.kernel_name)
    assert kern.get("pagecache_promotion_enabled") == 1
    assert kern.get("pagecache_promotion_cap") == 0 and kern.get("pagecache_promotion_order") == 0


def test_decision_probes_script_and_counts():
    k = Kernel(numa_balancing=2, demotion_enabled=1)
    script = guest.run_script("hot-chunks", [], k, {}, disk=False, decisions=[1])
    assert "r:tl_snm_all should_numa_migrate_memory ret=$retval:u8" in script
    assert "'ret == 0 && (src == 1)'" in script
    assert script.index("tl_snm_all/enable 1") < script.index("dump before") < script.index("echo > $T/trace")
    assert "tl_snm" not in guest.run_script("hot-chunks", [], k, {}, disk=False)
    blocks = {("kprobe_profile", "before"): ["  tl_snm_all   10   0", "  tl_snm_rej   10   0"],
              ("kprobe_profile", "after"): ["  tl_snm_all   13457   0", "  tl_snm_rej   13457   0"],
              ("trace_stats", "after"): ["entries: 8000", "overrun: 0", "commit overrun: 0", "bytes: 1",
                                         "entries: 582", "overrun: 0"]}
    res = type("R", (), {"counters": {}, "errors": []})()       # what _decisions reads and writes
    console._decisions(blocks, res)
    assert res.counters == {"numa_should_migrate_calls": 13447, "numa_latency_rejects": 8582} and res.errors == []
    blocks[("kprobe_profile", "after")][0] = "  tl_snm_all   13457   3"
    console._decisions(blocks, res)
    assert "missed 3 / 0 returns" in res.errors[0]
    with pytest.raises(ConfigError, match="count_decisions: the machine has no CPU-less"):
        guest.run_script("hot-chunks", [], k, {}, disk=False, decisions=[])


# ---- a real guest on the patched kernel ------------------------------------------------------

def _patched_kernel(pset):
    """pset's kernel if it is built; skip otherwise, saying how to build it."""
    k = kernel.cached_kernel(pset)
    if k is None:
        pytest.skip(f"{pset.kernel_name} is not built (it takes many minutes; tests never build it): build it "
                    f"once with `{kernel.build_hint(pset)}` or any `tierlab oracle --kernel {pset.kernel_name} ...` "
                    f"run (needs apt-get install {kernel.SOURCE_PACKAGE} flex bison libelf-dev)")
    return k


@pytest.fixture(scope="module")
def fault_count_kernel(oracle_guest):
    return _patched_kernel(FC)


@pytest.mark.long
def test_guest_on_the_fault_count_kernel(fault_count_kernel):
    """A short hot-chunks run on the patched kernel with fault_count_threshold 500: uname names the
    set, the RFC's knob is written and hot_threshold_ms is gone, the model ran the RFC's knobs, the
    probes count one should_numa_migrate_memory() call per hint fault (as the RFC's cover letter
    found: 12,080,772 invocations for 12,080,772 hint faults; here within the 0-15 seen in
    docs/oracle.md), and the ported decision holds: with the mm's count below 2^16 a fault's
    latency is the count itself, bumped first, so at most the first 499 hint faults become
    candidates and every later one is refused (two runs of this size took 1,194 and 2,162)."""
    from tierlab.oracle import run_oracle
    run = run_oracle("hot-chunks", {"total": "1536MiB", "chunk": "128MiB", "visits": 4, "iterations": 256},
                     {"demotion_enabled": 1, "numa_balancing": 2, "fault_count_threshold": 500}, scale=4,
                     timeout_s=600, guest_kernel=FC.kernel_name, count_decisions=True)
    g = run.guest
    assert g.kernel == fault_count_kernel.release and g.kernel.endswith("-tierlab-fault-count")
    assert g.knobs["fault_count_threshold"] == "500" and "hot_threshold_ms" not in g.knobs
    assert run.model.config["knobs"]["hint_fault_latency"] in (1, "fault_count")
    c = g.counters
    calls, rejects, cand = c["numa_should_migrate_calls"], c["numa_latency_rejects"], c["pgpromote_candidate"]
    assert 0 <= c["numa_hint_faults"] - calls <= 20
    assert 0 < c["numa_hint_faults"] < 1 << 16, "the run's size no longer fits this check"
    assert abs(calls - cand - rejects) <= 20
    if c["numa_hint_faults"] > 520:
        assert 480 <= cand <= 499 and rejects > 0
    else:
        assert rejects == 0


@pytest.fixture(scope="module")
def migrc_kernel(oracle_guest):
    return _patched_kernel(MIGRC)


@pytest.mark.long
def test_guest_on_the_migrc_kernel(migrc_kernel):
    """The promote-xsbench entry on the MIGRC kernel (~30-60 s of guest time): uname names the set,
    the model ran migrc=1, the workload promotes, and the four nr_tlb_* counters exist and count."""
    from tierlab.oracle import run_oracle, suite
    entry = next(e for e in suite.ENTRIES if e.name == "promote-xsbench")
    run = run_oracle(entry.workload, entry.params, entry.knobs, machine=entry.machine, scale=entry.scale,
                     cpus=entry.cpus, timeout_s=600, guest_kernel=MIGRC.kernel_name)
    g = run.guest
    assert g.kernel == migrc_kernel.release and g.kernel.endswith("-tierlab-migrc")
    assert run.model.config["knobs"]["migrc"] in (1, "on")
    assert g.counters["numa_hint_faults"] > 1000 and g.counters["pgpromote_success"] > 0
    for c in suite.TLB_COUNTERS:
        assert c in g.vmstat_after.index, c
    assert g.counters["nr_tlb_remote_flush"] > 0


@pytest.fixture(scope="module")
def pagecache_promotion_kernel(oracle_guest):
    return _patched_kernel(PCP)


@pytest.mark.long
def test_guest_on_the_pagecache_promotion_kernel(pagecache_promotion_kernel):
    """A file-read run with tiering and the RFC's switch on (~10 s of guest time): the file (1.5x
    node 0) fills node 0 and spills to node 1; a folio becomes a candidate from its 4th access (the
    set-up pass and three cycles set referenced, activate, set referenced again), so 4 cycles.
    uname names the set, the switch reads back on, the file is never mapped (no hint faults of
    it), and the read() path asks about node-1 folios (numa_hint_page_cache) and promotes them.
    hot_threshold_ms=5000: a folio's latency is the time between two reads of it, one cycle,
    ~1.3-1.7 s under TCG, so the default 1000 refuses every one (docs/oracle.md, "Page-cache
    promotion on tierlab's kernel")."""
    from tierlab.oracle import run_oracle
    run = run_oracle("file-read", {"file_size": "1536MiB", "cycles": 4},
                     {"demotion_enabled": 1, "numa_balancing": 2, "pagecache_promotion_enabled": 1,
                      "hot_threshold_ms": 5000}, scale=4, timeout_s=900, guest_kernel=PCP.kernel_name)
    g = run.guest
    assert g.kernel == pagecache_promotion_kernel.release and g.kernel.endswith("-tierlab-pagecache-promotion")
    assert g.knobs["pagecache_promotion_enabled"] == "true"
    assert run.model.config["knobs"]["pagecache_promotion_enabled"] == 1
    c = g.counters
    assert c["numa_hint_faults"] < 100 and c["numa_hint_page_cache_local"] == 0
    assert c["numa_hint_page_cache"] > 10_000 and c["pgpromote_success"] > 1_000
    assert c["numa_pages_migrated"] == c["pgpromote_success"]       # migrate_misplaced_folio_batch's two counts
