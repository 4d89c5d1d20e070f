"""Classic two-list LRU, hand-worked from the kernel's logic (kernel-mechanisms.md §4).

Each test drives the engine with explicit accesses on a tiny machine and checks the folio flags, the
list order (walked through prev/next from the sentinels) and the vmstat counters against what
mm/swap.c, mm/vmscan.c and mm/workingset.c do for the same sequence.

Numbers used throughout: a 256-page node has min_free_kbytes = int_sqrt(16 * 1024 KiB) = 128 KiB,
so WMARK_MIN = 32 pages, tmp = max(32 / 4, 256 * 10 / 10000) = 8: LOW = 40, HIGH = 48, PROMO = 56.
An allocation takes a page while free - 1 >= LOW, so 216 pages fit before kswapd is woken, and the
217th allocation (free 40 -> 39, taken at the MIN watermark) wakes it.
"""
from __future__ import annotations

import numpy as np
import pytest

from simkit import (
    CXL, DRAM, LOAD, READ, STORE, base, counters, has, has2, lru_list, lru_list_backwards, machine,
    make_sim, present, run, seq, where,
)
from tierlab.core import state as st
from tierlab.core.vmstat import VMSTAT_NAMES
from tierlab.core.lru import inactive_is_low
from tierlab.core.params import P
from tierlab.core.reclaim import (
    FOLIOREF_ACTIVATE, FOLIOREF_KEEP, FOLIOREF_RECLAIM, FOLIOREF_RECLAIM_CLEAN,
    folio_check_references,
)
from tierlab.workloads.base import Region

INACTIVE_ANON, ACTIVE_ANON, INACTIVE_FILE, ACTIVE_FILE = 0, 1, 2, 3
FITS = 216          # pages that fit on a 256-page node before an allocation goes below LOW


def node256():
    return machine((256, 1, DRAM))


def file_sim(pages=64, **knobs):
    knobs.setdefault("lru_batch_size", 1)
    knobs.setdefault("read_ahead_kb", 0)     # one page per miss: these cases are about the LRU, not readahead
    return make_sim(node256(), [Region("f", "file", pages)], **knobs)


def shadows(s, pages):
    return [p for p in pages if has2(s, p, st.F2_SHADOW)]


# --------------------------------------------------------------------------------------------
# folio_mark_accessed() on read(): inactive,unref -> inactive,ref -> active,unref -> active,ref
# --------------------------------------------------------------------------------------------

def test_geometry_of_the_test_node():
    sim = file_sim()
    assert sim.state.pgdat["wmark"][0].tolist() == [32, 40, 48, 56]


def test_read_sequence_referenced_then_activated_then_referenced():
    sim = file_sim()
    s = sim.state
    A, B = 0, 1
    # accesses to A are interleaved with B: filemap_read() skips folio_mark_accessed() for a read
    # that continues in the folio the previous read() ended in (test_back_to_back_reads_...)
    run(sim, [(A, READ)])
    assert where(s, A) == (0, INACTIVE_FILE)
    assert has(s, A, st.PG_REFERENCED) and not has(s, A, st.PG_ACTIVE)
    assert has(s, A, st.PG_LRU)
    assert counters(sim)["pgactivate"] == 0
    age0 = int(s.lruvec["nonresident_age"][0])

    run(sim, [(B, READ), (A, READ)])        # 2nd access to A: activated
    assert where(s, A) == (0, ACTIVE_FILE)
    assert has(s, A, st.PG_ACTIVE) and not has(s, A, st.PG_REFERENCED)
    assert counters(sim)["pgactivate"] == 1
    assert int(s.lruvec["nonresident_age"][0]) == age0 + 1        # workingset_activation() ages the lruvec
    assert where(s, B) == (0, INACTIVE_FILE) and has(s, B, st.PG_REFERENCED)

    run(sim, [(B, READ), (A, READ)])        # 3rd access to A: referenced again, stays active
    assert where(s, A) == (0, ACTIVE_FILE)
    assert has(s, A, st.PG_ACTIVE) and has(s, A, st.PG_REFERENCED)
    assert counters(sim)["pgactivate"] == 2             # B's activation, not A's
    assert where(s, B) == (0, ACTIVE_FILE)

    run(sim, [(B, READ), (A, READ)])        # 4th: nothing changes for an active, referenced folio
    assert counters(sim)["pgactivate"] == 2
    assert has(s, A, st.PG_ACTIVE) and has(s, A, st.PG_REFERENCED)
    assert s.lruvec["lru_size"][0].tolist() == [0, 0, 0, 2]


