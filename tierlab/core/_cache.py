"""Which of numba's cached kernels an edit makes stale: a stamp per kernel, from everything it is
compiled from, so that an edit recompiles the kernels that depend on it and no others.

numba stamps a cached function with a hash of its own source file, and checks nothing else. That is
not enough here: a kernel freezes values of other files into its code (params.P indices, vmstat
items, constants of state.py), and, with `_jit._LinkOnly`, its cached library holds the code of
every kernel it calls. Until this module, the whole cache was kept in a directory named by a hash of
every file of tierlab/core, so any edit recompiled everything (~2 minutes on 2 cores).

`kernel_stamp(fn)` hashes, for `fn` and every function it reaches:
- its code: the bytecode, constants, names and defaults of the function and of the code nested in
  it (not its line numbers: moving a function or editing a comment elsewhere changes nothing);
- the value of every global it loads (an IntEnum's members, a class's attributes, a number, a numpy
  dtype or array, a tuple), and of every attribute it names on a tierlab module it loads;
- the kernels it calls (numba dispatchers among those globals) with their compile options, followed
  to the leaves; mutually recursive kernels share one stamp (a strongly connected component of the
  call graph, Tarjan's algorithm);
- the sources of the numba patches themselves (_jit.py, _abi.py, this file).
Argument types (SimState's record dtypes) are not in the stamp: numba keys each cached overload by
its signature already, with numba's version and the host CPU.

A global whose value this does not know how to describe is described by a hash of every source
file of tierlab (what the old directory hash was), so an unusual kernel is recompiled too often,
never too rarely; `UNDESCRIBED` lists such names (tests/test_jit_cache.py keeps it empty for the
engine).

`StampedLocator` is numba's cache locator for tierlab's functions: one directory for all of them
(`CACHE_DIR`), the stamp above as numba's "source stamp", and a disambiguator that is not the line
number (numba's default, which would make a kernel stale whenever a line above it moves). The stamp
is computed on first use, when a kernel is first compiled or loaded: by then every module it
refers to is imported.
"""
from __future__ import annotations

import enum
import hashlib
import os
import sys
import types as pytypes
from pathlib import Path

import llvmlite
import numba
import numpy as np
from numba.core import caching
from numba.core.dispatcher import Dispatcher
from numba.core.extending import _Intrinsic
from numba.core.types import Type as NumbaType

PACKAGE_DIR = Path(__file__).resolve().parent.parent          # tierlab/
CACHE_DIR = os.path.join(os.environ.get("NUMBA_CACHE_DIR") or os.path.join(os.path.dirname(__file__), "__pycache__"),
                         "tierlab-kernels")

UNDESCRIBED: set[str] = set()     # "module.function: global" whose value fell back to the package hash

_stamps: dict[tuple, bytes] = {}
_stamped: list = []
_described: dict[int, tuple] = {}   # id -> (object, description) of enums and arrays (many kernels load them)


def _sha(*parts) -> bytes:
    h = hashlib.sha256()
    for x in parts:
        h.update(x if isinstance(x, bytes) else repr(x).encode())
        h.update(b"\0")
    return h.digest()


def _toolchain() -> bytes:
    here = Path(__file__).resolve().parent
    return _sha(*[(here / f).read_bytes() for f in ("_jit.py", "_cache.py", "_abi.py")],
                numba.__version__, llvmlite.__version__, np.__version__, sys.version_info[:2])


def _package_hash() -> bytes:
    return _sha(*[(str(f.relative_to(PACKAGE_DIR)), f.read_bytes()) for f in sorted(PACKAGE_DIR.rglob("*.py"))])


_TOOLCHAIN = None
_PACKAGE = None


def _key(fn) -> tuple:
    # a kernel and its twin (same code and globals, _jit._twin_function) get the same stamp; the
    # code and globals are kept alive in _stamped, so their ids are never reused
    return (id(fn.__code__), id(fn.__globals__))


def _is_tierlab(obj) -> bool:
    mod = obj.__name__ if isinstance(obj, pytypes.ModuleType) else getattr(obj, "__module__", None)
    return isinstance(mod, str) and (mod == "tierlab" or mod.startswith("tierlab."))


