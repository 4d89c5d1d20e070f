"""Run configs: every Result carries a RunConfig that rebuilds the run bit-identically (calibrated
and scaled machines too); one validator refuses bad values naming the key; the time series ends
with the final counters; the up-front estimates."""
from __future__ import annotations

import dataclasses
import json

import numpy as np
import pandas as pd
import pytest

from tierlab import api
from tierlab.api import Simulation, build
from tierlab.config import MAX_ACCESSES, RunConfig, estimate_note, validate
from tierlab.errors import ConfigError
from tierlab.kernel import Kernel
from tierlab.machine import Machine
from tierlab.workloads import make_workload


def same_run(a, b) -> None:
    pd.testing.assert_series_equal(a.counters, b.counters, check_exact=True)
    pd.testing.assert_frame_equal(a.timeseries, b.timeseries, check_exact=True)
    pd.testing.assert_frame_equal(a.nodes, b.nodes, check_exact=True)
    pd.testing.assert_frame_equal(a.marks_s, b.marks_s, check_exact=True)
    assert a.sim_time_s == b.sim_time_s


def calibrated_run():
    """As the seed-000 reproduction builds its machine: with_costs (calibrated copy cost), then
    scaled, with the same machine name as the preset; plus a cost override and a sample interval."""
    machine = Machine.load("dram-cxl-1tb").with_costs(seq_4k_ns=[226.5, 290.625]).scaled(4096)
    w = make_workload("file-read", {"file_size": "128GiB", "cycles": 2, "file_policy": "bind:1"}, scale=4096)
    sim = Simulation(machine, Kernel(numa_balancing=2, pagecache_promotion_enabled=1), w, seed=5,
                     sample_interval_ms=2.5, costs={"fault_ns": 650})
    return sim.run().result()


def test_calibrated_machine_round_trips():
    res = calibrated_run()
    cfg = res.config
    assert cfg["machine"]["name"] == "dram-cxl-1tb"
    assert [n["seq_4k_ns"] for n in cfg["machine"]["nodes"]] == [226.5, 290.625]
    assert cfg["machine"]["nodes"][0]["capacity"] == Machine.load("dram-cxl-1tb").scaled(4096).nodes[0].capacity_bytes
    assert cfg["costs"] == {"fault_ns": 650.0} and cfg["sample_interval_ms"] == 2.5 and cfg["seed"] == 5
    again = build(json.loads(json.dumps(cfg))).run().result()     # through JSON, as a file keeps it
    same_run(res, again)
    assert again.config == cfg
    # the preset by name is a different machine (uncalibrated): the config must not say "dram-cxl-1tb" only
    by_name = build({**cfg, "machine": "dram-cxl-1tb"}).run().result()
    assert by_name.sim_time_s != res.sim_time_s


def test_scaled_machine_and_preset_name_round_trip():
    res = build({"machine": "qemu-2node", "workload": "random-read", "scale": 64, "seed": 3,
                 "params": {"file_size": "2GiB", "accesses": 20000, "policy": "bind:0"},
                 "knobs": {"demotion_enabled": 1}}).run().result()
    assert res.counters["pgdemote_kswapd"] > 0
    assert res.config["machine"]["nodes"][0]["capacity"] == 2**30 // 64
    same_run(res, build(res.config).run().result())
    # a Simulation made from objects records the same config as build() from the preset name
    m = Machine.load("qemu-2node").scaled(64)
    w = make_workload("random-read", {"file_size": "2GiB", "accesses": 20000, "policy": "bind:0"}, scale=64)
    sim = Simulation(m, Kernel(demotion_enabled=1), w, seed=3)
    assert sim.config() == res.config
    same_run(res, sim.run().result())


def test_quantum_is_recorded_and_rebuilds_the_run():
    """The quantum orders two CPUs' events, so it decides counters: a run with a non-default one
    must record it, and build(config) must repeat it."""
    base = {"machine": "qemu-2node", "workload": "random-read", "scale": 64, "seed": 3,
            "params": {"file_size": "2GiB", "accesses": 20000, "policy": "bind:0", "tasks": 2},
            "knobs": {"demotion_enabled": 1}}
    res = build({**base, "quantum_us": 1}).run().result()
    assert res.config["quantum_us"] == 1.0
    same_run(res, build(res.config).run().result())
    assert build(base).run().result().config["quantum_us"] == 20.0
    with pytest.raises(ConfigError, match="quantum_us"):
        build({**base, "quantum_us": 0})
    with pytest.raises(ConfigError, match=r"quantum_us: 25 .*0\.001 \.\. 24"):
        build({**base, "quantum_us": 25})       # a lock calendar's ring must hold 4x the lead


def test_tlb_model_is_recorded_and_rebuilds_the_run():
    """The TLB model charges page walks, so it decides the clock: recorded, rebuilt, checked."""
    base = {"machine": "qemu-2node", "workload": "random-read", "scale": 64, "seed": 3,
            "params": {"file_size": "2GiB", "accesses": 20000, "policy": "bind:0", "io": "mmap"},
            "knobs": {"demotion_enabled": 1}}
    res = build({**base, "tlb_model": "set_assoc"}).run().result()
    assert res.config["tlb_model"] == "set_assoc" and res.counters["dtlb_load_misses"] > 0
    same_run(res, build(res.config).run().result())
    off = build(base).run().result()
    assert off.config["tlb_model"] == "off" and off.counters["dtlb_load_misses"] == 0
    with pytest.raises(ConfigError, match="tlb_model.*accepted: off, set_assoc"):
        build({**base, "tlb_model": "full"})