def test_loads_through_page_tables_do_not_mark_accessed():
    """Mapped accesses only set the PTE young bit; folio_mark_accessed() is not called."""
    sim = file_sim()
    s = sim.state
    run(sim, [(0, LOAD), (1, LOAD), (0, LOAD), (1, LOAD), (0, LOAD)])
    for p in (0, 1):
        assert where(s, p) == (0, INACTIVE_FILE)
        assert has(s, p, st.PG_YOUNG)
        assert not has(s, p, st.PG_REFERENCED) and not has(s, p, st.PG_ACTIVE)
        assert has2(s, p, st.F2_MAPPED)
    assert counters(sim)["pgactivate"] == 0


def test_new_anon_folios_start_inactive():
    """Since 5.9 new anonymous folios go to the inactive anon list (lru_cache_add_inactive_or_unevictable)."""
    sim = make_sim(node256(), [Region("a", "anon", 8)], lru_batch_size=1)
    s = sim.state
    run(sim, [(0, STORE), (1, STORE), (0, STORE)])
    assert lru_list(s, 0, INACTIVE_ANON) == [1, 0]
    for p in (0, 1):
        assert has(s, p, st.PG_YOUNG) and not has(s, p, st.PG_ACTIVE)
        assert not has(s, p, st.PG_REFERENCED)
        assert has2(s, p, st.F2_ANON)
    assert s.lruvec["lru_size"][0].tolist() == [2, 0, 0, 0]


def test_back_to_back_reads_of_one_page_mark_it_once():
    sim = file_sim()
    s = sim.state
    run(sim, [(0, READ), (0, READ), (0, READ)])
    assert counters(sim)["pgactivate"] == 0
    assert where(s, 0) == (0, INACTIVE_FILE)
    assert has(s, 0, st.PG_REFERENCED) and not has(s, 0, st.PG_ACTIVE)


# --------------------------------------------------------------------------------------------
# the per-CPU lru_add batch
# --------------------------------------------------------------------------------------------

def test_lru_add_batch_holds_folios_until_full():
    sim = file_sim(lru_batch_size=4)
    s = sim.state
    run(sim, [(0, READ), (1, READ), (2, READ)])
    assert s.lruvec["lru_size"][0].tolist() == [0, 0, 0, 0]
    for p in (0, 1, 2):
        assert present(s, p)
        assert has2(s, p, st.F2_BATCHED) and not has(s, p, st.PG_LRU)
        assert has(s, p, st.PG_REFERENCED) and not has(s, p, st.PG_ACTIVE)
        assert where(s, p) is None

    # 2nd access while still in the batch: __lru_cache_activate_folio() sets PG_active directly
    # (1 before 2: a read() continuing in the folio the last one ended in would not mark it)
    run(sim, [(1, READ), (2, READ)])
    assert has(s, 1, st.PG_ACTIVE) and not has(s, 1, st.PG_REFERENCED)
    assert has(s, 2, st.PG_ACTIVE)
    assert not has(s, 0, st.PG_ACTIVE)
    assert counters(sim)["pgactivate"] == 0
    assert int(s.lruvec["nonresident_age"][0]) == 2           # workingset_activation() on both
    assert s.lruvec["lru_size"][0].tolist() == [0, 0, 0, 0]

    run(sim, [(3, READ)])                           # 4th folio fills the batch: drained in order
    for p in range(4):
        assert has(s, p, st.PG_LRU) and not has2(s, p, st.F2_BATCHED)
    assert lru_list(s, 0, INACTIVE_FILE) == [3, 0]
    assert lru_list(s, 0, ACTIVE_FILE) == [2, 1]
    assert s.lruvec["lru_size"][0].tolist() == [0, 0, 2, 2]
    assert counters(sim)["pgactivate"] == 0         # lru_add does not count activations


