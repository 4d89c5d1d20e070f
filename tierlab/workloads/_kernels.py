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


@jit_entry
def fill_xsbench_lookups(pages, ends, firsts, energy, mat, mat_tab, mat_len, n_union, n_iso, n_gp, bases,
                         point_bytes, page_size, stack_page):
    """The pages of XSBench lookups in order (workloads/xsbench.py says what each lookup touches):
    per lookup the binary search's steps over the unionized grid, the index grid row's first and
    (if another) last page, each nuclide's grid point pair, the thread's stack page. ends[i]: the
    position of lookup i's last page (its stack store); firsts[i]: of its first nuclide point.
    Returns the pages filled."""
    k = 0
    for i in range(energy.shape[0]):
        target = min(np.int64(energy[i] * n_union), n_union - 1)
        lo = np.int64(0)
        hi = n_union - 1
        while hi - lo > 1:
            mid = (lo + hi) // 2
            pages[k] = bases[1] + mid * 8 // page_size
            k += 1
            if mid <= target:
                lo = mid
            else:
                hi = mid
        row0 = (target * n_iso * 4) // page_size
        row1 = ((target * n_iso + n_iso - 1) * 4) // page_size
        pages[k] = bases[2] + row0
        k += 1
        if row1 != row0:
            pages[k] = bases[2] + row1
            k += 1
        firsts[i] = k
        m = mat[i]
        low = min(np.int64(energy[i] * n_gp), n_gp - 2)
        for j in range(mat_len[m]):
            pages[k] = bases[0] + ((mat_tab[m, j] * n_gp + low) * point_bytes) // page_size
            k += 1
        pages[k] = stack_page
        ends[i] = k
        k += 1
    return k
