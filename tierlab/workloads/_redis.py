"""numba kernels of the `memtier` workload: a Redis server's event loop driven by memtier clients.

`serve()` advances the server round by round (one round = one ae event-loop iteration) and writes
the server thread's access stream: per command its CPU work (ops.OP_CPU) and the loads/stores of
the hash table, the dict entries, the values and the reply blocks it touches, in the order Redis
touches them. The model and its simplifications are in workloads/memtier.py's docstring; this file
is only its arithmetic. Everything here is deterministic (counter-based hashing, no RNG state).
"""
from __future__ import annotations

import numpy as np

from ..core._jit import jit, jit_entry, jit_inline
from ..core.ops import OP_CPU, OP_LOAD, OP_MARK, OP_PAGE, OP_STORE

PAGE = 4096
PROTO_IOBUF_LEN = 16384          # bytes readQueryFromClient reads per event (networking.c)
PROTO_REPLY_CHUNK_BYTES = 16384  # c->buf, the client's static reply buffer
REPLY_BLOCK_BYTES = 20464        # a clientReplyBlock's room: zmalloc_usable(16 KiB + 16) = 20480 - 16-byte header
REPLY_BLOCK_CLASS = 20480        # its jemalloc size class
TCACHE_SLOTS = 20                # jemalloc opt_tcache_nslots_large
DICT_HT_INITIAL_EXP = 2          # DICT_HT_INITIAL_SIZE = 4
DICT_REHASH_EMPTY_VISITS = 10    # _dictRehashStep: dictRehash(d, 1) visits at most n*10 empty buckets
ENTRY_BYTES = 64                 # dictEntry (24) + key sds (24) + value robj (16), one record per key
GAP_MAX = 64                     # rounds between a request's creation and its response kept apart

SET = 0
GET = 1

# cfg (int64) indices: the run's constants
C_CONNS, C_NREQ, C_PIPE, C_RATIO_A, C_RATIO_B, C_KEYS, C_KEY_MIN, C_DATA, C_SEED, C_DISTINCT, C_PREFIX_LEN, \
    C_VAL_CLASS, C_VAL_ALLOC, C_SHARED, C_VAL_BASE, C_REPLY_BASE, C_DICT_BASE, C_ENTRY_BASE, C_VAL_CAP, \
    C_REPLY_CAP = range(20)
NR_CFG = 20
# cfgf (float64) indices
F_SCALE, F_CPU_NS, F_NET_NS_PER_KB = range(3)
NR_CFGF = 3
# g (int64) indices: the server's and the clients' progress, resumable between chunks
(G_ROUND, G_CONN, G_BUDGET, G_LIMIT, G_PHASE, G_END_POS, G_NBLK, G_MARKS, G_LIVE, G_CHUNK,
 G_VTC, G_VHEAP, G_VFRESH, G_RTC, G_RHEAP, G_RFRESH,
 G_HT0, G_HT0_EXP, G_HT1_EXP, G_REHASH, G_USED, G_NENT, G_NEXT_TABLE_PAGE,
 G_SETS, G_GETS, G_HITS, G_MISSES, G_TX, G_RX, G_LATE, G_DONE, G_ROUNDS_MAX) = range(32)
NR_G = 32
# phases of a round
PH_VISIT = 0     # reading connections in order
PH_END = 1       # beforeSleep: the reply blocks written to the sockets and freed

ST_FULL = 0      # the output buffer is full: run it and call again
ST_DONE = 1      # every connection has its responses
ST_ROWS = 2      # the latency table needs more rows (grow it and call again)


@jit_inline
def mix64(x):
    """splitmix64's finaliser: a bijection of 64-bit integers with full avalanche."""
    x = np.uint64(x)
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


@jit_inline
def ndigits(v):
    n = 1
    while v >= 10:
        v //= 10
        n += 1
    return n


@jit_inline
def request_type(cfg, j):
    """memtier's ratio a:b: a SETs, then b GETs, repeated (client::create_request)."""
    a = cfg[C_RATIO_A]
    return SET if j % (a + cfg[C_RATIO_B]) < a else GET


@jit_inline
def request_key(cfg, c, j):
    """Key index (0 .. keys-1) of request j of connection c: memtier's R pattern, random_range over
    the key range from the client's own generator (--distinct-client-seed) or one seed for all."""
    who = np.uint64(c + 1) if cfg[C_DISTINCT] else np.uint64(0)
    h = mix64(mix64(np.uint64(cfg[C_SEED]) * np.uint64(0x9E3779B97F4A7C15) + who) + np.uint64(j))
    return np.int64(h % np.uint64(cfg[C_KEYS]))


