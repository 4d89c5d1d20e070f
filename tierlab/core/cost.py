"""The time model: every nanosecond the simulation charges comes from here.

Memory accesses cost by node and kind (per-node figures come from the machine file):

    4 KiB streaming copy  seq_ns[node]      read()/write() of a page-cache page, migration copies
    random cache line     line_ns[node]     loads through page tables
    cache-line store      write_ns[node]

multiplied by the node's loaded-latency factor, plus any wait for bandwidth.

Bandwidth. Each node's memory is a contended resource of rate B (its peak bandwidth, bytes per
ns): a capacity calendar (resource.py) in bins of MEM_BW_BIN_NS = 16384 ns, s.membw[nid]. Every
access books its bytes at its own virtual time (a 4 KiB copy 4096, a line load 64, a store 128:
the read-for-ownership now and the write-back later; a migration copy books on both nodes). No
bin ever holds more than B * 16384 bytes, so the bytes per 16 us of simulated time never exceed B,
for any number of tasks in any order; a request whose bin is full waits for the next bin with
room (the calendar's wait, added to the access's cost), which is how demand beyond B settles at B.
The ring of MEM_BW_BINS = 8192 bins spans 134 ms: far more than the clocks that book on it ever
spread (a quantum plus one step, ~350 us at most), and than the utilisation window reads back.

Why 16 us bins. Per access the engine makes ~20 ns of host time; anything done once per bin must
be rare against that. The node's current bin and its room are kept in s.mem[nid] (bw_room): an
access in that bin with room only takes its bytes out of it (mem_ns; written back to the
calendar by mem_bw_flush), and the access path's fast case checks this first and otherwise stops
with ops.ACCESS_MEM_BIN before any side effect, so the bin change (mem_ns_slow: write back, book
on the calendar, factor for the new bin) runs in the general case, out of the fast loop. Narrower
bins measured slower on `tierlab bench` (1 us bins: a bin change every one or two accesses).

Loaded latency below saturation. The machine's curve

    factor(u) = 1 + c * u / (1 - u),   u capped at 0.99,   c = loaded_latency_c (machine file)

is the shape of measured loaded-latency curves (flat at low load, a knee, then steep near
saturation; an M/M/1 queue's response-time curve scaled by c). u is the bandwidth the node
delivered over the last `util_window_ns` of simulated time, read from the calendar: the mean fill
of the K = util_window_ns / 16384 complete bins before the bin of the access's time, over
B * 16384 (resource.calendar_utilisation; the current, incomplete bin is left out). The factor is
computed when a bin becomes the node's current one and holds for it (s.mem[nid].load_factor). So
latency follows what the node delivered over the last K bins -- a sliding window at the access's
own virtual time, not the previous window's figure applied to the whole next window -- and a task
that runs later in host order but earlier in virtual time sees its own time's window. A task
ahead of the others sees its window without the bytes the tasks behind it will still book there
(the engine keeps clocks within about a quantum of each other). At saturation the factor is at
its cap (x15.85 for c = 0.15) and the calendar's waits hold throughput at B; with a steady demand
the window settles at the curve's fixed point (tests/test_bandwidth.py checks both).

`util_window_ns` is 262144 ns by default (16 bins): the window slides a sixteenth at a time, so
the loop latency -> throughput -> window -> latency settles at the curve's fixed point (4-16
readers of a 28 GB/s node: within 0.5 %); with 2 bins it swings and 4 readers got 72 % of the peak
where the curve gives 89 %, with 8 bins 3 % short. A change of load is followed within a quarter
of a millisecond. It is accepted from 16384 (one bin) to 4194304 ns (a quarter of the calendar's
horizon).

Kernel work (faults, syscalls, reclaim, migration) costs the constants in costs.py (COSTS), each
with its source. Reproductions fit only baseline figures (e.g. the per-page copy cost of
a machine) and mark those `calibrated`; nothing here is fitted to a treatment column.
"""
from __future__ import annotations

import numpy as np
from ._jit import jit, jit_entry, jit_inline

from .params import P
from .resource import calendar_book, calendar_fill_bin, calendar_room, calendar_utilisation
from .state import MEM_BW_BIN_NS, MEM_BW_BINS

MEM_BW_BIN_SHIFT = MEM_BW_BIN_NS.bit_length() - 1
UTIL_WINDOW_MAX_NS = MEM_BW_BIN_NS * MEM_BW_BINS // 4     # a quarter of the calendar's horizon
U_CAP = 0.99


