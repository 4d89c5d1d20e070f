"""Exact single-tier reference replacement policies: LRU, FIFO, CLOCK and OPT (Belady).

These are textbook policies over a page trace and a cache capacity in pages, kept for teaching and
for cross-checking tierlab against libCacheSim.  They are not a model of the kernel's LRU (see
``core/lru.py`` for that); each one matches a libCacheSim eviction file miss for miss when every
object has size 1 and the libCacheSim cache size equals ``capacity``:

``lru`` (libCacheSim ``cache/eviction/LRU.c``)
    A hit moves the page to the MRU end; a miss evicts the LRU page when full and inserts at the
    MRU end.  Here: an intrusive doubly linked list on int32 arrays indexed by dense page id.

``fifo`` (libCacheSim ``cache/eviction/FIFO.c``)
    A hit changes nothing; a miss evicts the oldest inserted page when full.  Here: a ring buffer.

``clock`` (libCacheSim ``cache/eviction/Clock.c``, FIFO-reinsertion / second chance)
    Each resident page has a counter ``freq`` of ``n_bit_counter`` bits (libCacheSim default 1, so
    ``max_freq = 2**n - 1 = 1``).  Insertion sets ``freq = init_freq`` (default 0: a new page is
    *not* referenced).  A hit sets ``freq = min(freq + 1, max_freq)``.  To evict, look at the
    oldest page: while its ``freq >= 1``, decrement it by one and move it to the newest end; evict
    the first page found with ``freq == 0``.  Eviction happens before the new page is inserted.
    Here: a circular buffer with a hand.  Moving the oldest page to the newest end is the same as
    stepping the hand past it, and writing the new page into the victim's slot and stepping the
    hand puts the new page at the newest end, so the order matches libCacheSim's list exactly.

``opt`` (libCacheSim ``cache/eviction/Belady.c``; Belady's MIN under demand paging)
    Every miss inserts the page; when full, the resident page whose next request is farthest in
    the future (never again counts as farthest) is evicted.  No policy that must admit every
    missed page misses less, so OPT is the lower bound the notebooks put beside the kernel's LRUs.
    Here: next-use indices from one backward pass, and a binary max-heap of (next use, page)
    keys with lazy deletion (a hit pushes the page's new key; a popped key that is not the page's
    current one is skipped), O(log n) per request.  Pages that are never requested again tie;
    which of them goes does not change the miss count.

Pages are arbitrary int64 ids.  ``remap_page_ids`` turns them into dense ids in order of first
appearance (a direct lookup array when they are already small and non-negative, else the growing
open-addressing hash of ``trace_kernels.PageIds``), so every request costs O(1).  Capacity is in
pages and every page has the same size; object sizes, TTLs, deletes and admission control are
not modelled.  Parity with the libcachesim 0.3.5 Python bindings (all four policies, and CLOCK
with other n_bit_counter and init_freq values) is checked in tests/test_reference_policies.py.
"""

from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np

from tierlab.core.trace_kernels import PageIds
from tierlab.errors import ConfigError

POLICY_LRU = 0
POLICY_FIFO = 1
POLICY_CLOCK = 2
POLICY_OPT = 3

POLICY_CODES = {"lru": POLICY_LRU, "fifo": POLICY_FIFO, "clock": POLICY_CLOCK, "opt": POLICY_OPT}

# Pages in [0, limit) are relabelled through a direct lookup array of `limit` int32s, which is
# cheaper than hashing every request and costs memory linear in the trace length.
_DIRECT_ID_SLACK = 1 << 16

_HASH_BLOCK = 1 << 16  # pages per PageIds.map call in hash_page_ids


class ReferenceCounts(NamedTuple):
    """Counters of one reference-policy run (hits + misses == requests)."""

    nr_requests: int
    nr_hits: int
    nr_misses: int
    nr_evictions: int


# ----------------------------------------------------------------------------------------------
# Kernels (operate on dense ids in [0, n_ids))
# ----------------------------------------------------------------------------------------------


