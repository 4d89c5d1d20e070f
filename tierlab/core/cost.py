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

Kernel work (faults, syscalls, reclaim, migration) costs the constants in COSTS below; their
sources are given with them. Reproductions fit only baseline figures (e.g. the per-page copy cost of
a machine) and mark those `calibrated`; nothing here is fitted to a treatment column.
"""
from __future__ import annotations

import numpy as np
from ._jit import jit, jit_inline

from .params import (
    P_LOADED_LATENCY_C, P_MIGRATE_BATCH_NS, P_MIGRATE_FOLIO_NS, P_UTIL_WINDOW_NS,
)

# name: (default, unit, what it models and where the number comes from)
COSTS = {
    "syscall_ns": (150.0, "ns", "read()/write() entry and exit with speculation mitigations; getppid()-style "
                   "round trips measure 70-250 ns on 2020s x86 servers (lmbench lat_syscall)."),
    "fma_ns": (0.0, "ns", "folio_mark_accessed() itself; folded into the calibrated per-page copy cost seq_ns."),
    "fma_hook_check_ns": (1.0, "ns", "the RFC v3 inline checks added to folio_mark_accessed() (PG_isolated test, "
                          "sysfs switch, numa_balancing bit): a few predictable branches on hot cache lines."),
    "promotion_candidate_ns": (4.0, "ns", "an out-of-line call to promotion_candidate() that returns at the "
                               "node_is_toptier() test: call/return plus a node-mask lookup."),
    "numa_migrate_check_ns": (60.0, "ns", "numa_migrate_check()+mpol_misplaced()+should_numa_migrate_memory(): "
                              "policy lookup, atomic xchg of the access time, two atomics for the rate limit."),
    "task_work_ns": (100.0, "ns", "task_work_run() at return to user when a promotion list is queued."),
    "numa_scan_pte_ns": (5.0, "ns", "change_pte_range() walking one present PTE that it leaves alone."),
    "numa_scan_update_ns": (25.0, "ns", "making one PTE PROT_NONE and stamping the folio's access time, "
                            "plus its share of the range's TLB flush."),
    "migrate_batch_ns": (4000.0, "ns", "one migrate_pages() call: batch set-up, one batched TLB shootdown "
                         "(try_to_unmap_flush, IPIs ~2-4 us), putback."),
    "migrate_folio_ns": (700.0, "ns", "per-folio migration work besides the copy: isolate/lock, rmap walk "
                         "and migration entries, allocate the destination, remap, LRU putback. "
                         "move_pages() of 4 KiB pages in 512-folio batches between the two nodes of a "
                         "Zen 3 EPYC, kernel 6.16: 3.73 GB/s (~1.1 us per page), folio_copy() ~35 % of "
                         "it (S. Garg, 'Accelerate page migration with batch copying and hardware "
                         "offload', RFC v3, lkml 2025-09-23, 20250923174752.35701-1-shivankg@amd.com): "
                         "~0.7 us per page without the copy."),
    "migrate_noncontig_ns": (0.0, "ns", "reserved: extra cost of a destination page not adjacent to the previous one."),
    "fault_ns": (700.0, "ns", "a minor page fault: exception entry/exit, VMA lookup, PTE install "
                 "(will-it-scale page_fault1 ~ 1.2-1.5 M faults/s per thread, zeroing excluded)."),
    "zero_page_ns": (250.0, "ns", "clearing a 4 KiB page (clear_page with rep stosb at ~16 GB/s)."),
    "pagecache_insert_ns": (400.0, "ns", "adding a new folio to the page cache on a miss: allocation, xarray "
                            "insert, lru_add, readahead bookkeeping."),
    "io_seq_4k_ns": (1300.0, "ns", "one 4 KiB page of sequential readahead from an NVMe SSD (~3 GB/s)."),
    "io_rand_4k_ns": (80000.0, "ns", "one random 4 KiB read from an NVMe SSD at queue depth 1 (~80 us)."),
    "swap_out_4k_ns": (10000.0, "ns", "writing a 4 KiB anon page to swap on NVMe, amortised in reclaim."),
    "swap_in_4k_ns": (80000.0, "ns", "a synchronous 4 KiB swap-in from NVMe (major fault)."),
    "reclaim_scan_ns": (120.0, "ns", "isolating and checking one folio in shrink_folio_list (rmap walk "
                        "for mapped folios, folio_check_references)."),
    "reclaim_free_ns": (150.0, "ns", "unmapping/deleting from the page cache and freeing one reclaimed folio."),
    "stream_break_ns": (-1.0, "ns", "extra cost when a streamed page is not physically adjacent to the "
                        "previous one: the streaming prefetchers lose the stream and the first lines "
                        "are a demand miss. -1 means 'one idle cache-line latency of the node'."),
    "util_window_ns": (100_000.0, "ns", "bandwidth accounting window for the loaded-latency model."),
}


@jit_inline
def note_bytes(s, p, nid, now, nbytes):
    """Account `nbytes` moved to/from node `nid` at time `now`; roll the window when it ends."""
    elapsed = np.float64(now - s.win_start[nid])
    if elapsed >= p[P_UTIL_WINDOW_NS]:
        roll_window(s, p, nid, now, elapsed)
    s.win_bytes[nid] += nbytes


@jit
def roll_window(s, p, nid, now, elapsed):
    """Close the node's accounting window: its utilisation sets the loaded-latency factor."""
    u = s.win_bytes[nid] / (s.bw_bytes_ns[nid] * elapsed)
    if u > 0.99:
        u = 0.99
    s.load_factor[nid] = 1.0 + p[P_LOADED_LATENCY_C] * u / (1.0 - u)
    s.win_start[nid] = now
    s.win_bytes[nid] = 0.0


@jit_inline
def seq_page_ns(s, p, nid, now):
    """A 4 KiB streaming copy from node `nid` (loaded)."""
    note_bytes(s, p, nid, now, 4096.0)
    return s.seq_ns[nid] * s.load_factor[nid]


@jit_inline
def line_load_ns(s, p, nid, now):
    note_bytes(s, p, nid, now, 64.0)
    return s.line_ns[nid] * s.load_factor[nid]


@jit_inline
def line_store_ns(s, p, nid, now):
    note_bytes(s, p, nid, now, 128.0)  # read-for-ownership now, write-back later
    return s.write_ns[nid] * s.load_factor[nid]


@jit_inline
def copy_folio_ns(s, p, src, dst, nr, now):
    """Copying nr pages src -> dst: paced by the slower side; both nodes' bandwidth is used."""
    note_bytes(s, p, src, now, 4096.0 * nr)
    note_bytes(s, p, dst, now, 4096.0 * nr)
    a = s.seq_ns[src] * s.load_factor[src]
    b = s.seq_ns[dst] * s.load_factor[dst]
    return nr * (a if a > b else b)


@jit_inline
def migrate_folio_ns(s, p, src, dst, nr, now):
    return p[P_MIGRATE_FOLIO_NS] + copy_folio_ns(s, p, src, dst, nr, now)


@jit_inline
def migrate_batch_ns(p):
    return p[P_MIGRATE_BATCH_NS]


def cost_defaults() -> dict:
    return {k: v[0] for k, v in COSTS.items()}
