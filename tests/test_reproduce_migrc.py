"""The seed 004 (MIGRC on XSBench) reproduction at a short length: the table's shape and roles, the
calibration of the before column's run time, the before column's shootdowns (kswapd's demotion
batches reaching the 15 other CPUs), MIGRC's headline (most shootdowns gone), that nothing is
deferred when migrated PTEs stay dirty, and that two run lengths give the same changes. Tolerances
are what the model meets here; the misses (local full flushes, migrations, run time) are the
reproduction's findings, not tested as agreement."""
import pytest

from tierlab.machine import Machine
from tierlab.reproduce import COLUMNS, published, run_reproduction
from tierlab.reproduce.hint_fault import with_loads_in_flight
from tierlab.reproduce.migrc_xsbench import E, run_column

FRACTION = 0.02


@pytest.fixture(scope="module")
def table():
    return run_reproduction("migrc-xsbench", scale=64, jobs=1, fraction=FRACTION)


def _col(df, col):
    d = df[df.experiment == f"{E}-{col}"].set_index("metric")
    return d.simulated, d.published


def test_published_rows_have_sources_and_both_columns():
    pub = published("migrc_xsbench.csv")
    assert pub.source.notna().all() and all("seed 004" in x for x in pub.source)
    assert set(pub[pub.experiment == f"{E}-before"].metric) == set(pub[pub.experiment == f"{E}-after"].metric)


def test_table_shape_roles_and_calibration(table):
    assert list(table.columns) == COLUMNS
    cal = table[table.role == "calibrated"]
    assert (cal.experiment == f"{E}-before").all()
    assert set(cal.metric) == {"time_elapsed_s", "itlb.itlb_flush", "tlb_flush.dtlb_thread", "tlb_flush.stlb_any",
                               "dTLB-load-misses", "dTLB-store-misses", "iTLB-load-misses"}
    assert abs(float(cal.set_index("metric").rel_error["time_elapsed_s"])) < 0.02
    # the perf events: each fitted on its before row (one base rate or factor), exact there unless
    # the base rate would be negative (itlb.itlb_flush: twice the model's flushes already exceed it)
    perf = cal[cal.metric != "time_elapsed_s"].set_index("metric")
    assert (perf.rel_error.abs() < 0.15).all()
    assert (perf.rel_error.drop("itlb.itlb_flush").abs() < 1e-9).all()
    assert all(v >= 0 for v in table.attrs["perf_fitted"].values())


def test_perf_rows_follow_the_cpus_flushes_and_walks(table):
    """The after column's flush events fall with the CPUs' whole flushes (twice each under PTI), the
    misses with the model's walks; no stale translation was written through or read after its
    source was freed."""
    ch, pub = _col(table, "change")
    b, a = table.attrs["extra_before"], table.attrs["extra_after"]
    assert a["tlb_cpu_flush_all"] < 0.6 * b["tlb_cpu_flush_all"]
    for ev in ("itlb.itlb_flush", "tlb_flush.dtlb_thread", "tlb_flush.stlb_any"):
        assert -1 < ch[ev] < 0 and pub[ev] < 0
    for key, ev in (("dtlb_load_misses", "dTLB-load-misses"), ("itlb_load_misses", "iTLB-load-misses")):
        assert ch[ev] == pytest.approx(a[key] / b[key] - 1, abs=1e-9)
    for col in (b, a):
        assert col["tlb_stale_write_hits"] == 0 and col["tlb_stale_freed_hits"] == 0


def test_before_column_shootdowns(table):
    sim, pub = _col(table, "before")
    assert sim["nr_tlb_remote_flush"] == pytest.approx(pub["nr_tlb_remote_flush"], rel=0.3)
    # kswapd (lazy) sends, the 15 CPUs running XSBench threads receive: the seed's 14.9
    assert 13.5 < sim["nr_tlb_remote_flush_received"] / sim["nr_tlb_remote_flush"] <= 15
    assert sim["nr_tlb_local_flush_all"] < 0.15 * sim["nr_tlb_remote_flush"]
    assert sim["pgmigrate_success"] == pytest.approx(pub["pgmigrate_success"], rel=0.4)


def test_migrc_removes_most_shootdowns_only_with_clean_migrated_ptes(table):
    ch, pub = _col(table, "change")
    assert ch["nr_tlb_remote_flush"] < -0.6 and pub["nr_tlb_remote_flush"] < -0.9
    assert ch["nr_tlb_remote_flush_received"] == pytest.approx(ch["nr_tlb_remote_flush"], abs=0.05)
    # with migration entries keeping the dirty bit every grid page stays dirty: nothing to defer
    assert table.attrs["ad_supported_change_nr_tlb_remote_flush"] == 0
    assert table.attrs["migrc_pending_max_pages"] > 0


def test_changes_hold_at_twice_the_length(table):
    """The remote-flush change at 2 % and 4 % of the run: -0.68 and -0.77 (and -0.75 at the
    reproduction's 5 %), a spread the scan-pace race between the threads explains (see the
    reproduction's docstring); the claim tested is that it stays within 10 points."""
    m = with_loads_in_flight(Machine.load("qemu-2node"), table.attrs["loads_in_flight_k"])
    b, a = run_column(m, 64, 2 * FRACTION, False), run_column(m, 64, 2 * FRACTION, True)
    ch, _ = _col(table, "change")
    assert a["nr_tlb_remote_flush"] / b["nr_tlb_remote_flush"] - 1 == pytest.approx(ch["nr_tlb_remote_flush"], abs=0.1)
    assert b["time_elapsed_s"] == pytest.approx(_col(table, "before")[0]["time_elapsed_s"], rel=0.05)