@jit_inline
def mem_fast_ok(s, nid, now):
    """The access path's fast case can charge an access's memory (mem_ns with fast=True): its time
    is in the node's current bin and the bin has room for the largest access (4 KiB). Otherwise the
    access returns ops.ACCESS_MEM_BIN (engine.access_present) before any side effect, and the
    general case makes the next bin current out of line."""
    m = s.mem[nid]
    return (np.int64(now) >> MEM_BW_BIN_SHIFT) == m.lf_bin and m.bw_room >= 4096.0


@jit_inline
def mem_ns(s, p, nid, now, unloaded, nbytes, fast):
    """An access of `unloaded` ns moving `nbytes` to/from node `nid` at `now`: loaded latency plus
    the wait for bandwidth. When the bin of `now` is the node's current bin and has room (always in
    the fast case, `fast`: mem_fast_ok checked it), the bytes only come out of the room kept in s.mem[nid]
    (bw_room, written back to the calendar by mem_bw_flush); anything else goes out of line."""
    m = s.mem[nid]
    if fast or ((np.int64(now) >> MEM_BW_BIN_SHIFT) == m.lf_bin and nbytes <= m.bw_room):
        m.bw_room -= nbytes
        return unloaded * m.load_factor
    return mem_ns_slow(s.mem, s.membw, p[P.LOADED_LATENCY_C], np.int64(p[P.UTIL_WINDOW_NS]), np.int64(nid),
                       np.int64(now), unloaded, nbytes)


@jit
def mem_bw_flush(mem, membw, nid):
    """Write the bytes taken out of the current bin's room back to the node's calendar."""
    d = mem[nid].bw_room0 - mem[nid].bw_room
    if d > 0.0:
        calendar_fill_bin(membw, nid, mem[nid].lf_bin, d)
    mem[nid].bw_room0 = mem[nid].bw_room


@jit_entry
def mem_bw_flush_all(mem, membw):
    """mem_bw_flush for every node: the calendars then hold every byte booked (the API does it
    after each run, so a Result or a test reads complete calendars)."""
    for nid in range(mem.shape[0]):
        mem_bw_flush(mem, membw, nid)


@jit
def mem_ns_slow(mem, membw, c, window_ns, nid, now, unloaded, nbytes):
    """mem_ns's general case: book on the calendar (after writing back the current bin), and make
    the bin of `now` current, with factor(u) for it: u the mean utilisation of the window_ns of
    bins before it."""
    mem_bw_flush(mem, membw, nid)
    b = now >> MEM_BW_BIN_SHIFT
    wait = calendar_book(membw, nid, now, nbytes)
    if b != mem[nid].lf_bin:
        k = max(np.int64(1), window_ns >> MEM_BW_BIN_SHIFT)
        u = min(calendar_utilisation(membw, nid, now, k), U_CAP)
        mem[nid].load_factor = 1.0 + c * u / (1.0 - u)
        mem[nid].lf_bin = b
    room = calendar_room(membw, nid, b)
    mem[nid].bw_room = room
    mem[nid].bw_room0 = room
    return unloaded * mem[nid].load_factor + wait


@jit_inline
def seq_page_ns(s, p, nid, now, fast):
    """A 4 KiB streaming copy from node `nid` (`fast`: the access path's fast case, mem_ns)."""
    return mem_ns(s, p, nid, now, s.mem[nid].seq_ns, 4096.0, fast)


@jit_inline
def line_load_ns(s, p, nid, now, fast):
    return mem_ns(s, p, nid, now, s.mem[nid].line_ns, 64.0, fast)


@jit_inline
def line_store_ns(s, p, nid, now, fast):
    return mem_ns(s, p, nid, now, s.mem[nid].write_ns, 128.0, fast)  # read-for-ownership now, write-back later


@jit_inline
def copy_folio_ns(s, p, src, dst, nr, now):
    """Copying nr pages src -> dst: paced by the slower side; both nodes' bandwidth is used."""
    a = mem_ns(s, p, src, now, s.mem[src].seq_ns * nr, 4096.0 * nr, False)
    b = mem_ns(s, p, dst, now, s.mem[dst].seq_ns * nr, 4096.0 * nr, False)
    return a if a > b else b


@jit_inline
def migrate_folio_ns(s, p, src, dst, nr, now):
    return p[P.MIGRATE_FOLIO_NS] + copy_folio_ns(s, p, src, dst, nr, now)


@jit_inline
def migrate_batch_ns(p):
    return p[P.MIGRATE_BATCH_NS]
