"""Kernels behind `tierlab.trace`: the lackey text parser, run folding, dense page ids and LRU
stack (reuse) distances.

Pure numba + numpy, no files, no Python objects, no allocation (`core/_jit.jit`): the wrappers in
`tierlab/trace/` own buffers, growth, validation and error messages; these functions only scan
arrays, keep state in arrays the caller passes in (so a trace can be fed chunk by chunk), and report
where they stopped.
"""
from __future__ import annotations

import numpy as np
from ._jit import jit_entry

# Outcome codes of parse_lackey_chunk's line classifier (also the index into its `stats` array).
LINE_DATA = 0        # " L addr,size", " S addr,size", " M addr,size": kept
LINE_INSTR = 1       # "I  addr,size": kept only when instruction fetches are wanted
LINE_MESSAGE = 2     # valgrind's own messages ("==pid== ...", "--pid-- ...", "**pid** ...")
LINE_INSTR_SKIPPED = 3
N_LINE_STATS = 4

# A trace record's op (tierlab.trace's `op` column), not the engine's OP_LOAD/OP_STORE/OP_READ/OP_WRITE.
TRACE_READ = 0
TRACE_WRITE = 1
COUNT_MAX = 0xFFFFFFFF  # count is stored as uint32; longer runs are split



@jit_entry
def _hex_value(c):
    """Value of one ASCII hex digit, or -1."""
    if 48 <= c <= 57:
        return c - 48
    if 97 <= c <= 102:
        return c - 87
    if 65 <= c <= 70:
        return c - 55
    return -1


@jit_entry
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
        op = TRACE_READ
        if end - pos >= 3 and c0 == 73 and buf[pos + 1] == 32 and buf[pos + 2] == 32:  # "I  "
            kind = LINE_INSTR
        elif end - pos >= 3 and c0 == 32 and buf[pos + 2] == 32:  # " X "
            c1 = buf[pos + 1]
            if c1 == 76:  # L
                kind = LINE_DATA
            elif c1 == 83 or c1 == 77:  # S, M
                kind = LINE_DATA
                op = TRACE_WRITE
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


@jit_entry
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


# ---------------------------------------------------------------------------------------------
# dense page ids, chunk by chunk

_GOLDEN64 = np.uint64(0x9E3779B97F4A7C15)


@jit_entry
def _slot(key, bits):
    # Fibonacci hashing: the top bits of key * 2**64/phi spread sequential and strided pages well
    return np.int64((np.uint64(key) * _GOLDEN64) >> np.uint64(64 - bits))


@jit_entry
def assign_ids(pages, table, bits, n_ids, out_ids):
    """Dense ids in order of first appearance, continuing from n_ids; returns (n_ids, done).

    table holds 2**bits (key, id) int64 pairs, id -1 = empty slot (open addressing, linear probing).
    out_ids[i] = id of pages[i] for i < done; it stops early (done < len(pages)) before a new id
    would fill the table beyond half, for the caller to grow it (`rehash_ids`) and call again.
    """
    mask = (np.int64(1) << bits) - 1
    for i in range(len(pages)):
        key = pages[i]
        s = _slot(key, bits)
        while table[2 * s + 1] >= 0 and table[2 * s] != key:
            s = (s + 1) & mask
        if table[2 * s + 1] < 0:
            if 2 * (n_ids + 1) > mask + 1:
                return n_ids, i
            table[2 * s] = key
            table[2 * s + 1] = n_ids
            n_ids += 1
        out_ids[i] = table[2 * s + 1]
    return n_ids, len(pages)


