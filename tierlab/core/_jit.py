"""The njit wrappers every kernel uses.

- cache=True: compiled code is kept on disk, so a second run starts in seconds.
- _nrt=False: no reference counting. Every call that LLVM does not inline otherwise increfs and
  decrefs each of SimState's ~50 arrays (atomic operations): measured ~1 us per call against
  1.5 ns for the same 8-line function without NRT. The price: kernels cannot allocate arrays, so
  callers pass scratch buffers in. State arrays are owned by the Python side for the whole run.
- error_model="numpy": a float division by zero gives inf/nan instead of raising.
- `jit` kernels are compiled without numba's CPython and C wrappers: those unbox every array of
  SimState and cost a third of a kernel's compile time, for a call from Python that only the
  entry points (`jit_entry`: engine.run, take_sample, the workload and trace fillers) get. A `jit`
  kernel called from Python (a test, a notebook) runs a twin compiled with the wrappers.
- one specialisation per kernel: a call from compiled code passes constants as plain int64/bool
  and narrow signed integers widened to int64 (see `_one_signature`).
- the on-disk cache lives in a directory named by a hash of every source file of tierlab/core
  (`ENGINE_CACHE_DIR`): numba checks only the defining file's timestamp, but kernels freeze
  constants of other files (params.P indices, state dtypes, vmstat items), so after an edit of
  params.py a kernel of an unchanged file would load with stale indices. Edited sources get a
  fresh directory (old ones can be deleted).
"""
import hashlib
import os
from pathlib import Path

from numba import config, njit, types
from numba.core.registry import CPUDispatcher

OPTIONS = dict(error_model="numpy", _nrt=False)


def _engine_hash() -> str:
    h = hashlib.sha1()
    for f in sorted(Path(__file__).parent.glob("*.py")):
        h.update(f.name.encode())
        h.update(f.read_bytes())
    return h.hexdigest()[:16]


# under NUMBA_CACHE_DIR when set (CI points it at a fresh directory), else beside the sources
ENGINE_CACHE_DIR = os.path.join(os.environ.get("NUMBA_CACHE_DIR") or os.path.join(os.path.dirname(__file__), "__pycache__"),
                                f"tierlab-{_engine_hash()}")
config.CACHE_DIR = ENGINE_CACHE_DIR


def _plain(t):
    """The argument type a kernel is compiled for: a literal as its plain type (numba would compile
    `f(s, 32)` for Literal[int](32), and type inference also calls a callee with the literal a
    variable starts from, `n = 0`, before it widens it), a narrow signed integer (a node id read
    from an int8 array, a list link from an int32 one) as int64. Both keep the value."""
    t = types.unliteral(t)
    if isinstance(t, types.Integer) and t.signed:
        return types.int64
    return t


def _one_signature(disp):
    """Compile `disp` for calls from other kernels with `_plain` argument types only: each distinct
    signature is a full compile (several seconds for the reclaim kernels), and the variants
    differed only in the types of equal values."""
    get = getattr(disp, "get_call_template", None)
    if get is None:
        return disp                 # NUMBA_DISABLE_JIT=1: njit returned the Python function

    def get_call_template(args, kws):
        return get(tuple(_plain(a) for a in args), {k: _plain(v) for k, v in kws.items()})
    disp.get_call_template = get_call_template
    return disp


class Kernel(CPUDispatcher):
    """A dispatcher whose compiled code has no CPython wrapper (calling it from Python directly
    would jump through a null pointer): a call from Python goes to a twin with the wrappers,
    compiled on first use and not cached (the cache index does not tell the two apart)."""

    def __call__(self, *args, **kws):
        twin = self.__dict__.get("_twin")
        if twin is None:
            twin = self._twin = njit(**OPTIONS)(self.py_func)
        return twin(*args, **kws)


def jit(fn):
    """A kernel called from other kernels (and from Python only by tests)."""
    if config.DISABLE_JIT:
        return fn
    disp = Kernel(py_func=fn, locals={}, targetoptions=dict(
        OPTIONS, nopython=True, boundscheck=None, no_cpython_wrapper=True, no_cfunc_wrapper=True))
    disp.enable_caching()
    return _one_signature(disp)


def jit_entry(fn):
    """A kernel the Python side calls (engine.run, the fillers): compiled with numba's wrappers."""
    return _one_signature(njit(cache=True, **OPTIONS)(fn))


def jit_inline(fn):
    """For the few tiny functions on the per-access path: inlined at numba IR level, so the hot
    loop makes no calls (a call passes every array of SimState by value, ~100 ns)."""
    return njit(cache=True, inline="always", **OPTIONS)(fn)
