"""Parameter sweeps: a TOML spec -> many runs -> one Parquet table (docs/sweeps.md).

    python -m tierlab sweep experiments/quickstart.toml --out sweeps/quickstart
    python -m tierlab sweep SPEC --out DIR --executor dask --scheduler tcp://host:8786
    python -m tierlab sweep SPEC --out DIR --dry-run

    from tierlab.sweep import run_sweep
    df = run_sweep("experiments/quickstart.toml", "sweeps/quickstart")   # a pandas DataFrame

A spec names a base run (the config dict `tierlab.api.build` takes), a `[grid]` (cartesian product),
optional `[zip]` groups (lists varied together) and `[repeat]` seeds. `plan(spec)` expands and
validates every run before anything runs; a bad spec raises ConfigError naming the file, the line and
the key, with what is accepted.

Storage in the output directory DIR:

* ``DIR/runs/<key>.json``: one file per finished run, written the moment the run finishes (temporary
  file + fsync + ``os.replace``). ``<key>`` is a hash of the canonical JSON of the run's resolved
  config plus the tierlab version, so a re-run of the sweep (or of another sweep sharing DIR) skips
  every run already stored. Names starting with ``.`` are temporary files; readers ignore them and
  the next sweep in DIR deletes the ones a killed sweep left behind.
* ``DIR/<name>.parquet``: the sweep table, one row per finished run (see `assemble`), rebuilt from
  the run files at the end of every sweep, atomically.
* ``DIR/.lock``: held (flock) while a sweep writes in DIR; a second concurrent sweep is refused.

The package, by concern: `spec` (TOML spec -> validated runs, run keys), `store` (the locked run
store), `executors` (local pool, Dask, serial), `assembly` (the Parquet table), `runner` (`sweep`,
`run_sweep`) and `cli` (`tierlab sweep`, `python -m tierlab.sweep`). Every run is validated with
`tierlab.config.check`, the validator `tierlab.api.build` and the CLI use; every file is written
with `tierlab.atomic.atomic_path`.

Runs execute in worker processes (`local`: a process pool; `dask`: a distributed Client) or in the
calling process (`serial`). Workers only compute and return the run's record; the calling process
writes every file, so Dask workers on other hosts need no shared file system.
"""
from .assembly import assemble, read_table, write_table
from .cli import add_sweep_arguments, add_sweep_command, add_sweep_commands, dry_run_report, main, main_sweep
from .executors import default_workers, execute_run
from .runner import SweepStats, run_sweep, sweep
from .spec import (
    BASE_KEYS, EXECUTORS, REPEAT_KEYS, RUN_FORMAT, SPEC_KEYS, VARY_TABLES, VARY_TOP, Run, Spec,
    canonical_json, expand, load_spec, plan, run_key, tierlab_version,
)
from .store import clean_temp_files, done_keys, load_run, locked, run_path, runs_dir, store_run, table_path

__all__ = [
    "BASE_KEYS", "EXECUTORS", "REPEAT_KEYS", "RUN_FORMAT", "SPEC_KEYS", "VARY_TABLES", "VARY_TOP", "Run", "Spec",
    "SweepStats", "add_sweep_arguments", "add_sweep_command", "add_sweep_commands", "assemble", "canonical_json",
    "clean_temp_files", "default_workers", "done_keys", "dry_run_report", "execute_run", "expand", "load_run",
    "load_spec", "locked", "main", "main_sweep", "plan", "read_table", "run_key", "run_path", "run_sweep",
    "runs_dir", "store_run", "sweep", "table_path", "tierlab_version", "write_table",
]
