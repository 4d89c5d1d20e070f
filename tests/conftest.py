"""Shared pytest configuration: hypothesis profiles, and the reproductions at the test scale (one
run per session, shared by their tests and the fidelity ratchet).

`ci` (the default) is derandomized with few examples so the suite is fast and reproducible;
`dev` explores more (HYPOTHESIS_PROFILE=dev pytest tests/test_properties.py).
"""
import os

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci", derandomize=True, max_examples=50, deadline=None, print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile(
    "dev", max_examples=300, deadline=None, print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


_REPRODUCTIONS: dict = {}


@pytest.fixture(scope="session")
def reproduction():
    """A reproduction's table at the test scale (Reproduction.quick, tests/fidelity.py), run once per
    session whichever tests ask for it: the reproductions' own tests and the fidelity ratchet."""
    import fidelity

    def get(name):
        if name not in _REPRODUCTIONS:
            _REPRODUCTIONS[name] = fidelity.quick_table(name)
        return _REPRODUCTIONS[name]
    return get


@pytest.fixture(scope="session")
def oracle_guest():
    """Skip unless the oracle's guest can run here: QEMU, busybox, cpio and the guest programs
    (built once). The guest tests' own fixtures add what else they need (a kernel, mkfs.ext4)."""
    from tierlab.oracle import build, guest
    try:
        guest.require_qemu()
        build.find_busybox()
        build.require_tool("cpio", "cpio")
        build.ensure_programs()
    except build.Unavailable as e:
        pytest.skip(f"the oracle's guest cannot be built here: {e}")


@pytest.fixture(scope="session")
def guest_ready(oracle_guest):
    """The guest with Debian's kernel (fetched into the oracle's cache) and mkfs.ext4 for its disk
    images; skip otherwise."""
    from tierlab.oracle import build
    try:
        build.require_tool("mkfs.ext4", "e2fsprogs")
        build.ensure_kernel()
    except build.Unavailable as e:
        pytest.skip(f"the oracle's guest cannot be built here: {e}")


@pytest.fixture(scope="session")
def own_kernel(oracle_guest):
    """tierlab's own 6.12 kernel (tierlab/oracle/kernel.py), if it is built; skip otherwise: tests
    never build it."""
    from tierlab.oracle import kernel
    k = kernel.cached_kernel()
    if k is None:
        pytest.skip(f"tierlab's kernel is not built (it takes many minutes; tests never build it): build it once "
                    f"with `python -c 'from tierlab.oracle import kernel; kernel.ensure_own_kernel(print)'` or any "
                    f"`tierlab oracle --kernel {kernel.NAME} ...` run (needs apt-get install {kernel.SOURCE_PACKAGE} "
                    f"flex bison libelf-dev)")
    return k


@pytest.fixture
def cached_kernel_dir(monkeypatch):
    """make(d, release): lay out `d` as a built, cached kernel of `release` (tierlab/oracle/kernel.py)
    and make any build attempt fail the test."""
    from tierlab.oracle import kernel

    def make(d, release):
        (d / "modules").mkdir(parents=True)
        (d / "modules" / "order").write_text("")
        (d / "release").write_text(release + "\n")
        (d / "vmlinuz").write_bytes(b"")

        def no_build(*a, **kw):
            raise AssertionError("built a kernel that is cached")
        monkeypatch.setattr(kernel, "_make", no_build)
        monkeypatch.setattr(kernel, "_require_build_tools", no_build)
        return d
    return make


# Test tiers. `make test` (the README's command, what CI runs) runs everything but `slow`;
# `make test-fast` also leaves out `long`: the modules below, which run whole reproductions,
# notebooks, the QEMU guest or subprocesses (each minutes of the suite); `make test-all` adds `slow`
# and hypothesis' `dev` profile.
LONG_MODULES = {
    "test_notebooks", "test_oracle", "test_reproduce", "test_reproduce_anon_folio", "test_reproduce_hint_fault",
    "test_reproduce_migrc", "test_fio", "test_memtier", "test_xsbench", "test_sweep", "test_nojit", "test_scaling",
    "test_fidelity", "test_oracle_xsbench",
}


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.module.__name__.rsplit(".", 1)[-1] in LONG_MODULES:
            item.add_marker(pytest.mark.long)
