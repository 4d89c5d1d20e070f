"""The seed 001 reproduction (anon-folio-order): the table's shape and roles, the share fitted on the
v6 cover's 64k-folio row, the kernel-time orderings the seed reports (v1 < v2 < v2-simple-order <
baseline-4k, in both tables), the fault relation on the browser heap, and the sensitivity to the
fitted share (every change scales with it). Tolerances are what the model meets; the 16k-folio
row's +30-46 % error is the reproduction's finding (the model's saving saturates with folio size
faster than the kernel's), not tested as agreement."""
import pytest

from tierlab.reproduce import COLUMNS, published, run_reproduction
from tierlab.reproduce.anon_folio_order import SEED_POLICIES, share_from


@pytest.fixture(scope="module")
def table():
    return run_reproduction("anon-folio-order", jobs=1)


def test_published_rows_have_sources():
    pub = published("anon_folio_order.csv")
    assert pub.source.notna().all()
    assert all("seed 001" in x or "[PATCH v6 0/9]" in x for x in pub.source)


def test_table_shape_roles_and_calibration(table):
    assert list(table.columns) == COLUMNS
    cal = table[table.role == "calibrated"]
    assert set(cal.experiment) == {"v6-kernel-compile-8jobs-64k-folio", "v6-kernel-compile-80jobs-64k-folio"}
    assert (cal.rel_error.abs() < 1e-9).all()
    # every seed policy row of both tables is predicted, and no page-size kernel row is invented
    pred = table[table.role == "predicted"]
    for j in (8, 80):
        for pol in SEED_POLICIES[1:]:
            assert ((pred.experiment == f"kernel-compile-{j}jobs-{pol}") & (pred.metric == "kern_time_change_pct")).any()
    assert not table.experiment.str.contains("-page").any()
    # real-time rows are the kern-time prediction times the calibration row's ratio: reported only
    real = table[(table.metric == "real_time_change_pct") & (table.role != "calibrated")]
    assert len(real) == 10 and (real.role == "reported").all()
    assert 0 < table.attrs["modelled_share_s"]["8jobs"] < 1 and 0 < table.attrs["modelled_share_s"]["80jobs"] < 1


def test_kernel_time_orderings_and_errors(table):
    for j in (8, 80):
        o = table.attrs["orderings"][f"{j}jobs kern_time"]
        assert o["agree"] and o["model"] == "v1 < v2 < v2-simple-order < baseline-4k"
    seed = table[table.experiment.str.startswith("kernel-compile") & (table.metric == "kern_time_change_pct")]
    assert (seed.simulated < 0).all() and (seed.rel_error.abs() < 0.15).all()


def test_fault_relation_on_the_browser_heap(table):
    row = table[table.metric == "page_faults_vs_v1"].iloc[0]
    assert 1.2 < row.simulated < row.published
    f = table.attrs["browser_faults"]
    assert f["v1"] < f["v2-simple-order"] < f["baseline-4k"] and f["simple_below_baseline"]


def test_sensitivity_scales_every_change_with_the_share(table):
    for j in (8, 80):
        sens = table.attrs["sensitivity"][f"{j}jobs"]
        for pol in SEED_POLICIES[1:]:
            assert sens["s=0.5"][pol] == pytest.approx(sens["s=1.0"][pol] / 2)
            fit = sens["fit on 64k-folio"]
            assert fit[pol] == pytest.approx(fit["s"] * sens["s=1.0"][pol])
    assert share_from(-30.0, -0.6) == pytest.approx(0.5)


def test_scale_is_refused():
    from tierlab.errors import ConfigError
    with pytest.raises(ConfigError, match="accepted: 1"):
        run_reproduction("anon-folio-order", scale=4)
