"""The one njit wrapper every kernel uses.

- cache=True: compiled code is kept on disk, so a second run starts in seconds.
- _nrt=False: no reference counting. Every call that LLVM does not inline otherwise increfs and
  decrefs each of SimState's ~50 arrays (atomic operations): measured ~1 us per call against
  1.5 ns for the same 8-line function without NRT. The price: kernels cannot allocate arrays, so
  callers pass scratch buffers in. State arrays are owned by the Python side for the whole run.
- error_model="numpy": a float division by zero gives inf/nan instead of raising.
"""
from numba import njit


def jit(fn):
    return njit(cache=True, error_model="numpy", _nrt=False)(fn)


def jit_inline(fn):
    """For the few tiny functions on the per-access path: inlined at numba IR level, so the hot
    loop makes no calls (a call passes every array of SimState by value, ~100 ns)."""
    return njit(cache=True, error_model="numpy", _nrt=False, inline="always")(fn)
