"""The seed 004 (MIGRC on XSBench) reproduction at a short length: the table's shape and roles, the
perf events' arithmetic, no stale translation used, a shootdown reaching at most the 15 other CPUs,
that nothing is deferred when migrated PTEs stay dirty, and that two run lengths give the same
changes. How close each row is to the seed is the fidelity scoreboard's (tests/test_fidelity.py)."""
import pytest

from tierlab.machine import Machine
from tierlab.reproduce import COLUMNS, REPRODUCTIONS, published
from tierlab.reproduce.hint_fault import with_loads_in_flight
from tierlab.reproduce.migrc_xsbench import E, run_column

FRACTION = REPRODUCTIONS[E].quick["fraction"]


@pytest.fixture(scope="module")
def table(reproduction):
    return reproduction(E)


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
    # the changes are scored; the absolute rows are reported beside them, and what carries a fitted
    # base rate or factor is derived
    assert (table[table.experiment == f"{E}-change"].role.isin(["predicted", "derived"])).all()
    rest = table[(table.experiment != f"{E}-change") & (table.role != "calibrated")]
    assert rest.role.isin(["reported", "derived"]).all()
    assert set(table[table.role == "derived"].metric) >= {"itlb.itlb_flush", "tlb_flush.dtlb_thread",
                                                          "tlb_flush.stlb_any"}


def test_no_stale_translation_is_used(table):
    """No stale translation was written through or read after its source was freed, before or
    after MIGRC defers flushes."""
    for col in (table.attrs["extra_before"], table.attrs["extra_after"]):
        assert col["tlb_stale_write_hits"] == 0 and col["tlb_stale_freed_hits"] == 0


def test_a_shootdown_reaches_at_most_the_other_cpus(table):
    """kswapd (lazy) sends, the 15 CPUs running XSBench threads receive."""
    sim, _ = _col(table, "before")
    assert 0 < sim["nr_tlb_remote_flush_received"] <= 15 * sim["nr_tlb_remote_flush"]


def test_nothing_is_deferred_when_migrated_ptes_stay_dirty(table):
    """With migration entries keeping the dirty bit every grid page stays dirty: MIGRC defers
    nothing, so the remote flushes do not change; with them clean it does defer."""
    assert table.attrs["ad_supported_change_nr_tlb_remote_flush"] == 0
    assert table.attrs["migrc_pending_max_pages"] > 0


@pytest.mark.slow   # two more columns at 20 % of the run (~2 min): make test-all
def test_changes_hold_at_twice_the_length(table):
    """The remote-flush change at the test's length and at twice it stays within 10 points. Both
    must outlast the scan period's start-up transient (the reproduction's docstring): at 10 % and
    20 % of the run it was -58 % and -66 % (k = 1: 8 points apart, near the bound); at 5 %, inside the
    transient, -35 %."""
    m = with_loads_in_flight(Machine.load("qemu-2node"), table.attrs["loads_in_flight_k"])
    b, a = run_column(m, 64, 2 * FRACTION, False), run_column(m, 64, 2 * FRACTION, True)
    ch, _ = _col(table, "change")
    assert a["nr_tlb_remote_flush"] / b["nr_tlb_remote_flush"] - 1 == pytest.approx(ch["nr_tlb_remote_flush"], abs=0.1)
    assert b["time_elapsed_s"] == pytest.approx(_col(table, "before")[0]["time_elapsed_s"], rel=0.05)
