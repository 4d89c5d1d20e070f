"""The engine's size as the compilers see it, read from the sources (no compile): the compile budget.

Every `jit`, `jit_inline` and `jit_entry` function of tierlab/core is one numba compile (its front
end: bytecode, typing, lowering, in Python, grows with the function's own size). LLVM then
optimizes and emits each entry point's call tree once (core/_jit.py: `_LinkOnly`), with every
`jit_inline` leaf inlined at each call site: that work grows with the entry point's expanded size.
Sizes are counted in Python AST nodes, a stand-in for numba IR and LLVM instructions that moves with
them. tests/test_compile_budget.py holds these figures under tests/data/compile_budget.json, so a
change that grows the engine's compile says so in review (`python tests/compile_budget.py --accept`).
"""
from __future__ import annotations

import ast
import functools
from dataclasses import dataclass, field
from pathlib import Path

CORE = Path(__file__).resolve().parent / "core"
DECORATORS = ("jit", "jit_inline", "jit_entry")
ENTRY = "engine.run"


@dataclass
class Kernel:
    name: str                  # module.function
    kind: str                  # jit, jit_inline or jit_entry
    nodes: int                 # AST nodes of its own body
    calls: list = field(default_factory=list)   # names of the kernels it calls


def kernels(core: Path = CORE) -> dict[str, Kernel]:
    """Every decorated function of the engine's modules, with the kernels it calls (resolved through
    each module's `from .x import y`)."""
    found: dict[str, Kernel] = {}
    raw = []
    for path in sorted(core.glob("*.py")):
        mod = path.stem
        tree = ast.parse(path.read_text())
        imports = {}
        for node in tree.body:
            if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
                for a in node.names:
                    imports[a.asname or a.name] = f"{node.module}.{a.name}"
        for node in tree.body:
            if not isinstance(node, ast.FunctionDef):
                continue
            kind = next((d.id for d in node.decorator_list if isinstance(d, ast.Name) and d.id in DECORATORS), None)
            if kind is None:
                continue
            called = [x.func.id for x in ast.walk(node) if isinstance(x, ast.Call) and isinstance(x.func, ast.Name)]
            raw.append((f"{mod}.{node.name}", kind, sum(1 for _ in ast.walk(node)), mod, called, imports))
    names = {r[0] for r in raw}
    for name, kind, nodes, mod, called, imports in raw:
        calls = []
        for c in called:
            target = f"{mod}.{c}" if f"{mod}.{c}" in names else imports.get(c)
            if target in names:
                calls.append(target)
        found[name] = Kernel(name, kind, nodes, calls)
    return found


def measure(core: Path = CORE) -> dict:
    """The budgeted figures: kernels (numba compiles), their own nodes in total (numba's front end),
    the largest kernel and the largest inlined leaf, and ENTRY's expanded size (what LLVM optimizes
    for a run: every kernel it reaches, each with its leaves inlined at every call site)."""
    ks = kernels(core)

    @functools.lru_cache(maxsize=None)
    def expanded(name: str) -> int:
        """Own nodes plus the inlined leaves' expanded nodes, once per call site."""
        k = ks[name]
        return k.nodes + sum(expanded(c) for c in k.calls if ks[c].kind == "jit_inline")

    reach, todo = set(), [ENTRY]          # every kernel a run reaches, through inlined leaves too
    while todo:
        n = todo.pop()
        if n not in reach:
            reach.add(n)
            todo += ks[n].calls
    units = [n for n in reach if ks[n].kind != "jit_inline"]
    biggest = max(ks.values(), key=lambda k: k.nodes)
    leaf = max((k for k in ks.values() if k.kind == "jit_inline"), key=lambda k: k.nodes)
    return {
        "kernels": len(ks),
        "inline_leaves": sum(k.kind == "jit_inline" for k in ks.values()),
        "own_nodes": sum(k.nodes for k in ks.values()),
        "largest_kernel_nodes": biggest.nodes, "largest_kernel": biggest.name,
        "largest_inline_leaf_nodes": leaf.nodes, "largest_inline_leaf": leaf.name,
        "run_units": len(units),
        "run_expanded_nodes": sum(expanded(n) for n in units),
    }
