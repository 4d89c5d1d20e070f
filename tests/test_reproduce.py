"""The reproduction registry and the seed 000 reproduction at a small scale: the table's shape and
roles, that calibration hits the two baseline columns, and that the model shows the seed's
qualitative result (promotion brings a CXL-resident file back to about DRAM speed)."""
import pandas as pd
import pytest

from tierlab.cli import main
from tierlab.errors import ConfigError
from tierlab.reproduce import COLUMNS, REPRODUCTIONS, list_reproductions, published, run_reproduction


@pytest.fixture(scope="module")
def seed000(reproduction):
    return reproduction("pagecache-promotion-128g")


def test_registry_lists_seed000():
    assert "pagecache-promotion-128g" in [r.name for r in list_reproductions()]
    with pytest.raises(ConfigError, match="unknown reproduction"):
        run_reproduction("no-such-reproduction")


def test_published_numbers_come_from_data_with_sources():
    pub = published("pagecache_promotion_128g.csv")
    assert {"experiment", "metric", "published", "source"} <= set(pub.columns)
    # every row cites its source (a missing one reads as NaN, which str.len().min() would skip)
    assert pub.source.notna().all(), pub[pub.source.isna()]
    assert all(isinstance(x, str) and len(x.strip()) > 10 and "seed 000" in x for x in pub.source), pub.source


def test_table_shape_and_roles(seed000):
    df = seed000
    assert list(df.columns) == COLUMNS
    calibrated = set(df[df.role == "calibrated"].metric)
    assert calibrated == {"dram_base_s_per_cycle", "cxl_base_s_per_cycle"}
    assert (df.role.isin(["calibrated", "predicted"])).all()
    pub = published("pagecache_promotion_128g.csv").set_index(["experiment", "metric"]).published
    for r in df.itertuples():
        assert r.published == pub[(r.experiment, r.metric)]     # published column is the data file's
        assert r.rel_error == pytest.approx((r.simulated - r.published) / r.published)


def test_calibration_hits_the_baselines(seed000):
    cal = seed000[seed000.role == "calibrated"]
    assert (cal.rel_error.abs() < 0.01).all()


def test_promotion_brings_the_file_back_to_dram_speed(seed000):
    v = seed000.set_index("metric").simulated
    assert v["cycle_1_s"] > v["cxl_base_s_per_cycle"]            # promoting costs time first
    assert v["post_promotion_s_per_cycle"] < 0.9 * v["cxl_base_s_per_cycle"]
    assert v["post_promotion_s_per_cycle"] == pytest.approx(v["toptier_check_s_per_cycle"], rel=0.02)
    assert v["capped_promotion_rounds"] >= 2                    # v3's per-task cap spreads promotion out
    assert v["add_order_overhead"] > 0                          # list_add loses destination locality


def test_cli_reproduce_csv(capsys, tmp_path):
    assert main(["reproduce", "pagecache-promotion-128g", "--scale", "256", "--format", "csv",
                 "--figures", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    df = pd.read_csv(__import__("io").StringIO(out))
    assert list(df.columns) == COLUMNS and len(df) > 10
    assert any(p.name.endswith("-cycles.png") for p in tmp_path.iterdir())


def test_cli_reproduce_bad_name(capsys):
    assert main(["reproduce", "nope"]) == 2
    assert "nope" in capsys.readouterr().err


def test_table_is_identical_for_any_jobs():
    """A worker process repeats the CXL set-up instead of forking it in memory: same numbers."""
    kw = dict(scale=256, steady_cycles=1, cycles=6)
    serial = run_reproduction("pagecache-promotion-128g", jobs=1, **kw)
    parallel = run_reproduction("pagecache-promotion-128g", jobs=2, **kw)
    pd.testing.assert_frame_equal(serial, parallel)
    assert serial.attrs == parallel.attrs


def test_bad_jobs_stops_before_any_work(capsys):
    with pytest.raises(ConfigError, match="jobs"):
        run_reproduction("pagecache-promotion-128g", scale=256, jobs=0)
    assert main(["reproduce", "pagecache-promotion-128g", "--jobs", "0"]) == 2
    assert "--jobs" in capsys.readouterr().err


def test_cli_reproduce_progress_bar_on_stderr(capsys):
    assert main(["reproduce", "pagecache-promotion-128g", "--scale", "256", "--format", "csv", "--progress"]) == 0
    captured = capsys.readouterr()
    assert "pass" in captured.err                     # tqdm bar: passes over the file
    assert captured.out.startswith("experiment,metric")


def test_seed003_is_listed_with_sourced_data():
    assert "mglru-fio" in [r.name for r in list_reproductions()]
    for csv in ("mglru_fio.csv", "mglru_fio_profile.csv"):
        pub = published(csv)
        assert pub.source.notna().all() and all("seed 003" in x for x in pub.source), csv


def test_frames_from_the_buddy_leave_the_seed000_table_as_it_is(seed000):
    """With page_alloc_model=buddy every simulation (the calibration's too) takes frames from the
    buddy allocator, so the physical adjacency the list-order variants depend on comes from real
    frames: the page cache of a sequential read on a fresh machine gets ascending, adjacent frames,
    and the table is the counting allocator's, value for value."""
    buddy = run_reproduction("pagecache-promotion-128g", page_alloc_model="buddy",
                             **REPRODUCTIONS["pagecache-promotion-128g"].quick)
    assert buddy.attrs["page_alloc_model"] == "buddy"
    pd.testing.assert_frame_equal(buddy, seed000)
