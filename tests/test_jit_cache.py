"""numba's on-disk cache and tierlab's kernel stamps (core/_cache.py): an edit makes stale exactly
the kernels compiled from what it changed."""
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import numpy as np
import pytest
from numba.core.caching import IndexDataCacheFile

from tierlab import jitcache
from tierlab.core import _cache, engine
from tierlab.core._jit import _twin_function

MODULE = """
import numpy as np
from tierlab.core._jit import jit, jit_inline
from {consts} import K, Mode

@jit_inline
def leaf(x):
    return x + K

@jit
def middle(x):
    return leaf(x) * 2

@jit
def top(x):
    if Mode.B == 1:
        return middle(x)
    return x

@jit
def other(x):
    return x - 1

@jit
def ping(n):
    return pong(n - 1) if n > 0 else 0

@jit
def pong(n):
    return ping(n - 1) + leaf(0) if n > 0 else 0
"""

CONSTS = """
import enum
K = {k}

class Mode(enum.IntEnum):
    A = 0
    B = {b}
"""

_versions = iter(range(10**6))
KERNELS_DIR = _cache.CACHE_DIR        # before the fixture below points it at a test directory


@pytest.fixture(autouse=True)
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setattr(_cache, "CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path


def build(module=MODULE, k=3, b=1, prefix=""):
    """A fresh copy of a small kernel module (and its constants' module) under tierlab.*: new
    function and globals objects, as after an edit and a restart (its file, which numba's cache
    needs to exist, under the test's cache directory)."""
    n = next(_versions)
    consts = types.ModuleType("tierlab._stamp_consts")
    exec(textwrap.dedent(CONSTS.format(k=k, b=b)), vars(consts))
    sys.modules[consts.__name__] = consts
    mod = types.ModuleType("tierlab._stamp_kernels")
    src = prefix + textwrap.dedent(module.format(consts=consts.__name__))
    path = Path(_cache.CACHE_DIR).parent / f"_stamp_kernels_{n}.py"
    path.write_text(src)
    mod.__file__ = str(path)
    exec(compile(src, mod.__file__, "exec"), vars(mod))
    return mod


def stamps(mod):
    return {name: _cache.kernel_stamp(getattr(mod, name).py_func)
            for name in ("leaf", "middle", "top", "other", "ping", "pong")}


def test_a_stamp_changes_with_what_the_kernel_is_compiled_from_and_nothing_else():
    base = stamps(build())
    assert stamps(build()) == base                       # the same sources, new objects: the same stamps
    # an edit of a callee: it and every kernel reaching it
    edited = stamps(build(MODULE.replace("x + K", "x + K + 1")))
    assert {n for n in base if edited[n] != base[n]} == {"leaf", "middle", "top", "ping", "pong"}
    # a constant of another module that a leaf freezes
    edited = stamps(build(k=4))
    assert {n for n in base if edited[n] != base[n]} == {"leaf", "middle", "top", "ping", "pong"}
    # an enum member that only `top` reads
    edited = stamps(build(b=2))
    assert {n for n in base if edited[n] != base[n]} == {"top"}
    # lines moved and comments added: nothing
    assert stamps(build(MODULE.replace("@jit\ndef other", "# a comment\n\n\n@jit\ndef other"), prefix="\n\n")) == base
    # mutually recursive kernels share a stamp
    assert base["ping"] == base["pong"]


def test_a_kernel_and_its_twin_share_a_stamp():
    mod = build()
    assert _cache.kernel_stamp(_twin_function(mod.middle.py_func)) == _cache.kernel_stamp(mod.middle.py_func)


def test_the_engine_is_described_without_falling_back_and_stamps_repeat_across_processes():
    _cache.kernel_stamp(engine.run.py_func)
    assert not _cache.UNDESCRIBED
    code = ("from tierlab.core import _cache, engine; import tierlab.api; "
            "print(_cache.kernel_stamp(engine.run.py_func).hex())")
    runs = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           env={"PYTHONHASHSEED": str(seed), "PATH": ""}).stdout.strip() for seed in (1, 2)]
    assert runs[0] == runs[1] == _cache.kernel_stamp(engine.run.py_func).hex()


def test_engine_kernels_use_the_stamped_locator():
    locator = engine.run._cache._impl.locator
    assert isinstance(locator, _cache.StampedLocator)
    assert locator.get_cache_path().startswith(KERNELS_DIR)
    assert locator.get_source_stamp() == _cache.kernel_stamp(engine.run.py_func)


def test_an_index_is_fresh_only_under_the_stamp_it_was_saved_with(tmp_path):
    mod = build()
    stamp = _cache._LazyStamp(mod.top.py_func)
    index = IndexDataCacheFile(str(tmp_path), "top", stamp)
    fake = types.SimpleNamespace(_cache=types.SimpleNamespace(_cache_file=index))
    assert not _cache.cached(fake)
    index.save(("sig",), ("data",))
    assert _cache.cached(fake)                           # saved, pickled as the stamp's bytes
    edited = build(b=2)
    fake._cache._cache_file = IndexDataCacheFile(str(tmp_path), "top", _cache._LazyStamp(edited.top.py_func))
    assert not _cache.cached(fake)                       # the same index file, stale for the edit


def test_engine_cached_reads_engine_run_index(monkeypatch):
    monkeypatch.setattr(_cache, "cached", lambda d: d is engine.run)
    assert jitcache.engine_cached()


@pytest.mark.parametrize("make", [lambda: np.arange(3), lambda: np.dtype([("a", "i8")]), lambda: (1, 2.5, "x")])
def test_values_are_described_by_content(make):
    d = _cache._Digest(build().leaf.py_func)
    assert d._value(make(), "v") == d._value(make(), "v")
    assert not _cache.UNDESCRIBED