# --------------------------------------------------------------------------------------------
# list order and the victims of reclaim
# --------------------------------------------------------------------------------------------

def test_list_order_head_is_newest():
    sim = file_sim()
    s = sim.state
    run(sim, seq(range(10), READ))
    fwd = lru_list(s, 0, INACTIVE_FILE)
    assert fwd == list(range(9, -1, -1))
    assert lru_list_backwards(s, 0, INACTIVE_FILE) == fwd
    # activation moves a folio to the head of the active list
    run(sim, [(4, READ), (7, READ), (2, READ)])
    assert lru_list(s, 0, ACTIVE_FILE) == [2, 7, 4]
    assert lru_list(s, 0, INACTIVE_FILE) == [9, 8, 6, 5, 3, 1, 0]


def test_reclaim_takes_the_tail_of_the_inactive_list_first():
    """Unmapped page cache read once is referenced but inactive: folio_check_references() returns
    RECLAIM_CLEAN and it is reclaimed anyway, oldest first."""
    sim = file_sim(pages=400)
    s = sim.state
    run(sim, seq(range(FITS), READ))
    assert counters(sim)["pageoutrun"] == 0 and int(s.pgdat["free"][0]) == 40
    assert all(has(s, p, st.PG_REFERENCED) for p in range(FITS))

    run(sim, seq(range(FITS, FITS + 1), READ))          # below LOW: kswapd wakes
    c = counters(sim)
    assert c["pageoutrun"] >= 1
    ev = shadows(s, range(400))
    k = len(ev)
    assert k > 0
    assert ev == list(range(k))                         # exactly the k oldest folios
    assert c["pgsteal_kswapd"] == k and c["pgsteal_file"] == k
    assert c["pgscan_kswapd"] == k                      # nothing scanned was kept
    assert c["pgactivate"] == 0                         # referenced folios were not rescued
    assert all(not present(s, p) for p in ev)
    assert int(s.pgdat["free"][0]) >= 48                         # kswapd stopped at (or above) HIGH
    assert int(s.pgdat["free"][0]) + (FITS + 1 - k) == 256
    assert lru_list(s, 0, INACTIVE_FILE)[-1] == k       # new tail: the oldest survivor


def test_shrink_active_list_deactivates_when_inactive_is_low():
    sim = file_sim(pages=400)
    s = sim.state
    run(sim, seq(range(150), READ) + seq(range(150), READ))     # 150 active, activated 0..149
    assert s.lruvec["lru_size"][0].tolist() == [0, 0, 0, 150]
    run(sim, seq(range(150, FITS + 1), READ))                   # 67 inactive < 150 active: low
    c = counters(sim)
    k = c["pgdeactivate"]
    assert k > 0
    assert c["pgrefill"] == k
    deact = [p for p in range(150) if not has(s, p, st.PG_ACTIVE)]
    assert deact == list(range(k))          # the tail (oldest activations) of the active list
    for p in deact:
        assert has(s, p, st.PG_WORKINGSET)
        assert where(s, p) == (0, INACTIVE_FILE)
    for p in range(k, 150):
        assert where(s, p) == (0, ACTIVE_FILE) and not has(s, p, st.PG_WORKINGSET)
    # deactivated folios went to the head of the inactive list, in their old relative order,
    # so the folios reclaimed were the oldest inactive ones (150, 151, ...), not them
    ina = lru_list(s, 0, INACTIVE_FILE)
    assert ina[:k] == list(range(k - 1, -1, -1))
    ev = shadows(s, range(400))
    assert ev == list(range(150, 150 + len(ev))) and ev