@numba.njit(cache=True)
def lru_kernel(ids, n_ids, capacity):
    """Exact LRU over dense ids; returns (misses, evictions).

    Models: libCacheSim cache/eviction/LRU.c with unit-size objects.
    prev[x] == -2 marks a non-resident page so residency costs no extra array.
    """
    not_resident = -2
    prev = np.full(n_ids, not_resident, dtype=np.int32)
    nxt = np.full(n_ids, -1, dtype=np.int32)
    head = -1  # MRU end
    tail = -1  # LRU end
    n_resident = 0
    misses = 0
    evictions = 0
    for i in range(ids.shape[0]):
        x = ids[i]
        p = prev[x]
        if p != not_resident:
            if x != head:
                # Unlink; x is not the head, so p >= 0.
                nx = nxt[x]
                nxt[p] = nx
                if nx >= 0:
                    prev[nx] = p
                else:
                    tail = p
                prev[x] = -1
                nxt[x] = head
                prev[head] = x
                head = x
            continue
        misses += 1
        if n_resident == capacity:
            victim = tail
            tail = prev[victim]
            if tail >= 0:
                nxt[tail] = -1
            else:
                head = -1
            prev[victim] = not_resident
            nxt[victim] = -1
            evictions += 1
        else:
            n_resident += 1
        prev[x] = -1
        nxt[x] = head
        if head >= 0:
            prev[head] = x
        else:
            tail = x
        head = x
    return misses, evictions


@numba.njit(cache=True)
def fifo_kernel(ids, n_ids, capacity):
    """Exact FIFO over dense ids; returns (misses, evictions).

    Models: libCacheSim cache/eviction/FIFO.c with unit-size objects.
    """
    resident = np.zeros(n_ids, dtype=np.uint8)
    ring = np.empty(capacity, dtype=np.int32)
    n_resident = 0
    hand = 0  # slot of the oldest page once the ring is full
    misses = 0
    evictions = 0
    for i in range(ids.shape[0]):
        x = ids[i]
        if resident[x]:
            continue
        misses += 1
        if n_resident == capacity:
            resident[ring[hand]] = 0
            ring[hand] = x
            hand += 1
            if hand == capacity:
                hand = 0
            evictions += 1
        else:
            ring[n_resident] = x
            n_resident += 1
        resident[x] = 1
    return misses, evictions


@numba.njit(cache=True)
def clock_kernel(ids, n_ids, capacity, n_bit_counter, init_freq):
    """Exact CLOCK (FIFO-reinsertion) over dense ids; returns (misses, evictions).

    Models: libCacheSim cache/eviction/Clock.c (Clock_find, Clock_insert, Clock_evict) with
    unit-size objects; see the module docstring for the rule.  freq[x] == -1 marks non-resident.
    """
    max_freq = (1 << n_bit_counter) - 1
    freq = np.full(n_ids, -1, dtype=np.int16)
    ring = np.empty(capacity, dtype=np.int32)
    n_resident = 0
    hand = 0  # slot of the oldest page (libCacheSim's q_tail) once the ring is full
    misses = 0
    evictions = 0
    for i in range(ids.shape[0]):
        x = ids[i]
        f = freq[x]
        if f >= 0:
            if f < max_freq:
                freq[x] = f + 1
            continue
        misses += 1
        if n_resident == capacity:
            # Terminates: every step past a page lowers its counter.
            while freq[ring[hand]] >= 1:
                freq[ring[hand]] -= 1
                hand += 1
                if hand == capacity:
                    hand = 0
            freq[ring[hand]] = -1
            ring[hand] = x
            hand += 1
            if hand == capacity:
                hand = 0
            evictions += 1
        else:
            ring[n_resident] = x
            n_resident += 1
        freq[x] = init_freq
    return misses, evictions


@numba.njit(cache=True)
def _heap_push(heap, n, key):
    """Push `key` onto the binary max-heap heap[0:n]; returns the new size."""
    i = n
    while i > 0:
        parent = (i - 1) >> 1
        if heap[parent] >= key:
            break
        heap[i] = heap[parent]
        i = parent
    heap[i] = key
    return n + 1


@numba.njit(cache=True)
def _heap_pop(heap, n):
    """Remove the largest key of the max-heap heap[0:n]; returns (key, new size)."""
    top = heap[0]
    n -= 1
    last = heap[n]
    i = 0
    while True:
        child = 2 * i + 1
        if child >= n:
            break
        if child + 1 < n and heap[child + 1] > heap[child]:
            child += 1
        if heap[child] <= last:
            break
        heap[i] = heap[child]
        i = child
    if n > 0:
        heap[i] = last
    return top, n


