"""Imported (only) by the forkserver of `tierlab sweep --executor local`: loads the engine's numba code
from the cache, or compiles it, once in the server, so every pool worker forked from it starts warm
instead of each worker loading (or, on a cold cache, compiling) the same code in parallel."""


def warm() -> None:
    from .api import run_config
    for workload, params in (("random-read", {"file_size": "16MiB", "accesses": 2000, "io": "read"}),
                             ("file-read", {"file_size": "4MiB", "read_size": "1MiB", "cycles": 1})):
        run_config({"machine": "qemu-2node", "workload": workload, "params": params, "scale": 1, "seed": 0})


try:
    warm()
except Exception:  # noqa: BLE001 - a worker then loads/compiles on its first run, as without warming
    pass
