"""Execute the notebooks and render them, with their figures, to HTML in one folder.

    python notebooks/render.py [--out build/notebooks] [NAME ...]

NAME is a notebook's file name or stem (`02_hint_fault_latency`, or a unique prefix such as `02`);
none means all of notebooks/*.ipynb. Each notebook runs at the scale it reads from TIERLAB_SCALE,
its own default when that is unset (`make notebooks`). The stored notebooks stay without outputs:
only the HTML gets them. A cell that raises stops that notebook's rendering with its error.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbconvert import HTMLExporter

HERE = Path(__file__).resolve().parent


def pick(names: list[str]) -> list[Path]:
    every = sorted(HERE.glob("*.ipynb"))
    if not names:
        return every
    out = []
    for name in names:
        stem = Path(name).name.removesuffix(".ipynb")
        hits = [p for p in every if p.stem == stem] or [p for p in every if p.stem.startswith(stem)]
        if len(hits) != 1:
            known = ", ".join(p.stem for p in every)
            why = "no notebook" if not hits else f"{len(hits)} notebooks match"
            sys.exit(f"render.py: {why} {name!r} (notebooks: {known})")
        out.append(hits[0])
    return out


def render(path: Path, out_dir: Path, timeout: int) -> Path:
    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, kernel_name="python3", timeout=timeout,
                   resources={"metadata": {"path": str(HERE)}}).execute()   # stops at an error
    html, _ = HTMLExporter().from_notebook_node(nb)                          # figures inline (base64)
    dest = out_dir / (path.stem + ".html")
    dest.write_text(html, encoding="utf-8")
    return dest


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("names", nargs="*", help="notebooks to render (default: all)")
    ap.add_argument("--out", default=str(HERE.parent / "build" / "notebooks"), help="HTML folder")
    ap.add_argument("--timeout", type=int, default=7200, help="seconds allowed per cell")
    args = ap.parse_args()
    paths = pick(args.names)
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    # the kernel's inline backend puts every figure into the cell's output (Agg would show none)
    os.environ["MPLBACKEND"] = "module://matplotlib_inline.backend_inline"
    scale = os.environ.get("TIERLAB_SCALE", "each notebook's default")
    for path in paths:
        t0 = time.monotonic()
        print(f"{path.name} (TIERLAB_SCALE: {scale}) ...", flush=True)
        dest = render(path, out_dir, args.timeout)
        print(f"  -> {dest} ({time.monotonic() - t0:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
