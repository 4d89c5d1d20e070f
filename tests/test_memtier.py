"""The memtier workload: the clients' pipelining and the server's rounds on hand-worked cases, the
miss rule, the 20480-class allocator, memtier's HdrHistogram arithmetic, the CPU-work op on both
access paths, and the seed 002 Redis reproduction at a small scale."""
import numpy as np
import pytest

from tierlab import Kernel, Machine
from tierlab.api import Simulation
from tierlab.core.ops import OP_CPU, OP_LOAD, OP_MARK, OP_PAGE, OP_STORE
from tierlab.errors import ConfigError
from tierlab.workloads import _redis as R
from tierlab.workloads import make_workload
from tierlab.workloads.base import Progress
from tierlab.workloads.memtier import (
    hdr_counts, hdr_mean, hdr_value_at_percentile, jemalloc_size_class, memtier_report, sds_alloc_bytes,
)


def generate(**params):
    """Run the workload's generator alone (no simulation); returns (workload, its state, the ops)."""
    w = make_workload("memtier", dict({"threads": 1, "clients": 1, "key_maximum": 99}, **params))
    gen = w.chunks(0)
    pages, ops = [], []
    try:
        ch = next(gen)
        while True:
            pages.append(ch.pages.copy())
            ops.append(ch.ops.copy())
            ch = gen.send(Progress(np.zeros(1, np.int64), np.zeros(1, bool), 0))
    except StopIteration:
        pass
    return w, w._run, np.concatenate(pages), np.concatenate(ops)


def test_pipeline_of_one_gives_one_command_per_round():
    # two connections, one command in flight each: every round answers one command per connection,
    # created when the previous response arrived (the end of the round before)
    w, st, _, _ = generate(threads=2, pipeline=1, requests=3, ratio="0:1")
    g = st["g"]
    assert g[R.G_ROUNDS_MAX] == 3
    assert list(st["last_round"]) == [2, 2]
    hist = st["hist"]
    assert hist[0, 1] == 2 and hist[1, 1] == 2 and hist[2, 1] == 2      # created at -1, 0, 1; one round later
    assert hist.sum() == 6
    # 10 us per round: every latency is 10 us, six commands in 30 us
    rep = memtier_report(np.array([10e3, 20e3, 30e3]), hist, st["last_round"], g)
    assert rep["Ops/sec"] == pytest.approx(6 / 30e-6)
    assert rep["p50 Latency"] == pytest.approx(0.015)     # hdr: 10 us is in [8, 16): highest 15 us
    assert rep["Avg. Latency"] == pytest.approx(0.012)    # its median equivalent value, 12 us
    assert rep["Misses/sec"] == rep["Ops/sec"] and rep["Hits/sec"] == 0     # no key was ever set


def test_deep_pipeline_answers_what_one_read_holds():
    # GETs of ~33 bytes: one 16 KiB read holds all four, all created at the start, all answered in round 0
    w, st, _, _ = generate(pipeline=1000, requests=4, ratio="0:1")
    assert st["g"][R.G_ROUNDS_MAX] == 1
    assert st["hist"][0, 1] == 4
    rep = memtier_report(np.array([500e3]), st["hist"], st["last_round"], st["g"])
    assert rep["p99 Latency"] == pytest.approx(0.503)      # 500 us is in the 8 us-wide bucket [496, 504)
    assert rep["KB/sec"] == pytest.approx((st["g"][R.G_TX] + 4 * 5) / 1024 / 500e-6)   # "$-1\r\n" per miss


def test_big_sets_complete_as_their_bytes_arrive():
    # SETs of 20000 bytes (20045 with the RESP framing of key "memtier-<2 digits>" or fewer): 16 KiB
    # per round, so the first completes in round 1 and the second in round 2
    w, st, _, ops = generate(pipeline=10, requests=2, ratio="1:0", key_maximum=9)
    assert st["g"][R.G_ROUNDS_MAX] == 3
    assert st["hist"][0, 2] == 1 and st["hist"][0, 3] == 1
    assert st["g"][R.G_SETS] == 2 and st["g"][R.G_TX] == 2 * (4 + 4 + 5 + 4 + 9 + 2 + 8 + 20000 + 2)
    # 100 us rounds (the first one empty: nothing completed): latencies 200 and 300 us
    rep = memtier_report(np.array([0.0, 200e3, 300e3]), st["hist"], st["last_round"], st["g"])
    assert rep["p50 Latency"] == pytest.approx(0.207)      # 200 us: [200, 208); 300 us: [296, 304)
    assert rep["p99 Latency"] == pytest.approx(0.303)
    assert rep["Ops/sec"] == pytest.approx(2 / 300e-6)


