"""Simulation state as a structure of arrays, and the intrusive list operations on it.

Per simulated 4 KiB page (file page-cache index or anonymous virtual page; ids are dense over the
regions a workload declares, so state grows with the workload, not with the machine) 16 bytes:

    node    int8    node the page lives on (or last lived on, when not present)
    flags   uint8   PG_referenced, PG_active, PG_workingset, PG_lru, PG_dirty, young, protnone, isolated
    flags2  uint8   present, anon, mapped, shadow, swapped, contig, in an lru_add batch
    order   int8    folio order, low nibble (heads and tails alike; folios are naturally aligned, so
                    the head of page p is p & ~(2**order - 1)); high nibble reserved for MGLRU gen/refs
    prev    int32   intrusive list links, as folio->lru in the kernel: an LRU list while on the LRU,
    next    int32   the task's promotion list while isolated for promotion
    stamp   uint32  NUMA hint stamp (access time in ms, or fault count) while present; the shadow
                    entry's eviction age (workingset.c) while evicted

List heads are sentinel slots appended after the pages in `prev`/`next`, so unlinking never needs to
know which list a folio is on (the kernel's list_head does the same). Lists: 4 classic LRU lists per
node (kernel order: inactive anon, active anon, inactive file, active file; head = newest, tail =
oldest), then one promotion list per task.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
from ._jit import jit, jit_inline

# flags (folio->flags analogues)
PG_REFERENCED = np.uint8(1)
PG_ACTIVE = np.uint8(2)
PG_WORKINGSET = np.uint8(4)
PG_LRU = np.uint8(8)
PG_DIRTY = np.uint8(16)
PG_YOUNG = np.uint8(32)      # aggregated accessed bit of the PTEs mapping the folio
PG_PROTNONE = np.uint8(64)   # mapped PROT_NONE by the NUMA scanner (hint fault pending)
PG_ISOLATED = np.uint8(128)  # isolated from the LRU (for migration / on a promotion list)

# flags2 (tierlab's bookkeeping)
F2_PRESENT = np.uint8(1)
F2_ANON = np.uint8(2)
F2_MAPPED = np.uint8(4)      # mapped by page tables (anon, mmap'd file, or the zero page for anon)
F2_SHADOW = np.uint8(8)      # evicted file page with a workingset shadow entry in `stamp`
F2_SWAPPED = np.uint8(16)    # anon page in swap, shadow in `stamp`
F2_CONTIG = np.uint8(32)     # physically follows page-1 on the same node (allocated right after it)
F2_BATCHED = np.uint8(64)    # waiting in a per-CPU lru_add batch (not yet PG_lru)

ORDER_MASK = np.int8(15)

# classic LRU lists (enum lru_list order)
LRU_INACTIVE_ANON = 0
LRU_ACTIVE_ANON = 1
LRU_INACTIVE_FILE = 2
LRU_ACTIVE_FILE = 3
NR_LRU_LISTS = 4

# memory policies (enum mempolicy mode)
MPOL_DEFAULT = 0
MPOL_PREFERRED = 1
MPOL_BIND = 2
MPOL_INTERLEAVE = 3

# region kinds
REGION_ANON = 0
REGION_FILE = 1         # page cache reached through read()/write() only: no VMA, never NUMA-scanned
REGION_FILE_MAPPED = 2  # a file mapped with mmap (a VMA the NUMA scanner walks)

# watermark slots (enum zone_watermarks, one zone per node)
WMARK_MIN = 0
WMARK_LOW = 1
WMARK_HIGH = 2
WMARK_PROMO = 3

# per-node promotion state slots (struct pglist_data, CONFIG_NUMA_BALANCING)
NBP_RL_START = 0
NBP_RL_NR_CAND = 1
NBP_THRESHOLD = 2
NBP_TH_START = 3
NBP_TH_NR_CAND = 4
NR_NBP = 5

LRU_BATCH_MAX = 31
STAMP_NONE = np.uint32(0xFFFFFFFF)  # access-time field reset to all ones at allocation ("no cpupid")

# run status codes
STATUS_DONE = 0
STATUS_SAMPLES_FULL = 1
STATUS_MARKS_FULL = 2
STATUS_OOM = 3


class SimState(NamedTuple):
    # per page (prev/next have the sentinel slots appended)
    node: np.ndarray
    flags: np.ndarray
    flags2: np.ndarray
    order: np.ndarray
    prev: np.ndarray
    next: np.ndarray
    stamp: np.ndarray
    # regions: pages [region_start[r], region_start[r+1])
    region_start: np.ndarray      # int64[R+1]
    region_kind: np.ndarray       # int8[R]
    region_policy: np.ndarray     # int8[R]
    region_nodes: np.ndarray      # int8[R, N] allowed nodes in policy order, -1 padded
    region_order: np.ndarray      # int8[R] folio order used when faulting pages of the region
    # per node
    free: np.ndarray              # int64[N] free pages
    managed: np.ndarray           # int64[N]
    wmark: np.ndarray             # int64[N, 4]
    lru_size: np.ndarray          # int64[N, NR_LRU_LISTS] pages
    nr_isolated: np.ndarray       # int64[N]
    nonresident_age: np.ndarray   # int64[N] (lruvec->nonresident_age; shadows keep its low 32 bits)
    refault_snap: np.ndarray      # int64[N, 2] workingset_activate_{anon,file} at the last reclaim pass
    scan_acc: np.ndarray          # float64[N] anon/file split accumulator (get_scan_count SCAN_FRACT)
    kswapd_awake: np.ndarray      # int8[N]
    kswapd_clock: np.ndarray      # int64[N] ns
    kswapd_failures: np.ndarray   # int64[N]
    kswapd_scanned: np.ndarray    # int64[N] pages scanned since kswapd last made progress
    tier: np.ndarray              # int8[N] 0 = top tier
    node_cpus: np.ndarray         # int64[N]
    zonelist: np.ndarray          # int8[N, N] fallback order by distance, -1 padded
    demote_target: np.ndarray     # int8[N, N] preferred demotion targets, -1 padded
    last_alloc: np.ndarray        # int64[N] last page allocated on the node (physical contiguity)
    nbp: np.ndarray               # int64[N, NR_NBP] promotion rate-limit / threshold state
    seq_ns: np.ndarray            # float64[N] 4 KiB streaming copy, unloaded
    line_ns: np.ndarray           # float64[N] random cache-line load, unloaded
    write_ns: np.ndarray          # float64[N] random cache-line store, unloaded
    bw_bytes_ns: np.ndarray       # float64[N] peak bandwidth, bytes per ns
    load_factor: np.ndarray       # float64[N] loaded-latency multiplier from the last window
    win_start: np.ndarray         # int64[N] start of the bandwidth accounting window
    win_bytes: np.ndarray         # float64[N] bytes moved in the current window
    # per CPU
    cpu_node: np.ndarray          # int64[C]
    cpu_clock: np.ndarray         # int64[C] ns
    cpu_next_task: np.ndarray     # int64[C] round-robin cursor over the CPU's tasks
    lru_batch: np.ndarray         # int64[C, LRU_BATCH_MAX]
    lru_batch_len: np.ndarray     # int64[C]
    # per task
    task_cpu: np.ndarray          # int64[T]
    task_runtime: np.ndarray      # int64[T] ns of CPU time consumed
    task_end: np.ndarray          # int64[T] CPU clock when the task last ran
    task_last_page: np.ndarray    # int64[T] previous page read()/written (stream continuity, pos_same_folio)
    task_call_start: np.ndarray   # int8[T] 1 when the task's next access starts a new system call
    promo_count: np.ndarray       # int64[T] pages on the promotion list (current->promo_count)
    numa_scan: np.ndarray         # int64[T, 2]: node_stamp (runtime ns of the next scan tick), scan period ns
    marks: np.ndarray             # int64[T, M] clock at MARK ops
    nr_marks: np.ndarray          # int64[T]
    # global
    counters: np.ndarray          # int64[N, NR_VMSTAT_ITEMS]
    samples: np.ndarray           # int64[S, ncols]
    misc: np.ndarray              # int64[16]: see MISC_* below
    rng: np.ndarray               # uint64[1] xorshift state


MISC_NR_SAMPLES = 0
MISC_NEXT_SAMPLE = 1
MISC_SWAP_USED = 2
MISC_NR_PAGES = 3
MISC_NOW = 4          # latest virtual time reached by any CPU
MISC_WAKEUPS = 5      # kswapd wake-ups so far (lets a running quantum yield to a woken kswapd)
MISC_NUMA_NEXT_SCAN = 6   # mm->numa_next_scan in ns (one mm shared by all tasks)
MISC_NUMA_SCAN_OFFSET = 7 # mm->numa_scan_offset as a page id


def nr_sentinels(nr_nodes: int, nr_tasks: int) -> int:
    return nr_nodes * NR_LRU_LISTS + nr_tasks


def page_state_bytes(nr_pages: int) -> int:
    """Bytes of per-page state (the 16-byte budget) for `nr_pages` simulated pages."""
    return nr_pages * 16


@jit_inline
def lru_sentinel(s, nid, lru):
    return s.node.shape[0] + nid * NR_LRU_LISTS + lru


@jit
def promo_sentinel(s, task):
    return s.node.shape[0] + s.lru_size.shape[0] * NR_LRU_LISTS + task


@jit
def init_lists(prev, nxt, first_sentinel):
    for i in range(first_sentinel, prev.shape[0]):
        prev[i] = i
        nxt[i] = i


@jit_inline
def list_add(s, head, x):
    """Insert x right after the sentinel (kernel list_add: newest end)."""
    n = s.next[head]
    s.next[x] = n
    s.prev[x] = head
    s.prev[n] = x
    s.next[head] = x


@jit_inline
def list_add_tail(s, head, x):
    """Insert x right before the sentinel (kernel list_add_tail)."""
    p = s.prev[head]
    s.prev[x] = p
    s.next[x] = head
    s.next[p] = x
    s.prev[head] = x


@jit_inline
def list_del(s, x):
    p = s.prev[x]
    n = s.next[x]
    s.next[p] = n
    s.prev[n] = p
    s.prev[x] = -1
    s.next[x] = -1


@jit
def list_empty(s, head):
    return s.next[head] == head


@jit_inline
def folio_nr_pages(s, head):
    return np.int64(1) << (s.order[head] & ORDER_MASK)


@jit_inline
def folio_head(s, page):
    o = s.order[page] & ORDER_MASK
    return page & ~((np.int64(1) << o) - 1)


@jit_inline
def folio_lru(s, head):
    """Which classic LRU list a folio belongs on: 2*file + active (folio_lru_list)."""
    lru = 0
    if not (s.flags2[head] & F2_ANON):
        lru += 2
    if s.flags[head] & PG_ACTIVE:
        lru += 1
    return lru


@jit_inline
def rng_next(s):
    """xorshift64*: deterministic per-run randomness inside kernels (e.g. next_demotion_node)."""
    x = s.rng[0]
    x ^= x >> np.uint64(12)
    x ^= x << np.uint64(25)
    x ^= x >> np.uint64(27)
    s.rng[0] = x
    return (x * np.uint64(2685821657736338717)) >> np.uint64(11)


@jit_inline
def region_of(s, page):
    """Binary search of the region holding `page` (regions are few; called on faults only)."""
    lo = 0
    hi = s.region_kind.shape[0] - 1
    while lo < hi:
        mid = (lo + hi + 1) >> 1
        if s.region_start[mid] <= page:
            lo = mid
        else:
            hi = mid - 1
    return lo