def test_parquet_metadata_config_rebuilds_the_run(tmp_path):
    from tierlab.output import read_parquet, write_parquet
    res = calibrated_run()
    write_parquet(res, tmp_path / "r.parquet")
    _, meta = read_parquet(tmp_path / "r.parquet")
    assert meta["config"] == res.config
    same_run(res, build(meta["config"]).run().result())


def test_run_config_is_frozen_and_idempotent():
    rc = validate({"machine": "qemu-2node", "workload": "random-read", "scale": "16",
                   "knobs": {"demotion_enabled": "1", "swappiness": 60}, "costs": {"fault_ns": "700"}})
    assert isinstance(rc, RunConfig)
    with pytest.raises(dataclasses.FrozenInstanceError):
        rc.seed = 1
    assert rc.scale == 16.0 and rc.knobs == {"demotion_enabled": 1.0}   # defaults left out
    assert rc.costs == {}                                                # 700 is fault_ns's default
    d = rc.to_dict()
    assert RunConfig.from_dict(d) == rc and RunConfig.from_dict(d).to_dict() == d
    assert validate(rc) == rc


def test_final_timeseries_row_is_the_final_counters():
    res = calibrated_run()
    last = res.timeseries.iloc[-1]
    assert np.array_equal(last[list(res.counters.index)].to_numpy(np.int64), res.counters.to_numpy())
    assert last["time_s"] >= res.sim_time_s
    for i, row in res.nodes.iterrows():
        assert last[f"node{i}_nr_free_pages"] == row["nr_free_pages"]
    assert res.timeseries["time_s"].is_monotonic_increasing


def test_state_estimate_is_16_bytes_per_page():
    from tierlab.core.state import page_state_bytes
    assert api.state_bytes(1 << 20) - api.state_bytes(0) == page_state_bytes(1 << 20) == 16 << 20


BAD = [
    ({"seed": -1}, ["seed", "0 .."]),
    ({"seed": 1.5}, ["seed", "integer"]),
    ({"scale": float("nan")}, ["scale", "finite number > 0"]),
    ({"scale": float("inf")}, ["scale", "finite number > 0"]),
    ({"scale": True}, ["scale"]),
    ({"params": {"accesses": 1.5}}, ["accesses", "1.5", "integer"]),
    ({"params": {"accesses": 1e20}}, ["accesses", "integer in 1 .."]),
    ({"params": {"accesses": 10**13}}, ["accesses", "at most 1e+12"]),
    ({"params": {"file_size": "1e30GiB"}}, ["file_size", "out of range"]),
    ({"params": {"file_size": float("nan")}}, ["file_size"]),
    ({"params": {"tasks": 10**9}}, ["tasks", "1 .. 4096"]),
    ({"costs": {"fault_ns": -100}}, ["fault_ns", "0 .."]),
    ({"costs": {"stream_break_ns": -0.5}}, ["stream_break_ns", "-1 or"]),
    ({"costs": {"util_window_ns": 0}}, ["util_window_ns", "16384 .. 33554432"]),
    ({"costs": {"no_such_cost": 1}}, ["no_such_cost", "fault_ns"]),
    ({"sample_interval_ms": 0}, ["sample_interval_ms", "0.001"]),
    ({"knobs": {"demotion_enabled": float("nan")}}, ["demotion_enabled", "0 .. 1"]),
    ({"knobs": [1]}, ["knobs", "table"]),
    ({"extra": 1}, ["extra", "accepted"]),
    ({"machine": 7}, ["machine", "preset"]),
    ({"machine": {"nodes": [{"name": "n"}]}}, ["machine", "capacity"]),
]


@pytest.mark.parametrize("change, names", BAD, ids=[f"bad{i}" for i in range(len(BAD))])
def test_one_validator_names_the_key(change, names):
    cfg = {"machine": "qemu-2node", "workload": "random-read", "scale": 64,
           "params": {"file_size": "2GiB", "accesses": 1000}}
    for k, v in change.items():
        cfg[k] = {**cfg.get(k, {}), **v} if isinstance(v, dict) and isinstance(cfg.get(k), dict) else v
    with pytest.raises(ConfigError) as ei:
        validate(cfg)
    msg = str(ei.value)
    assert "\n" not in msg
    for n in names:
        assert n in msg, msg


def test_machine_dict_values_are_checked():
    d = Machine.load("qemu-2node").to_dict()
    d["nodes"][1]["seq_4k_ns"] = float("nan")
    with pytest.raises(ConfigError, match=r"nodes\[1\]\.seq_4k_ns"):
        validate({"machine": d, "workload": "random-read"})
    assert Machine.from_dict(Machine.load("qemu-2node").to_dict()).nodes == Machine.load("qemu-2node").nodes


def test_time_estimate():
    assert estimate_note(1000) is None
    note = estimate_note(10**10)
    assert note.startswith("tierlab: 1e+10 simulated accesses") and "wall time" in note
    assert MAX_ACCESSES == 10**12


def test_page_alloc_model_is_recorded_and_rebuilds_the_run():
    """The buddy allocator decides which large folios can be allocated: recorded, rebuilt, checked."""
    base = {"machine": "qemu-2node", "workload": "random-read", "scale": 64, "seed": 3,
            "params": {"file_size": "2GiB", "accesses": 20000, "policy": "bind:0", "io": "mmap"},
            "knobs": {"demotion_enabled": 1}}
    res = build({**base, "page_alloc_model": "buddy"}).run().result()
    assert res.config["page_alloc_model"] == "buddy" and res.buddyinfo is not None
    assert res.buddyinfo.to_numpy().sum() > 0
    same_run(res, build(res.config).run().result())
    off = build(base).run().result()
    assert off.config["page_alloc_model"] == "counts" and off.buddyinfo is None
    with pytest.raises(ConfigError, match="page_alloc_model.*accepted: counts, buddy"):
        build({**base, "page_alloc_model": "slab"})