@jit_inline
def key_len(cfg, cfgf, k):
    """Bytes of the key string: the prefix ("memtier-") and the full-size key number's digits."""
    return cfg[C_PREFIX_LEN] + ndigits(cfg[C_KEY_MIN] + np.int64(k * cfgf[F_SCALE]))


@jit_inline
def request_bytes(cfg, t, klen):
    """The RESP bytes memtier writes (redis_protocol::write_command_set / _get)."""
    n = 4 + 4 + 5 + 1 + ndigits(klen) + 2 + klen + 2     # *N, $3, SET/GET, $<klen>, key
    if t == SET:
        d = cfg[C_DATA]
        n += 1 + ndigits(d) + 2 + d + 2
    return n


# --- the 20480-class allocator: jemalloc tcache in front of the arena's first fit -------------------

@jit_inline
def heap_push(heap, n, v):
    i = n
    heap[i] = v
    while i > 0:
        par = (i - 1) >> 1
        if heap[par] <= heap[i]:
            break
        heap[par], heap[i] = heap[i], heap[par]
        i = par
    return n + 1


@jit_inline
def heap_pop(heap, n):
    top = heap[0]
    n -= 1
    heap[0] = heap[n]
    i = 0
    while True:
        a = 2 * i + 1
        if a >= n:
            break
        b = a + 1
        m = b if (b < n and heap[b] < heap[a]) else a
        if heap[i] <= heap[m]:
            break
        heap[i], heap[m] = heap[m], heap[i]
        i = m
    return top, n


@jit_inline
def slot_alloc(g, tc, heap, gi):
    """A slot of one size class: the tcache's most recently freed (LIFO), else the arena's lowest
    free slot (first fit by serial number and address), else a fresh one at the top. gi: the
    pool's first index in g (tcache count, heap count, fresh)."""
    if g[gi] > 0:
        g[gi] -= 1
        return tc[g[gi]]
    if g[gi + 1] > 0:
        v, g[gi + 1] = heap_pop(heap, g[gi + 1])
        return v
    v = g[gi + 2]
    g[gi + 2] += 1
    return v


@jit_inline
def slot_free(g, tc, heap, gi, v):
    """Free into the tcache; a full tcache first flushes its older half to the arena
    (tcache_bin_flush_large keeps ncached_max / 2)."""
    if g[gi] == TCACHE_SLOTS:
        half = TCACHE_SLOTS // 2
        for i in range(half):
            g[gi + 1] = heap_push(heap, g[gi + 1], tc[i])
        for i in range(half, TCACHE_SLOTS):
            tc[i - half] = tc[i]
        g[gi] = TCACHE_SLOTS - half
    tc[g[gi]] = v
    g[gi] += 1


# --- emitting accesses ------------------------------------------------------------------------------

