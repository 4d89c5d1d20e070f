"""The run store of a sweep's output directory: one JSON file per finished run (written with
`tierlab.atomic.atomic_path`), temporary-file clean-up, and the directory lock."""
from __future__ import annotations

import contextlib
import json
import os
import sys

from ..atomic import atomic_path
from ..errors import ConfigError
from .spec import RUN_FORMAT, Run, Spec

def runs_dir(out_dir) -> str:
    return os.path.join(os.fspath(out_dir), "runs")


def run_path(out_dir, key: str) -> str:
    return os.path.join(runs_dir(out_dir), key + ".json")


def table_path(out_dir, spec: Spec) -> str:
    return os.path.join(os.fspath(out_dir), spec.name + ".parquet")

def store_run(out_dir, run: Run, record: dict, version: str) -> str:
    """Write a finished run's file atomically; return its path."""
    path = run_path(out_dir, run.key)
    doc = {"format": RUN_FORMAT, "key": run.key, "tierlab": version, "config": run.config,
           "varied": run.varied, "seed": run.seed, **record}
    with atomic_path(path) as tmp:
        with open(tmp, "w") as f:
            json.dump(doc, f, allow_nan=True)
    return path


def load_run(out_dir, key: str) -> dict | None:
    """A stored run's record, or None when it is not stored. A file that does not parse (written by
    something other than this module) is removed so the run is computed again."""
    path = run_path(out_dir, key)
    try:
        with open(path) as f:
            doc = json.load(f)
        if doc.get("key") != key or "counters" not in doc:
            raise ValueError("not a run record of this key")
        return doc
    except FileNotFoundError:
        return None
    except (ValueError, OSError) as e:
        print(f"tierlab: warning: {path}: unreadable run file ({e}); it will be computed again", file=sys.stderr)
        with contextlib.suppress(OSError):
            os.unlink(path)
        return None


def done_keys(out_dir) -> set[str]:
    d = runs_dir(out_dir)
    try:
        names = os.listdir(d)
    except FileNotFoundError:
        return set()
    return {n[:-5] for n in names if n.endswith(".json") and not n.startswith(".")}


def clean_temp_files(out_dir) -> int:
    """Remove temporary files a killed sweep left behind (only call while holding the lock)."""
    n = 0
    for d in (os.fspath(out_dir), runs_dir(out_dir)):
        with contextlib.suppress(FileNotFoundError):
            for name in os.listdir(d):
                if name.startswith(".") and name.endswith(".tmp"):
                    with contextlib.suppress(OSError):
                        os.unlink(os.path.join(d, name))
                        n += 1
    return n


@contextlib.contextmanager
def locked(out_dir):
    """Hold DIR/.lock (flock) while a sweep writes in DIR; a second concurrent sweep is refused."""
    import fcntl
    path = os.path.join(os.fspath(out_dir), ".lock")
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ConfigError(f"--out {os.fspath(out_dir)!r}: another sweep is writing there (lock {path}); "
                              "wait for it or use another directory") from None
        yield
    finally:
        os.close(fd)
