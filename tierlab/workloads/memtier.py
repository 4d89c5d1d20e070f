"""`memtier`: a Redis server driven by memtier_benchmark, reported the way memtier reports it.

Seed 002 runs `memtier_benchmark -t 512 -c 20 -n 25000 --ratio 1:1 --key-pattern R:R -d 20000
--pipeline=1000 --distinct-client-seed` against one Redis server. tierlab simulates the server's
memory -- the one task whose accesses matter to the kernel -- and puts a model of the clients
around it. The parameters carry memtier's option names.

The clients (memtier_benchmark 1.4-2.1, the versions of the seed's date; read from its source).
`threads` x `clients` connections, each sending `requests` commands. A connection's command j is
a SET when j mod (a + b) < a for --ratio a:b (client::create_request alternates a SETs and b
GETs), its key is random_range(key_minimum, key_maximum) from the client's own generator (R:R;
--distinct-client-seed seeds each client apart, without it every client draws the same keys),
its bytes are the RESP text memtier writes (SET: `*3 $3 SET $<klen> key $<d> <d bytes>`, GET:
`*2 $3 GET $<klen> key`; keys "memtier-<n>"). The pipeline: at its start a connection creates
`pipeline` commands at once; afterwards every response it parses lets it create one more
(shard_connection::fill_pipeline), stamped with the time it is created. A command's latency is
the time from that stamp to the parse of its response. A GET of a key no SET has stored yet is a
miss ("$-1"), otherwise a hit of `data_size` bytes.

The server (Redis 7, one thread). One event-loop iteration (a *round*) reads every connection
once, in a fixed order: readQueryFromClient reads up to PROTO_IOBUF_LEN = 16 KiB of what the
connection has sent (commands up to `pipeline` beyond the responses memtier has had), and every
command whose last byte has arrived runs. Replies are written at the round's end (beforeSleep ->
handleClientsWithPendingWrites), so every command of a round is answered at the round's end. With
20 KB SETs a connection advances ~0.8 SET + 0.8 GET per round; the server is never idle (10.24 M
commands are outstanding), so the run is the server's own time, command after command. What a
command touches, in Redis's order:
- its CPU work: `request_cpu_ns` (parsing, the event loop's and the socket system calls' fixed
  part; calibrated by the reproduction) plus `net_ns_per_kb` per KiB of request and response (the
  server's share of moving the bytes through loopback TCP); an ops.OP_CPU op;
- SET: the value is copied out of the query buffer into a new allocation (createStringObject:
  sds of d + 5 + 1 bytes, jemalloc's 20480 size class for d = 20000: page stores), then the key is
  looked up (one incremental rehash step first), and either its entry is updated and the old value
  freed, or a new entry is added (the dict may expand: see below);
- GET: the lookup (bucket, chain entries); on a hit the value's pages are read into the reply:
  c->buf takes the connection's first 16 KiB of replies of the round, the rest goes to reply
  blocks (clientReplyBlock, 20464 bytes of room = the 20480 class: the same size class as the
  values), allocated as the bytes arrive, read by the socket write and freed at the round's end.
Allocation of the 20480 class is jemalloc's: the thread cache first (LIFO, 20 slots; a full cache
flushes its older half to the arena), then the arena's first fit (lowest serial number and
address: the lowest free slot), then a fresh slot at the top of the heap. Values and reply blocks
share it, so a block often reuses the extent of a value just overwritten, and the slots that cycle
as reply blocks every round are hot. The dict is Redis 7.2's: two tables, expansion to the next
power of two when used >= size, one rehash step (a bucket) per lookup; each table is a fresh
allocation (its pages faulted where memory is free at that moment: the last expansion of a 10 M-key
dict happens once DRAM is full). Entries are one 64-byte record per key (dictEntry 24 + key sds 24
+ value robj 16) in insertion order.

Simplified (each named): the per-connection buffers (c->querybuf, c->buf; ~0.5 GB at full size,
allocated at connect, touched every round: hot DRAM the tiering never moves) are not simulated
memory, their copies are part of the CPU cost; the value robj churn of overwrites is folded into
the entry record; serverCron's active rehashing (1 ms per 100 ms) is left out, so a rehash takes
~2x the commands; an old table is not freed after its rehash (at most half the final table's
pages, cold) and freed extents are never purged (jemalloc's 10 s dirty decay: with values
recycled continuously almost nothing stays free that long); a reply block is always the 20480
class (a reply larger than 20 KB would use larger blocks); the miss reply costs as much CPU as
any command besides its bytes; the clients themselves use no CPU or memory of the simulated
machine (memtier runs on the other socket) and keep up with the server.

How memtier reports (Result.summary, `memtier_report()`): per client its run lasts from its start
(time 0) to the parse of its last response; the test duration is the mean over clients of the end
(run_stats: averaged start and end times). Ops/sec, Hits/sec, Misses/sec are counts over that
duration; KB/sec is (bytes received + bytes sent) / 1024 per second. Latencies go into an
HdrHistogram of microseconds created with (lowest 10, highest 1,000,000, 2 significant digits)
(safe_hdr_histogram in memtier 1.4.0 - 2.1.x): hdr_record_value drops a value beyond the
histogram's last bucket (>= 2^20 us = 1.048576 s); Avg. Latency is hdr_mean, pXX is
hdr_value_at_percentile (the highest value of the bucket: hence 1044.479 and 1048.575 ms in the
seed), all in ms. With 1000 commands in flight per connection a command waits ~625 rounds, far
beyond 1.05 s, so only the commands answered within 1.05 s of their creation are in the
latency figures: the first rounds of the run. The figures are memtier's and indicative only.

Scale F: keys (key_maximum - key_minimum) and connections (threads x clients) are divided by F,
`requests`, `pipeline` and the byte counts are not: a connection's run is the full-size one, a
round has 1/F of the commands and lasts 1/F of the time, which is the compressed clock of
docs/scaling.md. Rates (ops/s, KB/s) need no correction; latencies and durations are multiplied
by F (full-size seconds).
"""
from __future__ import annotations

