"""Reference policies (tierlab.core.reference): hand-worked cases, libCacheSim parity, invariants."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tierlab.core import reference as ref
from tierlab.errors import ConfigError
from tierlab.trace import write_oracle_general

BELADY = [1, 2, 3, 4, 1, 2, 5, 1, 2, 3, 4, 5]


# ----------------------------------------------------------------------------------------------
# Naive oracle: lists, checkable by eye
# ----------------------------------------------------------------------------------------------


def naive_misses(pages, capacity, policy, n_bit_counter=1, init_freq=0):
    """List-based LRU/FIFO/CLOCK/OPT; the CLOCK rule is libCacheSim Clock.c's, written plainly;
    OPT evicts the resident page whose next request is farthest (never: farthest of all)."""
    max_freq = (1 << n_bit_counter) - 1
    queue = []  # oldest first
    freq = {}
    misses = 0

    def next_use(q, i):
        return next((j for j in range(i + 1, len(pages)) if pages[j] == q), len(pages))

    for i, p in enumerate(pages):
        if p in freq:
            if policy == "lru":
                queue.remove(p)
                queue.append(p)
            elif policy == "clock":
                freq[p] = min(freq[p] + 1, max_freq)
            continue
        misses += 1
        if len(queue) == capacity:
            if policy == "clock":
                while freq[queue[0]] >= 1:
                    freq[queue[0]] -= 1
                    queue.append(queue.pop(0))
            if policy == "opt":
                queue.sort(key=lambda q: next_use(q, i), reverse=True)
            del freq[queue.pop(0)]
        queue.append(p)
        freq[p] = init_freq
    return misses


# ----------------------------------------------------------------------------------------------
# (a) Hand-worked sequences
# ----------------------------------------------------------------------------------------------

# Belady sequence 1,2,3,4,1,2,5,1,2,3,4,5 (queues written oldest/LRU first):
#
# FIFO, 3 pages: misses 1 2 3 4(-1) 1(-2) 2(-3) 5(-4), hits 1 2, misses 3(-1) 4(-2), hit 5 -> 9.
# FIFO, 4 pages: misses 1 2 3 4, hits 1 2, misses 5(-1) 1(-2) 2(-3) 3(-4) 4(-5) 5(-1) -> 10
#   (Belady's anomaly: more memory, more misses).
# LRU, 3 pages: 1 2 3 4(-1) 1(-2) 2(-3) 5(-4) miss -> [1 2 5]; hits 1 2 -> [5 1 2];
#   3(-5) 4(-1) 5(-2) miss -> 10.
# LRU, 4 pages: 1 2 3 4 miss; hits 1 2 -> [3 4 1 2]; 5(-3) miss; hits 1 2 -> [4 5 1 2];
#   3(-4) 4(-5) 5(-1) miss -> 8.
# CLOCK (1-bit, new pages unreferenced), 3 pages: 1 2 3 4(-1) 1(-2) 2(-3) 5(-4) miss -> [1 2 5];
#   hits set ref(1) ref(2); 3 miss: 1 and 2 lose their bit and go to the back, 5 is evicted
#   -> [1 2 3]; 4(-1) 5(-2) miss -> 10.
# CLOCK, 4 pages: 1 2 3 4 miss, hits ref(1) ref(2); 5 miss: 1, 2 recycled, evict 3 -> [4 1 2 5];
#   hits ref(1) ref(2); 3 miss evicts 4 -> [1' 2' 5 3]; 4 miss: 1, 2 recycled, evict 5
#   -> [3 1 2 4]; 5 miss evicts 3 -> 8.
# OPT, 3 pages: 1 2 3 miss; 4 evicts 3 (next uses 1@4, 2@5, 3@9) -> [1 2 4]; hits 1 2; 5 evicts 4
#   (1@7, 2@8, 4@10); hits 1 2; 3 evicts 1 or 2 (neither comes back); 4 evicts the other; 5 hit
#   -> 7.   OPT, 4 pages: 1 2 3 4 miss; hits 1 2; 5 evicts 4 (the farthest, @10); hits 1 2 3;
#   4 evicts one of 1 2 3; 5 hit -> 6.
#
# Sequence 1,2,1,3,2 with 2 pages separates the policies:
# LRU: 1 2 miss, 1 hit -> [2 1], 3 evicts 2, 2 miss -> 4.   FIFO: 3 evicts 1, 2 hits -> 3.
# CLOCK (init_freq=0): 3 recycles ref'd 1 and evicts 2 -> [1 3], 2 miss -> 4.
# CLOCK (init_freq=1): 1 and 2 both referenced; 3 clears both and evicts 1 -> [2 3], 2 hit -> 3.
# OPT: 3 evicts 1 (never again) rather than 2 (@4), 2 hits -> 3.
HAND_CASES = [
    (BELADY, 3, "opt", {}, 7),
    (BELADY, 4, "opt", {}, 6),
    ([1, 2, 1, 3, 2], 2, "opt", {}, 3),
    ([7, 7, 8, 7, 8], 1, "opt", {}, 4),
    (BELADY, 3, "fifo", {}, 9),
    (BELADY, 4, "fifo", {}, 10),
    (BELADY, 3, "lru", {}, 10),
    (BELADY, 4, "lru", {}, 8),
    (BELADY, 3, "clock", {}, 10),
    (BELADY, 4, "clock", {}, 8),
    ([1, 2, 1, 3, 2], 2, "lru", {}, 4),
    ([1, 2, 1, 3, 2], 2, "fifo", {}, 3),
    ([1, 2, 1, 3, 2], 2, "clock", {}, 4),
    ([1, 2, 1, 3, 2], 2, "clock", {"init_freq": 1}, 3),
    ([7, 7, 8, 7, 8], 1, "lru", {}, 4),
    ([7, 7, 8, 7, 8], 1, "clock", {}, 4),
]


@pytest.mark.parametrize("pages,capacity,policy,kw,expected", HAND_CASES)
def test_hand_worked_miss_counts(pages, capacity, policy, kw, expected):
    counts = ref.simulate(np.array(pages), capacity, policy, **kw)
    assert counts.nr_misses == expected
    assert naive_misses(pages, capacity, policy, **kw) == expected


def test_named_wrappers_match_dispatcher():
    pages = np.array(BELADY)
    assert ref.simulate_lru(pages, 3) == 10
    assert ref.simulate_fifo(pages, 3) == 9
    assert ref.simulate_clock(pages, 4) == 8
    assert ref.simulate_opt(pages, 3) == 7
    assert ref.simulate(pages, 4, ref.POLICY_FIFO) == ref.simulate(pages, 4, "fifo")


def test_kernels_take_dense_ids():
    ids, n_ids = ref.remap_page_ids(np.array(BELADY) * 10**15)
    assert n_ids == 5
    assert tuple(ref.lru_kernel(ids, n_ids, 3)) == (10, 7)
    assert tuple(ref.fifo_kernel(ids, n_ids, 3)) == (9, 6)
    assert tuple(ref.clock_kernel(ids, n_ids, 3, 1, 0)) == (10, 7)
    assert tuple(ref.reference_kernel(ref.POLICY_CLOCK, ids, n_ids, 3, 1, 0)) == (10, 7)
    assert tuple(ref.opt_kernel(ids, n_ids, 3)) == (7, 4)


def test_remap_paths_give_first_appearance_ids():
    pages = np.array([5, 3, 5, 900, 3, 0])
    expected = [0, 1, 0, 2, 1, 3]
    direct_ids, n_direct = ref.remap_page_ids(pages)  # small non-negative: lookup array
    hashed_ids, n_hashed = ref.remap_page_ids(pages * -(10**12))  # hash table
    assert direct_ids.tolist() == hashed_ids.tolist() == expected
    assert n_direct == n_hashed == 4
    uint_ids, _ = ref.remap_page_ids(pages.astype(np.uint64) + np.uint64(2**63))
    assert uint_ids.tolist() == expected


def test_hash_remap_survives_table_growth():
    rng = np.random.default_rng(3)
    keys = rng.integers(-(2**62), 2**62, 5_000)  # distinct with overwhelming probability
    pages = keys[rng.integers(0, keys.size, 40_000)]
    ids, n_ids = ref.remap_page_ids(pages)
    _, first, inverse = np.unique(pages, return_index=True, return_inverse=True)
    order = np.argsort(np.argsort(first))  # rank of each distinct key by first appearance
    assert n_ids == first.size
    assert np.array_equal(ids, order[inverse])


def test_empty_trace():
    assert ref.simulate(np.array([], dtype=np.int64), 4, "clock") == (0, 0, 0, 0)


@pytest.mark.parametrize(
    "kw,match",
    [
        ({"capacity": 0}, "capacity"),
        ({"capacity": 2.5}, "capacity"),
        ({"policy": "arc"}, "accepted"),
        ({"policy": 7}, "accepted"),
        ({"n_bit_counter": 0}, "n_bit_counter"),
        ({"init_freq": 2}, "init_freq"),
    ],
)
def test_bad_input_names_the_key(kw, match):
    args = {"capacity": 2, "policy": "clock"} | kw
    with pytest.raises(ConfigError, match=match):
        ref.simulate(np.array(BELADY), args.pop("capacity"), args.pop("policy"), **args)


def test_rejects_non_integer_pages():
    with pytest.raises(ConfigError, match="pages"):
        ref.simulate(np.array([1.0, 2.0]), 2, "lru")


# ----------------------------------------------------------------------------------------------
# (b) Exact parity with libCacheSim on generated traces
# ----------------------------------------------------------------------------------------------




def _libcachesim_misses(lcs, path, n_requests, capacity, policy, **kw):
    cache_cls = {"lru": lcs.LRU, "fifo": lcs.FIFO, "clock": lcs.Clock, "opt": lcs.Belady}[policy]
    reader = lcs.TraceReader(str(path), lcs.TraceType.ORACLE_GENERAL_TRACE)
    # hashpower only sizes libCacheSim's hash table; its default (2**24 buckets) costs ~50 ms to
    # allocate per cache, which dominates these small traces.
    miss_ratio, _ = cache_cls(capacity, hashpower=16, **kw).process_trace(reader)
    # miss_ratio is n_miss / n_req in double precision, so the count is recovered exactly.
    return round(miss_ratio * n_requests)


def _trace(kind, n_requests, n_pages, seed):
    rng = np.random.default_rng(seed)
    if kind == "uniform":
        return rng.integers(0, n_pages, n_requests)
    weights = 1.0 / np.arange(1, n_pages + 1) ** 0.9
    ranks = np.searchsorted(np.cumsum(weights) / weights.sum(), rng.random(n_requests))
    pages = rng.permutation(n_pages)[np.minimum(ranks, n_pages - 1)]
    if kind == "zipf_sparse":
        # Huge, negative and sparse ids exercise the hash remap; the file holds them as uint64.
        return pages.astype(np.int64) * np.int64(0x9E3779B97F4A7C1) - np.int64(2**62)
    return pages


CLOCK_VARIANTS = [{}, {"init_freq": 1}, {"n_bit_counter": 2}, {"n_bit_counter": 3, "init_freq": 2}]


@pytest.mark.parametrize("kind", ["uniform", "zipf", "zipf_sparse"])
def test_miss_counts_equal_libcachesim(kind, tmp_path):
    lcs = pytest.importorskip("libcachesim")
    n_requests, n_pages = 20_000, 2_000
    pages = _trace(kind, n_requests, n_pages, seed=len(kind))
    path = tmp_path / "trace.oracleGeneral"
    # next_access_vtime is Belady's input; the other policies ignore it
    write_oracle_general(path, pages, next_access=True)
    for capacity in (1, 7, 100, 500, 1999, 2500):
        for policy in ("lru", "fifo", "clock", "opt"):
            ours = ref.simulate(pages, capacity, policy).nr_misses
            theirs = _libcachesim_misses(lcs, path, n_requests, capacity, policy)
            assert ours == theirs, (kind, capacity, policy)
        for kw in CLOCK_VARIANTS[1:]:
            ours = ref.simulate(pages, capacity, "clock", **kw).nr_misses
            theirs = _libcachesim_misses(lcs, path, n_requests, capacity, "clock", **kw)
            assert ours == theirs, (kind, capacity, kw)


def test_per_request_api_agrees_on_each_request():
    """libCacheSim's per-request get() gives the same hit/miss at every position as our CLOCK."""
    lcs = pytest.importorskip("libcachesim")
    pages = _trace("zipf", 3_000, 300, seed=5)
    capacity = 40
    cache = lcs.Clock(capacity, hashpower=12)
    req = lcs.Request()
    req.obj_size = 1
    hits = np.empty(len(pages), dtype=bool)
    for i, p in enumerate(pages.tolist()):
        req.obj_id = p
        hits[i] = cache.get(req)
    # Prefix miss counts pin down every single decision, not just the total.
    for stop in (1, 50, 333, 1000, len(pages)):
        assert ref.simulate(pages[:stop], capacity, "clock").nr_misses == int((~hits[:stop]).sum())


