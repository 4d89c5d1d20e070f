"""Executors: run a sweep's runs in a local process pool (forkserver, warmed by
tierlab/_sweep_warm.py), on a Dask cluster, or serially. Workers only compute and return each run's
record; the sweep process writes every file."""
from __future__ import annotations

import contextlib
import json
import os
import time

from ..errors import ConfigError
from .spec import Run

def execute_run(config: dict) -> dict:
    """Run one resolved config (in a worker) and return its record: counters (kernel names), final
    free pages per node, simulated times, marks, cycle times, host wall time."""
    from ..api import run_config
    t0 = time.perf_counter()
    res = run_config(config)
    wall = time.perf_counter() - t0
    d = res.to_dict()
    rec = {
        "counters": d["counters"],
        "nr_free_pages": d["nr_free_pages"],
        "sim_time_s": float(res.sim_time_s),
        "task_times_s": d["task_times_s"],
        "marks_s": {k: [x.item() if hasattr(x, "item") else x for x in v] for k, v in d["marks_s"].items()},
        "cycle_times_s": [float(x) for x in res.cycle_times_s(0)] if len(res.marks_s) else None,
        "wall_s": wall,
        "host": os.uname().nodename,
    }
    return rec


def _worker_init(driver_pid: int) -> None:
    """Pool workers die with the sweep that started them, so a SIGKILLed sweep leaves no orphan
    computing. Forkserver workers are children of the fork server, not of the sweep, and hold the
    server's liveness pipe open; so a thread watches the sweep's process (pidfd) and exits the worker
    when it ends (at the latest when the current numba call returns the GIL)."""
    with contextlib.suppress(Exception):
        import ctypes
        import signal
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    import threading
    threading.Thread(target=_watch_driver, args=(driver_pid,), name="tierlab-sweep-watchdog", daemon=True).start()


def _pid_alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
        return stat[stat.rindex(")") + 2:].split()[0] not in ("Z", "X")
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass
        return True


def _watch_driver(pid: int) -> None:
    import select
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        os._exit(1)
    except (AttributeError, OSError):
        fd = None
    if fd is not None:
        select.select([fd], [], [])   # a pidfd turns readable when the process ends
    else:
        while _pid_alive(pid):
            time.sleep(1.0)
    os._exit(1)


def default_workers() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:
        return max(1, os.cpu_count() or 1)


def pool_workers(workers: int | None, todo: int, state_bytes: int) -> int:
    if workers is not None:
        return max(1, min(int(workers), todo))
    n = min(default_workers(), todo)
    if state_bytes > 0:  # as many concurrent runs as the memory holds
        from ..api import available_memory_bytes
        n = min(n, max(1, int(0.7 * available_memory_bytes() // (state_bytes * 1.3))))
    return max(1, n)


def iter_local(todo: list[Run], workers: int):
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed
    method = "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"
    ctx = multiprocessing.get_context(method)
    if method == "forkserver":
        # the server (started at the first pool) warms up the workloads of this sweep
        os.environ["TIERLAB_SWEEP_WARM"] = json.dumps(sorted({r.config["workload"] for r in todo}))
        ctx.set_forkserver_preload(["tierlab._sweep_warm"])
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_worker_init,
                               initargs=(os.getpid(),))
    try:
        futs = {pool.submit(execute_run, r.config): r for r in todo}
        for f in as_completed(futs):
            try:
                yield futs[f], f.result(), None
            except Exception as e:  # noqa: BLE001 - reported per run
                yield futs[f], None, e
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown(wait=True)


def iter_serial(todo: list[Run]):
    for r in todo:
        try:
            rec = execute_run(r.config)
        except Exception as e:  # noqa: BLE001
            yield r, None, e
            continue
        yield r, rec, None


def dask_client(scheduler: str | None, workers: int | None, client=None):
    """(client, close) for the dask executor: the given Client, a Client to `scheduler`, or a
    LocalCluster of `workers` single-threaded worker processes."""
    if client is not None:
        return client, (lambda: None)
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise ConfigError("--executor dask needs the 'distributed' package (pip install 'dask[distributed]')") from None
    if scheduler:
        try:
            c = Client(scheduler, timeout="20s")
        except (OSError, TimeoutError) as e:
            raise ConfigError(f"--scheduler {scheduler!r}: cannot connect ({e})") from None
        return c, c.close
    import logging
    cluster = LocalCluster(n_workers=workers or default_workers(), threads_per_worker=1, processes=True,
                           dashboard_address=":0", silence_logs=logging.ERROR)
    c = Client(cluster)

    def close():
        c.close()
        cluster.close()
    return c, close


def iter_dask(todo: list[Run], client):
    from distributed import as_completed
    import uuid
    tag = uuid.uuid4().hex[:8]
    futs = {}
    for r in todo:
        f = client.submit(execute_run, r.config, key=f"tierlab-run-{r.key}-{tag}", pure=False)
        futs[f] = r
    try:
        for f in as_completed(list(futs)):
            try:
                yield futs[f], f.result(), None
            except Exception as e:  # noqa: BLE001
                yield futs[f], None, e
    except BaseException:
        client.cancel(list(futs))
        raise
