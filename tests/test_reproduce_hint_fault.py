"""The seed 002 microbenchmark reproduction at a small scale: the table's shape and roles, the
calibration of the default score, the rows the model predicts closely, the RFC's headline (fault-count
latency promotes several times more and rejects far fewer on the large footprint, and runs faster),
and that two scales give the same table. Tolerances are what the model meets at these scales (the
full-size figures are in the reproduction's report)."""
import pytest

from tierlab.machine import Machine
from tierlab.reproduce import COLUMNS, published, run_reproduction
from tierlab.reproduce.hint_fault import E, run_column, with_loads_in_flight

SCALE = 128


@pytest.fixture(scope="module")
def table():
    return run_reproduction("hint-fault-microbench", scale=SCALE, jobs=1)


def _v(df, col):
    d = df[df.experiment == f"{E}-{col}"].set_index("metric")
    return d.simulated, d.published


def test_published_rows_have_sources_and_both_columns():
    pub = published("hint_fault_microbench.csv")
    assert pub.source.notna().all() and all("seed 002" in x for x in pub.source)
    d = set(pub[pub.experiment == f"{E}-default"].metric)
    p = set(pub[pub.experiment == f"{E}-patched"].metric)
    assert p <= d and {"score_us", "pgpromote_success", "numa_latency_rejects"} <= p


def test_table_shape_roles_and_calibration(table):
    assert list(table.columns) == COLUMNS
    cal = table[table.role == "calibrated"]
    assert list(cal.metric) == ["score_us"] and (cal.experiment == f"{E}-default").all()
    assert abs(float(cal.rel_error.iloc[0])) < 0.03
    assert len(table) == len(published("hint_fault_microbench.csv"))


def test_default_column_predictions(table):
    sim, pub = _v(table, "default")
    for k in ("numa_pte_updates", "numa_hint_faults", "numa_should_migrate_calls"):
        assert sim[k] == pytest.approx(pub[k], rel=0.1), k
    assert sim["numa_latency_rejects"] == pytest.approx(pub["numa_latency_rejects"], rel=0.25)
    assert sim["numa_hint_faults_local"] == 0 and sim["pgdemote_direct"] == 0
    # the seed's samples: thresholds stepped from 1125 to 2000 ms, latencies up to ~630 s
    assert sim["threshold_sample_min_ms"] == 1125 and sim["threshold_sample_max_ms"] == 2000
    assert 400_000 < sim["latency_sample_max_ms"] < 700_000
    assert 5 < sim["cxl_pass_ms"] < 20


def test_fault_count_latency_promotes_more_and_rejects_less(table):
    d, _ = _v(table, "default")
    p, _ = _v(table, "patched")
    assert p["pgpromote_success"] > 2.5 * d["pgpromote_success"]
    assert p["numa_latency_rejects"] < 0.5 * d["numa_latency_rejects"]
    assert p["score_us"] < 0.95 * d["score_us"]
    assert p["numa_should_migrate_calls"] == p["numa_hint_faults"]
    assert p["pgdemote_kswapd"] > d["pgdemote_kswapd"]


def test_two_scales_agree(table):
    k = table.attrs["loads_in_flight_k"]
    m = with_loads_in_flight(Machine.load("bergamo-cxl"), k)
    a, b = (run_column(m, sc, False) for sc in (64, SCALE))
    for key in ("score_us", "numa_pte_updates", "numa_hint_faults", "numa_latency_rejects"):
        assert a[key] == pytest.approx(b[key], rel=0.05), key
    for key in ("pgpromote_success", "pgdemote_kswapd"):
        assert a[key] == pytest.approx(b[key], rel=0.3), key