# ----------------------------------------------------------------------------------------------
# (c) Properties
# ----------------------------------------------------------------------------------------------

page_lists = st.lists(st.integers(min_value=0, max_value=12), min_size=0, max_size=80)
policies = st.sampled_from(["lru", "fifo", "clock", "opt"])


@settings(deadline=None, max_examples=150)
@given(pages=page_lists, capacity=st.integers(1, 10), policy=policies)
def test_prop_counters_are_consistent(pages, capacity, policy):
    c = ref.simulate(np.array(pages, dtype=np.int64), capacity, policy)
    n_distinct = len(set(pages))
    assert c.nr_hits + c.nr_misses == c.nr_requests == len(pages)
    assert n_distinct <= c.nr_misses <= c.nr_requests
    # Nothing is ever removed except by eviction, so the cache fills and then stays full.
    assert c.nr_evictions == max(0, c.nr_misses - capacity)
    if capacity >= n_distinct:
        assert c.nr_misses == n_distinct


@settings(deadline=None, max_examples=100)
@given(pages=page_lists)
def test_prop_lru_inclusion(pages):
    arr = np.array(pages, dtype=np.int64)
    misses = [ref.simulate_lru(arr, c) for c in range(1, 15)]
    assert all(a >= b for a, b in zip(misses, misses[1:]))