def test_get_of_a_key_never_set_is_a_miss_and_after_a_set_a_hit():
    _, st, _, _ = generate(requests=10, ratio="0:1", key_minimum=1, key_maximum=1, data_size=10)
    assert st["g"][R.G_MISSES] == 10 and st["g"][R.G_HITS] == 0
    # one key, SET then GET on every connection: the first GET follows the first SET
    _, st, _, _ = generate(threads=3, requests=10, ratio="1:1", key_minimum=1, key_maximum=1, data_size=10)
    assert st["g"][R.G_HITS] == 15 and st["g"][R.G_MISSES] == 0
    # many keys: the miss share is what the keys set so far leave (no SET before: a miss)
    _, st, _, _ = generate(threads=4, requests=2000, ratio="1:1", key_maximum=999, data_size=10)
    g = st["g"]
    s = np.arange(g[R.G_SETS])
    assert g[R.G_MISSES] / g[R.G_GETS] == pytest.approx(np.exp(-s / 1000).mean(), rel=0.1)


def test_allocator_tcache_then_first_fit_then_fresh():
    g = np.zeros(R.NR_G, np.int64)
    tc = np.zeros(R.TCACHE_SLOTS, np.int64)
    heap = np.zeros(64, np.int64)
    gi = R.G_VTC
    assert [R.slot_alloc(g, tc, heap, gi) for _ in range(3)] == [0, 1, 2]      # fresh slots
    R.slot_free(g, tc, heap, gi, 1)
    R.slot_free(g, tc, heap, gi, 0)
    assert R.slot_alloc(g, tc, heap, gi) == 0           # LIFO: the last freed first
    assert R.slot_alloc(g, tc, heap, gi) == 1
    assert R.slot_alloc(g, tc, heap, gi) == 3
    # 21 frees: the 21st finds the tcache full and flushes its older half (the first 10 freed) to
    # the arena; then 11 allocations: the 11 most recent from the tcache, then the arena's lowest
    got = [R.slot_alloc(g, tc, heap, gi) for _ in range(40)]        # slots 4..43
    for v in got[:21]:
        R.slot_free(g, tc, heap, gi, v)
    assert g[gi] == 11 and g[gi + 1] == 10
    again = [R.slot_alloc(g, tc, heap, gi) for _ in range(12)]
    assert again[:11] == got[10:21][::-1]
    assert again[11] == min(got[:10])


def test_values_take_whole_20480_slots_and_the_stream_is_in_redis_order():
    assert sds_alloc_bytes(20000) == 20006 and jemalloc_size_class(20006) == 20480
    assert [jemalloc_size_class(n) for n in (1, 17, 65, 16400, 16384, 32769)] == [8, 24, 80, 20480, 16384, 40960]
    w, st, pages, ops = generate(requests=2, ratio="1:1", key_minimum=1, key_maximum=1, pipeline=10)
    # SET: CPU, then the value's 5 pages stored in slot 0 (pages 0-4 of the values region), the
    # lookup (a bucket of the first table, empty), the new entry and the bucket stored
    vb = st["cfg"][R.C_VAL_BASE]
    assert ops[0] == OP_CPU
    assert list(pages[1:6]) == [vb + i for i in range(5)] and all(ops[1:6] == OP_STORE | OP_PAGE)
    assert ops[6] == OP_LOAD and pages[6] == st["cfg"][R.C_DICT_BASE]
    assert (int(ops[7]) & ~OP_MARK) == OP_STORE and pages[7] == st["cfg"][R.C_ENTRY_BASE]
    # GET (a hit): CPU, bucket, entry, the value's 5 pages read, the reply's 3626 bytes beyond c->buf
    # in a reply block: slot 1 of the same class, its first page stored, read at the round's end
    i = int(np.flatnonzero(ops == OP_CPU)[1])
    assert list(pages[i + 3:i + 8]) == [vb + p for p in range(5)] and all(ops[i + 3:i + 8] == OP_LOAD | OP_PAGE)
    assert pages[i + 8] == vb + 5 and ops[i + 8] == OP_STORE | OP_PAGE
    assert pages[-1] == vb + 5 and ops[-1] == OP_LOAD | OP_PAGE | OP_MARK
    assert st["g"][R.G_MARKS] == len(np.flatnonzero(ops & OP_MARK))


def test_hdr_histogram_as_memtier_2_0():
    c = hdr_counts(np.array([1044479, 1048575, 1048576, 5_000_000]), np.ones(4))
    assert c.sum() == 2                                    # >= 2**20 us: not recordable, dropped
    assert hdr_value_at_percentile(c, 50.0) == 1044479     # the seed's p99: a bucket's highest value
    assert hdr_value_at_percentile(c, 99.9) == 1048575     # the seed's p99.9: the last bucket's
    assert hdr_mean(hdr_counts(np.array([10]), np.ones(1))) == 12.0