class _Digest:
    """One function's own part of a stamp (its code and the values it loads) and the functions it
    refers to (the call graph's edges)."""

    def __init__(self, fn):
        self.fn = fn
        self.callees: list = []
        self.parts: list = [fn.__module__, fn.__qualname__.removesuffix("_twin"), self._code(fn.__code__),
                            self._value(fn.__defaults__, "defaults"), self._value(fn.__kwdefaults__, "kwdefaults")]
        g = fn.__globals__
        builtins = g.get("__builtins__", {})
        builtins = builtins if isinstance(builtins, dict) else vars(builtins)
        # the names a function's code uses: its globals and the attributes it reads. Each that is
        # a global (or a builtin) is described; an attribute that happens to share a global's name
        # only adds a dependency, never hides one
        names = set()
        for code in self._codes(fn.__code__):
            names.update(code.co_names)
        for name in sorted(names):
            if name in g:
                v = g[name]
                self.parts.append((name, self._value(v, name)))
                if isinstance(v, pytypes.ModuleType) and _is_tierlab(v):
                    # attributes named on a tierlab module (`st.F2_PRESENT`): every name of the
                    # function that the module defines (a superset of those read from it)
                    mod = vars(v)
                    for attr in sorted(names & mod.keys()):
                        self.parts.append((name, attr, self._value(mod[attr], attr)))
            elif name in builtins:
                self.parts.append((name, "builtin"))
        if fn.__closure__:
            for i, cell in enumerate(fn.__closure__):
                self.parts.append(("closure", i, self._value(cell.cell_contents, f"closure {i}")))
        self.digest = _sha(*self.parts)

    @staticmethod
    def _codes(code):
        yield code
        for c in code.co_consts:
            if isinstance(c, pytypes.CodeType):
                yield from _Digest._codes(c)

    def _code(self, code) -> bytes:
        consts = tuple(self._code(c) if isinstance(c, pytypes.CodeType) else (type(c).__name__, repr(c))
                       for c in code.co_consts)
        return _sha(code.co_code, consts, code.co_names, code.co_varnames, code.co_freevars, code.co_cellvars,
                    code.co_argcount, code.co_kwonlyargcount, code.co_flags)

    def _undescribed(self, what: str):
        UNDESCRIBED.add(f"{self.fn.__module__}.{self.fn.__qualname__}: {what}")
        global _PACKAGE
        if _PACKAGE is None:
            _PACKAGE = _package_hash()
        self.parts.append(("undescribed", what, _PACKAGE))

    def _value(self, v, name: str, depth: int = 0):
        """A picklable description of a global's value that changes when what numba freezes of it
        changes; kernels it refers to become edges."""
        if depth > 4:
            self._undescribed(name)
            return "deep"
        if v is None or isinstance(v, (bool, int, float, complex, str, bytes, np.generic)):
            return (type(v).__name__, repr(v))
        if isinstance(v, (tuple, list, frozenset)):
            items = sorted(v, key=repr) if isinstance(v, frozenset) else v
            return (type(v).__name__, tuple(self._value(x, name, depth + 1) for x in items))
        if isinstance(v, Dispatcher):
            self.callees.append(v.py_func)
            return ("kernel", v.py_func.__module__, v.py_func.__qualname__,
                    repr(sorted((k, repr(x)) for k, x in v.targetoptions.items())))
        if isinstance(v, _Intrinsic):
            # an @intrinsic (core/_prefetch.py): its code generator is what numba freezes
            if _is_tierlab(v._defn):
                self.callees.append(v._defn)
            return ("intrinsic", v._defn.__module__, v._defn.__qualname__)
        if isinstance(v, pytypes.FunctionType):
            if _is_tierlab(v):
                self.callees.append(v)
            return ("function", v.__module__, v.__qualname__)
        if isinstance(v, pytypes.ModuleType):
            return ("module", v.__name__)
        if isinstance(v, np.dtype):
            return ("dtype", v.str, repr(v.descr))
        if isinstance(v, np.ndarray) or isinstance(v, type) and issubclass(v, enum.Enum):
            got = _described.get(id(v))
            if got is None or got[0] is not v:
                if isinstance(v, np.ndarray):
                    d = ("array", v.dtype.str, v.shape, hashlib.sha256(np.ascontiguousarray(v).tobytes()).hexdigest())
                else:
                    d = ("enum", v.__qualname__, tuple((m.name, repr(m.value)) for m in v))
                got = _described[id(v)] = (v, d)
            return got[1]
        if isinstance(v, type) and _is_tierlab(v):
            return ("class", v.__qualname__, tuple((k, self._value(x, f"{name}.{k}", depth + 1))
                                                   for k, x in sorted(vars(v).items()) if not k.startswith("__")))
        if isinstance(v, NumbaType):
            return ("numba type", str(v))
        if isinstance(v, type) or callable(v) and not _is_tierlab(v):
            # numpy, numba, math and builtins' functions and types: named by where they live
            return ("external", getattr(v, "__module__", None), getattr(v, "__qualname__", getattr(v, "__name__", None)))
        self._undescribed(name)
        return ("undescribed", type(v).__qualname__)


