"""Golden counters (tests/golden.py): each canonical run gives exactly its stored counters and
sim_time_s. On a difference the failure prints the per-counter diff; if the change is intended,
`python tests/golden.py --accept` rewrites the files (the reviewer sees the diff in git)."""
import pytest

import golden


@pytest.mark.parametrize("name", golden.names())
def test_golden_counters(name):
    old = golden.load(name)
    assert old is not None, f"no golden file for {name}: run `python tests/golden.py --accept {name}`"
    new = golden.run_one(name)
    d = golden.diff(old, new)
    assert not d, (f"{name} differs from {golden.path_of(name).name} "
                   f"(`python tests/golden.py --accept` if intended):\n  " + "\n  ".join(d))


def test_golden_diff_reports_every_changed_counter():
    old = {"config": {"a": 1}, "sim_time_s": 1.0, "counters": {"pgfault": 10, "pgsteal_kswapd": 3}}
    new = {"config": {"a": 1}, "sim_time_s": 1.0, "counters": {"pgfault": 11, "pswpin": 2}}
    assert golden.diff(old, new) == ["pgfault: 10 -> 11 (+10.00%)", "pgsteal_kswapd: 3 -> 0 (-100.00%)",
                                     "pswpin: 0 -> 2"]
    assert golden.diff(old, dict(old)) == []
    assert golden.diff(old, {**old, "sim_time_s": 1.5}) == ["sim_time_s: 1.0 -> 1.5"]
