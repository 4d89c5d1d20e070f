"""Recording a real program's page trace under valgrind lackey.

`record_trace` runs ``valgrind --tool=lackey --trace-mem=yes --log-fd=N`` with N the write end of a
pipe, so the program's own stdout/stderr stay separate and lackey's text (about a million lines a
second, tens of bytes each) never touches the disk: it is parsed in large binary chunks by the numba
kernel (`lackey.iter_lackey`) and the folded chunks are streamed into the .npz writer
(`writers.save_trace_chunks`), so memory stays bounded by a chunk however long the program runs.
Lackey traces the process's threads in one stream without thread ids (every record is task 0) and
not its children (valgrind's default).
"""
from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import subprocess
import time

import numpy as np

from ..errors import ConfigError, TierlabError
from .analysis import PageIds
from .lackey import LACKEY_BYTES_PER_LINE, iter_lackey, new_stats, stats_dict
from .readers import load_trace
from .writers import save_trace_chunks

INSTALL_HINT = (
    "valgrind was not found on PATH; `trace record` runs programs under valgrind's lackey tool. "
    "Install it with your package manager: Debian/Ubuntu: sudo apt-get install valgrind; "
    "Fedora: sudo dnf install valgrind; Arch: sudo pacman -S valgrind"
)
_PIPE_BYTES = 1 << 20  # lackey pipe capacity asked for (Linux's default pipe-max-size)
_PIPE_NAP_S = 0.005


def _batching_reader(f, pipe_bytes: int):
    """readinto that naps after a short read so the pipe can fill.

    Valgrind writes lackey's text in ~100-byte pieces; a reader that wakes for each piece costs
    more CPU in context switches than the parsing itself (measured on 2 CPUs, `sort` of 3000
    lines: 1.6 M reads, 9.3 s wall; with the nap 6 s). A nap is far shorter than the 1 MiB pipe
    takes to fill at lackey's ~30 MB/s, so the writer does not stall.
    """
    def readinto(mv):
        n = f.readinto(mv)
        if n and n < len(mv) and n < pipe_bytes // 4:
            time.sleep(_PIPE_NAP_S)
        return n
    return readinto


def _find_valgrind() -> str:
    vg = shutil.which("valgrind")
    if vg is None:
        raise TierlabError(INSTALL_HINT)
    return vg


def record_trace(cmd: list[str], out, instructions: bool = False, chunk_lines: int = 1 << 20,
                 compress: bool = True, stdin=None, stdout=None, stderr=None,
                 env: dict | None = None, load: bool = True):
    """Run `cmd` under valgrind lackey and write its folded page trace to `out` (.npz).

    stdin/stdout/stderr/env are passed to subprocess.Popen for the program (default: inherited).
    The trace is written even if the program exits non-zero; meta["exit_code"] records it. Returns
    the Trace read back from `out` (load=True), or with load=False only a dict (records, accesses,
    pages, meta) without loading it. Either meta also has wall_s and lines_per_s (not stored in
    the file). Raises TierlabError if valgrind is missing or the run yields no accesses.
    """
    cmd = [os.fspath(c) for c in cmd]
    if not cmd:
        raise ConfigError("trace record: expected a command to run after '--'")
    vg = _find_valgrind()
    if shutil.which(cmd[0]) is None:
        raise ConfigError(f"trace record: command not found: {cmd[0]!r}")
    out = os.fspath(out)
    out_dir = os.path.dirname(os.path.abspath(out))
    if not os.path.isdir(out_dir):  # fail before the (slow) run, not after
        raise ConfigError(f"--out {out!r}: directory {out_dir!r} does not exist")
    rfd, wfd = os.pipe()
    pipe_bytes = 1 << 16
    with contextlib.suppress(OSError, AttributeError, ImportError):
        import fcntl
        pipe_bytes = fcntl.fcntl(wfd, fcntl.F_SETPIPE_SZ, _PIPE_BYTES)  # best effort
    argv = [vg, "--tool=lackey", "--trace-mem=yes", f"--log-fd={wfd}", "--", *cmd]
    source = shlex.join(cmd)
    meta = {"source": source, "tool": "valgrind-lackey", "instructions": bool(instructions)}
    stats, ids = new_stats(), PageIds()
    totals = {"accesses": 0}

    def chunks(r):
        for page, op, count in iter_lackey(_batching_reader(r, pipe_bytes),
                                           f"valgrind lackey output of {source!r}", instructions,
                                           max(int(chunk_lines), 1) * LACKEY_BYTES_PER_LINE, stats):
            ids.map(page)
            totals["accesses"] += int(count.sum(dtype=np.uint64))
            yield None, page, op, count
        if not totals["accesses"]:
            raise TierlabError(f"valgrind lackey recorded no memory accesses for {source!r} "
                               f"(exit code {proc.poll()}); see valgrind's messages on stderr")
        meta.update(exit_code=int(proc.wait()), lackey=stats_dict(stats))

    t0 = time.perf_counter()
    proc = None
    try:
        with open(rfd, "rb", buffering=0, closefd=True) as r:
            try:
                proc = subprocess.Popen(argv, pass_fds=(wfd,), stdin=stdin, stdout=stdout,
                                        stderr=stderr, env=env)
            finally:
                os.close(wfd)  # only valgrind may hold the write end, or EOF never comes
            records = save_trace_chunks(out, chunks(r), meta, compress=compress)
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
    wall_s = time.perf_counter() - t0
    timing = {"wall_s": wall_s, "lines_per_s": meta["lackey"]["lines"] / wall_s if wall_s > 0 else 0.0,
              "records_per_s": records / wall_s if wall_s > 0 else 0.0}
    if not load:
        return {"records": records, "accesses": totals["accesses"], "pages": ids.n,
                "meta": {**meta, **timing}}
    trace = load_trace(out)
    trace.meta.update(timing)
    return trace
