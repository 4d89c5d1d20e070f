"""The time model: every nanosecond the simulation charges comes from here.

Memory accesses cost by node and kind (per-node figures come from the machine file):

    4 KiB streaming copy  seq_ns[node]      read()/write() of a page-cache page, migration copies
    random cache line     line_ns[node]     loads through page tables
    cache-line store      write_ns[node]

multiplied by the node's loaded-latency factor. Each node has a peak bandwidth B; the bytes moved to
or from it are accounted over windows of `util_window_ns` of simulated time, and the utilisation
u = bytes / (B * window) of the last window sets the factor for the next one:

    factor(u) = 1 + c * u / (1 - u),   u capped at 0.99,   c = loaded_latency_c (machine file)

This is the shape of measured loaded-latency curves (flat at low load, a knee, then steep near
saturation; an M/M/1 queue's response-time curve scaled by c). It is a feedback loop: when tasks
demand more than B, latency rises until their throughput settles just under B, so bandwidth-bound
results come out of the model instead of a fixed per-tier latency.

Kernel work (faults, syscalls, reclaim, migration) costs the constants in costs.py (COSTS), each
with its source. Reproductions fit only baseline figures (e.g. the per-page copy cost of
a machine) and mark those `calibrated`; nothing here is fitted to a treatment column.
"""
from __future__ import annotations

import numpy as np
from ._jit import jit, jit_inline


from .params import P



@jit_inline
def note_bytes(s, p, nid, now, nbytes):
    """Account `nbytes` moved to/from node `nid` at time `now`; roll the window when it ends."""
    elapsed = np.float64(now - s.mem[nid].win_start)
    if elapsed >= p[P.UTIL_WINDOW_NS]:
        roll_window(s, p, np.int64(nid), now, elapsed)   # int64: the access path's uint64 node id would compile a second variant
    s.mem[nid].win_bytes += nbytes


@jit
def roll_window(s, p, nid, now, elapsed):
    """Close the node's accounting window: its utilisation sets the loaded-latency factor."""
    u = s.mem[nid].win_bytes / (s.mem[nid].bw_bytes_ns * elapsed)
    if u > 0.99:
        u = 0.99
    s.mem[nid].load_factor = 1.0 + p[P.LOADED_LATENCY_C] * u / (1.0 - u)
    s.mem[nid].win_start = now
    s.mem[nid].win_bytes = 0.0


@jit_inline
def seq_page_ns(s, p, nid, now):
    """A 4 KiB streaming copy from node `nid` (loaded)."""
    note_bytes(s, p, nid, now, 4096.0)
    return s.mem[nid].seq_ns * s.mem[nid].load_factor


@jit_inline
def line_load_ns(s, p, nid, now):
    note_bytes(s, p, nid, now, 64.0)
    return s.mem[nid].line_ns * s.mem[nid].load_factor


@jit_inline
def line_store_ns(s, p, nid, now):
    note_bytes(s, p, nid, now, 128.0)  # read-for-ownership now, write-back later
    return s.mem[nid].write_ns * s.mem[nid].load_factor


@jit_inline
def copy_folio_ns(s, p, src, dst, nr, now):
    """Copying nr pages src -> dst: paced by the slower side; both nodes' bandwidth is used."""
    note_bytes(s, p, src, now, 4096.0 * nr)
    note_bytes(s, p, dst, now, 4096.0 * nr)
    a = s.mem[src].seq_ns * s.mem[src].load_factor
    b = s.mem[dst].seq_ns * s.mem[dst].load_factor
    return nr * (a if a > b else b)


@jit_inline
def migrate_folio_ns(s, p, src, dst, nr, now):
    return p[P.MIGRATE_FOLIO_NS] + copy_folio_ns(s, p, src, dst, nr, now)


@jit_inline
def migrate_batch_ns(p):
    return p[P.MIGRATE_BATCH_NS]

