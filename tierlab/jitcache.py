"""Whether numba's on-disk cache holds the engine, so a command can say it is compiling.

numba writes one index file (`*.nbi`) per cached function under core/_jit.py's ENGINE_CACHE_DIR
(in `tierlab/core/__pycache__/`, or under `NUMBA_CACHE_DIR` when that is set). With no index for the
engine the first simulation compiles every kernel (about half a minute) before it shows any progress.
"""
from __future__ import annotations

import glob
import os
import sys

COMPILING_NOTE = ("tierlab: compiling the simulation engine (first run with an empty numba cache; about "
                  "half a minute, once; later runs start in seconds)")


def engine_cached() -> bool:
    """True when numba's cache has index files for tierlab's engine as its sources stand
    (core/_jit.py ENGINE_CACHE_DIR: a directory per version of the sources)."""
    from .core._jit import ENGINE_CACHE_DIR
    return bool(glob.glob(os.path.join(ENGINE_CACHE_DIR, "**", "engine.*.nbi"), recursive=True))


def say_if_compiling(file=None) -> bool:
    """Print COMPILING_NOTE on stderr when the engine is not cached; return whether it printed."""
    if engine_cached():
        return False
    print(COMPILING_NOTE, file=file or sys.stderr, flush=True)
    return True
