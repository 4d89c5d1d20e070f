"""The one njit wrapper every kernel uses.

- cache=True: compiled code is kept on disk, so a second run starts in seconds.
- _nrt=False: no reference counting. Every call that LLVM does not inline otherwise increfs and
  decrefs each of SimState's ~50 arrays (atomic operations): measured ~1 us per call against
  1.5 ns for the same 8-line function without NRT. The price: kernels cannot allocate arrays, so
  callers pass scratch buffers in. State arrays are owned by the Python side for the whole run.
- error_model="numpy": a float division by zero gives inf/nan instead of raising.
- one specialisation per kernel: a call from compiled code passes constants as plain int64/bool
  and narrow signed integers widened to int64 (see `_one_signature`).
"""
from numba import njit, types


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


def jit(fn):
    return _one_signature(njit(cache=True, error_model="numpy", _nrt=False)(fn))


def jit_inline(fn):
    """For the few tiny functions on the per-access path: inlined at numba IR level, so the hot
    loop makes no calls (a call passes every array of SimState by value, ~100 ns)."""
    return njit(cache=True, error_model="numpy", _nrt=False, inline="always")(fn)
