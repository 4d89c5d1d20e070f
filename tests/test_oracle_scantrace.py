"""--trace-scan (tierlab/oracle/scantrace.py): the probes' definitions, the run script, the parsing of
a captured trace (promote-anon on Debian's 6.12, 2026-11-28), the rule's arithmetic, and a guest run
whose placements must follow Linux's doubling (skipped where the guest cannot run)."""
from pathlib import Path

import pytest

from tierlab.kernel import Kernel
from tierlab.oracle import build, guest, scantrace
from tierlab.oracle.console import parse_console

DATA = Path(__file__).parent / "data" / "oracle" / "scantrace-promote-anon.console.txt"
# Debian's linux-image-6.12.117+deb12-amd64 (from its BTF)
OFFS = {"task_struct": {"numa_scan_period": 3772, "numa_scan_period_max": 3776, "numa_scan_seq": 3768,
                        "numa_work": 3816, "mm": 2304},
        "mm_struct": {"numa_scan_seq": 1200, "numa_next_scan": 1184}}


def test_probe_definitions_read_the_task_from_its_numa_work():
    tnw, tnwr, tsm, tsmr = scantrace.probe_defs(OFFS)
    assert tnw.startswith("p:tl_tnw task_numa_work period=-44($arg1):u32 pmax=-40($arg1):u32 tseq=-48($arg1):s32 ")
    assert "seq=+1200(-1512($arg1)):s32 next=+1184(-1512($arg1)):u64" in tnw
    assert tnwr.startswith("r:tl_tnwr task_numa_work period=-44($arg1):u32")
    assert tsm.startswith("p:tl_tsm task_scan_max period=+3772($arg1):u32 tseq=+3768($arg1):s32 seq=+1200(+2304($arg1)):s32")
    assert tsmr == "r:tl_tsmr task_scan_max ret=$retval:u32"


def test_run_script_prints_the_trace_after_the_after_dump():
    text = guest.run_script("random-read", ["x"], Kernel(numa_balancing=2), {}, disk=False, scan_offsets=OFFS)
    assert "sprobe 'p:tl_tnw task_numa_work" in text
    assert text.index("echo > $T/trace") < text.index("/bin/tierlab-random-read")
    assert text.index("dump after") < text.index("@@tierlab begin scantrace after")
    assert "@@tierlab begin scantrace" not in guest.run_script("random-read", ["x"], Kernel(), {}, disk=False)


def _captured():
    return scantrace.parse_scan_trace(DATA.read_text().splitlines())


def test_parse_captured_trace():
    tr = _captured()
    assert len(tr) == 16 and tr.event.value_counts().to_dict() == {"tl_tnw": 5, "tl_tnwr": 5, "tl_tsm": 3, "tl_tsmr": 3}
    calls = scantrace.scan_calls(tr)
    assert list(calls.period) == [1000, 1000, 2000, 2000, 4000]
    assert list(calls.seq) == [0, 0, 1, 1, 2] and calls.scanned.all()
    assert list(calls.next_after - calls.jif) == [250, 250, 500, 500, 1000]   # now + msecs_to_jiffies(period), HZ=250
    pl = scantrace.placements(tr)
    # init_numa_balancing's call (another pid, returning to it) is not a placement
    assert pl[["seq", "period_before", "pmax", "period_after"]].values.tolist() == [[1, 1000, 30000, 2000],
                                                                                    [2, 2000, 30000, 4000]]
    assert scantrace.rule_check(pl) == {"placements_known": 2, "doubling": 2, "tenths": 0}


def test_rule_arithmetic():
    """The guest's bounds as the model computes them (core/numa_balancing.py, the kernel's defaults
    at scale 1), then the two rules the trace is checked against."""
    import numpy as np
    from tierlab.core.numa_balancing import task_scan_max_ms, task_scan_min_ms
    from tierlab.core.params import NR_PARAMS, P
    p = np.zeros(NR_PARAMS)
    p[P.SCALE], p[P.SCAN_SIZE_MB], p[P.SCAN_PERIOD_MIN_MS], p[P.SCAN_PERIOD_MAX_MS] = 1.0, 256, 1000, 60000
    mib = 256
    assert task_scan_min_ms(p, 384 * mib) == 500 and task_scan_max_ms(p, 384 * mib) == 30000
    assert task_scan_min_ms(p, 200 * mib) == 1000 and task_scan_max_ms(p, 200 * mib) == 60000
    assert task_scan_min_ms(p, 4096 * mib) == 100          # the floor: 1000 / (2560 / 256)
    assert scantrace.predict_periods(1000, 6, 30000) == [2000, 4000, 8000, 16000, 30000, 30000]
    assert scantrace.predict_periods(166, 3, 10000, "tenths", 166) == [217, 283, 370]


def test_btf_offsets_of_the_cached_debian_kernel():
    d = build.cache_dir() / "kernel"
    ks = sorted(d.glob("linux-image-6.12.117+deb12-amd64-unsigned")) if d.exists() else []
    if not ks or not (ks[0] / "vmlinuz").exists():
        pytest.skip("Debian's 6.12.117 kernel is not cached here")
    try:
        offs = scantrace.scan_offsets(ks[0], ks[0] / "vmlinuz")
    except Exception as e:        # no zstd / objcopy here
        pytest.skip(f"cannot read the kernel's BTF here: {e}")
    assert offs == OFFS


def test_tierlab_kernel_without_btf_is_refused(tmp_path):
    """tierlab's own kernel has no debug info: --trace-scan names Debian's kernel instead."""
    from tierlab.oracle.kernel import cached_kernel
    gk = cached_kernel()
    if gk is None:
        pytest.skip("tierlab-6.12 is not built here")
    from tierlab.errors import ConfigError
    with pytest.raises(ConfigError, match="no BTF"):
        scantrace.scan_offsets(tmp_path, gk.vmlinuz)


@pytest.fixture(scope="module")
def guest_ready(oracle_guest):
    try:
        build.ensure_kernel()
    except build.Unavailable as e:
        pytest.skip(f"the oracle's guest cannot be built here: {e}")


def test_guest_scan_period_doubles_at_each_placement(guest_ready):
    """promote-anon (4 M accesses, ~25 s of guest time: a 1.5 M run once ended before any placement under
    TCG timing): in tiering mode every recorded fault is a promotion,
    private and remote, so update_task_scan_period() sees local + shared == 0 and doubles the
    period at each placement (capped at task_scan_max)."""
    from tierlab.machine import Machine
    from tierlab.oracle.programs import guest_program
    from tierlab.workloads import make_workload
    m = guest.guest_machine(Machine.load("qemu-2node").scaled(4), 2)
    w = make_workload("random-read", {"target": "anon", "file_size": "1536MiB", "accesses": 4_000_000}, scale=4)
    program, args, files = guest_program(w, 0, None)
    b = guest.boot(m, program, args, files, Kernel(demotion_enabled=1, numa_balancing=2), timeout_s=300,
                   trace_scan=True)
    g = parse_console(b.transcript)
    assert g.errors == [] and g.exit_status == 0
    s = scantrace.scan_summary(g)
    assert s["calls"] >= 2 and s["start_ms"] in (500, 1000)      # task_scan_start for 1 or 2 windows of RSS
    assert s["check"]["placements_known"] >= 1
    assert s["check"]["doubling"] == s["check"]["placements_known"]
