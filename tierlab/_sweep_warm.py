"""Imported (only) by the fork server of `tierlab sweep --executor local`: loads the engine's numba
code from the cache, or compiles it, once in the server, so every pool worker forked from it starts
warm instead of each worker loading (or, on a cold cache, compiling) the same code in parallel.

The sweep names its workloads in the environment variable TIERLAB_SWEEP_WARM (a JSON list) before the
server starts; each one with a tiny configuration below is run once (their generators may have numba
code of their own). Other workloads load their code in the workers on first use, as without warming.
"""
import json
import os

TINY = {
    "random-read": {"file_size": "16MiB", "accesses": 2000, "io": "read"},
    "file-read": {"file_size": "4MiB", "read_size": "1MiB", "cycles": 1},
}


def warm(workloads) -> None:
    from .api import run_config
    for name in ["random-read"] + [w for w in workloads if w != "random-read"]:
        if name in TINY:
            run_config({"machine": "qemu-2node", "workload": name, "params": TINY[name], "scale": 1, "seed": 0})


def _die_with_parent() -> None:
    """The fork server exits with the sweep that spawned it, also while it is still warming up."""
    try:
        import ctypes
        import signal
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:  # noqa: BLE001 - not Linux: the server exits when its liveness pipe closes
        pass


_die_with_parent()
try:
    warm(json.loads(os.environ.get("TIERLAB_SWEEP_WARM", "[]")))
except Exception:  # noqa: BLE001 - a worker then loads/compiles on its first run, as without warming
    pass
