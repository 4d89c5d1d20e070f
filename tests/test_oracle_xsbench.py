"""The XSBench-shaped guest program (tierlab/oracle/programs/xsbench.c) and its suite entry
`promote-xsbench`: its arguments come from the model's workload, it builds, it touches per lookup
the pages the model's xsbench stream names for the same energy and material, and (on tierlab's
kernel, only when it is already built) a guest run promotes and has the nr_tlb_* counters."""
from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

from tierlab.oracle import build, suite
from tierlab.oracle.programs import guest_program
from tierlab.workloads import make_workload
from tierlab.workloads._kernels import fill_xsbench_lookups
from tierlab.workloads.xsbench import MAT_DIST, POINT_BYTES

ENTRY = next(e for e in suite.ENTRIES if e.name == "promote-xsbench")


def _args(args: list[str]) -> dict:
    return dict(a.split("=", 1) for a in args)


def test_program_arguments_are_the_models_workload():
    w = make_workload("xsbench", ENTRY.params, scale=ENTRY.scale)
    prog, args, files = guest_program(w, seed=3)
    a = _args(args)
    assert prog == "xsbench" and files == {}
    assert a["n_iso"] == "355" and a["n_gp"] == "768" and a["particles"] == "100000" and a["lookups"] == "34"
    assert a["threads"] == "2" and a["seed"] == "3" and a["write_share"] == "0" and a["cpunodebind"] == ""
    mats = [[int(k) for k in m.split(",")] for m in a["mats"].split(";")]
    assert mats == [m.tolist() for m in w.materials()] and len(mats[0]) == 321
    assert [float(p) for p in a["mat_dist"].split(",")] == MAT_DIST.tolist()
    # the entry's size spills: 384 MiB of grids against node 0's 256 MiB at 1/4 of qemu-2node
    assert sum(r.pages for r in w.regions()) * 4096 > 1.4 * (256 << 20)
    w = make_workload("xsbench", {"size": "small", "gridpoints": 64, "particles": 8, "threads": 4,
                                  "write_share": 0.25, "cpunodebind": "0"})
    a = _args(guest_program(w)[1])
    assert a["n_iso"] == "68" and a["n_gp"] == "64" and a["threads"] == "4" and a["write_share"] == "0.25"
    assert a["cpunodebind"] == "0" and len(a["mats"].split(";")) == 12


def _run_native(binary, args, timeout=60):
    """Run the program on the host until its done line (it then stops itself with SIGSTOP) and
    return its output lines."""
    p = subprocess.Popen([str(binary), *args], stdout=subprocess.PIPE, text=True)
    lines = []
    try:
        for ln in p.stdout:
            lines.append(ln.rstrip("\n"))
            if ln.startswith("@@tierlab done") or ln.startswith("@@tierlab error"):
                break
    finally:
        p.kill()
        p.wait(timeout)
    return lines


def test_program_builds_and_touches_the_models_pages_per_lookup(tmp_path):
    """Compiled as the oracle compiles it (gcc -static unless the static libc is missing) and run on
    the host at a small size: every thread marks twice, and for each traced lookup the pages it
    touched (region:page, in order) are what the model's fill_xsbench_lookups gives for the same
    energy and material: the search's steps, the index row's 1-2 pages, one point page per
    nuclide, the stack page."""
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("gcc not found")
    src = build.PROGRAM_DIR / "xsbench.c"
    out = tmp_path / "xsbench"
    r = subprocess.run([gcc, "-O2", "-Wall", "-Werror", "-o", str(out), str(src), "-lpthread", "-lm"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    w = make_workload("xsbench", {"gridpoints": 96, "particles": 40, "lookups": 5, "threads": 2})
    _, args, _ = guest_program(w, seed=1)
    lines = _run_native(out, [a for a in args if not a.startswith("dir=")] + ["trace_lookups=100"])
    assert not [ln for ln in lines if "error" in ln], lines[:5]
    marks = [ln.split()[2:4] for ln in lines if ln.startswith("@@tierlab mark")]
    assert sorted(marks) == [["0", "0"], ["0", "1"], ["1", "0"], ["1", "1"]]
    traced = [ln.split()[2:] for ln in lines if ln.startswith("@@tierlab xslookup")]
    assert len(traced) == 100                      # thread 0 runs 20 particles x 5 lookups
    regs = w.regions()
    base = np.cumsum([0] + [r.pages for r in regs])
    mats = w.materials()
    mat_tab = np.zeros((len(mats), max(map(len, mats))), np.int64)
    for i, m in enumerate(mats):
        mat_tab[i, :len(m)] = m
    energy = np.array([float.fromhex(t[0]) for t in traced])
    mat = np.array([int(t[1]) for t in traced], np.int64)
    pages = np.empty(len(traced) * (int(w.n_union).bit_length() + 3 + mat_tab.shape[1]), np.int64)
    ends = np.empty(len(traced), np.int64)
    firsts = np.empty(len(traced), np.int64)
    fill_xsbench_lookups(pages, ends, firsts, energy, mat, mat_tab, np.array([len(m) for m in mats], np.int64),
                         np.int64(w.n_union), np.int64(w.n_isotopes), np.int64(w.n_gridpoints),
                         base.astype(np.int64), np.int64(POINT_BYTES), np.int64(4096), np.int64(base[3] + 0))
    start = 0
    for i, t in enumerate(traced):
        model = pages[start:ends[i] + 1]
        start = ends[i] + 1
        guest = [base[int(r)] + int(p) for r, p in (x.split(":") for x in t[2:])]
        assert guest == model.tolist(), (i, t[:2])
    assert {int(m) for m in mat} <= set(range(12))


# ---- a real guest on tierlab's kernel ------------------------------------------------------

def test_guest_xsbench_promotes_and_counts_its_flushes(own_kernel):
    """The entry's workload in the guest on tierlab's kernel (mainline: no MIGRC):
    the grids spill to node 1 (in tiering mode the scanner protects only pages off the top tier, so
    hint faults mean pages on node 1), NUMA balancing promotes some of them back (every promotion is a
    NUMA migration here: numa_pages_migrated = pgpromote_success), both threads mark twice, and the
    four nr_tlb_* counters exist and count. (At 1/10 of the entry's length the scanner once
    protected 5 PTEs in the whole run, cause not traced; so the full length, ~30-60 s.)"""
    from tierlab.oracle import kernel, run_oracle
    run = run_oracle(ENTRY.workload, ENTRY.params, ENTRY.knobs, machine=ENTRY.machine, scale=ENTRY.scale,
                     cpus=ENTRY.cpus, timeout_s=600, guest_kernel=kernel.NAME)
    g = run.guest
    assert g.kernel == own_kernel.release and run.warnings == []
    assert len(g.marks_s) == 4 and sorted(g.marks_s.task.tolist()) == [0, 0, 1, 1]
    assert g.counters["numa_hint_faults"] > 1000 and g.counters["pgpromote_success"] > 0
    assert g.counters["numa_pages_migrated"] == g.counters["pgpromote_success"]
    for c in suite.TLB_COUNTERS:
        assert c in g.vmstat_after.index, c
    assert g.counters["nr_tlb_remote_flush"] > 0
    assert run.model.counters["pgpromote_success"] > 0
