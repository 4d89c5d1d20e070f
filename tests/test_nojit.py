"""A small tiered run with NUMBA_DISABLE_JIT=1 (in a subprocess) must give the JIT run's counters:
plain Python/NumPy semantics (integer widths, wraparound, casts) that numba hides show up here."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = r"""
import json, sys
sys.path[:0] = [{root!r}, {tests!r}]
from simkit import CXL, DRAM, LOAD, READ, STORE, chunk, machine, make_sim
from tierlab.workloads.base import Region
m = machine((128, 1, DRAM), (512, 0, CXL))
sim = make_sim(m, [Region("a", "anon", 160), Region("f", "file", 160)], lru_batch_size=4,
               demotion_enabled=1, numa_balancing=2, pagecache_promotion_enabled=1,
               scan_delay_ms=0, scan_period_min_ms=1, scan_size_mb=1)
# ~5 ms: NUMA scans run at scheduler ticks (every 4 ms), so the loads must outlast the first one
acc = [(p % 160, STORE) for p in range(400)] + [(160 + p % 160, READ) for p in range(800)] \
      + [(p % 160, LOAD) for p in range(30000)]
sim.run(chunks=[chunk(acc)])
res = sim.result()
print(json.dumps({{"counters": {{k: int(v) for k, v in res.counters.items()}}, "sim_time_s": res.sim_time_s}}))
"""


def run(jit: bool) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    if not jit:
        env["NUMBA_DISABLE_JIT"] = "1"
    code = SCRIPT.format(root=str(ROOT), tests=str(ROOT / "tests"))
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def jit_run():
    return run(jit=True)


def test_the_scenario_demotes_and_promotes(jit_run):
    c = jit_run["counters"]
    assert c["pgdemote_kswapd"] + c["pgdemote_direct"] > 0
    assert c["pgpromote_success"] > 0 and c["numa_hint_faults"] > 0


def test_counters_equal_without_jit(jit_run):
    nojit = run(jit=False)
    assert nojit == jit_run
