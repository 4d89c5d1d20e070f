"""Result serialisation: a JSON-able dict, and one Parquet file per run.

Parquet layout (``tierlab run --out FILE``; `write_parquet` / `read_parquet`), format_version 1:

* The file's table is the run's time series (`Result.timeseries`), one row per sample taken every
  ``sample_interval_ms`` of simulated time: ``time_s`` (float64, simulated seconds), then every
  vmstat counter under its kernel name (int64, cumulative since the start of the run, summed over
  nodes), then per-node gauges ``node{i}_nr_free_pages``, ``node{i}_nr_inactive_anon``,
  ``node{i}_nr_active_anon``, ``node{i}_nr_inactive_file``, ``node{i}_nr_active_file``,
  ``node{i}_nr_isolated``, ``node{i}_migrc_pending_nr`` (pages). ``pandas.read_parquet(FILE)`` gives it back as a DataFrame.
* The schema metadata key ``tierlab`` holds a JSON object with everything else: ``format_version``,
  ``counters`` (final vmstat totals), ``node_counters`` (per node), ``nodes`` (final per-node table),
  ``sim_time_s``, ``task_times_s``, ``marks_s``, ``cycle_times_s``, ``tasks`` (CPU time per task and
  kswapd, `Result.tasks` as records) and ``config`` (the config dict
  that `tierlab.api.build` accepts, so the run can be repeated). Read it with `read_parquet`, or
  ``json.loads(pyarrow.parquet.read_schema(FILE).metadata[b"tierlab"])``.

Writes go through `tierlab.atomic.atomic_path`: a temporary file in the same directory, fsynced and
moved into place with `os.replace`; on any error it is removed and nothing is left behind.
"""
from __future__ import annotations

import json
import os

import numpy as np

from .atomic import atomic_path
from .errors import ConfigError

FORMAT_VERSION = 1
METADATA_KEY = b"tierlab"


def result_dict(res) -> dict:
    """`Result.to_dict()` plus per-node state and (when the workload records marks) cycle times."""
    d = res.to_dict()
    d["nodes"] = [{"node": int(i), **{k: (v.item() if isinstance(v, np.generic) else v)
                                      for k, v in row.items()}}
                  for i, row in res.nodes.to_dict(orient="index").items()]
    d["node_counters"] = {str(i): {k: int(v) for k, v in row.items() if v}
                          for i, row in res.node_counters.to_dict(orient="index").items()}
    if len(res.marks_s):
        tasks = sorted(int(t) for t in res.marks_s.task.unique())
        cycles = {t: [float(x) for x in res.cycle_times_s(t)] for t in tasks}
        if any(cycles.values()):
            # task 0's cycle times; every task's under cycle_times_s_by_task when there are several
            d["cycle_times_s"] = cycles.get(0, [])
            if len(tasks) > 1:
                d["cycle_times_s_by_task"] = {str(t): v for t, v in cycles.items()}
    return _jsonable(d)


def _jsonable(x):
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, np.ndarray):
        return x.tolist()
    return x


def check_output_path(path) -> str:
    """Validate an output path before any work: its directory exists and it is not a directory."""
    path = os.fspath(path)
    d = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(d):
        raise ConfigError(f"--out {path!r}: directory {d!r} does not exist")
    if os.path.isdir(path):
        raise ConfigError(f"--out {path!r}: is a directory; expected a file name such as run.parquet")
    return path


def write_parquet(res, path) -> None:
    """Write `res` (a tierlab.api.Result) to `path` atomically in the layout described above."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    meta = result_dict(res)
    meta = {"format_version": FORMAT_VERSION, **meta}
    table = pa.Table.from_pandas(res.timeseries, preserve_index=False)
    md = dict(table.schema.metadata or {})
    md[METADATA_KEY] = json.dumps(meta).encode()
    table = table.replace_schema_metadata(md)
    with atomic_path(check_output_path(path)) as tmp:
        pq.write_table(table, tmp)


def read_parquet(path):
    """(timeseries DataFrame, metadata dict) from a file written by `write_parquet`."""
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    md = table.schema.metadata or {}
    if METADATA_KEY not in md:
        raise ConfigError(f"{path}: not a tierlab result (no {METADATA_KEY.decode()!r} schema metadata)")
    return table.to_pandas(), json.loads(md[METADATA_KEY])
