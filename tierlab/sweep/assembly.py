"""The sweep table: one row per finished run, assembled from the run store, written as Parquet
(atomically, with the spec in the schema metadata)."""
from __future__ import annotations

import json

from ..atomic import atomic_path
from .spec import Run, Spec, load_spec, plan, tierlab_version
from .store import load_run, table_path

def _column(values: list):
    """Varied values as one Parquet-able column: ints/floats/bools/strings kept, mixed types as str."""
    kinds = {type(v) for v in values}
    if kinds <= {int} or kinds <= {float} or kinds <= {str} or kinds <= {bool}:
        return values
    if kinds <= {int, float}:
        return [float(v) for v in values]
    return [v if isinstance(v, str) else json.dumps(v) for v in values]


def assemble(spec, out_dir, runs: list[Run] | None = None):
    """The sweep table from the stored runs (finished runs only, in plan order). Columns: run_key,
    each varied key (spec spelling of the value), seed, every counter (kernel names), sim_time_s,
    task_times_s (list), cycle_times_s (list; when any run recorded marks), wall_s."""
    import numpy as np
    import pandas as pd
    spec = load_spec(spec)
    runs = runs if runs is not None else plan(spec)
    recs = []
    for r in runs:
        doc = load_run(out_dir, r.key)
        if doc is not None:
            recs.append((r, doc))
    counter_names: list[str] = []
    seen = set()
    for _, doc in recs:
        for k in doc["counters"]:
            if k not in seen:
                seen.add(k)
                counter_names.append(k)
    cols: dict[str, list] = {"run_key": [r.key for r, _ in recs]}
    for k in spec.varied_keys:
        cols[k] = _column([r.varied[k] for r, _ in recs])
    cols["seed"] = [r.seed for r, _ in recs]
    for c in counter_names:
        cols[c] = [int(doc["counters"].get(c, 0)) for _, doc in recs]
    cols["sim_time_s"] = [float(doc["sim_time_s"]) for _, doc in recs]
    # list columns hold float64 arrays, as pandas.read_parquet gives them back
    cols["task_times_s"] = [np.asarray(doc.get("task_times_s", []), dtype=np.float64) for _, doc in recs]
    if any(doc.get("cycle_times_s") is not None for _, doc in recs):
        cols["cycle_times_s"] = [np.asarray(doc.get("cycle_times_s") or [], dtype=np.float64) for _, doc in recs]
    cols["wall_s"] = [float(doc.get("wall_s", float("nan"))) for _, doc in recs]
    df = pd.DataFrame(cols)
    for c in counter_names + ["seed"]:
        df[c] = df[c].astype("int64")
    return df


def write_table(df, spec: Spec, out_dir, runs: list[Run]) -> str:
    """Write the table to DIR/<name>.parquet atomically; the spec and version go in the schema
    metadata under b'tierlab_sweep'."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    path = table_path(out_dir, spec)
    table = pa.Table.from_pandas(df, preserve_index=False)
    md = dict(table.schema.metadata or {})
    md[b"tierlab_sweep"] = json.dumps({"name": spec.name, "spec": spec.to_dict(), "spec_path": spec.path,
                                       "tierlab": tierlab_version(), "runs": len(runs),
                                       "finished": len(df)}, default=str).encode()
    table = table.replace_schema_metadata(md)
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp)
    return path


def read_table(path):
    """(DataFrame, metadata dict) of a sweep table."""
    import pyarrow.parquet as pq
    t = pq.read_table(path)
    md = t.schema.metadata or {}
    return t.to_pandas(), json.loads(md.get(b"tierlab_sweep", b"{}"))