from typing import Iterator

import numpy as np

from ..core.ops import OP_MARK  # noqa: F401  (re-exported for tests reading the stream)
from ..errors import ConfigError
from ..units import PAGE_SIZE
from . import _redis as R
from .base import Chunk, Param, Process, Region, Workload, int_param, nodes_param, policy_param

MAX_CONNECTIONS = 1 << 20
KEY_PREFIX = "memtier-"


def _ratio(v, key="ratio"):
    s = str(v)
    a, sep, b = s.partition(":")
    if not sep or not a.isdigit() or not b.isdigit() or int(a) + int(b) == 0:
        raise ConfigError(f"{key}: {v!r} is not a ratio; accepted: SETS:GETS such as 1:1 or 1:10 (not 0:0)")
    return int(a), int(b)


def _key_pattern(v, key="key_pattern"):
    if str(v) != "R:R":
        raise ConfigError(f"{key}: {v!r} is not modelled; accepted: R:R (uniform random keys for SETs and GETs)")
    return "R:R"


def jemalloc_size_class(n: int) -> int:
    """jemalloc 5's size class of an n-byte request with Redis's lg_quantum 3: multiples of 8 up
    to 64, then four classes per doubling (2**k + i * 2**(k-2), i = 0..3)."""
    if n <= 8:
        return 8
    k = (n - 1).bit_length() - 1
    step = max(8, 1 << (k - 2))
    return -(-n // step) * step


def sds_alloc_bytes(d: int) -> int:
    """Bytes sdsnewlen asks for a d-byte string: its header (sdshdr8/16/32), the bytes, the NUL."""
    hdr = 3 if d < 256 else 5 if d < 65536 else 9
    return hdr + d + 1


class Memtier(Workload):
    name = "memtier"
    description = ("a Redis server (one thread: event loop, dict, jemalloc 20 KB values) under memtier_benchmark "
                   "(threads x clients connections, pipeline, ratio, R:R keys); memtier's report in Result.summary")
    params = {
        "threads": int_param(512, "memtier threads (-t); connections = threads x clients / scale", lo=1),
        "clients": int_param(20, "connections per thread (-c)", lo=1),
        "requests": int_param(25000, "commands per connection (-n)", lo=1, hi=1 << 40),
        "ratio": Param("1:1", _ratio, "SET:GET ratio (--ratio)"),
        "key_pattern": Param("R:R", _key_pattern, "key pattern (--key-pattern); R:R only"),
        "data_size": int_param(20000, "value bytes (-d)", lo=1, hi=1 << 24),
        "pipeline": int_param(1000, "commands in flight per connection (--pipeline)", lo=1, hi=1 << 16),
        "distinct_client_seed": int_param(1, "1: each client draws its own keys (--distinct-client-seed)",
                                          lo=0, hi=1),
        "key_minimum": int_param(0, "smallest key number (--key-minimum)", lo=0, hi=1 << 40),
        "key_maximum": int_param(10_000_000, "largest key number (--key-maximum); the range is divided by "
                                 "scale", lo=1, hi=1 << 40),
        "request_cpu_ns": int_param(16000, "the server's CPU work per command besides memory and bytes (ns; "
                                    "the reproduction calibrates it)", lo=0, hi=1 << 40),
        "net_ns_per_kb": int_param(100, "the server's CPU per KiB of request and response moved through "
                                   "loopback TCP (ns)", lo=0, hi=1 << 30),
        "cpunodebind": nodes_param("1", "the server's CPUs (numactl --cpunodebind)"),
        "policy": policy_param("bind|numa_balancing:1,2", "the server's memory policy (numactl --membind, "
                               "with --balancing)"),
    }
    access_params = ("threads", "clients", "requests")

    def validate(self):
        conns = self.threads * self.clients / self.scale
        if conns < 1 or conns != int(conns):
            raise ConfigError(f"threads x clients / scale = {self.threads} x {self.clients} / {self.scale:g} is not a "
                              "whole number of connections; accepted: a scale that divides threads x clients")
        if conns > MAX_CONNECTIONS:
            raise ConfigError(f"threads x clients: {int(conns)} connections; accepted: at most {MAX_CONNECTIONS}")
        if self.key_maximum < self.key_minimum:
            raise ConfigError(f"key_maximum: {self.key_maximum} is below key_minimum {self.key_minimum}")
        if self.nr_keys >= 1 << 31:
            raise ConfigError(f"key_maximum: {self.nr_keys} keys at this scale; accepted: fewer than 2**31")

    # ---- layout ---------------------------------------------------------------------------------
    @property
    def nr_conns(self) -> int:
        return int(self.threads * self.clients / self.scale)

    @property
    def nr_keys(self) -> int:
        return max(1, round((self.key_maximum - self.key_minimum + 1) / self.scale))

    @property
    def value_class(self) -> int:
        return jemalloc_size_class(sds_alloc_bytes(self.data_size))

    @property
    def shared_class(self) -> bool:
        return self.value_class == R.REPLY_BLOCK_CLASS

    def _min_bytes(self, t: int) -> int:
        klen = len(KEY_PREFIX) + len(str(self.key_minimum))
        n = 4 + 4 + 5 + 1 + len(str(klen)) + 2 + klen + 2
        if t == R.SET:
            n += 1 + len(str(self.data_size)) + 2 + self.data_size + 2
        return n

    def _max_blocks_per_visit(self) -> int:
        """Reply blocks one connection can fill in one round: the most GETs whose bytes fit one
        16 KiB read (plus the one whose tail it reads), over every phase of the ratio's pattern."""
        a, b = self.ratio
        if b == 0:
            return 0
        most = 0
        for start in range(a + b):
            total, gets, j = 0, 0, start
            while True:
                t = R.SET if j % (a + b) < a else R.GET
                gets += t == R.GET
                if total > R.PROTO_IOBUF_LEN or gets > self.pipeline:
                    break
                total += self._min_bytes(t)
                j += 1
            most = max(most, gets)
        hit = 1 + len(str(self.data_size)) + 2 + self.data_size + 2
        return -(-(most * hit) // R.REPLY_BLOCK_BYTES) + 1

    def _table_pages(self) -> np.ndarray:
        """Page offset of each dict table (by log2 size) in the dict region, in creation order."""
        off = np.zeros(64, np.int64)
        acc = 0
        exp = R.DICT_HT_INITIAL_EXP
        while True:
            off[exp] = acc
            acc += max(1, -(-(8 << exp) // PAGE_SIZE))
            if (1 << exp) >= self.nr_keys:
                break
            exp += 1
        return off, acc, exp

    def _pool_sizes(self) -> tuple[int, int]:
        blocks = self.nr_conns * self._max_blocks_per_visit()
        if self.shared_class:
            return self.nr_keys + 1 + blocks + R.TCACHE_SLOTS, 0
        return self.nr_keys + 1 + R.TCACHE_SLOTS, blocks + R.TCACHE_SLOTS

    def regions(self) -> list[Region]:
        vcap, rcap = self._pool_sizes()
        _, dict_pages, _ = self._table_pages()
        out = [Region("values", "anon", -(-(vcap * self.value_class) // PAGE_SIZE))]
        if rcap:
            out.append(Region("replies", "anon", -(-(rcap * R.REPLY_BLOCK_CLASS) // PAGE_SIZE)))
        out.append(Region("dict", "anon", dict_pages))
        out.append(Region("entries", "anon", -(-(self.nr_keys * R.ENTRY_BYTES) // PAGE_SIZE)))
        return out

    def processes(self) -> list[Process]:
        pol, nodes = self.policy
        return [Process("redis-server", vmas=tuple(r.name for r in self.regions()), cpunodebind=self.cpunodebind,
                        policy=pol, policy_nodes=nodes)]

    def nr_marks(self) -> int:
        return 1024

    # ---- the stream -----------------------------------------------------------------------------
    def _new_state(self, seed: int) -> dict:
        regions = self.regions()
        bases = dict(zip((r.name for r in regions), np.cumsum([0] + [r.pages for r in regions])[:-1].tolist()))
        vcap, rcap = self._pool_sizes()
        tpage, _, final_exp = self._table_pages()
        a, b = self.ratio
        K, C = self.nr_keys, self.nr_conns
        cfg = np.zeros(R.NR_CFG, np.int64)
        cfg[R.C_CONNS], cfg[R.C_NREQ], cfg[R.C_PIPE] = C, self.requests, self.pipeline
        cfg[R.C_RATIO_A], cfg[R.C_RATIO_B], cfg[R.C_KEYS], cfg[R.C_KEY_MIN] = a, b, K, self.key_minimum
        cfg[R.C_DATA], cfg[R.C_SEED], cfg[R.C_DISTINCT] = self.data_size, seed, self.distinct_client_seed
        cfg[R.C_PREFIX_LEN] = len(KEY_PREFIX)
        cfg[R.C_VAL_CLASS], cfg[R.C_VAL_ALLOC] = self.value_class, sds_alloc_bytes(self.data_size)
        cfg[R.C_SHARED] = self.shared_class
        cfg[R.C_VAL_BASE], cfg[R.C_REPLY_BASE] = bases["values"], bases.get("replies", 0)
        cfg[R.C_DICT_BASE], cfg[R.C_ENTRY_BASE] = bases["dict"], bases["entries"]
        cfg[R.C_VAL_CAP], cfg[R.C_REPLY_CAP] = vcap, rcap
        cfgf = np.zeros(R.NR_CFGF, np.float64)
        cfgf[R.F_SCALE], cfgf[R.F_CPU_NS], cfgf[R.F_NET_NS_PER_KB] = self.scale, self.request_cpu_ns, self.net_ns_per_kb
        g = np.zeros(R.NR_G, np.int64)
        g[R.G_BUDGET] = -1
        g[R.G_LIVE] = C
        g[R.G_HT0_EXP], g[R.G_HT1_EXP], g[R.G_REHASH] = R.DICT_HT_INITIAL_EXP, -1, -1
        g[R.G_NEXT_TABLE_PAGE] = tpage[R.DICT_HT_INITIAL_EXP + 1]
        rows = self._rows_estimate()
        return dict(
            cfg=cfg, cfgf=cfgf, g=g,
            next_req=np.zeros(C, np.int64), left=np.zeros(C, np.int64), cur_key=np.zeros(C, np.int64),
            reply_bytes=np.zeros(C, np.int64), ring=np.zeros((C, self.pipeline), np.int32),
            last_round=np.full(C, -1, np.int64),
            heads=np.full((2, 1 << final_exp), -1, np.int32), tpage=tpage,
            ent_next=np.full(K, -1, np.int32), ent_key=np.zeros(K, np.int32), ent_val=np.zeros(K, np.int64),
            key_ent=np.full(K, -1, np.int32),
            vtc=np.zeros(R.TCACHE_SLOTS, np.int64), vheap=np.zeros(vcap, np.int64),
            rtc=np.zeros(R.TCACHE_SLOTS, np.int64), rheap=np.zeros(max(rcap, 1), np.int64),
            blk_slot=np.zeros(C * self._max_blocks_per_visit() + 1, np.int64),
            blk_used=np.zeros(C * self._max_blocks_per_visit() + 1, np.int64),
            hist=np.zeros((rows, R.GAP_MAX + 1), np.int64), round_mark=np.full(rows, -1, np.int64),
            round_chunk=np.full(rows, -1, np.int64), chunk_end_ns=[])

    def _rows_estimate(self) -> int:
        a, b = self.ratio
        per = (a * self._min_bytes(R.SET) + b * self._min_bytes(R.GET)) / (a + b)
        rounds = self.requests * per / R.PROTO_IOBUF_LEN + self.requests / self.pipeline
        return int(rounds * 1.1) + 2 * R.GAP_MAX + 16

    def chunks(self, seed: int) -> Iterator[Chunk]:
        st = self._run = self._new_state(seed)
        cap = self.chunk_accesses
        pages = np.empty(cap + 8192, np.int64)
        ops = np.empty(cap + 8192, np.uint8)
        g = st["g"]
        while True:
            n, status = R.serve(st["cfg"], st["cfgf"], g, st["next_req"], st["left"], st["cur_key"],
                                st["reply_bytes"], st["ring"], st["last_round"], st["heads"], st["tpage"],
                                st["ent_next"], st["ent_key"], st["ent_val"], st["key_ent"], st["vtc"], st["vheap"],
                                st["rtc"], st["rheap"], st["blk_slot"], st["blk_used"], st["hist"],
                                st["round_mark"], st["round_chunk"], pages, ops, cap)
            vcap, rcap = st["cfg"][R.C_VAL_CAP], st["cfg"][R.C_REPLY_CAP]
            if g[R.G_VFRESH] > vcap or g[R.G_RFRESH] > rcap:      # the bounds are computed: a bug if hit
                raise RuntimeError(f"memtier: allocator pool overflow ({g[R.G_VFRESH]} > {vcap} or "
                                   f"{g[R.G_RFRESH]} > {rcap})")
            if status == R.ST_ROWS:
                grow = st["hist"].shape[0]
                st["hist"] = np.concatenate([st["hist"], np.zeros_like(st["hist"])])
                st["round_mark"] = np.concatenate([st["round_mark"], np.full(grow, -1, np.int64)])
                st["round_chunk"] = np.concatenate([st["round_chunk"], np.full(grow, -1, np.int64)])
            if n:
                progress = yield Chunk(np.array([0, n], np.int64), pages[:n], ops[:n])
                st["chunk_end_ns"].append(int(progress.task_clock_ns[0]) if progress is not None else -1)
                g[R.G_CHUNK] += 1
            if status == R.ST_DONE:
                return

    # ---- memtier's report -----------------------------------------------------------------------
    def summary(self, result, phase_start_ns: int) -> dict:
        st = getattr(self, "_run", None)
        if st is None or st["g"][R.G_LIVE] != 0:
            return {}
        marks = result.marks_s[result.marks_s.task == 0].time_s.to_numpy() * 1e9
        return memtier_report(round_end_times(st, marks), st["hist"], st["last_round"], st["g"], self.scale)


def round_end_times(st: dict, marks_ns: np.ndarray) -> np.ndarray:
    """Each round's end (simulated ns): the MARK on its last op, or the clock at the end of the
    chunk its last op closed (a round that added nothing after it)."""
    rounds = int(st["g"][R.G_ROUNDS_MAX])
    out = np.zeros(rounds, np.float64)
    chunk_end = np.asarray(st["chunk_end_ns"], np.float64)
    for r in range(rounds):
        m, c = int(st["round_mark"][r]), int(st["round_chunk"][r])
        out[r] = marks_ns[m] if m >= 0 else (chunk_end[c] if c >= 0 else 0.0)
    return out


# HdrHistogram as memtier 1.4-2.1 creates it: hdr_init(10, 1000000, 2)
HDR_UNIT_MAGNITUDE = 3            # floor(log2(10))
HDR_SUB_HALF_MAGNITUDE = 7        # ceil(log2(2 * 10**2)) - 1
HDR_SUB_HALF = 1 << HDR_SUB_HALF_MAGNITUDE
HDR_SUB_MASK = (2 * HDR_SUB_HALF - 1) << HDR_UNIT_MAGNITUDE
HDR_COUNTS_LEN = 1408             # (buckets to cover 10**6: 10, + 1) x 128


def _bit_length(x: np.ndarray) -> np.ndarray:
    """64 - clz(x) for 0 < x < 2**53 (exact in float64: frexp's exponent is the bit length)."""
    return np.frexp(np.asarray(x, np.float64))[1].astype(np.int64)


def hdr_index(v: np.ndarray) -> np.ndarray:
    """counts_index_for(): the counts slot of values v (>= 0), without the range check."""
    v = np.asarray(v, np.int64)
    bucket = _bit_length(v | HDR_SUB_MASK) - HDR_UNIT_MAGNITUDE - (HDR_SUB_HALF_MAGNITUDE + 1)
    sub = v >> (bucket + HDR_UNIT_MAGNITUDE)
    return ((bucket + 1) << HDR_SUB_HALF_MAGNITUDE) + sub - HDR_SUB_HALF


def hdr_value_at_index(i: np.ndarray) -> np.ndarray:
    i = np.asarray(i, np.int64)
    bucket = (i >> HDR_SUB_HALF_MAGNITUDE) - 1
    sub = (i & (HDR_SUB_HALF - 1)) + HDR_SUB_HALF
    low = bucket < 0
    sub = np.where(low, sub - HDR_SUB_HALF, sub)
    bucket = np.where(low, 0, bucket)
    return sub << (bucket + HDR_UNIT_MAGNITUDE)


def _hdr_range(v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(lowest equivalent value, size of the equivalent range) of values v."""
    v = np.asarray(v, np.int64)
    bucket = _bit_length(v | HDR_SUB_MASK) - HDR_UNIT_MAGNITUDE - (HDR_SUB_HALF_MAGNITUDE + 1)
    sub = v >> (bucket + HDR_UNIT_MAGNITUDE)
    adjusted = np.where(sub >= 2 * HDR_SUB_HALF, bucket + 1, bucket)
    return sub << (bucket + HDR_UNIT_MAGNITUDE), np.int64(1) << (HDR_UNIT_MAGNITUDE + adjusted)


def hdr_counts(values_us: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """hdr_record_value of each value (weight times): values past the last slot are dropped, as
    hdr_record_values returns false for them."""
    idx = hdr_index(values_us)
    ok = (idx < HDR_COUNTS_LEN) & (np.asarray(values_us) >= 0)
    return np.bincount(idx[ok], weights=np.asarray(weights, np.float64)[ok], minlength=HDR_COUNTS_LEN)


def hdr_value_at_percentile(counts: np.ndarray, p: float) -> int:
    """The highest equivalent value of the first slot whose running count reaches p % (rounded)."""
    total = counts.sum()
    if total == 0:
        return 0
    at = max(1, int(min(p, 100.0) / 100 * total + 0.5))
    i = int(np.argmax(np.cumsum(counts) >= at))
    low, size = _hdr_range(hdr_value_at_index(i))
    return int(low + size - 1)


def hdr_mean(counts: np.ndarray) -> float:
    """Counts times each slot's median equivalent value, over the total."""
    total = counts.sum()
    if total == 0:
        return 0.0
    low, size = _hdr_range(hdr_value_at_index(np.arange(len(counts))))
    return float((counts * (low + (size >> 1))).sum() / total)


def memtier_report(round_end_ns: np.ndarray, hist: np.ndarray, last_round: np.ndarray, g: np.ndarray,
                   scale: float = 1.0) -> dict:
    """memtier's totals from the server's rounds. round_end_ns[r]: when round r's responses went
    out (simulated ns from the start); hist[created + 1, gap]: commands created at the end of round
    `created` (-1: at the start) and answered `gap` rounds later; last_round[c]: the round of
    connection c's last response; g: the totals (serve's G_* counters). Durations and latencies are
    multiplied by `scale` (full-size time)."""
    rounds = len(round_end_ns)
    created = np.arange(hist.shape[0]) - 1
    t0 = np.where(created >= 0, round_end_ns[np.clip(created, 0, rounds - 1)], 0.0)
    vals, wts = [], []
    for gap in range(hist.shape[1]):
        done = created + gap
        sel = (hist[:, gap] > 0) & (done >= 0) & (done < rounds)
        if sel.any():
            lat_us = (round_end_ns[done[sel]] - t0[sel]) * scale / 1000.0
            vals.append(lat_us.astype(np.int64))     # memtier's ts_diff: whole microseconds
            wts.append(hist[sel, gap])
    counts = hdr_counts(np.concatenate(vals), np.concatenate(wts)) if vals else np.zeros(HDR_COUNTS_LEN)
    # commands answered more than GAP_MAX rounds after their creation are taken as dropped
    # (>= 2**20 us): check that every such span is that long
    spans = [(round_end_ns[c + R.GAP_MAX + 1] - (round_end_ns[c] if c >= 0 else 0.0)) * scale / 1000.0
             for c in range(-1, rounds - R.GAP_MAX - 1)]
    truncated = bool(len(spans) and min(spans) < (1 << 20) and g[R.G_LATE] > 0)
    ends = round_end_ns[last_round] * scale / 1e9
    duration = float(ends.mean())           # every client starts at 0
    sets, gets, hits, misses = (int(g[i]) for i in (R.G_SETS, R.G_GETS, R.G_HITS, R.G_MISSES))
    ops = sets + gets
    sim_s = duration / scale
    return {
        "Ops/sec": ops / sim_s, "Sets/sec": sets / sim_s, "Gets/sec": gets / sim_s,
        "Hits/sec": hits / sim_s, "Misses/sec": misses / sim_s,
        "Avg. Latency": hdr_mean(counts) / 1000.0,
        "p50 Latency": hdr_value_at_percentile(counts, 50.0) / 1000.0,
        "p99 Latency": hdr_value_at_percentile(counts, 99.0) / 1000.0,
        "p99.9 Latency": hdr_value_at_percentile(counts, 99.9) / 1000.0,
        "KB/sec": (int(g[R.G_TX]) + int(g[R.G_RX])) / 1024.0 / sim_s,
        "latency_count": int(counts.sum()), "ops": ops, "duration_s": duration, "rounds": rounds,
        "latency_truncated": truncated,
    }


__all__ = ["Memtier", "memtier_report", "hdr_value_at_percentile", "hdr_mean", "hdr_counts",
           "jemalloc_size_class", "sds_alloc_bytes"]
