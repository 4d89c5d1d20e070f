"""The fidelity scoreboard's rules on hand-made tables (no simulation): every published row gets a
tolerance from data/, statuses follow the declared tolerances, a change of the other sign or a move
the other way from the seed's `versus` row is a wrong direction, a calibrated row outside its
tolerance is stale, an unreproduced row is listed, and the ratchet reports worse and better rows."""
import pandas as pd
import pytest

from tierlab.errors import ConfigError
from tierlab.reproduce import REPRODUCTIONS, list_reproductions, published, table
from tierlab.reproduce.scoreboard import compare, score_table, summary, to_markdown, tolerances


def test_every_published_row_has_a_declared_tolerance_and_no_tolerance_is_orphaned():
    tol = tolerances()
    assert tol.tolerance_kind.isin(["relative", "absolute", "sign"]).all()
    assert tol.tolerance_reason.str.len().min() > 10
    assert not tol.index.duplicated().any()
    keys = set()
    for rep in list_reproductions():
        assert rep.data, rep.name
        for csv in rep.data:
            keys |= set(map(tuple, published(csv)[["experiment", "metric"]].values))
    changes = {k for k in tol.index if k[0].endswith("-change")}      # seed 004's scored changes
    assert keys <= set(tol.index) and set(tol.index) - keys == changes
    for exp, metric in changes:
        assert (exp.replace("-change", "-before"), metric) in keys


def _board(name, factor=None, values=None, drop=()):
    """A reproduction's table with the model at `factor` x published (or `values`), rows in `drop` absent."""
    rep = REPRODUCTIONS[name]
    pub = pd.concat([published(c) for c in rep.data], ignore_index=True)
    sim = {(r.experiment, r.metric): (values or {}).get((r.experiment, r.metric), r.published * (factor or 1.0))
           for r in pub.itertuples() if (r.experiment, r.metric) not in drop}
    cal = {("mglru-fio-mainline", "before_fill_GBps")}
    return score_table(rep, table(pub, sim, calibrated=cal), "test")


def test_statuses_follow_the_declared_tolerances():
    list_reproductions()
    b = _board("mglru-fio", factor=1.04).set_index("metric")
    main = b[b.experiment == "mglru-fio-mainline"]
    assert main.status["before_fill_GBps"] == "within"                         # 4 % of a 5 % time
    assert main.error["before_fill_GBps"] == pytest.approx(0.04)
    assert main.status["after_fill_GBps"] == "outside"                         # 0.062 GB/s > the seed's ±0.05
    assert main.error_unit["after_fill_GBps"] == "absolute"
    assert (b.fitted.str.split("; ").map(len) == 9).all()                      # SEED003_COSTS (kswapd: sourced)
    stale = _board("mglru-fio", factor=1.2).set_index("metric")
    assert stale.status["before_fill_GBps"] == "stale"                        # calibrated, outside


def test_wrong_direction_against_the_seeds_versus_row_and_for_changes():
    list_reproductions()
    E = "mglru-fio-mainline"
    pub = published("mglru_fio.csv").set_index(["experiment", "metric"]).published
    rises = {(E, "after_fill_GBps"): pub[(E, "before_fill_GBps")] * 1.3}      # the seed's drop, risen
    b = _board("mglru-fio", values=rises).set_index(["experiment", "metric"])
    assert b.status[(E, "after_fill_GBps")] == "wrong direction"
    a = _board("anon-folio-order", factor=-0.5).set_index(["experiment", "metric"])
    row = a.loc[("kernel-compile-8jobs-v2", "kern_time_change_pct")]
    assert row.status == "wrong direction" and row.error_unit == "points"
    assert row.error == pytest.approx(-38.6 * -0.5 - -38.6)


def test_rows_the_model_lacks_are_listed_not_dropped():
    list_reproductions()
    gone = ("kernel-compile-8jobs-v1", "user_time_change_pct")
    b = _board("anon-folio-order", drop={gone}).set_index(["experiment", "metric"])
    assert b.role[gone] == "not reproduced" and b.status[gone] == "not reproduced" and b.fitted[gone] == ""
    assert len(b) == len(published("anon_folio_order.csv"))
    s = summary(b.reset_index())
    assert s.loc["anon-folio-order", "not_reproduced"] == 1 and s.loc["all", "rows"] == len(b)
    md = to_markdown(b.reset_index(), "python -m tierlab reproduce --all --score", when="2026-11-27")
    assert "on 2026-11-27" in md and "## anon-folio-order" in md and "not reproduced" in md


def test_ratchet_reports_worse_and_better_rows():
    list_reproductions()
    old = _board("mglru-fio", factor=1.04)
    same, better = compare(old, old)
    assert same == [] and better == []
    worse, _ = compare(old, _board("mglru-fio", factor=1.2))
    assert any("before_fill_GBps: within -> stale" in w for w in worse)
    _, improved = compare(_board("mglru-fio", factor=1.2), old)
    assert any("before_fill_GBps: stale -> within" in x for x in improved)
    # an error that grows by less than the stated noise (2 % of the published value) is not worse
    assert not any("before_fill_GBps" in w for w in compare(old, _board("mglru-fio", factor=1.05))[0])
    assert compare(old.iloc[1:], old)[0] == [f"mglru-fio {old.experiment[0]} {old.metric[0]}: new row (accept it)"]


def test_an_unknown_tolerance_class_stops_naming_it(tmp_path, monkeypatch):
    import shutil

    from tierlab import reproduce
    for f in ("tolerances.csv", "tolerance_defaults.csv"):
        shutil.copy(reproduce.DATA_DIR / f, tmp_path / f)
    t = pd.read_csv(tmp_path / "tolerances.csv")
    t.loc[0, "tolerance_class"] = "vibes"
    t.to_csv(tmp_path / "tolerances.csv", index=False)
    monkeypatch.setattr(reproduce, "DATA_DIR", tmp_path)
    with pytest.raises(ConfigError, match="vibes.*accepted: seed, time"):
        tolerances()


@pytest.mark.parametrize("argv, says", [
    (["reproduce"], "NAME or --all"),
    (["reproduce", "mglru-fio", "--all", "--score"], "not both"),
    (["reproduce", "--all"], "--all only with --score"),
    (["reproduce", "mglru-fio", "--quick"], "--quick only with --score"),
    (["reproduce", "--all", "--score", "--scale", "4"], "--scale not accepted"),
    (["reproduce", "nope", "--score"], "unknown reproduction 'nope'; accepted: anon-folio-order"),
])
def test_bad_scoreboard_flags_stop_naming_them(argv, says, capsys):
    from tierlab.cli import main
    assert main(argv) == 2
    assert says in capsys.readouterr().err
