"""tierlab.trace.vmalog on a hand-written strace + perf log: calls split across lines joined, process
instances (fork, execve, a thread whose first line comes before its clone returns), VMAs trimmed,
split and committed as the kernel makes them, faults attributed by address and time, touched runs."""
from __future__ import annotations

from tierlab.trace.vmalog import analyse, summarize

STRACE = """\
100 10.000000 execve("/usr/bin/prog", ["prog"], 0x7ffe /* 1 vars */) = 0
100 10.001000 brk(NULL)       = 0x10000000
100 10.002000 brk(0x10021000) = 0x10021000
100 10.003000 mmap(NULL, 40960, PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS, -1, 0) = 0x20000000
100 10.003100 mmap(NULL, 8192, PROT_READ, MAP_PRIVATE, 3, 0) = 0x50000000
100 10.004000 mmap(NULL, 1048576, PROT_NONE, MAP_PRIVATE|MAP_ANONYMOUS|MAP_NORESERVE, -1, 0) = 0x30000000
100 10.005000 munmap(0x30000000, 262144) = 0
100 10.006000 mprotect(0x30040000, 262144, PROT_READ|PROT_WRITE <unfinished ...>
101 10.006500 mmap(NULL, 8192, PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS, -1, 0) = 0x40000000
100 10.007000 <... mprotect resumed>) = 0
100 10.007500 clone(child_stack=0x1, flags=CLONE_VM|CLONE_FS|CLONE_FILES|CLONE_SIGHAND|CLONE_THREAD|CLONE_SYSVSEM, parent_tid=[101], tls=0x1, child_tidptr=0x1) = 101
100 10.008000 munmap(0x20002000, 8192) = 0
100 10.009000 brk(0x10011000) = 0x10011000
100 10.010000 munmap(0x30040000, 262144) = 0
100 10.011000 clone(child_stack=NULL, flags=CLONE_CHILD_CLEARTID|CLONE_CHILD_SETTID|SIGCHLD, child_tidptr=0x1) = 200
200 10.012000 execve("/bin/true", ["true"], 0x7ffe /* 1 vars */) = 0
200 10.013000 +++ exited with 0 +++
101 10.019000 +++ exited with 0 +++
100 10.020000 exit_group(0)                = ?
100 10.020100 +++ exited with 0 +++
"""

FAULTS = """\
 100/100  10.002500:     10000000
 100/100  10.002600:     10005000
 100/100  10.002700:     10006000
 100/100  10.002800:     10005000
 100/100  10.003500:     20000000
 100/100  10.003600:     20009000
 100/100  10.003700:     50000000
 100/100  10.007200:     30041000
 100/100  10.007300:     30040000
 101/101  10.007400:     40001000
 200/200  10.012500:     10000000
"""


def run(tmp_path):
    (tmp_path / "x.strace").write_text(STRACE)
    (tmp_path / "x.faults").write_text(FAULTS)
    return analyse(str(tmp_path / "x.strace"), str(tmp_path / "x.faults"), "x")


def test_processes_and_their_counts(tmp_path):
    procs, _, _, _ = run(tmp_path)
    # 100 before its execve, prog, 200 before its execve, true (thread 101's early instance merged)
    assert procs["comm"].tolist() == ["", "prog", "", "true"]
    prog = procs[procs["comm"] == "prog"].iloc[0]
    assert (prog["mmap_anon"], prog["mmap_file"], prog["munmap"], prog["partial_unmaps"], prog["brk"],
            prog["mprotect_commit"]) == (3, 1, 3, 3, 2, 1)
    assert prog["faults"] == 10 and prog["anon_touched_pages"] == 8 and prog["heap_pages"] == 33
    assert abs(prog["lifetime_ms"] - 20.1) < 1e-6
    true = procs[procs["comm"] == "true"].iloc[0]
    assert true["faults"] == 1 and true["anon_touched_pages"] == 0 and abs(true["lifetime_ms"] - 1.0) < 1e-6


def test_vmas_trimmed_split_committed_and_touched(tmp_path):
    _, vmas, touches, steps = run(tmp_path)
    got = sorted((r.kind, r.pages, r.touched_pages, r.touched_runs, r.unmapped_by) for r in vmas.itertuples())
    assert got == sorted([
        ("brk", 33, 3, 2, "exit"),          # pages 0, 5, 6 (5 twice: once)
        ("mmap", 2, 1, 1, "exit"),          # the head of the 10-page mmap after the hole [2, 4)
        ("mmap", 6, 1, 1, "exit"),          # its tail [4, 10): page 9 touched before the split
        ("reserve", 128, 0, 0, "exit"),     # 256 pages, head trimmed twice by 64
        ("mprotect", 64, 2, 1, "munmap"),   # the commit, pages 1 then 0: one run
        ("mmap", 2, 1, 1, "exit"),          # the thread's, mapped before its clone returned
    ])
    commit = vmas[vmas["kind"] == "mprotect"].iloc[0]
    assert abs(commit["map_ms"] - 7.0) < 1e-6 and abs(commit["unmap_ms"] - 10.0) < 1e-6
    heap = vmas[vmas["kind"] == "brk"]["vma"].iloc[0]
    assert touches[touches["vma"] == heap][["offset", "pages"]].values.tolist() == [[0, 1], [5, 2]]
    assert steps[["pages", "heap_pages"]].values.tolist() == [[33, 33], [-16, 17]]


def test_summary_rows(tmp_path):
    procs, vmas, _, steps = run(tmp_path)
    s = summarize(procs, vmas, steps)
    grow = s[(s["what"] == "brk_step_pages") & (s["group"] == "grow")].iloc[0]
    assert grow["count"] == 1 and grow["q50"] == 33
    share = s[(s["what"] == "touched_share") & (s["group"] == "mprotect")].iloc[0]
    assert share["mean"] == 2 / 64
    alive = s[s["what"] == "alive_share"].set_index("group")["mean"]
    assert abs(alive.sum() - 1) < 1e-9 and abs(alive["2"] - 1.0 / 20.1) < 1e-6