def kernel_stamp(fn) -> bytes:
    """The stamp of the function `fn` (a kernel's py_func): see the module docstring."""
    got = _stamps.get(_key(fn))
    if got is not None:
        return got
    global _TOOLCHAIN
    if _TOOLCHAIN is None:
        _TOOLCHAIN = _toolchain()
    # Tarjan's strongly connected components over the functions reachable from fn (the call graph
    # is a few dozen levels deep); a component, emitted after every component it reaches, is
    # stamped with its members' digests and its successors' stamps
    digests: dict[tuple, _Digest] = {}
    index: dict[tuple, int] = {}
    low: dict[tuple, int] = {}
    stack: list = []
    on_stack: set = set()

    def digest(f) -> _Digest:
        d = digests.get(_key(f))
        if d is None:
            d = digests[_key(f)] = _Digest(f)
        return d

    def visit(f):
        k = _key(f)
        index[k] = low[k] = len(index)
        stack.append(f)
        on_stack.add(k)
        for c in digest(f).callees:
            ck = _key(c)
            if ck in _stamps:
                continue
            if ck not in index:
                visit(c)
                low[k] = min(low[k], low[ck])
            elif ck in on_stack:
                low[k] = min(low[k], index[ck])
        if low[k] == index[k]:
            members = []
            while not members or _key(members[-1]) != k:
                members.append(stack.pop())
                on_stack.discard(_key(members[-1]))
            keys = {_key(m) for m in members}
            succ = sorted({_stamps[_key(c)] for m in members for c in digest(m).callees if _key(c) not in keys})
            stamp = _sha(_TOOLCHAIN, sorted(digest(m).digest for m in members), succ)
            for m in members:
                _stamps[_key(m)] = stamp
                _stamped.append((m.__code__, m.__globals__))

    visit(fn)
    return _stamps[_key(fn)]


class _LazyStamp:
    """numba's source stamp for a kernel, computed when numba first compares or saves it (numba
    asks for it when the dispatcher is made, before the kernels the function calls are defined)."""

    def __init__(self, fn):
        self.fn = fn

    def value(self) -> bytes:
        return kernel_stamp(self.fn)

    def __eq__(self, other):
        return self.value() == (other.value() if isinstance(other, _LazyStamp) else other)

    def __ne__(self, other):
        return not self == other

    def __hash__(self):
        return hash(self.value())

    def __reduce__(self):
        return (bytes, (self.value(),))


class StampedLocator(caching._CacheLocator):
    """numba's cache locator for tierlab's functions (module tierlab.*)."""

    def __init__(self, py_func, py_file):
        self._py_func = py_func
        self._cache_path = os.path.join(CACHE_DIR, self.get_suitable_cache_subpath(py_file))

    def get_cache_path(self):
        return self._cache_path

    def get_source_stamp(self):
        return _LazyStamp(self._py_func)

    def get_disambiguator(self):
        return "k"

    @classmethod
    def from_function(cls, py_func, py_file):
        if not _is_tierlab(py_func) or not os.path.exists(py_file):
            return None
        self = cls(py_func, py_file)
        try:
            self.ensure_cache_path()
        except OSError:
            return None
        return self

    @classmethod
    def install(cls):
        classes = caching.CacheImpl._locator_classes
        if cls not in classes:
            classes.insert(0, cls)


def cached(dispatcher) -> bool:
    """Whether numba's cache holds `dispatcher`'s code as its sources stand now (an index with its
    current stamp)."""
    cache = getattr(dispatcher, "_cache", None)
    return bool(cache is not None and getattr(cache, "_cache_file", None) is not None
                and cache._cache_file._load_index())
