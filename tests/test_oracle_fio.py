"""The fio-shaped guest program (tierlab/oracle/programs/fio.c), its suite entries lru-classic-fio and
lru-mglru-fio, and the per-size THP rows of the mthp entries: the program's arguments are the model's
fio workload, what it cannot do the same way is refused by name, it builds with -Wall -Werror and,
run on the host, reads the blocks the model's laws give (random map, norandommap, fio's zipf,
pareto and normal generators) with both engines; a short guest run reclaims page cache (skipped
where QEMU or the kernel cannot be had)."""
from __future__ import annotations

import shutil
import subprocess
import types

import numpy as np
import pandas as pd
import pytest

from tierlab.errors import ConfigError
from tierlab.oracle import build, suite
from tierlab.oracle.programs import guest_program
from tierlab.workloads import fio_dist, make_workload

ENTRY = next(e for e in suite.ENTRIES if e.name == "lru-classic-fio")


def _args(args: list[str]) -> dict:
    return dict(a.split("=", 1) for a in args)


def test_program_arguments_are_the_models_workload():
    w = make_workload("fio", ENTRY.params, scale=ENTRY.scale)
    prog, args, files = guest_program(w, seed=3)
    a = _args(args)
    assert prog == "fio" and files == {"fio.0.0": 384 << 20}           # 1536 MiB at 1/4
    assert a["size"] == str(384 << 20) and a["bs"] == "4096" and a["numjobs"] == "1" and a["rw"] == "randread"
    assert a["ioengine"] == "io_uring" and a["iodepth"] == "128" and a["norandommap"] == "1" and a["loops"] == "6"
    assert a["dist"] == "random" and a["file_policy"] == "bind:0" and a["seed"] == "3" and a["shared"] == "0"
    assert a["fadvise_hint"] == "1" and a["pre_read"] == "0" and a["log_ios"] == "65536"
    # the job's size rounds down to whole bs blocks, as the model's file does
    w = make_workload("fio", {"rw": "read", "bs": "64KiB", "size": "1000KiB", "numjobs": 3, "filename": "any name",
                              "pre_read": 1, "random_distribution": "zipf:1.2", "ioengine": "psync"})
    prog, args, files = guest_program(w)
    a = _args(args)
    assert files == {"fio.shared": 15 * 65536} and a["size"] == str(15 * 65536) and a["bs"] == "65536"
    assert a["shared"] == "1" and a["numjobs"] == "3" and a["pre_read"] == "1"
    assert a["dist"] == "zipf" and a["dist_param"] == "1.2" and a["ioengine"] == "psync"


@pytest.mark.parametrize("params, name", [
    ({"rw": "randwrite"}, "rw"), ({"rw": "randrw"}, "rw"),
    ({"time_based": 1, "runtime": "10s"}, "time_based"), ({"runtime": "10s"}, "runtime"),
    ({"ramp_time": "1s"}, "ramp_time"), ({"startdelay": "1s"}, "startdelay"),
    ({"nrfiles": 2}, "nrfiles"),
])
def test_what_the_program_cannot_do_is_refused_by_name(params, name):
    w = make_workload("fio", {"size": "64MiB"} | params)
    with pytest.raises(ConfigError, match=f"^{name}:"):
        guest_program(w)


# ---- the program on the host ---------------------------------------------------------------

