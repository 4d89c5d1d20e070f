"""The engine's compile budget (tierlab/codesize.py): tests/data/compile_budget.json holds, for each
figure, the budget it must stay within; tests/test_compile_budget.py fails when one is exceeded.

    python tests/compile_budget.py            # the figures now, against the budget
    python tests/compile_budget.py --accept   # set the budget to the figures now plus HEADROOM

Raise the budget on purpose, in review, with the cold start it costs (`python -m tierlab bench
--compile`), as a golden is re-accepted; shrink it when a change makes the engine smaller.
"""
from __future__ import annotations

import json
import math
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
BUDGET = HERE / "data" / "compile_budget.json"
HEADROOM = 0.05      # room for a small fix without a re-accept
LIMITED = ("kernels", "own_nodes", "largest_kernel_nodes", "largest_inline_leaf_nodes", "run_expanded_nodes")


def current() -> dict:
    if str(HERE.parent) not in sys.path:
        sys.path.insert(0, str(HERE.parent))
    from tierlab.codesize import measure
    return measure()


def over_budget(now: dict, budget: dict) -> list[str]:
    return [f"{k}: {now[k]} > budget {budget[k]}" for k in LIMITED if now[k] > budget[k]]


def main(argv: list[str]) -> int:
    now = current()
    if "--accept" in argv:
        BUDGET.write_text(json.dumps({k: math.ceil(now[k] * (1 + HEADROOM)) for k in LIMITED}, indent=2) + "\n")
        print(f"wrote {BUDGET}")
    budget = json.loads(BUDGET.read_text())
    for k, v in now.items():
        print(f"{k:28s} {v!s:>24}" + (f"   budget {budget[k]}" if k in budget else ""))
    over = over_budget(now, budget)
    for line in over:
        print("over budget:", line)
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
