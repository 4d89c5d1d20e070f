"""The seed 001 reproduction (anon-folio-order): the table's shape and roles, the share fitted on the
v6 cover's 64k-folio row, the kernel-time orderings the seed reports (v1 < v2 < v2-simple-order <
baseline-4k, in both tables) and the fault relation on the browser heap (simple-order between v1
and the baseline). How close each row is to the seed is the fidelity scoreboard's
(tests/test_fidelity.py, data/tolerances.csv)."""
import pytest

from tierlab.reproduce import COLUMNS, published, run_reproduction
from tierlab.reproduce.anon_folio_order import SEED_POLICIES


@pytest.fixture(scope="module")
def table(reproduction):
    return reproduction("anon-folio-order")


def test_published_rows_have_sources():
    pub = published("anon_folio_order.csv")
    assert pub.source.notna().all()
    assert all("seed 001" in x or "[PATCH v6 0/9]" in x for x in pub.source)


def test_table_shape_roles_and_calibration(table):
    assert list(table.columns) == COLUMNS
    # the 64k-folio rows are fitted, and v1 (the same orders) equals them by construction
    cal = table[table.role == "calibrated"]
    assert set(cal.experiment) == {f"{e}-{j}jobs-{p}" for j in (8, 80)
                                   for e, p in (("v6-kernel-compile", "64k-folio"), ("kernel-compile", "v1"))}
    # the other kern-time rows are the fitted share times the model's change; no page-size kernel
    # row is invented
    kern = table[(table.metric == "kern_time_change_pct") & (table.role != "calibrated")]
    assert len(kern) == 8 and (kern.role == "derived").all()
    assert not table.experiment.str.contains("-page").any()
    # real-time rows are the kern-time row times the calibration row's ratio: reported only
    real = table[(table.metric == "real_time_change_pct") & (table.role != "calibrated")]
    assert len(real) == 8 and (real.role == "reported").all()
    assert set(table[table.role == "predicted"].metric) == {"page_faults_vs_v1"}
    assert 0 < table.attrs["modelled_share_s"]["8jobs"] < 1 and 0 < table.attrs["modelled_share_s"]["80jobs"] < 1


def test_kernel_time_orderings_and_errors(table):
    for j in (8, 80):
        o = table.attrs["orderings"][f"{j}jobs kern_time"]
        assert o["agree"] and o["model"] == "v1 < v2 < v2-simple-order < baseline-4k"


def test_fault_relation_on_the_browser_heap(table):
    """The seed: simple-order takes more faults than v1, still fewer than the baseline."""
    f = table.attrs["browser_faults"]
    assert f["v1"] < f["v2-simple-order"] < f["baseline-4k"] and f["simple_below_baseline"]


def test_scale_is_refused():
    from tierlab.errors import ConfigError
    with pytest.raises(ConfigError, match="accepted: 1"):
        run_reproduction("anon-folio-order", scale=4)