@jit_inline
def emit_range(pages, ops, n, base, lo, hi, op):
    """One op per page of bytes [lo, hi) of a region starting at page `base`."""
    for q in range(lo // PAGE, (hi - 1) // PAGE + 1):
        pages[n] = base + q
        ops[n] = op
        n += 1
    return n


@jit_inline
def emit(pages, ops, n, page, op):
    pages[n] = page
    ops[n] = op
    return n + 1


@jit_inline
def entry_page(cfg, e):
    return cfg[C_ENTRY_BASE] + e * ENTRY_BYTES // PAGE


# --- the dict (dict.c of Redis 7.2): two tables, incremental rehash ----------------------------------

@jit_inline
def table_base(cfg, tpage, exp):
    """First page of the table of 2**exp buckets: tables are laid out in the order they are
    created (sizes 4, 8, 16, ...), each from a page boundary."""
    return cfg[C_DICT_BASE] + tpage[exp]


@jit_entry
def serve(cfg, cfgf, g, next_req, left, cur_key, reply_bytes, ring, last_round,
          heads, tpage, ent_next, ent_key, ent_val, key_ent,
          vtc, vheap, rtc, rheap, blk_slot, blk_used, hist, round_mark, round_chunk,
          pages, ops, cap):
    """Advance the event loop until the output buffer (pages/ops, room for `cap` ops) is full, every
    request is answered, or the latency table needs rows. Returns (ops written, ST_*)."""
    n = 0
    C = cfg[C_CONNS]
    nreq = cfg[C_NREQ]
    pipe = cfg[C_PIPE]
    valloc = cfg[C_VAL_ALLOC]
    d = cfg[C_DATA]
    hit_bytes = 1 + ndigits(d) + 2 + d + 2            # "$<d>\r\n" <data> "\r\n"
    # the most a command can emit: CPU, a rehash step, two lookups, the value, reply pages
    cmd_max = 4096 + (valloc + hit_bytes) // PAGE + 16
    rows = hist.shape[0]
    while True:
        r = g[G_ROUND]
        if r + GAP_MAX + 2 >= rows:
            return n, ST_ROWS
        if g[G_PHASE] == PH_VISIT:
            while g[G_CONN] < C:
                c = g[G_CONN]
                if g[G_BUDGET] < 0:
                    # a new visit: read up to 16 KiB of what memtier has sent (its pipeline holds
                    # the requests up to `pipe` beyond the responses it has had)
                    g[G_BUDGET] = PROTO_IOBUF_LEN
                    g[G_LIMIT] = next_req[c] + pipe
                while g[G_BUDGET] > 0:
                    j = next_req[c]
                    if left[c] == 0:
                        if j >= nreq or j >= g[G_LIMIT]:
                            break
                        k = request_key(cfg, c, j)
                        cur_key[c] = k
                        left[c] = request_bytes(cfg, request_type(cfg, j), key_len(cfg, cfgf, k))
                    take = min(g[G_BUDGET], left[c])
                    if left[c] - take == 0 and n + cmd_max > cap:
                        return n, ST_FULL        # the command completes with this read: room first
                    g[G_BUDGET] -= take
                    left[c] -= take
                    if left[c] > 0:
                        break
                    n = execute(cfg, cfgf, g, c, j, cur_key[c], reply_bytes, heads, tpage, ent_next, ent_key,
                                ent_val, key_ent, vtc, vheap, rtc, rheap, blk_slot, blk_used, pages, ops, n)
                    # the response goes out at this round's end: memtier then creates request j + pipe
                    created = ring[c, j % pipe] if j >= pipe else -1
                    ring[c, j % pipe] = r
                    gap = r - created
                    if gap <= GAP_MAX:
                        hist[created + 1, gap] += 1
                    else:
                        g[G_LATE] += 1
                    next_req[c] = j + 1
                    if j + 1 == nreq:
                        last_round[c] = r
                        g[G_LIVE] -= 1
                g[G_BUDGET] = -1
                g[G_CONN] += 1
            g[G_PHASE] = PH_END
            g[G_END_POS] = 0
        # beforeSleep: handleClientsWithPendingWrites -- each reply block is read by the socket
        # write and freed (c->buf is not simulated: see the module docstring of memtier.py)
        while g[G_END_POS] < g[G_NBLK]:
            if n + 8 > cap:
                return n, ST_FULL
            i = g[G_END_POS]
            slot = blk_slot[i]
            base, lo = reply_slot_bytes(cfg, slot)
            n = emit_range(pages, ops, n, base, lo, lo + blk_used[i], OP_LOAD | OP_PAGE)
            if cfg[C_SHARED]:
                slot_free(g, vtc, vheap, G_VTC, slot)
            else:
                slot_free(g, rtc, rheap, G_RTC, slot)
            g[G_END_POS] += 1
        g[G_NBLK] = 0
        for c in range(C):
            reply_bytes[c] = 0
        # the round's end time: a MARK on its last op in this chunk, else the clock at the end of
        # the previous chunk (the round added nothing after it)
        if n > 0:
            if not (ops[n - 1] & OP_MARK):
                ops[n - 1] |= OP_MARK
                g[G_MARKS] += 1
            round_mark[r] = g[G_MARKS] - 1
        else:
            round_chunk[r] = g[G_CHUNK] - 1
        g[G_ROUND] = r + 1
        g[G_CONN] = 0
        g[G_PHASE] = PH_VISIT
        if g[G_LIVE] == 0:
            g[G_ROUNDS_MAX] = r + 1
            return n, ST_DONE


@jit_inline
def reply_slot_bytes(cfg, slot):
    """(region base page, byte offset) of a reply block's slot."""
    if cfg[C_SHARED]:
        return cfg[C_VAL_BASE], slot * cfg[C_VAL_CLASS]
    return cfg[C_REPLY_BASE], slot * REPLY_BLOCK_CLASS


@jit
def dict_find(cfg, g, key, heads, tpage, ent_next, ent_key, pages, ops, n):
    """dictFind: the bucket in table 0 (unless already rehashed) then, while rehashing, in table 1;
    each chain entry's page is read (dictEntry, its key compared). Returns (entry or -1, n)."""
    h = mix64(np.uint64(key) ^ np.uint64(0x5851F42D4C957F2D))
    for t in range(2):
        exp = g[G_HT0_EXP] if t == 0 else g[G_HT1_EXP]
        if exp < 0:
            break
        which = g[G_HT0] if t == 0 else 1 - g[G_HT0]
        b = np.int64(h & np.uint64((1 << exp) - 1))
        if t == 0 and g[G_REHASH] >= 0 and b < g[G_REHASH]:
            continue                     # already moved to table 1
        n = emit(pages, ops, n, table_base(cfg, tpage, exp) + b * 8 // PAGE, OP_LOAD)
        e = heads[which, b]
        while e >= 0:
            n = emit(pages, ops, n, entry_page(cfg, e), OP_LOAD)
            if ent_key[e] == key:
                return e, n
            e = ent_next[e]
        if g[G_REHASH] < 0:
            break
    return -1, n


@jit
def dict_rehash_step(cfg, g, heads, tpage, ent_next, ent_key, pages, ops, n):
    """_dictRehashStep: move one bucket of table 0 to table 1 (visiting at most 10 empty ones);
    each moved entry's key is hashed (its page read), it is linked into table 1 (bucket and entry
    stored). When table 0 is empty, table 1 becomes table 0."""
    if g[G_REHASH] < 0:
        return n
    t0 = g[G_HT0]
    exp0 = g[G_HT0_EXP]
    exp1 = g[G_HT1_EXP]
    size0 = np.int64(1) << exp0
    visits = DICT_REHASH_EMPTY_VISITS
    idx = g[G_REHASH]
    while idx < size0 and heads[t0, idx] < 0:
        idx += 1
        visits -= 1
        if visits == 0:
            break
    if idx < size0:
        n = emit(pages, ops, n, table_base(cfg, tpage, exp0) + idx * 8 // PAGE, OP_LOAD)
    if idx < size0 and heads[t0, idx] >= 0:
        e = heads[t0, idx]
        mask = np.uint64((1 << exp1) - 1)
        while e >= 0:
            nxt = ent_next[e]
            h = mix64(np.uint64(ent_key[e]) ^ np.uint64(0x5851F42D4C957F2D))
            b = np.int64(h & mask)
            ent_next[e] = heads[1 - t0, b]
            heads[1 - t0, b] = e
            n = emit(pages, ops, n, entry_page(cfg, e), OP_STORE)
            n = emit(pages, ops, n, table_base(cfg, tpage, exp1) + b * 8 // PAGE, OP_STORE)
            e = nxt
        heads[t0, idx] = -1
        n = emit(pages, ops, n, table_base(cfg, tpage, exp0) + idx * 8 // PAGE, OP_STORE)
        idx += 1
    g[G_REHASH] = idx
    if idx >= size0:
        # rehash done: table 1 is the table (the old one is freed: see memtier.py on what is not modelled)
        g[G_HT0] = 1 - t0
        g[G_HT0_EXP] = exp1
        g[G_HT1_EXP] = -1
        g[G_REHASH] = -1
    return n


@jit
def dict_add(cfg, g, key, heads, tpage, ent_next, ent_key, ent_val, key_ent, val, pages, ops, n):
    """dictAdd of a new key: expand first if the table is full (used >= size: the next power of
    two above used, rehashed incrementally), then the entry (a new record, in insertion order)
    goes to the head of its bucket in the table being filled."""
    if g[G_REHASH] < 0 and g[G_USED] >= (np.int64(1) << g[G_HT0_EXP]):
        exp = g[G_HT0_EXP]
        while (np.int64(1) << exp) < g[G_USED] + 1:
            exp += 1
        g[G_HT1_EXP] = exp
        g[G_REHASH] = 0
        # a fresh allocation for it (calloc of new pages: touched when written)
        tpage[exp] = g[G_NEXT_TABLE_PAGE]
        g[G_NEXT_TABLE_PAGE] += max(np.int64(1), ((np.int64(1) << exp) * 8 + PAGE - 1) // PAGE)
    e = g[G_NENT]
    g[G_NENT] = e + 1
    t = g[G_HT0] if g[G_REHASH] < 0 else 1 - g[G_HT0]
    exp = g[G_HT0_EXP] if g[G_REHASH] < 0 else g[G_HT1_EXP]
    h = mix64(np.uint64(key) ^ np.uint64(0x5851F42D4C957F2D))
    b = np.int64(h & np.uint64((1 << exp) - 1))
    ent_key[e] = key
    ent_val[e] = val
    ent_next[e] = heads[t, b]
    heads[t, b] = e
    key_ent[key] = e
    g[G_USED] += 1
    n = emit(pages, ops, n, entry_page(cfg, e), OP_STORE)
    n = emit(pages, ops, n, table_base(cfg, tpage, exp) + b * 8 // PAGE, OP_STORE)
    return n


@jit
def execute(cfg, cfgf, g, c, j, key, reply_bytes, heads, tpage, ent_next, ent_key, ent_val, key_ent,
            vtc, vheap, rtc, rheap, blk_slot, blk_used, pages, ops, n):
    """One command, as Redis runs it once its last byte is read: the CPU work, then for a SET the
    value copied out of the query buffer into a new allocation (createStringObject), the lookup
    (with one rehash step), the entry updated or added and the old value freed; for a GET the
    lookup and, on a hit, the value copied into the reply. Returns n."""
    t = request_type(cfg, j)
    klen = key_len(cfg, cfgf, key)
    req = request_bytes(cfg, t, klen)
    vbase = cfg[C_VAL_BASE]
    vclass = cfg[C_VAL_CLASS]
    valloc = cfg[C_VAL_ALLOC]
    d = cfg[C_DATA]
    if t == SET:
        resp = 5                                            # "+OK\r\n"
    elif key_ent[key] >= 0:
        resp = 1 + ndigits(d) + 2 + d + 2
    else:
        resp = 5                                            # "$-1\r\n"
    cpu = cfgf[F_CPU_NS] + cfgf[F_NET_NS_PER_KB] * (req + resp) / 1024.0
    n = emit(pages, ops, n, np.int64(cpu), OP_CPU)
    g[G_TX] += req
    g[G_RX] += resp
    if t == SET:
        g[G_SETS] += 1
        v = slot_alloc(g, vtc, vheap, G_VTC)
        n = emit_range(pages, ops, n, vbase, v * vclass, v * vclass + valloc, OP_STORE | OP_PAGE)
        n = dict_rehash_step(cfg, g, heads, tpage, ent_next, ent_key, pages, ops, n)
        e, n = dict_find(cfg, g, key, heads, tpage, ent_next, ent_key, pages, ops, n)
        if e >= 0:
            old = ent_val[e]
            ent_val[e] = v
            n = emit(pages, ops, n, entry_page(cfg, e), OP_STORE)
            slot_free(g, vtc, vheap, G_VTC, old)
        else:
            n = dict_add(cfg, g, key, heads, tpage, ent_next, ent_key, ent_val, key_ent, v, pages, ops, n)
        reply_bytes[c] += resp
        return n
    g[G_GETS] += 1
    n = dict_rehash_step(cfg, g, heads, tpage, ent_next, ent_key, pages, ops, n)
    e, n = dict_find(cfg, g, key, heads, tpage, ent_next, ent_key, pages, ops, n)
    if e < 0:
        g[G_MISSES] += 1
        reply_bytes[c] += resp
        return n
    g[G_HITS] += 1
    v = ent_val[e]
    n = emit_range(pages, ops, n, vbase, v * vclass, v * vclass + valloc, OP_LOAD | OP_PAGE)
    # the reply: bytes [R, R + resp) of the connection's replies this round; c->buf holds the
    # first 16 KiB, the rest goes to reply blocks of 20464 bytes each (a new one when the last is full)
    lo = reply_bytes[c]
    hi = lo + resp
    reply_bytes[c] = hi
    pos = max(lo, PROTO_REPLY_CHUNK_BYTES)
    while pos < hi:
        k = (pos - PROTO_REPLY_CHUNK_BYTES) // REPLY_BLOCK_BYTES       # block index within the round
        off = (pos - PROTO_REPLY_CHUNK_BYTES) - k * REPLY_BLOCK_BYTES
        if off == 0:
            if cfg[C_SHARED]:
                slot = slot_alloc(g, vtc, vheap, G_VTC)
            else:
                slot = slot_alloc(g, rtc, rheap, G_RTC)
            blk_slot[g[G_NBLK]] = slot
            blk_used[g[G_NBLK]] = 0
            g[G_NBLK] += 1
        i = g[G_NBLK] - 1
        m = min(hi - pos, REPLY_BLOCK_BYTES - off)
        base, b0 = reply_slot_bytes(cfg, blk_slot[i])
        n = emit_range(pages, ops, n, base, b0 + off, b0 + off + m, OP_STORE | OP_PAGE)
        blk_used[i] = off + m
        pos += m
    return n
