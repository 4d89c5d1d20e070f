"""Running a sweep: plan (validate), run what the store lacks with an executor, store each run as it
finishes, and rebuild the table."""
from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass
from typing import Any, Callable

from ..api import state_bytes
from ..config import estimate_note
from ..errors import ConfigError, TierlabError
from ..jitcache import say_if_compiling
from . import executors
from .assembly import assemble, write_table
from .spec import EXECUTORS, Run, load_spec, plan, tierlab_version
from .store import clean_temp_files, done_keys, load_run, locked, runs_dir, store_run, table_path

def _progress_bar(progress, total: int, initial: int, desc: str):
    if progress is None:
        progress = sys.stderr.isatty() or _in_notebook()
    if not progress:
        return None
    from tqdm.auto import tqdm
    return tqdm(total=total, initial=initial, unit="run", desc=desc, file=sys.stderr, dynamic_ncols=True,
                smoothing=0.1)


def _in_notebook() -> bool:
    try:
        from IPython import get_ipython
        ip = get_ipython()
        return ip is not None and ip.__class__.__name__ == "ZMQInteractiveShell"
    except Exception:
        return False


@dataclass
class SweepStats:
    total: int
    done_before: int
    ran: int
    failed: list[tuple[Run, str]]
    table: str | None
    wall_s: float

    def summary(self) -> str:
        s = (f"{self.total} runs: {self.done_before} already done, {self.ran} run now"
             + (f", {len(self.failed)} failed" if self.failed else ""))
        return s + (f" -> {self.table}" if self.table else "")


def sweep(spec, out_dir, executor: str = "local", workers: int | None = None, scheduler: str | None = None,
          progress=None, client=None, on_run: Callable[[Run, dict], None] | None = None) -> tuple["Any", SweepStats]:
    """Plan (validate) the sweep, run every run not already stored in `out_dir`, store each as it
    finishes, and (re)build the table. Returns (DataFrame, SweepStats)."""
    t_start = time.perf_counter()
    if executor not in EXECUTORS:
        raise ConfigError(f"--executor {executor!r}: accepted: {', '.join(EXECUTORS)}")
    if workers is not None and (not isinstance(workers, int) or workers < 1):
        raise ConfigError(f"--workers {workers!r}: expected an integer >= 1")
    if scheduler and executor != "dask":
        raise ConfigError(f"--scheduler is for --executor dask, not {executor}")
    spec = load_spec(spec)
    runs = plan(spec)                      # every run validated before anything runs or is written
    version = tierlab_version()
    out_dir = os.fspath(out_dir)
    if os.path.exists(out_dir) and not os.path.isdir(out_dir):
        raise ConfigError(f"--out {out_dir!r}: exists and is not a directory")
    failed: list[tuple[Run, str]] = []
    close = None
    dask_client = None
    if executor == "dask" and any(r.key not in done_keys(out_dir) for r in runs):
        dask_client, close = executors.dask_client(scheduler, workers, client)   # connect before writing anything
    try:
        os.makedirs(runs_dir(out_dir), exist_ok=True)
        with locked(out_dir):
            clean_temp_files(out_dir)
            stored = done_keys(out_dir)
            todo = [r for r in runs if not (r.key in stored and load_run(out_dir, r.key) is not None)]
            done_before = len(runs) - len(todo)
            note = estimate_note(sum(r.accesses or 0 for r in todo))
            if note:
                print(f"{note}, in total over {len(todo)} runs", file=sys.stderr)
            if todo and executor != "dask":
                say_if_compiling()
            bar = _progress_bar(progress, len(runs), done_before, spec.name)
            ran = 0
            it = None
            try:
                if todo:
                    if executor == "serial":
                        it = executors.iter_serial(todo)
                    elif executor == "local":
                        n = executors.pool_workers(workers, len(todo), max(state_bytes(r.nr_pages) for r in todo))
                        it = executors.iter_serial(todo) if n == 1 and workers is None and len(todo) == 1 else executors.iter_local(todo, n)
                    else:
                        if dask_client is None:
                            dask_client, close = executors.dask_client(scheduler, workers, client)
                        it = executors.iter_dask(todo, dask_client)
                    for run, rec, exc in it:
                        if exc is not None:
                            msg = f"{type(exc).__name__}: {exc}" if not isinstance(exc, TierlabError) else str(exc)
                            failed.append((run, msg))
                            line = f"tierlab: run {run.index + 1} ({run.label()}) failed: {msg}"
                            (bar.write(line, file=sys.stderr) if bar is not None else print(line, file=sys.stderr))
                        else:
                            store_run(out_dir, run, rec, version)
                            ran += 1
                            if on_run is not None:
                                on_run(run, rec)
                        if bar is not None:
                            bar.update(1)
                            if failed:
                                bar.set_postfix(failed=len(failed))
            finally:
                if it is not None:
                    it.close()
                if bar is not None:
                    bar.close()
                # the table of every finished run, also after a failure or Ctrl-C
                df = assemble(spec, out_dir, runs)
                tpath = table_path(out_dir, spec)
                if len(df) or os.path.exists(tpath):
                    write_table(df, spec, out_dir, runs)
                else:
                    tpath = None
    finally:
        if close is not None:
            close()
    stats = SweepStats(total=len(runs), done_before=done_before, ran=ran, failed=failed, table=tpath,
                       wall_s=time.perf_counter() - t_start)
    df.attrs["sweep"] = {"total": stats.total, "done_before": stats.done_before, "ran": stats.ran,
                         "failed": len(failed), "table": tpath}
    return df, stats


def run_sweep(spec_or_path, out_dir, executor="local", workers: int | None = None, progress=True,
              scheduler: str | None = None):
    """For notebooks: run (or resume) a sweep and return its table as a pandas DataFrame.

    `executor`: "local" (process pool, default `workers` = cores), "dask" (a LocalCluster, or the
    scheduler at `scheduler`), "serial" (this process), or a `distributed.Client` to use as is.
    `df.attrs["sweep"]` holds how many runs were already done, run now and failed."""
    client = None
    if not isinstance(executor, str):
        client, executor = executor, "dask"
    df, _ = sweep(spec_or_path, out_dir, executor=executor, workers=workers, scheduler=scheduler,
                  progress=progress, client=client)
    return df
