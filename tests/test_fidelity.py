"""The fidelity ratchet (tests/fidelity.py): each reproduction's test-scale scoreboard against the
committed one. A row whose status gets worse or whose error grows by more than the stated noise
fails, naming it; improvements are reported as a warning, to be accepted with
`python tests/fidelity.py --accept NAME` (the reviewer sees the CSV's diff). The tables are the
suite's own test-scale runs (conftest.py's `reproduction` fixture), not extra runs."""
import warnings

import pytest

import fidelity
from tierlab.reproduce import list_reproductions


@pytest.mark.parametrize("name", [r.name for r in list_reproductions()])
def test_no_scoreboard_row_gets_worse(name, reproduction):
    from tierlab.reproduce.scoreboard import compare
    old = fidelity.load(name)
    assert old is not None and len(old), f"no committed rows for {name}: `python tests/fidelity.py --accept {name}`"
    worse, better = compare(old, fidelity.board(name, reproduction(name)))
    if better:
        warnings.warn(f"{name}: {len(better)} row(s) improved; `python tests/fidelity.py --accept {name}` "
                      "records them:\n  " + "\n  ".join(better))
    assert not worse, (f"{name}: {len(worse)} row(s) worse than tests/data/fidelity_quick.csv "
                       f"(`python tests/fidelity.py --accept {name}` if intended):\n  " + "\n  ".join(worse))
