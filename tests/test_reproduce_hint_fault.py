"""The seed 002 microbenchmark reproduction at a small scale: the table's shape and roles, one
decision call per hint fault, and that two scales give the same table. How close each row is to the
seed, and whether the RFC's headline holds (the patched column promotes more, rejects fewer and runs
faster), is the fidelity scoreboard's (tests/test_fidelity.py, data/tolerances.csv)."""
import pytest

from tierlab.machine import Machine
from tierlab.reproduce import COLUMNS, REPRODUCTIONS, published
from tierlab.reproduce.hint_fault import E, run_column, with_loads_in_flight

SCALE = REPRODUCTIONS[E].quick["scale"]


@pytest.fixture(scope="module")
def table(reproduction):
    return reproduction(E)


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
    assert set(table[table.role == "derived"].metric) == {"numa_should_migrate_calls"}
    assert len(table) == len(published("hint_fault_microbench.csv"))


def test_one_decision_call_per_hint_fault(table):
    """should_numa_migrate_memory() runs once per hint fault in both kernels (hence role derived)."""
    for col in ("default", "patched"):
        sim, _ = _v(table, col)
        assert sim["numa_should_migrate_calls"] == sim["numa_hint_faults"] > 0


def test_scan_walk_per_pass(table):
    """The scanner's calls per pass and the share of its ranges that updated a PTE are reported
    (hint_fault.scan_walk): at least one call a pass, and the share a fraction."""
    for col in ("default", "patched"):
        assert table.attrs[f"scan_calls_per_pass_{col}"] >= 1
        assert 0 < table.attrs[f"scan_ranges_updated_share_{col}"] < 1


def test_two_scales_agree(table):
    k = table.attrs["loads_in_flight_k"]
    m = with_loads_in_flight(Machine.load("bergamo-cxl"), k)
    a, b = (run_column(m, sc, False) for sc in (64, SCALE))
    for key in ("score_us", "numa_pte_updates", "numa_hint_faults", "numa_latency_rejects"):
        assert a[key] == pytest.approx(b[key], rel=0.05), key
    for key in ("pgpromote_success", "pgdemote_kswapd"):
        assert a[key] == pytest.approx(b[key], rel=0.3), key
