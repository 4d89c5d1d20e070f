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
  kernel called from Python (a test, a notebook) runs a twin compiled with the wrappers (cached
  under its own name).
- one specialisation per kernel: a call from compiled code passes constants as plain int64/bool
  and narrow signed integers widened to int64 (see `_one_signature`).
- `jit_inline` leaves are inlined by LLVM (`forceinline`: its alwaysinline attribute), not by
  numba: numba's IR inlining re-ran its front end on the callee at each of ~2,000 call sites and
  typed the expanded bodies as one (an 11-minute cold start); LLVM's inliner gives the same
  machine code from one compile of each leaf.
- a `jit` kernel's library is link-only (`_LinkOnly`): LLVM optimizes and emits each entry
  point's call tree once, not again at every level of it. In the entry point's module the
  kernels it links in are internal, so LLVM drops the arguments a kernel never reads and the
  bodies it inlined everywhere.
- SimState goes by reference (`_abi.py`): one pointer per call, not ~450 words.
- the on-disk cache (`_cache.CACHE_DIR`, one directory for tierlab's functions) knows which
  kernels an edit makes stale (`_cache.StampedLocator`): numba checks only the defining file,
  but a kernel freezes constants of other files (params.P indices, state dtypes, vmstat items)
  and, link-only, holds the code of the kernels it calls; each kernel's stamp covers all of that,
  so an edit recompiles the kernels that depend on it and no others.
"""
from types import FunctionType

import llvmlite.binding as llvm
from numba import config, njit, types
from numba.core import codegen
from numba.core.registry import CPUDispatcher
from numba.core.targetconfig import ConfigStack

from ._cache import StampedLocator

OPTIONS = dict(error_model="numpy", _nrt=False)


StampedLocator.install()


class _LinkOnly:
    """Code that is only ever linked into an entry point is not optimized or emitted on its own.

    numba gives every compiled function a library: its module with the modules of all its callees
    linked in, run through LLVM's whole module pipeline and emitted as machine code. A `jit` kernel
    is called only from other kernels, which link its module in and optimize it again, so across a
    call tree that work was repeated at every level (most of a cold start once the leaves stopped
    being inlined by numba). Here a library finalized while a kernel without CPython and C
    wrappers is compiled (a `jit` kernel, or a numba helper it calls) only links its callees in;
    the entry point (`jit_entry`, or a twin) that links it runs the module pipeline, inlining the
    `forceinline` leaves, and emits machine code once. Its cache entry is the module's bitcode,
    all a later caller needs. Results do not change (no fast-math: LLVM keeps every result bit
    for bit); only where the work is done does. Relies on numba's JITCodeLibrary internals
    (pyproject pins numba below 0.70)."""

    KIND = "tierlab-link-only"

    @staticmethod
    def compiling_kernel() -> bool:
        """Whether the compile on top of numba's stack is a kernel without wrappers (`jit`)."""
        stack = ConfigStack()
        if not stack:
            return False
        flags = stack.top()
        return bool(flags.no_cpython_wrapper and flags.no_cfunc_wrapper)

    @classmethod
    def install(cls):
        lib = codegen.JITCodeLibrary
        if getattr(lib, "_tierlab_link_only", False):
            return
        full_finalize = lib.finalize
        full_serialize = lib.serialize_using_object_code
        full_unserialize = lib._unserialize.__func__
        full_set_env = codegen.JITCPUCodegen.set_env

        def finalize(self):
            if not cls.compiling_kernel():
                return full_finalize(self)
            self._raise_if_finalized()
            seen = set()
            for library in self._linking_libraries:
                if library not in seen:
                    seen.add(library)
                    self._reload_init.update(library._reload_init)
                    self._final_module.link_in(library._get_module_for_linking(), preserve=True)
            self._link_only = True
            self._finalized = True

        full_for_linking = lib._get_module_for_linking

        def get_module_for_linking(self):
            # a link-only module is never executed: its functions are made linkonce_odr in place
            # (numba clones an executable library's module first)
            if not getattr(self, "_link_only", False) or self._shared_module is not None:
                return full_for_linking(self)
            for fn in self._final_module.functions:
                if not fn.is_declaration and fn.linkage == llvm.Linkage.external:
                    fn.linkage = "linkonce_odr"
            self._shared_module = self._final_module
            return self._shared_module

        def serialize_using_object_code(self):
            if getattr(self, "_link_only", False):
                return (self.name, cls.KIND, self._get_module_for_linking().as_bitcode())
            return full_serialize(self)

        def unserialize(klass, codegen_, state):
            name, kind, data = state
            if kind != cls.KIND:
                return full_unserialize(klass, codegen_, state)
            self = codegen_.create_library(name)
            self._final_module = self._shared_module = llvm.parse_bitcode(data)
            self._link_only = True
            self._finalized = True
            return self

        def set_env(self, env_name, env):
            # a link-only library defines nothing in the execution engine: its environment (read
            # only by object-mode fallbacks and dynamic exceptions, which kernels have neither of)
            # has no address to be written to
            if self._engine.get_global_value_address(env_name):
                full_set_env(self, env_name, env)

        full_optimize_final = lib._optimize_final_module

        def optimize_final_module(self):
            # an entry point's module holds its whole call tree: the linked-in functions become
            # internal, so LLVM may change their signatures (dead-argument elimination drops
            # what a callee never reads) and drops a body once every call to it is inlined
            if not cls.compiling_kernel():
                for fn in self._final_module.functions:
                    if not fn.is_declaration and fn.linkage == llvm.Linkage.linkonce_odr:
                        fn.linkage = "internal"
            return full_optimize_final(self)

        lib.finalize = finalize
        lib._optimize_final_module = optimize_final_module
        lib._get_module_for_linking = get_module_for_linking
        lib.serialize_using_object_code = serialize_using_object_code
        lib._unserialize = classmethod(unserialize)
        codegen.JITCPUCodegen.set_env = set_env
        lib._tierlab_link_only = True


_LinkOnly.install()


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
    compiled on first use and cached under its own name (`_twin_function`: numba's cache index is
    named by the function's qualname and does not tell a kernel's two builds apart)."""

    def __call__(self, *args, **kws):
        twin = self.__dict__.get("_twin")
        if twin is None:
            twin = self._twin = njit(cache=True, **OPTIONS)(_twin_function(self.py_func))
        return twin(*args, **kws)


def _twin_function(fn):
    """`fn` (same code, globals, defaults) under the qualname `<qualname>_twin`."""
    twin = FunctionType(fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)
    twin.__qualname__ = f"{fn.__qualname__}_twin"
    twin.__module__ = fn.__module__
    twin.__kwdefaults__ = fn.__kwdefaults__
    twin.__doc__ = fn.__doc__
    return twin


def jit(fn):
    """A kernel called from other kernels (and from Python only by tests)."""
    return _kernel(fn, forceinline=False)


def jit_entry(fn):
    """A kernel the Python side calls (engine.run, the fillers): compiled with numba's wrappers."""
    return _one_signature(njit(cache=True, forceinline=False, **OPTIONS)(fn))


def jit_inline(fn):
    """A small leaf on the per-access path, inlined into every caller by LLVM (forceinline), so the
    hot loop makes no calls. numba compiles it once, as a `jit` kernel."""
    return _kernel(fn, forceinline=True)


def _kernel(fn, forceinline: bool):
    # forceinline is set either way: numba otherwise inherits it from the caller being compiled
    if config.DISABLE_JIT:
        return fn
    disp = Kernel(py_func=fn, locals={}, targetoptions=dict(
        OPTIONS, nopython=True, boundscheck=None, no_cpython_wrapper=True, no_cfunc_wrapper=True,
        forceinline=forceinline))
    disp.enable_caching()
    return _one_signature(disp)
