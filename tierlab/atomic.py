"""One way to write a file: atomically and durably.

`atomic_path(path)` yields a temporary path next to `path` ('.<name>.<random>.tmp', mode 0666 minus
the umask rather than mkstemp's 0600). On success the file is fsync'ed, moved into place with
`os.replace` and the directory entry is fsync'ed; on any error the temporary file is removed, so a
failed run or write never leaves a half-written result behind. Every writer in tierlab (Parquet
results, traces, sweep stores) goes through it.
"""
from __future__ import annotations

import contextlib
import os
import tempfile

from .errors import ConfigError


def _fsync_dir(d: str) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(d, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _fsync_file(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextlib.contextmanager
def atomic_path(path):
    """Yield a temporary path next to `path`; fsync and move it into place on success, delete it on
    any error. A missing directory is a ConfigError naming it."""
    path = os.fspath(path)
    d = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(d):
        raise ConfigError(f"output {path!r}: directory {d!r} does not exist")
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=".tmp", dir=d)
    os.close(fd)
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        yield tmp
        _fsync_file(tmp)
        os.replace(tmp, path)
        _fsync_dir(d)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
