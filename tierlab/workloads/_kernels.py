"""numba fillers for workload access streams (the per-access work of generating a chunk)."""
from __future__ import annotations

from ..core._jit import jit
from ..core.engine import OP_MARK, OP_READ, OP_STORE, OP_STREAM, OP_SYSCALL_END


@jit
def fill_file_read(pages, ops, out_off, start, n, base, file_pages, buf_pages, pages_per_call):
    """Accesses [start, start+n) of one file-read task stream into pages/ops[out_off:]: first
    `buf_pages` stores to the buffer (base + file_pages + i), then endless sequential passes over
    the file with SYSCALL_END every `pages_per_call` pages and at end of file, MARK at end of file."""
    rd = OP_READ | OP_STREAM
    for k in range(n):
        i = start + k
        o = out_off + k
        if i < buf_pages:
            pages[o] = base + file_pages + i
            ops[o] = OP_STORE
            continue
        pos = (i - buf_pages) % file_pages
        pages[o] = base + pos
        op = rd
        if pos == file_pages - 1:
            op |= OP_SYSCALL_END | OP_MARK
        elif (pos + 1) % pages_per_call == 0:
            op |= OP_SYSCALL_END
        ops[o] = op