def test_bad_params_are_refused():
    with pytest.raises(ConfigError, match="whole number of connections"):
        make_workload("memtier", {"threads": 3, "clients": 1}, scale=2)
    with pytest.raises(ConfigError, match="ratio"):
        make_workload("memtier", {"ratio": "0:0"})
    with pytest.raises(ConfigError, match="key_pattern"):
        make_workload("memtier", {"key_pattern": "S:S"})


def small_sim(fast_case=True):
    w = make_workload("memtier", {"threads": 4, "clients": 2, "requests": 200, "key_maximum": 3999,
                                  "data_size": 20000, "policy": "bind|numa_balancing:0,1", "cpunodebind": "0"})
    m = Machine.load("qemu-2node").scaled(16)     # 64 MiB of DRAM for ~82 MB of values
    sim = Simulation(m, Kernel(numa_balancing=2, demotion_enabled=1, scan_delay_ms=10), w, seed=3,
                     sample_interval_ms=1e9, fast_case=fast_case)
    return sim.run()


def test_cpu_work_and_page_stores_same_on_both_paths():
    a, b = small_sim(True), small_sim(False)
    assert np.array_equal(a.state.counters, b.state.counters)
    assert np.array_equal(a.state.marks, b.state.marks)
    assert a.result().summary == b.result().summary
    s = a.result().summary
    assert s["ops"] == 1600 and s["Ops/sec"] > 0


def test_reproduction_small_scale(reproduction):
    # a tenth of the seed's requests at scale 128 (seconds; Reproduction.quick): the table's shape
    # and roles, and the rows that follow from the model's own arithmetic (the keys set so far, the
    # RESP bytes); how close each row is to the seed is the scoreboard's (tests/test_fidelity.py)
    from tierlab.reproduce import REPRODUCTIONS
    df = reproduction("hint-fault-memtier")
    scale = REPRODUCTIONS["hint-fault-memtier"].quick["scale"]
    row = {(r.experiment.rsplit("-", 1)[1], r.metric): r for r in df.itertuples()}
    assert len(row) == 32
    assert row[("default", "ops_per_sec")].role == "calibrated"
    split = {"hits_per_sec", "misses_per_sec", "kb_per_sec"}
    assert all(r.role == ("derived" if k[1] in split else "predicted") for k, r in row.items()
               if k != ("default", "ops_per_sec"))
    keys = 10_000_001 / scale
    for col in ("default", "patched"):
        sim = {m: row[(col, m)].simulated for c, m in row if c == col}
        sets = sim["ops_per_sec"] / 2 * df.attrs[f"duration_s_{col}"] / scale
        miss = sim["misses_per_sec"] / (sim["ops_per_sec"] / 2)
        assert miss == pytest.approx(keys / sets * (1 - np.exp(-sets / keys)), rel=0.05)
        kb = (sim["ops_per_sec"] / 2 * 20045 + sim["hits_per_sec"] * (20010 + 34) + sim["misses_per_sec"] * 39) / 1024
        assert sim["kb_per_sec"] == pytest.approx(kb, rel=0.002)
        assert sim["numa_hint_faults_local"] == 0
        assert sim["pgpromote_success"] <= sim["pgpromote_candidate"]
        assert sim["p999_latency_ms"] < 1048.576          # memtier drops what it cannot record
        # how the scanner spent its passes (hint_fault.scan_walk): calls, and updating ranges' share
        assert df.attrs[f"scan_calls_per_pass_{col}"] >= 1
        assert 0 < df.attrs[f"scan_ranges_updated_share_{col}"] <= 1


@pytest.mark.slow
def test_reproduction_holds_at_two_scales():
    # the full run at scales 64 and 128: the predicted rows agree (how near the seed's they are is
    # the scoreboard's)
    from tierlab.reproduce import run_reproduction
    a, b = (run_reproduction("hint-fault-memtier", scale=f, jobs=1) for f in (64, 128))
    for x, y in zip(a.itertuples(), b.itertuples()):
        assert x.metric == y.metric
        if x.metric.endswith("sec") or x.metric in ("numa_pte_updates", "numa_hint_faults", "pgpromote_candidate"):
            assert y.simulated == pytest.approx(x.simulated, rel=0.05), x.metric
        if x.metric in ("pgpromote_success", "pgdemote_kswapd"):
            assert y.simulated == pytest.approx(x.simulated, rel=0.25), x.metric     # 64: 13.6 M, 128: 11.2 M demoted
