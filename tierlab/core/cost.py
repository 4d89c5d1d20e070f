"""The time model: every nanosecond the simulation charges comes from here.

Memory accesses cost by node and kind (per-node figures come from the machine file):

    4 KiB streaming copy  seq_ns[node]      read()/write() of a page-cache page, migration copies
    random cache line     line_ns[node]     loads through page tables
    cache-line store      write_ns[node]

multiplied by the node's loaded-latency factor, plus any wait for bandwidth.

Bandwidth. Each node's memory is a contended resource of rate B (its peak bandwidth, bytes per
ns): a capacity calendar (resource.py) in bins of MEM_BW_BIN_NS = 1024 ns, s.membw[nid]. Every
access books its bytes at its own virtual time (a 4 KiB copy 4096, a line load 64, a store 128:
the read-for-ownership now and the write-back later; a migration copy books on both nodes). No
bin ever holds more than B * 1024 bytes, so the bytes per unit of simulated time never exceed B,
for any number of tasks in any order; a request whose bin is full waits for the next bin with
room (the calendar's wait, added to the access's cost), which is how demand beyond B settles at B.
1024 ns holds 7 pages on a 28 GB/s CXL node and 63 on a 258 GB/s DRAM node; the calendar's ring of
MEM_BW_BINS = 1024 bins spans 1.05 ms, 52 quanta of 20 us: more than the clocks that book on it
ever spread (a quantum plus one step; a random page-cache miss is 80 us).

Loaded latency below saturation. The machine's curve

    factor(u) = 1 + c * u / (1 - u),   u capped at 0.99,   c = loaded_latency_c (machine file)

is the shape of measured loaded-latency curves (flat at low load, a knee, then steep near
saturation; an M/M/1 queue's response-time curve scaled by c). u is the bandwidth the node
delivered over the last `util_window_ns` of simulated time, read from the calendar: the mean fill
of the K = util_window_ns / 1024 complete bins before the bin of the access's time, over
B * 1024 (resource.calendar_utilisation; the current, incomplete bin is left out). The factor is
computed once per node and bin reached and cached (s.mem[nid].load_factor, lf_bin). So latency
follows what the node delivered over the last K microseconds -- a sliding window at the access's
own virtual time, not the previous window's figure applied to the whole next window -- and a task
that runs later in host order but earlier in virtual time sees its own time's window. A task
ahead of the others sees its window without the bytes the tasks behind it will still book there
(the engine keeps clocks within about a quantum of each other, so that is a few microseconds of
the window). At saturation the factor is at its cap (x15.85 for c = 0.15) and the calendar's
waits hold throughput at B; with a steady demand the window settles at the curve's fixed point
(tests/test_bandwidth.py checks both).

`util_window_ns` is 16384 ns by default (16 bins): tens of 4 KiB copies per task, and a change of
load is followed within a few tens of accesses; computing u costs one pass over K bins per node
and bin reached. It is accepted from 1024 (one bin) to 262144 ns (a quarter of the calendar's
horizon).

Kernel work (faults, syscalls, reclaim, migration) costs the constants in costs.py (COSTS), each
with its source. Reproductions fit only baseline figures (e.g. the per-page copy cost of
a machine) and mark those `calibrated`; nothing here is fitted to a treatment column.
"""
from __future__ import annotations

import numpy as np
from ._jit import jit, jit_inline

from .params import P
from .resource import calendar_book, calendar_utilisation_slow
from .state import MEM_BW_BIN_NS

MEM_BW_BIN_SHIFT = MEM_BW_BIN_NS.bit_length() - 1
UTIL_WINDOW_MAX_NS = 262144          # a quarter of the calendar's horizon
U_CAP = 0.99


@jit_inline
def load_factor(s, p, nid, now):
    """The node's loaded-latency factor at time `now` (cached per calendar bin)."""
    b = np.int64(now) >> MEM_BW_BIN_SHIFT
    if b == s.mem[nid].lf_bin:
        return s.mem[nid].load_factor
    return update_load_factor(s, p, np.int64(nid), b)


@jit
def update_load_factor(s, p, nid, b):
    """factor(u) for bin b, u the mean utilisation of the util_window_ns of bins before it."""
    k = max(np.int64(1), np.int64(p[P.UTIL_WINDOW_NS]) >> MEM_BW_BIN_SHIFT)
    u = min(calendar_utilisation_slow(s.membw, nid, b, k), U_CAP)
    f = 1.0 + p[P.LOADED_LATENCY_C] * u / (1.0 - u)
    s.mem[nid].load_factor = f
    s.mem[nid].lf_bin = b
    return f


@jit_inline
def mem_ns(s, p, nid, now, unloaded, nbytes):
    """An access of `unloaded` ns moving `nbytes` to/from node `nid` at `now`: loaded latency plus
    the wait for bandwidth."""
    f = load_factor(s, p, nid, now)
    return unloaded * f + calendar_book(s.membw, nid, now, nbytes)


@jit_inline
def seq_page_ns(s, p, nid, now):
    """A 4 KiB streaming copy from node `nid`."""
    return mem_ns(s, p, nid, now, s.mem[nid].seq_ns, 4096.0)


@jit_inline
def line_load_ns(s, p, nid, now):
    return mem_ns(s, p, nid, now, s.mem[nid].line_ns, 64.0)


@jit_inline
def line_store_ns(s, p, nid, now):
    return mem_ns(s, p, nid, now, s.mem[nid].write_ns, 128.0)  # read-for-ownership now, write-back later


@jit_inline
def copy_folio_ns(s, p, src, dst, nr, now):
    """Copying nr pages src -> dst: paced by the slower side; both nodes' bandwidth is used."""
    a = mem_ns(s, p, src, now, s.mem[src].seq_ns * nr, 4096.0 * nr)
    b = mem_ns(s, p, dst, now, s.mem[dst].seq_ns * nr, 4096.0 * nr)
    return a if a > b else b


@jit_inline
def migrate_folio_ns(s, p, src, dst, nr, now):
    return p[P.MIGRATE_FOLIO_NS] + copy_folio_ns(s, p, src, dst, nr, now)


@jit_inline
def migrate_batch_ns(p):
    return p[P.MIGRATE_BATCH_NS]
