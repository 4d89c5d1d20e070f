"""Every notebook in notebooks/ runs top to bottom at smoke scale without an error.

Each notebook reads TIERLAB_SCALE from the environment; here it is set to the smoke size, so a
notebook takes well under a minute once numba's cache is warm (a cold cache first compiles the
engine, which takes minutes: the per-notebook budget allows for that). Matplotlib runs headless
(MPLBACKEND=Agg). The kernel is the `python3` kernelspec, made to point at this interpreter.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from nbclient.exceptions import CellTimeoutError

NOTEBOOK_DIR = Path(__file__).resolve().parents[1] / "notebooks"
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("*.ipynb"))
SMOKE_SCALE = "256"
NOTEBOOK_TIMEOUT_S = float(os.environ.get("TIERLAB_NOTEBOOK_TIMEOUT", "1200"))
KERNEL_NAME = "python3"


def _runs_this_python(spec) -> bool:
    exe = spec.argv[0] if spec.argv else ""
    # jupyter_client replaces a bare "python"/"python3"/"pythonX.Y" by sys.executable
    bare = {"python", f"python{sys.version_info[0]}", "python{}.{}".format(*sys.version_info[:2])}
    return exe in bare or os.path.realpath(exe) == os.path.realpath(sys.executable)


@pytest.fixture(scope="session")
def kernel_env(tmp_path_factory):
    """Environment variables under which the `python3` kernel is this interpreter (with tierlab).

    Install the kernelspec into this environment (--sys-prefix) if there is none; if another one
    shadows it (e.g. a user-level python3 kernel of a different Python), put a private kernelspec
    for this interpreter first on JUPYTER_PATH."""
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

    try:
        spec = KernelSpecManager().get_kernel_spec(KERNEL_NAME)
    except NoSuchKernel:
        subprocess.run([sys.executable, "-m", "ipykernel", "install", "--sys-prefix", "--name", KERNEL_NAME],
                       check=True, capture_output=True)
        spec = KernelSpecManager().get_kernel_spec(KERNEL_NAME)
    if _runs_this_python(spec):
        return {}
    prefix = tmp_path_factory.mktemp("jupyter")
    subprocess.run([sys.executable, "-m", "ipykernel", "install", "--prefix", str(prefix), "--name", KERNEL_NAME],
                   check=True, capture_output=True)
    path = str(prefix / "share" / "jupyter")
    old = os.environ.get("JUPYTER_PATH")
    return {"JUPYTER_PATH": path + (os.pathsep + old if old else "")}


def test_notebooks_exist():
    assert NOTEBOOKS, f"no notebooks in {NOTEBOOK_DIR}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_runs(path, kernel_env, monkeypatch, tmp_path):
    for k, v in kernel_env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("TIERLAB_SCALE", SMOKE_SCALE)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.setenv("TMPDIR", str(tmp_path))      # the notebooks' temporary sweep directories
    nb = nbformat.read(path, as_version=4)
    deadline = time.monotonic() + NOTEBOOK_TIMEOUT_S

    def remaining(cell) -> int:                       # one budget for the whole notebook
        return max(1, int(deadline - time.monotonic()))

    execute(nb, remaining, path.name)
    problems = notebook_problems(nb)
    assert not problems, f"{path.name}: " + problems[0]


def execute(nb, timeout_func, name):
    """Run every cell in order. allow_errors=True: a raising cell leaves its error output in the
    notebook, and notebook_problems() reports it (with allow_errors=False nbclient would stop at the
    first error, and an error output could never be seen)."""
    client = NotebookClient(nb, kernel_name=KERNEL_NAME, timeout_func=timeout_func, allow_errors=True,
                            resources={"metadata": {"path": str(NOTEBOOK_DIR)}})
    try:
        client.execute()
    except CellTimeoutError:
        pytest.fail(f"{name} did not finish within {NOTEBOOK_TIMEOUT_S:.0f} s "
                    f"(TIERLAB_SCALE={SMOKE_SCALE}; set TIERLAB_NOTEBOOK_TIMEOUT to allow more)")


def notebook_problems(nb) -> list[str]:
    """What is wrong with an executed notebook: a cell with an error output, or a code cell that
    never ran (execution stopped early)."""
    out = []
    for i, c in enumerate(nb.cells):
        if c.cell_type != "code" or not c.source.strip():
            continue
        if c.execution_count is None:
            out.append(f"cell {i} did not run")
        for o in c.get("outputs", []):
            if o.get("output_type") == "error":
                out.append(f"cell {i} raised {o.get('ename')}: {o.get('evalue')}\n"
                           + json.dumps(o, indent=1)[:2000])
    return out


def test_a_raising_cell_is_reported(kernel_env, monkeypatch):
    """The check above can fail: a notebook whose second cell raises is reported, with the error."""
    for k, v in kernel_env.items():
        monkeypatch.setenv(k, v)
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1"),
                                         nbformat.v4.new_code_cell("1 / 0"),
                                         nbformat.v4.new_code_cell("y = 2")])
    execute(nb, lambda cell: 60, "raising.ipynb")
    problems = notebook_problems(nb)
    assert len(problems) == 1 and problems[0].startswith("cell 1 raised ZeroDivisionError")
    nb.cells[2].execution_count = None
    assert notebook_problems(nb)[-1] == "cell 2 did not run"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_is_stored_without_outputs(path):
    """Outputs and execution counts are stripped before committing, so diffs stay readable."""
    nb = nbformat.read(path, as_version=4)
    for i, c in enumerate(nb.cells):
        if c.cell_type == "code":
            assert not c.outputs and c.execution_count is None, \
                f"{path.name}: cell {i} has stored outputs; strip them (outputs=[], execution_count=None)"