def test_no_deactivation_while_inactive_is_not_low():
    sim = file_sim(pages=400)
    s = sim.state
    run(sim, seq(range(50), READ) + seq(range(50), READ))       # 50 active
    run(sim, seq(range(50, FITS + 40), READ))                   # pressure; inactive >> active
    c = counters(sim)
    assert c["pgsteal_kswapd"] > 0
    assert c["pgdeactivate"] == 0 and c["pgrefill"] == 0
    assert all(where(s, p) == (0, ACTIVE_FILE) for p in range(50))


def test_inactive_is_low_ratio():
    """inactive * int_sqrt(10 * GiB) < active, ratio 1 below 1 GiB."""
    sim = file_sim()
    s = sim.state
    gib = 1 << 18

    def low(inactive, active):
        s.lruvec["lru_size"][0, INACTIVE_FILE] = inactive
        s.lruvec["lru_size"][0, ACTIVE_FILE] = active
        s.lruvec["lru_size"][0, INACTIVE_ANON] = inactive
        s.lruvec["lru_size"][0, ACTIVE_ANON] = active
        f = bool(inactive_is_low(s, sim.p, 0, True))
        assert bool(inactive_is_low(s, sim.p, 0, False)) == f
        return f

    assert not low(100, 100) and low(99, 100) and not low(0, 0) and low(0, 1)
    # 1 GiB total -> 3:1
    assert not low(gib // 4, 3 * gib // 4)
    assert low(gib // 4 - 1, 3 * gib // 4 + 1)
    # 10 GiB -> 10:1 ; 100 GiB -> int_sqrt(1000) = 31:1 ; 1 TiB -> int_sqrt(10240) = 101:1
    for total_gib, ratio in ((1, 3), (10, 10), (100, 31), (1024, 101)):
        ina = -(-total_gib * gib // (ratio + 1))        # inactive + ratio * inactive lands in the bucket
        assert (ina * (ratio + 1)) >> 18 == total_gib == (ina * (ratio + 1) + 1) >> 18
        assert not low(ina, ina * ratio)
        assert low(ina, ina * ratio + 1)
    # just below 1 GiB the ratio is 1
    assert low(gib // 2 - 1, gib // 2) and not low(gib // 2, gib // 2 - 1)
    # under --scale F the lists stand for F times as many pages: 100 GiB / 1024 of lists is 31:1
    sim.p[P.SCALE] = 1024.0
    ina = -(-100 * gib // 1024 // 32)
    assert not low(ina, ina * 31) and low(ina, ina * 31 + 2)
    sim.p[P.SCALE] = 1.0
    s.lruvec["lru_size"][0] = 0


# --------------------------------------------------------------------------------------------
# folio_check_references(): mapped folios get a second trip
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("anon,mapped,young,ref,verdict,ref_after", [
    (False, True, True, False, FOLIOREF_KEEP, True),
    (False, True, True, True, FOLIOREF_ACTIVATE, True),
    (False, False, False, True, FOLIOREF_RECLAIM_CLEAN, False),
    (False, True, False, True, FOLIOREF_RECLAIM_CLEAN, False),
    (False, False, False, False, FOLIOREF_RECLAIM, False),
    (True, True, True, False, FOLIOREF_KEEP, True),
    (True, True, True, True, FOLIOREF_ACTIVATE, True),
    (True, True, False, True, FOLIOREF_RECLAIM, False),
    (True, True, False, False, FOLIOREF_RECLAIM, False),
])
def test_folio_check_references_table(anon, mapped, young, ref, verdict, ref_after):
    sim = file_sim()
    s = sim.state
    x = 5
    s.pages.flags2[x] = st.F2_PRESENT | (st.F2_ANON if anon else 0) | (st.F2_MAPPED if mapped else 0)
    s.pages.flags[x] = (st.PG_YOUNG if young else 0) | (st.PG_REFERENCED if ref else 0)
    assert folio_check_references(s, x) == verdict
    assert not has(s, x, st.PG_YOUNG)                   # folio_referenced() cleared the young bits
    assert has(s, x, st.PG_REFERENCED) == ref_after


def test_mapped_young_folio_kept_once_then_activated():
    sim = make_sim(node256(), [Region("map", "file", 4, mapped=True), Region("f", "file", 2000)],
                   lru_batch_size=1, read_ahead_kb=0)      # one page per miss
    s = sim.state
    F = base(sim, 1)
    M = [0, 1, 2, 3]
    run(sim, seq(M, LOAD))                              # mmap'd, young, unreferenced, oldest
    run(sim, seq(range(F, F + FITS + 1 - 4), READ))     # fill the node: kswapd scans the tail
    c = counters(sim)
    assert c["pgsteal_kswapd"] > 0
    for m in M:     # KEEP: one more trip on the inactive list, PG_referenced set, young cleared
        assert present(s, m) and where(s, m) == (0, INACTIVE_FILE)
        assert has(s, m, st.PG_REFERENCED) and not has(s, m, st.PG_YOUNG)
    assert c["pgactivate"] == 0
    # put back at the head, in their old relative order, ahead of the older streamed pages
    ina = lru_list(s, 0, INACTIVE_FILE)
    assert ina[:4] == [3, 2, 1, 0]

    run(sim, [(0, LOAD), (1, LOAD)])                   # touched again before the next check
    run(sim, seq(range(F + FITS + 1 - 4, F + 800), READ))
    c = counters(sim)
    assert c["pgactivate"] == 2
    for m in (0, 1):                                    # young + referenced: ACTIVATE
        assert where(s, m) == (0, ACTIVE_FILE) and has(s, m, st.PG_ACTIVE)
    for m in (2, 3):                                    # referenced only, file: RECLAIM_CLEAN
        assert not present(s, m) and has2(s, m, st.F2_SHADOW)


# --------------------------------------------------------------------------------------------
# workingset refault detection
# --------------------------------------------------------------------------------------------

def _hot_and_cold(gap):
    """128 active hot pages on a 512-page node (min 45, low 56, high 67); stream cold pages until
    the first cold page c0 is evicted, read `gap` more cold pages, then refault c0."""
    sim = make_sim(machine((512, 1, DRAM)), [Region("hot", "file", 128), Region("cold", "file", 2000)],
                   lru_batch_size=1, read_ahead_kb=0)      # one page per miss
    s = sim.state
    H, C = base(sim, 0), base(sim, 1)
    run(sim, seq(range(H, H + 128), READ) + seq(range(H, H + 128), READ))
    assert s.lruvec["lru_size"][0].tolist() == [0, 0, 0, 128]
    n = 512 - 56 - 128                                  # cold pages that fit above LOW
    run(sim, seq(range(C, C + n), READ))
    assert not has2(s, C, st.F2_SHADOW)
    run(sim, [(C + n, READ)])                           # first eviction: the oldest cold page
    assert has2(s, C, st.F2_SHADOW) and not present(s, C)
    evicted = counters(sim)["pgsteal_kswapd"]
    assert 0 < evicted < 64
    run(sim, seq(range(C + n + 1, C + n + 1 + gap), READ))
    before = counters(sim)
    run(sim, [(C, READ)])
    after = counters(sim)
    return sim, C, before, after


def test_refault_within_workingset_size_is_activated():
    sim, c0, before, after = _hot_and_cold(gap=8)
    s = sim.state
    # distance <= evictions since c0 (< 64) + 8 reads, workingset size = active file = 128
    assert after["workingset_refault_file"] - before["workingset_refault_file"] == 1
    assert after["workingset_activate_file"] - before["workingset_activate_file"] == 1
    assert after["workingset_restore_file"] == 0        # c0 never had PG_workingset
    assert where(s, c0) == (0, ACTIVE_FILE) and has(s, c0, st.PG_ACTIVE)
    assert not has2(s, c0, st.F2_SHADOW)


def test_refault_after_a_long_distance_is_not_activated():
    sim, c0, before, after = _hot_and_cold(gap=600)
    s = sim.state
    # ~600 evictions since c0 > 128 active file pages
    assert after["workingset_refault_file"] - before["workingset_refault_file"] == 1
    assert after["workingset_activate_file"] == before["workingset_activate_file"] == 0
    assert where(s, c0) == (0, INACTIVE_FILE) and not has(s, c0, st.PG_ACTIVE)
    assert has(s, c0, st.PG_REFERENCED)                 # the read() that refaulted it


def test_refault_restores_workingset_bit():
    """A folio deactivated by shrink_active_list (PG_workingset) that is evicted and refaults
    within the workingset size gets PG_workingset back (workingset_restore_file)."""
    sim = file_sim(pages=2000)
    s = sim.state
    run(sim, seq(range(150), READ) + seq(range(150), READ))
    run(sim, seq(range(150, FITS + 1), READ))           # deactivates 0.. with PG_workingset
    assert has(s, 0, st.PG_WORKINGSET) and not has(s, 0, st.PG_ACTIVE)
    n = FITS + 1
    while not has2(s, 0, st.F2_SHADOW):
        run(sim, [(n, READ)])
        n += 1
        assert n < 2000
    active = int(s.lruvec["lru_size"][0, ACTIVE_FILE])
    assert active > 32
    before = counters(sim)
    run(sim, [(0, READ)])
    after = counters(sim)
    assert after["workingset_refault_file"] - before["workingset_refault_file"] == 1
    assert after["workingset_activate_file"] - before["workingset_activate_file"] == 1
    assert after["workingset_restore_file"] - before["workingset_restore_file"] == 1
    assert where(s, 0) == (0, ACTIVE_FILE) and has(s, 0, st.PG_WORKINGSET)


def test_refault_distance_counts_the_folios_own_eviction():
    sim = file_sim(pages=400)
    s = sim.state
    run(sim, seq(range(FITS + 1), READ))
    ev = shadows(s, range(400))
    assert ev == list(range(len(ev))) and ev
    assert s.lruvec["lru_size"][0, ACTIVE_FILE] == 0 and s.lruvec["lru_size"][0, ACTIVE_ANON] == 0
    last = ev[-1]                        # the last folio evicted; nothing aged the lruvec since
    run(sim, [(last, READ)])
    c = counters(sim)
    assert c["workingset_refault_file"] == 1
    # kernel: refault_distance = 1 > workingset_size = active_file = 0 -> not activated
    assert c["workingset_activate_file"] == 0
    assert where(s, last) == (0, INACTIVE_FILE)


# --------------------------------------------------------------------------------------------
# large folios
# --------------------------------------------------------------------------------------------

def test_large_folio_is_one_unit():
    sim = make_sim(node256(), [Region("a", "anon", 64, order=2)], lru_batch_size=1)
    s = sim.state
    run(sim, [(0, STORE), (1, STORE), (2, LOAD), (3, STORE)])
    assert int(s.pgdat["free"][0]) == 256 - 4
    assert s.lruvec["lru_size"][0].tolist() == [4, 0, 0, 0]
    assert lru_list(s, 0, INACTIVE_ANON) == [0]
    assert counters(sim)["pgalloc"] == 4
    assert counters(sim)["pgfault"] == 1


@pytest.mark.parametrize("regions,page,op,neighbour", [
    # a file region whose last folio would run past its end into the next (anon) region
    ([Region("f", "file", 6, order=2), Region("a", "anon", 8)], 5, READ, 6),
    # a region whose base is not aligned: its first folio would start in the previous region
    ([Region("x", "anon", 3), Region("b", "anon", 8, order=2)], 3, STORE, 2),
])
def test_large_folio_stays_inside_its_region(regions, page, op, neighbour):
    sim = make_sim(node256(), regions, lru_batch_size=1)
    s = sim.state
    run(sim, [(page, op)])
    r = int(np.searchsorted(s.regions.start, page, side="right")) - 1
    head = int(st.folio_head(s, page))
    nr = int(st.folio_nr_pages(s, head))
    assert present(s, head)
    assert s.regions.start[r] <= head and head + nr <= s.regions.start[r + 1]
    assert int(st.folio_head(s, neighbour)) == neighbour and not present(s, neighbour)
    assert int(s.pgdat["free"][0]) == 256 - nr


def test_fork_continues_bit_identically():
    """Simulation.fork(): the fork, run on, ends in the same state as a simulation that ran every
    step from scratch; running it leaves the original where it was."""
    m = machine((256, 1, DRAM), (1024, 0, CXL))

    def setup():
        sim = make_sim(m, [Region("f", "file", 600, "bind", (1,))], lru_batch_size=1, numa_balancing=2,
                       pagecache_promotion_enabled=1)
        return run(sim, seq(range(600), READ))

    def more(x):
        x.set_knobs(pagecache_promotion_cap="unlimited")
        for _ in range(4):
            run(x, seq(range(600), READ))

    orig = setup()
    before = [a.copy() for _, a in st.state_arrays(orig.state)]
    fork = orig.fork()
    more(fork)
    scratch = setup()
    more(scratch)
    for (name, a), (_, b) in zip(st.state_arrays(fork.state), st.state_arrays(scratch.state)):
        assert np.array_equal(a, b), name
    for (name, a), b in zip(st.state_arrays(orig.state), before):
        assert np.array_equal(a, b), name
    assert fork.state.counters[:, VMSTAT_NAMES.index("pgpromote_success")].sum() > 0


# --------------------------------------------------------------------------------------------
# Active list aging (mm/vmscan.c 6.12): prepare_scan_control()'s may_deactivate against the
# refault snapshot of the last reclaim run, get_scan_count()'s lru_size >> priority for both lists
# --------------------------------------------------------------------------------------------

def test_may_deactivate_from_the_refault_snapshot():
    """A type may deactivate when its workingset_activate count differs from the snapshot that
    snapshot_refaults() took at the end of the last reclaim run, or when inactive_is_low(); the
    answer stays the same through a run until the run's end takes a new snapshot."""
    from tierlab.core.reclaim import may_deactivate, snapshot_refaults
    from tierlab.core.vmstat import Vm
    sim = file_sim()
    s = sim.state
    for lru, n in ((INACTIVE_ANON, 100), (ACTIVE_ANON, 100), (INACTIVE_FILE, 100), (ACTIVE_FILE, 100)):
        s.lruvec["lru_size"][0, lru] = n                     # 100:100, ratio 1: not low
    assert not may_deactivate(s, sim.p, 0, True) and not may_deactivate(s, sim.p, 0, False)
    s.counters[0, Vm.WORKINGSET_ACTIVATE_FILE] += 1          # a file refault activation
    assert may_deactivate(s, sim.p, 0, True) and not may_deactivate(s, sim.p, 0, False)
    assert may_deactivate(s, sim.p, 0, True)                 # still: nothing took a snapshot
    s.counters[0, Vm.WORKINGSET_ACTIVATE_ANON] += 3
    assert may_deactivate(s, sim.p, 0, False)
    snapshot_refaults(s, 0)                                   # the reclaim run ends
    assert s.lruvec["refaults"][0].tolist() == [3, 1]
    assert not may_deactivate(s, sim.p, 0, True) and not may_deactivate(s, sim.p, 0, False)
    s.lruvec["lru_size"][0, INACTIVE_FILE] = 99               # 99 * 1 < 100: inactive_is_low
    assert may_deactivate(s, sim.p, 0, True) and not may_deactivate(s, sim.p, 0, False)


def test_active_scan_size_is_the_inactive_scan_times_active_over_inactive():
    """Both lists of a type get lru_size >> priority (times the same fraction), so a pass scans
    active/inactive active pages per inactive page; the fraction is carried to the next batch. A
    batch is one round of shrink_lruvec(): at most SWAP_CLUSTER_MAX of the active list."""
    from tierlab.core.reclaim import active_scan_size
    sim = file_sim()
    s = sim.state
    assert active_scan_size(s, 0, True, 32, 128, 48) == 12           # 32 * 48/128
    assert active_scan_size(s, 0, True, 32, 256, 20) == 2            # 2.5: .5 carried
    assert s.lruvec["deact_acc"][0, 1] == 0.5
    assert active_scan_size(s, 0, True, 32, 256, 20) == 3            # .5 + 2.5
    assert s.lruvec["deact_acc"][0, 1] == 0.0
    assert active_scan_size(s, 0, False, 32, 256, 20) == 2           # anon carries its own
    assert s.lruvec["deact_acc"][0].tolist() == [0.5, 0.0]
    assert active_scan_size(s, 0, True, 32, 64, 60) == 30            # 30, nothing carried
    assert active_scan_size(s, 0, True, 32, 64, 60) == 30
    assert active_scan_size(s, 0, True, 32, 32, 200) == 32           # 200: one round's 32 at most,
    assert s.lruvec["deact_acc"][0, 1] == 0.0                         # the rest of the pass dropped
    assert active_scan_size(s, 0, True, 32, 256, 20) == 2
    assert active_scan_size(s, 0, True, 32, 16, 20) == 20            # never more than the list
    assert s.lruvec["deact_acc"][0, 1] == 0.0
    assert active_scan_size(s, 0, True, 0, 0, 100) == 32             # empty inactive: one round
    assert active_scan_size(s, 0, True, 32, 100, 0) == 0


def test_kswapd_deactivates_one_round_when_active_is_the_larger_list():
    """150 active, 67 inactive file pages when kswapd wakes: inactive_is_low (67 < 150). Its one
    batch (32 reclaimed: free 39 -> 71 >= HIGH) scans 32 inactive pages; the pass would owe
    int(32 * 150/67) = 71 active pages, but the round takes 32 from each list and the pass ends at
    its goal: 32 deactivated."""
    sim = file_sim(pages=400)
    s = sim.state
    run(sim, seq(range(150), READ) + seq(range(150), READ))
    run(sim, seq(range(150, FITS + 1), READ))
    c = counters(sim)
    assert c["pgsteal_kswapd"] == 32 and c["pgscan_kswapd"] == 32
    assert c["pgdeactivate"] == c["pgrefill"] == 32
    assert s.lruvec["lru_size"][0, ACTIVE_FILE] == 150 - 32


def test_refault_activation_allows_deactivation_until_the_run_ends():
    """50 active, inactive not low. A refault activation since the last snapshot lets the next
    kswapd run deactivate: its batch scans 32 of 167 inactive pages, so int(32 * 50/167) = 9 active
    pages go. balance_pgdat() ends with snapshot_refaults(): the next run, with no new refault
    activation and inactive not low, deactivates nothing."""
    from tierlab.core.vmstat import Vm
    sim = file_sim(pages=400)
    s = sim.state
    run(sim, seq(range(50), READ) + seq(range(50), READ))     # 50 active
    s.counters[0, Vm.WORKINGSET_ACTIVATE_FILE] += 1             # as if a refault had activated
    run(sim, seq(range(50, FITS + 1), READ))                    # 167 inactive when kswapd wakes
    c = counters(sim)
    assert c["pgscan_kswapd"] == 32
    assert c["pgdeactivate"] == int(32 * (50 / 167)) == 9
    assert s.lruvec["refaults"][0, 1] == c["workingset_activate_file"] == 1
    assert not s.pgdat["kswapd_awake"][0]
    run(sim, seq(range(FITS + 1, FITS + 41), READ))             # more pressure, another run
    c2 = counters(sim)
    assert c2["pgscan_kswapd"] > 32
    assert c2["pgdeactivate"] == 9
