"""The engine's compile stays within its committed budget (tests/compile_budget.py)."""
import json

from compile_budget import BUDGET, LIMITED, current, over_budget


def test_engine_within_compile_budget():
    budget = json.loads(BUDGET.read_text())
    assert set(LIMITED) <= set(budget)
    over = over_budget(current(), budget)
    assert not over, ("the engine grew past its compile budget (raise it on purpose: python tests/compile_budget.py "
                      "--accept, with the cold start from `python -m tierlab bench --compile` in the commit): "
                      + "; ".join(over))


def test_budget_check_fails_when_a_figure_grows():
    budget = json.loads(BUDGET.read_text())
    grown = {**budget, "run_expanded_nodes": budget["run_expanded_nodes"] + 1}
    assert over_budget(grown, budget) == [
        f"run_expanded_nodes: {budget['run_expanded_nodes'] + 1} > budget {budget['run_expanded_nodes']}"]