@numba.njit(cache=True)
def opt_kernel(ids, n_ids, capacity):
    """Belady's OPT over dense ids; returns (misses, evictions).

    Models: libCacheSim cache/eviction/Belady.c with unit-size objects.  A heap key is
    next_use * 2**31 + page (both < 2**31), so the largest key is the farthest next use.
    """
    n = ids.shape[0]
    never = n  # the next use of a page that is not requested again
    next_use = np.empty(n, dtype=np.int64)
    last = np.full(n_ids, never, dtype=np.int64)
    for i in range(n - 1, -1, -1):
        next_use[i] = last[ids[i]]
        last[ids[i]] = i
    shift = np.int64(1) << 31
    key_of = np.full(n_ids, -1, dtype=np.int64)  # the resident page's current heap key; -1: not resident
    heap = np.empty(n + 1, dtype=np.int64)
    size = 0
    n_resident = 0
    misses = 0
    evictions = 0
    for i in range(n):
        x = ids[i]
        key = next_use[i] * shift + x
        if key_of[x] >= 0:
            key_of[x] = key
            size = _heap_push(heap, size, key)
            continue
        misses += 1
        if n_resident == capacity:
            while True:
                top, size = _heap_pop(heap, size)
                victim = top % shift
                if key_of[victim] == top:
                    break
            key_of[victim] = -1
            evictions += 1
        else:
            n_resident += 1
        key_of[x] = key
        size = _heap_push(heap, size, key)
    return misses, evictions


@numba.njit(cache=True)
def reference_kernel(policy, ids, n_ids, capacity, n_bit_counter, init_freq):
    """Run the policy with integer code ``policy``; returns (misses, evictions), or (-1, -1) for
    an unknown code.  n_bit_counter and init_freq are used by POLICY_CLOCK only."""
    if policy == POLICY_LRU:
        return lru_kernel(ids, n_ids, capacity)
    if policy == POLICY_FIFO:
        return fifo_kernel(ids, n_ids, capacity)
    if policy == POLICY_CLOCK:
        return clock_kernel(ids, n_ids, capacity, n_bit_counter, init_freq)
    if policy == POLICY_OPT:
        return opt_kernel(ids, n_ids, capacity)
    return -1, -1


@numba.njit(cache=True)
def relabel_page_ids(pages, n_slots):
    """Dense ids in order of first appearance for pages already in [0, n_slots); returns
    (ids, n_ids).

    First-appearance order puts hot pages at low ids, which keeps the policies' per-page arrays
    cache-friendly (about 2x faster LRU on a zipf trace than using the raw page numbers).
    """
    label = np.full(n_slots, -1, dtype=np.int32)
    ids = np.empty(pages.shape[0], dtype=np.int32)
    n_ids = 0
    for i in range(pages.shape[0]):
        p = pages[i]
        v = label[p]
        if v < 0:
            v = n_ids
            label[p] = v
            n_ids += 1
        ids[i] = v
    return ids, n_ids


def hash_page_ids(pages):
    """Dense ids in order of first appearance for arbitrary int64 pages; returns (ids, n_ids).

    The open-addressing table of `trace_kernels.PageIds` (the one dense-id map in tierlab), fed in
    blocks so it grows with the distinct pages, not with the trace.
    """
    ids = np.empty(pages.shape[0], dtype=np.int32)
    table = PageIds(bits=10)
    for lo in range(0, pages.shape[0], _HASH_BLOCK):
        table.map(pages[lo:lo + _HASH_BLOCK], out=ids[lo:lo + _HASH_BLOCK])
    return ids, table.n


# ----------------------------------------------------------------------------------------------
# Thin Python wrappers: validation and id remapping, no per-request Python work
# ----------------------------------------------------------------------------------------------