@pytest.fixture(scope="module")
def binary(tmp_path_factory):
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("gcc not found")
    out = tmp_path_factory.mktemp("fio") / "fio"
    r = subprocess.run([gcc, "-O2", "-Wall", "-Werror", "-o", str(out), str(build.PROGRAM_DIR / "fio.c"),
                        "-lpthread", "-lm"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return out


def _run_native(binary, args, timeout=60):
    """Run the program on the host until its done or error line (it then stops itself with
    SIGSTOP) and return its output lines."""
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


def _host_run(binary, tmp_path, params: dict, trace: int = 0):
    """The model's workload `params` (unscaled) run by the program on the host over files of its
    size in tmp_path: (output lines, the traced blocks of job 0)."""
    w = make_workload("fio", params)
    _, args, files = guest_program(w, seed=1)
    for name, size in files.items():
        (tmp_path / name).write_bytes(np.random.default_rng(0).integers(0, 256, size, np.uint8).tobytes())
    lines = _run_native(binary, [f"dir={tmp_path}", *args[1:], f"trace_blocks={trace}"])
    errors = [ln for ln in lines if "error" in ln]
    if errors and "io_uring_setup" in errors[0]:
        pytest.skip(f"io_uring is not available on this host: {errors[0]}")
    assert not errors, errors
    assert lines[-1].startswith("@@tierlab done")
    return lines, np.array([int(ln.split()[2]) for ln in lines if ln.startswith("@@tierlab fioblock")], np.int64)


@pytest.mark.parametrize("engine", ["psync", "io_uring"])
def test_random_map_reads_every_block_once_per_pass(binary, tmp_path, engine):
    """randread without norandommap: each pass a permutation of the blocks (fio's random map), a
    new one per pass; every job MARKs every log_ios I/Os (and after its pre_read)."""
    nb = 512
    lines, blocks = _host_run(binary, tmp_path, {"rw": "randread", "size": f"{nb * 4}KiB", "numjobs": 2, "loops": 2,
                                                 "ioengine": engine, "iodepth": 16, "log_ios": 256, "pre_read": 1},
                              trace=2 * nb)
    assert len(blocks) == 2 * nb
    assert sorted(blocks[:nb]) == list(range(nb)) and sorted(blocks[nb:]) == list(range(nb))
    assert not np.array_equal(blocks[:nb], blocks[nb:]) and not np.array_equal(blocks[:nb], np.arange(nb))
    marks = [tuple(map(int, ln.split()[2:4])) for ln in lines if ln.startswith("@@tierlab mark")]
    assert sorted(marks) == [(j, k) for j in range(2) for k in range(1 + 2 * nb // 256)]


def test_sequential_and_norandommap(binary, tmp_path):
    _, blocks = _host_run(binary, tmp_path, {"rw": "read", "size": "1MiB", "bs": "8KiB", "loops": 2}, trace=1000)
    assert blocks.tolist() == list(range(128)) * 2
    _, blocks = _host_run(binary, tmp_path, {"rw": "randread", "size": "1MiB", "norandommap": 1, "loops": 40,
                                             "ioengine": "io_uring", "iodepth": 32}, trace=10_000)
    counts = np.bincount(blocks, minlength=256)
    assert len(blocks) == 10_000 and blocks.min() >= 0 and blocks.max() < 256
    assert (counts > 0).sum() > 250 and counts.max() < 80          # uniform: ~39 per block, repeats allowed


@pytest.mark.parametrize("dist", ["zipf:1.2", "zipf:0.8", "pareto:0.2", "normal:0", "normal:10"])
def test_skewed_blocks_follow_the_models_law(binary, tmp_path, dist):
    """fio's generators in C against the model's (workloads/fio_dist.py) over 4096 blocks: the
    sorted hit counts (the law's shape: how much the hottest blocks get) agree, and hashing
    scatters the hot blocks over the file in both."""
    n, draws = 4096, 60_000
    _, blocks = _host_run(binary, tmp_path, {"rw": "randread", "size": f"{n * 4}KiB", "loops": draws // n + 1,
                                             "random_distribution": dist}, trace=draws)
    name, param = fio_dist.parse(dist)
    model = fio_dist.BlockDistribution(name, param, n, np.random.default_rng(7)).blocks(draws)
    g = np.sort(np.bincount(blocks, minlength=n))[::-1].cumsum() / draws
    m = np.sort(np.bincount(model, minlength=n))[::-1].cumsum() / draws
    for k in (1, 10, 100, 1000):        # share of the I/Os on the k hottest blocks
        assert g[k - 1] == pytest.approx(m[k - 1], abs=0.02 + 0.05 * m[k - 1]), (k, g[k - 1], m[k - 1])
    assert (np.bincount(blocks, minlength=n) > 0).sum() == pytest.approx((np.bincount(model, minlength=n) > 0).sum(),
                                                                          rel=0.05)


# ---- the mthp entries' per-size rows -----------------------------------------------------

def test_suite_reads_per_size_thp_rows_from_both_sides():
    mthp = pd.DataFrame({"anon_fault_alloc": [3, 100], "split_deferred": [0, 7]},
                        index=["hugepages-16kB", "hugepages-64kB"])
    res = types.SimpleNamespace(counters=pd.Series({"pgfault": 1000, "pgsteal_kswapd": 5, "pgsteal_direct": 2}),
                                mthp=mthp)
    assert suite._value(res, "hugepages-64kB/anon_fault_alloc") == 100
    assert suite._value(res, "hugepages-16kB/split_deferred") == 0
    assert suite._value(res, "hugepages-32kB/anon_fault_alloc") is None     # a size that side lacks
    assert suite._value(res, "hugepages-64kB/swpout") is None
    assert suite._value(res, "pgfault") == 1000 and suite._value(res, "pgsteal (kswapd+direct)") == 7
    assert suite._value(types.SimpleNamespace(counters=res.counters, mthp=pd.DataFrame()),
                        "hugepages-64kB/anon_fault_alloc") is None
    mech = suite.MECHANISMS["mthp"]
    assert all(c.startswith("hugepages-") or c == "pgfault" for c in mech.rows)
    for e in (e for e in suite.ENTRIES if e.mechanism == "mthp"):
        assert e.scale == 1 and e.knobs["anon_folio_orders"] == "mthp"


# ---- a real guest --------------------------------------------------------------------------

def test_guest_fio_io_uring_reclaims_page_cache(guest_ready):
    """The entry's job, shorter (1/8 of qemu-2node, one pass): the io_uring reads of a file 1.5x
    node 0 bound there fill node 0 and reclaim evicts page cache in both guest and model; the
    guest read the whole job (its done line) and the model reclaimed about as much."""
    from tierlab.oracle import run_oracle
    params = dict(ENTRY.params, loops=1)
    run = run_oracle(ENTRY.workload, params, ENTRY.knobs, machine=ENTRY.machine, scale=8, timeout_s=600)
    g, m = run.guest, run.model.counters
    assert run.warnings == [] and g.run_time_s > 0
    steal_g = g.counters["pgsteal_kswapd"] + g.counters["pgsteal_direct"]
    steal_m = m["pgsteal_kswapd"] + m["pgsteal_direct"]
    assert steal_g > 5_000 and steal_m > 5_000
    assert g.counters["pgdemote_kswapd"] + g.counters["pgdemote_direct"] == 0     # no demotion asked
