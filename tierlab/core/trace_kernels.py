"""Kernels behind `tierlab.trace`: the lackey text parser, run folding, and LRU reuse distances.

Pure numba + numpy, no files, no Python objects. The wrappers in `tierlab/trace.py` own buffering,
validation and error messages; these functions only scan arrays and report where they stopped.
"""
from __future__ import annotations

import numpy as np
from numba import njit

# Outcome codes of parse_lackey_chunk's line classifier (also the index into its `stats` array).
LINE_DATA = 0        # " L addr,size", " S addr,size", " M addr,size": kept
LINE_INSTR = 1       # "I  addr,size": kept only when instruction fetches are wanted
LINE_MESSAGE = 2     # valgrind's own messages ("==pid== ...", "--pid-- ...", "**pid** ...")
LINE_INSTR_SKIPPED = 3
N_LINE_STATS = 4

OP_READ = 0
OP_WRITE = 1
COUNT_MAX = 0xFFFFFFFF  # count is stored as uint32; longer runs are split

REUSE_BUCKETS = 65  # bucket 0: distance 0; bucket k >= 1: 2**(k-1) <= distance < 2**k


@njit(cache=True)
def _hex_value(c):
    """Value of one ASCII hex digit, or -1."""
    if 48 <= c <= 57:
        return c - 48
    if 97 <= c <= 102:
        return c - 87
    if 65 <= c <= 70:
        return c - 55
    return -1


@njit(cache=True)
def parse_lackey_chunk(buf, n_bytes, want_instr, page_shift, out_page, out_op, out_count, stats):
    """Parse the complete lines of buf[:n_bytes] (lackey --trace-mem output) into folded runs.

    Each kept access becomes (page = addr >> page_shift, op); 'L' and 'I' are reads, 'S' and 'M'
    (load then store of the same bytes) are writes. A run of the same (page, op) folds into one
    record whose count is the number of lines, split at COUNT_MAX. An access straddling a page
    boundary is counted at its start page only.

    Writes records to out_* (capacity must be >= the number of lines in the buffer) and adds line
    counts to `stats` (indexed by the LINE_* codes). Returns (n_out, consumed, bad_line): consumed
    is the byte offset just after the last complete line parsed (a trailing partial line is left
    for the caller); bad_line is the 0-based index of the first malformed line within this call,
    or -1, in which case parsing stopped at the start of that line.
    """
    n_out = 0
    pos = 0
    line = 0
    while pos < n_bytes:
        # find the end of this line first: a partial last line is not ours to judge yet
        end = pos
        while end < n_bytes and buf[end] != 10:
            end += 1
        if end >= n_bytes:
            break
        c0 = buf[pos]
        kind = -1
        op = OP_READ
        if end - pos >= 3 and c0 == 73 and buf[pos + 1] == 32 and buf[pos + 2] == 32:  # "I  "
            kind = LINE_INSTR
        elif end - pos >= 3 and c0 == 32 and buf[pos + 2] == 32:  # " X "
            c1 = buf[pos + 1]
            if c1 == 76:  # L
                kind = LINE_DATA
            elif c1 == 83 or c1 == 77:  # S, M
                kind = LINE_DATA
                op = OP_WRITE
        elif end - pos >= 2 and ((c0 == 61 and buf[pos + 1] == 61) or (c0 == 45 and buf[pos + 1] == 45)
                                 or (c0 == 42 and buf[pos + 1] == 42)):  # "==", "--", "**"
            kind = LINE_MESSAGE
        if kind == -1:
            return n_out, pos, line
        if kind == LINE_MESSAGE or (kind == LINE_INSTR and not want_instr):
            stats[LINE_MESSAGE if kind == LINE_MESSAGE else LINE_INSTR_SKIPPED] += 1
            pos = end + 1
            line += 1
            continue
        # "addr,size": 1..16 hex digits, a comma, 1+ decimal digits, optional '\r'
        i = pos + 3
        addr = np.uint64(0)
        nd = 0
        while i < end:
            v = _hex_value(buf[i])
            if v < 0:
                break
            addr = (addr << np.uint64(4)) | np.uint64(v)
            nd += 1
            i += 1
        if nd == 0 or nd > 16 or i >= end or buf[i] != 44:
            return n_out, pos, line
        i += 1
        ns = 0
        while i < end and 48 <= buf[i] <= 57:
            ns += 1
            i += 1
        if i < end and buf[i] == 13:
            i += 1
        if ns == 0 or i != end:
            return n_out, pos, line
        page = np.int64(addr >> np.uint64(page_shift))
        stats[kind] += 1
        if (n_out > 0 and out_page[n_out - 1] == page and out_op[n_out - 1] == op
                and out_count[n_out - 1] < COUNT_MAX):
            out_count[n_out - 1] += 1
        else:
            out_page[n_out] = page
            out_op[n_out] = op
            out_count[n_out] = 1
            n_out += 1
        pos = end + 1
        line += 1
    return n_out, pos, -1


@njit(cache=True)
def fold_runs(task, page, op, count, out_task, out_page, out_op, out_count):
    """Fold consecutive records with equal (task, page, op) by summing counts (split at COUNT_MAX).

    out_* must have len(task) capacity. Returns the number of records written.
    """
    n_out = 0
    for i in range(len(task)):
        c = np.int64(count[i])
        if (n_out > 0 and out_task[n_out - 1] == task[i] and out_page[n_out - 1] == page[i]
                and out_op[n_out - 1] == op[i]):
            room = COUNT_MAX - np.int64(out_count[n_out - 1])
            take = c if c < room else room
            out_count[n_out - 1] += take
            c -= take
        if c > 0:
            out_task[n_out] = task[i]
            out_page[n_out] = page[i]
            out_op[n_out] = op[i]
            out_count[n_out] = c
            n_out += 1
    return n_out


@njit(cache=True)
def reuse_distance_histogram(ids, count, n_ids):
    """LRU stack distances of a folded access sequence, as a log2 histogram over accesses.

    ids are dense page ids in [0, n_ids); record i stands for count[i] consecutive accesses of
    ids[i]. The distance of an access is the number of distinct other pages touched since the
    previous access to the same page, so an LRU cache of C pages hits exactly the accesses with
    distance < C. A Fenwick tree over record positions holds a 1 at each page's latest position;
    the distance is the number of 1s strictly between the previous and the current position.
    O(n log n). Returns (hist, cold): hist[0] counts distance 0 (including the count-1 repeats
    inside each record), hist[k] distances in [2**(k-1), 2**k); cold counts first accesses.
    """
    n = len(ids)
    tree = np.zeros(n + 1, dtype=np.int64)
    last = np.full(n_ids, -1, dtype=np.int64)
    hist = np.zeros(REUSE_BUCKETS, dtype=np.int64)
    cold = 0
    for i in range(n):
        p = ids[i]
        j = last[p]
        if j < 0:
            cold += 1
        else:
            # marks at positions j+1 .. i-1  ==  prefix(i) - prefix(j + 1)
            d = 0
            k = i
            while k > 0:
                d += tree[k]
                k -= k & (-k)
            k = j + 1
            while k > 0:
                d -= tree[k]
                k -= k & (-k)
            b = 0
            while d > 0:
                b += 1
                d >>= 1
            hist[b] += 1
            k = j + 1
            while k <= n:
                tree[k] -= 1
                k += k & (-k)
        k = i + 1
        while k <= n:
            tree[k] += 1
            k += k & (-k)
        last[p] = i
        hist[0] += np.int64(count[i]) - 1
    return hist, cold
