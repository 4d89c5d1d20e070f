"""numba fillers for workload access streams (the per-access work of generating a chunk)."""
from __future__ import annotations

import numpy as np

from ..core._jit import jit_entry
from ..core.ops import OP_MARK, OP_READ, OP_STORE, OP_STREAM, OP_SYSCALL_END


@jit_entry
def fill_file_read(pages, ops, out_off, start, n, base, file_pages, buf_pages, pages_per_call):
    """Accesses [start, start+n) of one file-read task stream into pages/ops[out_off:]: first
    `buf_pages` stores to the buffer (base + file_pages + i), then endless sequential passes over
    the file with SYSCALL_END every `pages_per_call` pages and at end of file, MARK at end of file.
    Filled in runs between call ends (no division or branch per access)."""
    rd = np.uint8(OP_READ | OP_STREAM)
    k = 0
    while k < n and start + k < buf_pages:
        pages[out_off + k] = base + file_pages + start + k
        ops[out_off + k] = OP_STORE
        k += 1
    if k == n:
        return
    j = start + k - buf_pages
    pos = j % file_pages
    in_call = pos % pages_per_call
    while k < n:
        # a run of plain reads up to the end of the call, the file or the chunk (vectorises)
        m = min(n - k, pages_per_call - in_call, file_pages - pos)
        o = out_off + k
        for i in range(m):
            pages[o + i] = base + pos + i
            ops[o + i] = rd
        k += m
        pos += m
        in_call += m
        if pos == file_pages:
            ops[o + m - 1] = rd | OP_SYSCALL_END | OP_MARK
            pos = 0
            in_call = 0
        elif in_call == pages_per_call:
            ops[o + m - 1] = rd | OP_SYSCALL_END
            in_call = 0