@settings(deadline=None, max_examples=100)
@given(pages=page_lists, capacity=st.integers(1, 10))
def test_prop_opt_is_a_lower_bound(pages, capacity):
    arr = np.array(pages, dtype=np.int64)
    opt = ref.simulate_opt(arr, capacity)
    for policy in ("lru", "fifo", "clock"):
        assert opt <= ref.simulate(arr, capacity, policy).nr_misses, policy
    # OPT is a stack algorithm too: more memory never costs a miss
    assert ref.simulate_opt(arr, capacity + 1) <= opt


@settings(deadline=None, max_examples=150)
@given(pages=page_lists, capacity=st.integers(1, 10), policy=policies,
       clock=st.sampled_from(CLOCK_VARIANTS))
def test_prop_matches_naive_oracle(pages, capacity, policy, clock):
    kw = clock if policy == "clock" else {}
    assert ref.simulate(np.array(pages, dtype=np.int64), capacity, policy, **kw).nr_misses == \
        naive_misses(pages, capacity, policy, **kw)


@settings(deadline=None, max_examples=100)
@given(pages=page_lists, capacity=st.integers(1, 10), policy=policies,
       scale=st.integers(-(2**40), 2**40).filter(bool), offset=st.integers(-(2**20), 2**20))
def test_prop_page_ids_only_matter_up_to_equality(pages, capacity, policy, scale, offset):
    arr = np.array(pages, dtype=np.int64)
    relabelled = arr * np.int64(scale) + np.int64(offset)  # injective on 0..12
    assert ref.simulate(relabelled, capacity, policy) == ref.simulate(arr, capacity, policy)