@jit_entry
def rehash_ids(old, new, new_bits):
    """Move every (key, id) pair of table `old` into the empty table `new` of 2**new_bits slots."""
    mask = (np.int64(1) << new_bits) - 1
    for j in range(len(old) // 2):
        if old[2 * j + 1] >= 0:
            s = _slot(old[2 * j], new_bits)
            while new[2 * s + 1] >= 0:
                s = (s + 1) & mask
            new[2 * s] = old[2 * j]
            new[2 * s + 1] = old[2 * j + 1]


class PageIds:
    """Dense page ids 0, 1, ... in order of first appearance, fed chunk by chunk."""

    def __init__(self, bits: int = 12):
        self.bits = bits
        self.table = np.full(2 << bits, -1, np.int64)
        self.n = 0

    def map(self, pages: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """ids of pages (into `out`, default a new int64 array), assigning new ids to new pages.
        The table doubles when half full, so it stays O(distinct pages)."""
        pages = np.ascontiguousarray(pages, np.int64)
        out = np.empty(len(pages), np.int64) if out is None else out
        done = 0
        while True:
            n, k = assign_ids(pages[done:], self.table, self.bits, self.n, out[done:])
            self.n, done = int(n), done + int(k)
            if done == len(pages):
                return out
            bits = self.bits + 1
            table = np.full(2 << bits, -1, np.int64)
            rehash_ids(self.table, table, bits)
            self.bits, self.table = bits, table


# ---------------------------------------------------------------------------------------------
# LRU stack distances, chunk by chunk


@jit_entry
def _prefix(tree, k):
    s = 0
    while k > 0:
        s += tree[k]
        k -= k & (-k)
    return s


@jit_entry
def _add(tree, k, v):
    n = len(tree) - 1
    while k <= n:
        tree[k] += v
        k += k & (-k)


@jit_entry
def compact_positions(last, n_ids, old_tree, new_tree):
    """Renumber the live positions (last[id] >= 0 for id < n_ids) to 0..k-1 in order and rebuild
    the Fenwick tree `new_tree` (may be `old_tree`) with ones at 0..k-1; returns k, the next free
    position. Distances are counts of live positions between two points, so they are unchanged.
    """
    for p in range(n_ids):
        if last[p] >= 0:
            last[p] = _prefix(old_tree, last[p] + 1) - 1  # rank among the live positions
    k = 0
    for p in range(n_ids):
        if last[p] >= 0:
            k += 1
    for j in range(1, len(new_tree)):  # a prefix of k ones: node j covers (j - lowbit(j), j]
        lo = j - (j & (-j))
        hi = j if j < k else k
        new_tree[j] = hi - lo if hi > lo else 0
    new_tree[0] = 0
    return k


@jit_entry
def stack_distances(ids, count, n_ids, last, tree, clock, hist):
    """Add the LRU stack distances of a chunk of folded records to `hist`; returns (clock, cold).

    ids are dense page ids (< n_ids); record i stands for count[i] consecutive accesses of ids[i].
    The distance of an access is the number of distinct other pages touched since the previous
    access to the same page, so an LRU cache of C pages hits exactly the accesses with distance < C;
    hist[d] counts accesses at distance d (the count-1 repeats inside a record are distance 0), cold
    the first accesses. State across chunks: last[id] (position of the page's latest access, -1 if
    never), a Fenwick tree over positions with a 1 at each page's latest position, and clock (the
    next position). The distance is the number of 1s strictly between the previous and the current
    position. When the positions run out the live ones are compacted (`compact_positions`); the
    caller sizes the tree >= 2 * n_ids + 1 so that costs O(1) amortised: O(n log n_ids) in all.
    len(last), len(hist) >= n_ids.
    """
    size = len(tree) - 1
    cold = 0
    for i in range(len(ids)):
        if clock >= size:
            clock = compact_positions(last, n_ids, tree, tree)
        p = ids[i]
        j = last[p]
        if j < 0:
            cold += 1
        else:
            hist[_prefix(tree, clock) - _prefix(tree, j + 1)] += 1
            _add(tree, j + 1, -1)
        _add(tree, clock + 1, 1)
        last[p] = clock
        clock += 1
        hist[0] += np.int64(count[i]) - 1
    return clock, cold
