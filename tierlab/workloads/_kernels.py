"""numba fillers for workload access streams (the per-access work of generating a chunk)."""
from __future__ import annotations

import numpy as np

from ..core._jit import jit
from ..core.engine import OP_MARK, OP_READ, OP_STORE, OP_STREAM, OP_SYSCALL_END


@jit
def fill_file_read(pages, ops, out_off, start, n, base, file_pages, buf_pages, pages_per_call):
    """Accesses [start, start+n) of one file-read task stream into pages/ops[out_off:]: first
    `buf_pages` stores to the buffer (base + file_pages + i), then endless sequential passes over
    the file with SYSCALL_END every `pages_per_call` pages and at end of file, MARK at end of file.
    Positions advance incrementally (no division per access)."""
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
    for k in range(k, n):
        o = out_off + k
        pages[o] = base + pos
        op = rd
        in_call += 1
        if pos == file_pages - 1:
            op |= OP_SYSCALL_END | OP_MARK
            pos = 0
            in_call = 0
        else:
            if in_call == pages_per_call:
                op |= OP_SYSCALL_END
                in_call = 0
            pos += 1
        ops[o] = op
