"""Whether numba's on-disk cache holds the engine, and what a first run shows while it compiles.

numba writes one index file (`*.nbi`) per cached function under core/_cache.py's CACHE_DIR (in
`tierlab/core/__pycache__/tierlab-kernels/`, or under `NUMBA_CACHE_DIR` when that is set), stamped
with what the function is compiled from. With no index for the
engine the first simulation compiles every kernel it reaches before it shows any progress of its
own; `say_if_compiling()` says so and shows the compile's progress (kernels compiled out of those
the engine defines, and which one is compiling) from numba's compile events.
"""
from __future__ import annotations

import sys
import time

from numba.core import event

COMPILING_NOTE = ("tierlab: compiling the simulation engine (first run with an empty numba cache: "
                  "about a minute on 2 cores, once; later runs start in seconds)")


def engine_cached() -> bool:
    """True when numba's cache holds engine.run as the sources stand (an index whose stamp,
    core/_cache.py, matches what engine.run is compiled from)."""
    from .core._cache import cached
    from .core.engine import run
    return cached(run)


def say_if_compiling(file=None) -> bool:
    """Print COMPILING_NOTE on stderr when the engine is not cached, and show the compile's progress
    until engine.run is compiled; return whether it printed."""
    if engine_cached():
        return False
    out = file or sys.stderr
    print(COMPILING_NOTE, file=out, flush=True)
    CompileProgress(out).install()
    return True


def engine_kernels() -> list:
    """Every numba dispatcher that tierlab's loaded modules define (the engine, the workloads'
    fillers, the trace kernels; not the reference cache models): at most what a first run compiles."""
    from numba.core.dispatcher import Dispatcher
    found = []
    for name, mod in list(sys.modules.items()):
        if not name.startswith("tierlab.") or name == "tierlab.core.reference" or mod is None:
            continue
        found += [v for v in vars(mod).values() if isinstance(v, Dispatcher) and v.__module__ == name]
    return found


def kernel_name(dispatcher) -> str:
    """`module.function` of a compiled function, without the package (`reclaim.shrink_folio_list`)."""
    fn = getattr(dispatcher, "py_func", dispatcher)
    return f"{fn.__module__.rsplit('.', 1)[-1]}.{fn.__name__}"


class CompileProgress:
    """A progress bar over numba's compile events for tierlab's kernels: how many of the engine's
    kernels are compiled, and the one compiling now. It closes when engine.run is compiled (the
    last and largest of a first run), saying how many kernels took how long."""

    def __init__(self, file=None):
        self.file = file or sys.stderr
        self.bar = None
        self.t0 = time.perf_counter()
        self.done = 0

    def install(self) -> None:
        from tqdm import tqdm
        total = sum(1 for d in engine_kernels() if not d.overloads)   # an upper bound: the workload's
        # fillers are compiled, the other workloads' are not
        self.bar = tqdm(total=total, unit="kernel", file=self.file, desc="compiling", leave=False,
                        dynamic_ncols=True, mininterval=0.5 if self.file.isatty() else 15.0)
        event.register("numba:compile", _Listener(self))

    def _gone(self) -> bool:
        """Done, or the file it writes to was closed (the caller's stderr, e.g. a test's capture,
        ended before engine.run was compiled): it does nothing more instead of failing the compile.
        It stays registered: unregistering inside numba's broadcast of an event would make numba
        skip the next listener's call (it iterates the list being changed)."""
        if self.bar is not None and getattr(self.file, "closed", False):
            self.bar = None
        return self.bar is None

    def started(self, dispatcher) -> None:
        if not self._gone():
            self.bar.set_postfix_str(kernel_name(dispatcher), refresh=False)

    def ended(self, dispatcher) -> None:
        if self._gone():
            return
        self.done += 1
        if self.done > self.bar.total:        # a kernel compiled for a second signature
            self.bar.total = self.done
        self.bar.update(1)
        if kernel_name(dispatcher) == "engine.run":
            self.bar.close()
            self.bar = None
            print(f"tierlab: compiled {self.done} kernels in {time.perf_counter() - self.t0:.0f} s",
                  file=self.file, flush=True)


class CompileRecorder:
    """Times every compile of a tierlab kernel from numba's compile events: inclusive (a caller's
    compile holds its callees', which numba compiles while typing the call) and exclusive (its
    own: front end, and for an entry point LLVM's optimization and code emission of its whole call
    tree). `top_level` are the compiles nothing else was compiling around: the entry points a run
    called from Python (engine.run, the workload's fillers, take_sample)."""

    def __init__(self):
        self.kernels: list[tuple[str, float, float]] = []     # (name, inclusive s, exclusive s)
        self.top_level: list[tuple[str, float]] = []
        self._stack: list[list[float]] = []

    def __enter__(self):
        self._listener = _Listener(self)
        event.register("numba:compile", self._listener)
        return self

    def __exit__(self, *exc):
        event.unregister("numba:compile", self._listener)

    def started(self, dispatcher) -> None:
        self._stack.append([time.perf_counter(), 0.0])

    def ended(self, dispatcher) -> None:
        t0, inner = self._stack.pop()
        took = time.perf_counter() - t0
        if self._stack:
            self._stack[-1][1] += took
        else:
            self.top_level.append((kernel_name(dispatcher), took))
        self.kernels.append((kernel_name(dispatcher), took, took - inner))


class _Listener(event.Listener):
    """Passes numba's compile events of tierlab's functions to `to` (started / ended)."""

    def __init__(self, to):
        self.to = to

    def on_start(self, ev):
        d = ev.data.get("dispatcher")
        if d is not None and getattr(d, "py_func", d).__module__.startswith("tierlab."):
            self.to.started(d)

    def on_end(self, ev):
        d = ev.data.get("dispatcher")
        if d is not None and getattr(d, "py_func", d).__module__.startswith("tierlab."):
            self.to.ended(d)
