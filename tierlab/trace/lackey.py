"""valgrind lackey ``--trace-mem=yes`` text -> folded page records, chunk by chunk.

Mapping of lackey lines (parsed in large binary chunks by `core.trace_kernels.parse_lackey_chunk`):

* `` L addr,size`` load -> read; `` S`` store -> write; `` M`` modify (a load then a store of the
  same bytes) -> one write access; ``I  addr,size`` instruction fetch -> read, kept only with
  ``instructions=True``;
* an access that straddles a page boundary is counted once, at the page of its first byte;
* lackey interleaves all threads of the process in one stream without thread ids, so every record
  is task 0. Valgrind's own messages (``==pid== ...``) are skipped; any other line is an error
  naming file:line.
"""
from __future__ import annotations

import contextlib
import os
from typing import Iterator

import numpy as np

from ..core import trace_kernels as tk
from ..errors import TraceError
from ..units import PAGE_SHIFT
from .format import COUNT_MAX, Trace, make_trace

LACKEY_BYTES_PER_LINE = 16  # typical lackey line length, to size chunks given in lines
_MIN_LINE_BYTES = 7  # "I  0,1\n": bounds the number of records a buffer can hold


def new_stats() -> np.ndarray:
    """The line counters iter_lackey fills (indexed by trace_kernels.LINE_*)."""
    return np.zeros(tk.N_LINE_STATS + 1, np.int64)  # last slot: bytes read


def stats_dict(stats: np.ndarray) -> dict:
    return {
        "lines": int(stats[:tk.N_LINE_STATS].sum()),
        "data_lines": int(stats[tk.LINE_DATA]),
        "instruction_lines": int(stats[tk.LINE_INSTR] + stats[tk.LINE_INSTR_SKIPPED]),
        "instruction_lines_kept": int(stats[tk.LINE_INSTR]),
        "message_lines": int(stats[tk.LINE_MESSAGE]),
        "bytes": int(stats[tk.N_LINE_STATS]),
    }


def iter_lackey(readinto, name: str, instructions: bool, chunk_bytes: int,
                stats: np.ndarray | None = None) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Parse lackey text from readinto(memoryview) -> nbytes (0 at EOF) into folded
    (page, op, count) chunks of at most ~chunk_bytes / 7 records; a run that continues across a
    chunk boundary is folded too (the last record of each chunk is held back). Adds line counts to
    `stats` (see new_stats)."""
    stats = new_stats() if stats is None else stats
    line_stats = stats[:tk.N_LINE_STATS]
    buf = np.empty(max(int(chunk_bytes), 64), np.uint8)
    cap = len(buf) // _MIN_LINE_BYTES + 1
    out_page, out_op, out_count = np.empty(cap, np.int64), np.empty(cap, np.uint8), np.empty(cap, np.uint32)
    held = None  # (page, op, count) of the last record so far
    filled = 0
    eof = False
    while True:
        mv = memoryview(buf)
        while filled < len(buf) and not eof:
            n = readinto(mv[filled:])
            if not n:
                eof = True
            else:
                filled += n
                stats[tk.N_LINE_STATS] += n
        del mv
        if eof and filled and buf[filled - 1] != 10:  # close a last line without '\n'
            if filled == len(buf):
                buf = np.concatenate([buf, np.zeros(1, np.uint8)])
            buf[filled] = 10
            filled += 1
        lines_before = int(line_stats.sum())
        n_out, consumed, bad = tk.parse_lackey_chunk(buf, filled, bool(instructions), PAGE_SHIFT,
                                                      out_page, out_op, out_count, line_stats)
        if bad >= 0:
            text = bytes(buf[consumed:filled]).split(b"\n", 1)[0][:80]
            raise TraceError(f"{name}:{lines_before + bad + 1}: expected a lackey line ' L addr,size', "
                             f"' S addr,size', ' M addr,size' or 'I  addr,size' (hex address, "
                             f"decimal size) or a valgrind '==pid==' message; got {text!r}")
        if n_out:
            lo = 0
            if (held is not None and held[0] == out_page[0] and held[1] == out_op[0]
                    and held[2] + int(out_count[0]) <= COUNT_MAX):
                held = (held[0], held[1], held[2] + int(out_count[0]))  # the run continues
                lo = 1
            if n_out > lo:
                if held is not None:
                    yield (np.concatenate([[held[0]], out_page[lo:n_out - 1]]).astype(np.int64),
                           np.concatenate([[held[1]], out_op[lo:n_out - 1]]).astype(np.uint8),
                           np.concatenate([[held[2]], out_count[lo:n_out - 1]]).astype(np.uint32))
                elif n_out - 1 > lo:
                    yield (out_page[lo:n_out - 1].copy(), out_op[lo:n_out - 1].copy(),
                           out_count[lo:n_out - 1].copy())
                held = (int(out_page[n_out - 1]), int(out_op[n_out - 1]), int(out_count[n_out - 1]))
        rest = filled - consumed
        if consumed == 0 and filled == len(buf) and not eof:
            # one line longer than the whole buffer: grow rather than fail on odd valgrind output
            buf = np.concatenate([buf, np.empty(len(buf), np.uint8)])
            cap = len(buf) // _MIN_LINE_BYTES + 1
            out_page, out_op, out_count = (np.empty(cap, a.dtype) for a in (out_page, out_op, out_count))
            continue
        buf[:rest] = buf[consumed:filled]
        filled = rest
        if eof and filled == 0:
            break
    if held is not None:
        yield (np.array([held[0]], np.int64), np.array([held[1]], np.uint8),
               np.array([held[2]], np.uint32))


@contextlib.contextmanager
def open_lackey(src, name: str | None = None):
    """(readinto, name) for a path or a binary file object."""
    if isinstance(src, (str, os.PathLike)):
        with open(src, "rb", buffering=0) as f:
            yield f.readinto, name or os.fspath(src)
    else:
        yield src.readinto, name or getattr(src, "name", "<lackey stream>")


def parse_lackey(src, instructions: bool = False, chunk_lines: int = 1 << 20,
                 name: str | None = None) -> Trace:
    """Parse valgrind lackey --trace-mem text (a path or a binary file object) into a folded Trace.

    Instruction fetches ('I' lines) are kept, as reads, only if `instructions`. Malformed lines
    raise TraceError naming file:line. Reads chunk_lines * ~16 bytes at a time.
    """
    stats = new_stats()
    with open_lackey(src, name) as (readinto, name):
        parts = list(iter_lackey(readinto, str(name), instructions,
                                 max(int(chunk_lines), 1) * LACKEY_BYTES_PER_LINE, stats))
    cat = lambda i, dt: np.concatenate([p[i] for p in parts]) if parts else np.zeros(0, dt)  # noqa: E731
    meta = {"source": str(name), "tool": "valgrind-lackey", "instructions": bool(instructions),
            "lackey": stats_dict(stats)}
    return make_trace(None, cat(0, np.int64), cat(1, np.uint8), cat(2, np.uint32), meta, str(name))