def remap_page_ids(pages) -> tuple[np.ndarray, int]:
    """Map arbitrary integer page ids to dense int32 ids in order of first appearance.

    Returns (ids, n_ids) with n_ids the number of distinct pages.  Pages already in
    [0, max(2 * len(pages), 65536)) go through a direct lookup array, anything else through a hash
    table; both give the same ids.
    """
    pages = np.ascontiguousarray(pages)
    if pages.ndim != 1 or not np.issubdtype(pages.dtype, np.integer):
        raise ConfigError(f"pages must be a 1-D integer array; got shape {pages.shape}, dtype {pages.dtype}")
    if pages.dtype == np.uint64 and pages.size and int(pages.max()) > np.iinfo(np.int64).max:
        pages = pages.view(np.int64)  # a bijection, and only equality matters
    else:
        pages = pages.astype(np.int64, copy=False)
    if pages.size == 0:
        return np.empty(0, dtype=np.int32), 0
    lo = int(pages.min())
    hi = int(pages.max())
    if lo >= 0 and hi < min(max(2 * pages.size, _DIRECT_ID_SLACK), np.iinfo(np.int32).max):
        ids, n_ids = relabel_page_ids(pages, hi + 1)
    else:
        ids, n_ids = hash_page_ids(pages)
    return ids, int(n_ids)


def _check_capacity(capacity) -> int:
    if isinstance(capacity, (bool, np.bool_)) or not isinstance(capacity, (int, np.integer)) or capacity < 1:
        raise ConfigError(f"capacity must be an integer number of pages >= 1; got {capacity!r}")
    if capacity >= np.iinfo(np.int32).max:
        raise ConfigError(f"capacity must be < 2**31 - 1 pages; got {capacity!r}")
    return int(capacity)


def _policy_code(policy) -> int:
    if isinstance(policy, str):
        key = policy.lower()
        if key not in POLICY_CODES:
            raise ConfigError(f"unknown policy {policy!r}; accepted: {sorted(POLICY_CODES)}")
        return POLICY_CODES[key]
    if policy not in POLICY_CODES.values():
        raise ConfigError(f"unknown policy code {policy!r}; accepted: {POLICY_CODES}")
    return int(policy)


def simulate(pages, capacity: int, policy=POLICY_LRU, *, n_bit_counter: int = 1,
             init_freq: int = 0) -> ReferenceCounts:
    """Run a reference policy ("lru"/"fifo"/"clock"/"opt" or a POLICY_* code) over a page trace.

    capacity is in pages.  n_bit_counter and init_freq are CLOCK's libCacheSim parameters
    (defaults 1 and 0, as in libCacheSim) and are ignored by the other policies.
    """
    code = _policy_code(policy)
    cap = _check_capacity(capacity)
    if isinstance(n_bit_counter, bool) or not 1 <= int(n_bit_counter) <= 14:
        raise ConfigError(f"n_bit_counter must be in 1..14; got {n_bit_counter!r}")
    max_freq = (1 << int(n_bit_counter)) - 1
    if not 0 <= int(init_freq) <= max_freq:
        raise ConfigError(f"init_freq must be in 0..{max_freq} for n_bit_counter={n_bit_counter}; "
                          f"got {init_freq!r}")
    ids, n_ids = remap_page_ids(pages)
    misses, evictions = reference_kernel(code, ids, n_ids, cap, int(n_bit_counter), int(init_freq))
    n = int(ids.shape[0])
    return ReferenceCounts(nr_requests=n, nr_hits=n - int(misses), nr_misses=int(misses),
                           nr_evictions=int(evictions))


def simulate_lru(pages, capacity: int) -> int:
    """Misses of exact LRU with ``capacity`` pages (libCacheSim LRU)."""
    return simulate(pages, capacity, POLICY_LRU).nr_misses


def simulate_fifo(pages, capacity: int) -> int:
    """Misses of FIFO with ``capacity`` pages (libCacheSim FIFO)."""
    return simulate(pages, capacity, POLICY_FIFO).nr_misses


def simulate_clock(pages, capacity: int, n_bit_counter: int = 1, init_freq: int = 0) -> int:
    """Misses of CLOCK with ``capacity`` pages (libCacheSim Clock, same parameter defaults)."""
    return simulate(pages, capacity, POLICY_CLOCK, n_bit_counter=n_bit_counter,
                    init_freq=init_freq).nr_misses


def simulate_opt(pages, capacity: int) -> int:
    """Misses of Belady's OPT with ``capacity`` pages (libCacheSim Belady)."""
    return simulate(pages, capacity, POLICY_OPT).nr_misses
