"""The multi-gen LRU (core/mglru.py) against hand-worked cases from the kernel's logic (mm/vmscan.c,
mm_inline.h, mm/swap.c, mm/workingset.c of v6.6-v6.13), and its invariants over hypothesis-built
scenarios with lru_gen on."""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

from simkit import CXL, DRAM, LOAD, READ, STORE, counters, machine, make_sim, node_counter, run, seq
from strategies import build_sim, scenarios
from test_access_path import _scripted, assert_same_run
from test_access_path import scenarios as access_scenarios
from test_properties import check_invariants, folio_gen
from test_scenarios import check_chunk_by_chunk, check_relations, run_chunks
from tierlab.core import mglru
from tierlab.core import state as st
from tierlab.errors import ConfigError
from tierlab.workloads.base import Region

ANON, FILE = st.LRU_GEN_ANON, st.LRU_GEN_FILE


def lrugen(sim, nid=0):
    return sim.state.lruvec[nid]


def refs_of(sim, x):
    """(PG_referenced, PG_workingset, refs bits) of folio x."""
    s = sim.state
    return (bool(s.pages.flags[x] & st.PG_REFERENCED), bool(s.pages.flags[x] & st.PG_WORKINGSET),
            (int(s.pages.order[x]) & 0xFF) >> 6)


def gen_list(sim, nid, gen, typ):
    s = sim.state
    sent = st.lru_gen_sentinel(s, nid, gen, typ)
    out, x = [], int(s.pages.next[sent])
    while x != sent:
        out.append(x)
        x = int(s.pages.next[x])
    return out


def test_placement_of_new_folios():
    """lru_gen_add_folio with 4 generations (max_seq 3, min_seq 0): a read() miss is not a fault ->
    min_seq + 1; an anon fault and an mmap'd file fault are active -> max_seq; the two youngest count
    as active in the classic gauges."""
    regs = [Region("f", "file", 64, advice="random"), Region("a", "anon", 8), Region("m", "file", 8, mapped=True)]
    sim = make_sim(machine((512, 1, DRAM)), regs, lru_gen="y", lru_batch_size=1)
    lv = lrugen(sim)
    assert int(lv["max_seq"]) == 3 and lv["min_seq"].tolist() == [0, 0]
    run(sim, [(0, READ), (64, STORE), (72, LOAD)])
    s = sim.state
    assert folio_gen(s, 0) == 1 and folio_gen(s, 64) == 3 and folio_gen(s, 72) == 3
    assert gen_list(sim, 0, 1, FILE) == [0] and gen_list(sim, 0, 3, ANON) == [64] and gen_list(sim, 0, 3, FILE) == [72]
    assert lv["nr_pages"].tolist() == [[0, 0], [0, 1], [0, 0], [1, 1]]
    assert lv["lru_size"].tolist() == [0, 1, 1, 1]          # inactive anon, active anon, inactive file, active file
    assert not any(s.pages.flags[x] & st.PG_ACTIVE for x in (0, 64, 72))


def test_folio_inc_refs_tiers_without_activation():
    """folio_mark_accessed with lru_gen on: 1st access PG_referenced, 2nd PG_workingset, then refs
    1..3 (saturated); tier = order_base_2(refs + workingset + 1). No activation, no lru_lock."""
    regs = [Region("f", "file", 64, advice="random")]
    sim = make_sim(machine((512, 1, DRAM)), regs, lru_gen="y", lru_batch_size=1)
    expect = [(True, False, 0), (True, True, 0), (True, True, 1), (True, True, 2), (True, True, 3), (True, True, 3)]
    tiers = [0, 1, 2, 2, 3, 3]
    for k in range(6):
        run(sim, [(0, READ), (1, READ)])           # page 1 between, so each read of 0 marks it
        assert refs_of(sim, 0) == expect[k], k
        assert mglru.lru_tier_from_refs(mglru.folio_lru_refs(sim.state, 0)) == tiers[k]
    assert counters(sim)["pgactivate"] == 0
    classic = make_sim(machine((512, 1, DRAM)), regs, lru_batch_size=1)
    for _ in range(3):
        run(classic, [(0, READ), (1, READ)])
    assert counters(classic)["pgactivate"] == 2


def test_inc_max_seq_moves_the_oldest_generation():
    """inc_max_seq with MAX_NR_GENS generations: inc_min_seq moves the oldest generation's folios to
    the next one (refs cleared) and folds the controller's statistics (avg = (avg + cur) / 2), then
    a new youngest generation; the second youngest turns inactive."""
    regs = [Region("f", "file", 64, advice="random"), Region("a", "anon", 8)]
    sim = make_sim(machine((512, 1, DRAM)), regs, lru_gen="y", lru_batch_size=1)
    run(sim, seq(range(4), READ) + [(64, STORE)])       # file 0..3 in gen 1, anon 64 in gen 3
    s, p = sim.state, sim.p
    lv = lrugen(sim)
    mglru.inc_max_seq(s, p, 0, True, 0)                  # gen 0 is empty: min_seq 0 -> 1, max_seq 4
    assert int(lv["max_seq"]) == 4 and lv["min_seq"].tolist() == [1, 1]
    assert [folio_gen(s, x) for x in range(4)] == [1] * 4
    # gens now 1 (oldest), 2, 3, 0 (youngest): gen 2 turned inactive, anon in gen 3 stays active
    assert lv["lru_size"].tolist() == [0, 1, 4, 0]
    lv["evicted"][FILE, 0] = 100
    lv["refaulted"][FILE, 0] = 10
    lv["protected"][FILE, 1] = 7
    run(sim, [(0, READ), (5, READ), (0, READ)])          # folio 0: referenced + workingset
    mglru.inc_max_seq(s, p, 0, True, 0)                  # gen 1 -> gen 2: min_seq 2, max_seq 5
    assert int(lv["max_seq"]) == 5 and lv["min_seq"].tolist() == [2, 2]
    assert [folio_gen(s, x) for x in range(4)] == [2] * 4
    assert refs_of(sim, 0) == (False, False, 0)
    # page 5 was added to gen 2 (min_seq + 1); inc_min_seq takes gen 1 from its tail (0 first) and
    # list_move_tail()s each folio, so the moved run ends up reversed behind it
    assert gen_list(sim, 0, 2, FILE) == [5, 0, 1, 2, 3]
    assert int(lv["avg_total"][FILE, 0]) == 50 and int(lv["avg_refaulted"][FILE, 0]) == 5
    assert int(lv["avg_total"][FILE, 2]) == 3 and int(lv["refaulted"][FILE, 0]) == 0
    assert int(lv["evicted"][FILE, 0]) == 0 and int(lv["protected"][FILE, 1]) == 0


def test_pid_controller_decisions():
    """get_tier_idx: tier 0 (gain 1) against each higher tier (gain 2), positive_ctrl_err =
    pv.refaulted < 64 or pv.refaulted * (sp.total + 64) * sp.gain <= (sp.refaulted + 1) * pv.total * pv.gain."""
    sim = make_sim(machine((512, 1, DRAM)), [Region("f", "file", 8, advice="random")], lru_gen="y")
    s = sim.state
    lv = lrugen(sim)
    assert mglru.get_tier_idx(s, 0, FILE) == 3                     # no refaults: nothing protected
    lv["evicted"][FILE, 0] = 1000
    lv["refaulted"][FILE, 0] = 100
    lv["evicted"][FILE, 1] = 200
    lv["refaulted"][FILE, 1] = 100     # 100 * 1064 * 1 = 106400 > 101 * 200 * 2 = 40400: tier 1 refaults more
    assert mglru.get_tier_idx(s, 0, FILE) == 0
    lv["refaulted"][FILE, 1] = 63      # fewer than MIN_LRU_BATCH refaults: no evidence
    lv["evicted"][FILE, 2] = 1000
    lv["refaulted"][FILE, 2] = 200     # 200 * 1064 = 212800 > 101 * 1000 * 2 = 202000
    assert mglru.get_tier_idx(s, 0, FILE) == 1
    lv["refaulted"][FILE, 2] = 190     # 202160 <= 202000? no -> still 1;  180: 191520 <= 202000 -> passes
    assert mglru.get_tier_idx(s, 0, FILE) == 1
    lv["refaulted"][FILE, 2] = 180
    assert mglru.get_tier_idx(s, 0, FILE) == 3
    # anon vs file (swappiness 60: gains 60 : 140): file tier 0 refaults 100/1000, anon 10/1000
    lv["evicted"][ANON, 0] = 1000
    lv["refaulted"][ANON, 0] = 10
    # 100 * (1000 + 64) * 60 = 6384000 <= 11 * 1000 * 140 = 1540000? no: file's rate is higher -> anon
    assert mglru.get_type_to_scan(s, 0, 60)[0] == ANON
    lv["refaulted"][ANON, 0] = 60
    # 6384000 <= 61 * 1000 * 140 = 8540000: file is not worse -> file
    assert mglru.get_type_to_scan(s, 0, 60)[0] == FILE


def fill_and_stream(sim, first, hot, new):
    """Read `first` pages once, the `hot` ones (a prefix) five more times, then `new` pages once."""
    acc = seq(range(first), READ)
    for _ in range(5):
        for x in range(hot):
            acc += [(x, READ), (first + new + x, READ)]
    return run(sim, acc + seq(range(first, first + new), READ))


def test_eviction_order_and_tier_protection():
    """Eviction takes the oldest generation from its tail (FIFO for page cache read once); a folio
    with saturated refs (5+ accesses through fds) is protected by sort_folio (pgrefill,
    protected[tier 3 - 1]) even though no tier refaults more than tier 0 (tier_idx 3)."""
    sim = make_sim(machine((400, 1, DRAM)), [Region("f", "file", 1200, advice="random")], lru_gen="y", lru_batch_size=1)
    fill_and_stream(sim, 300, 10, 400)
    s = sim.state
    c = counters(sim)
    assert c["pgsteal_kswapd"] + c["pgsteal_direct"] > 0 and c["pgactivate"] == 0
    assert c["pgrefill"] >= 10 and int(lrugen(sim)["protected"][FILE, 2]) >= 10
    assert int(lrugen(sim)["tier_idx"][FILE]) == 3
    present = [bool(s.pages.flags2[x] & st.F2_PRESENT) for x in range(10, 300)]
    first = present.index(True) if True in present else len(present)
    assert all(present[first:]), "pages read once were not evicted oldest first"


def test_lru_gen_views_match_the_state():
    """Simulation.lru_gen() (debugfs lru_gen_full's table, with pages per tier) and lru_gen_tiers():
    folios read 1, 2, 3 and 6 times through read() sit in tiers 0, 1, 2 and 3 (refs + PG_workingset
    = 0, 1, 2, 4) of the generation they were added to (a read of the folio the previous read
    ended in is not marked, so other pages, read once, come between); after pressure, per generation the tiers
    still add up to nr_pages; the controller rows are read_ctrl_pos()'s numbers and the decision is
    the stored tier_idx."""
    sim = make_sim(machine((400, 1, DRAM)), [Region("f", "file", 1200, advice="random")], lru_gen="y", lru_batch_size=1)
    times = {0: 1, 1: 2, 2: 3, 3: 6}
    run(sim, [(y, READ) for k in range(6) for x, n in times.items() if k < n for y in (x, 100 + 4 * k + x)])
    g = sim.lru_gen()
    young = g[(g.type == "file") & (g.nr_pages > 0)]
    assert young.seq.tolist() == [1]                     # min_seq + 1 with 4 generations
    assert young[["tier0", "tier1", "tier2", "tier3"]].values.tolist() == [[1 + 12, 1, 1, 1]]
    fill_and_stream(sim, 300, 10, 400)
    s = sim.state
    lv = lrugen(sim)
    g = sim.lru_gen()
    assert (g[[f"tier{i}" for i in range(st.MAX_NR_TIERS)]].sum(axis=1) == g.nr_pages).all()
    f = g[g.type == "file"]
    assert f.seq.tolist() == list(range(int(lv["min_seq"][FILE]), int(lv["max_seq"]) + 1))
    assert f.age.tolist() == list(range(len(f) - 1, -1, -1))
    assert int(g.nr_pages.sum()) == int(lv["lru_size"].sum())
    t = sim.lru_gen_tiers()
    assert len(t) == st.ANON_AND_FILE * st.MAX_NR_TIERS
    for row in t.itertuples():
        typ = ANON if row.type == "anon" else FILE
        r, total = mglru.read_ctrl_pos(s, 0, typ, row.tier)
        assert (row.refaulted + row.avg_refaulted, row.protected + row.evicted + row.avg_total) == (r, total)
        assert row.tier_idx == int(lv["tier_idx"][typ])
    assert make_sim(machine((400, 1, DRAM)), [Region("f", "file", 8)]).lru_gen().empty


def test_shadow_refault_into_gen_and_tier():
    """lru_gen_eviction leaves token = min_seq << 2 | max(refs - 1, 0) and PG_workingset = refs > 0;
    a refault whose token seq is min_seq is recent: refaulted[type][tier], workingset_activate; with
    refs >= 3 it comes back with PG_workingset and saturated refs (workingset_restore)."""
    sim = make_sim(machine((400, 1, DRAM)), [Region("f", "file", 1200, advice="random")], lru_gen="y", lru_batch_size=1)
    acc = []
    for _ in range(4):
        acc += [(0, READ), (1000, READ)]                   # page 0: 4 accesses, refs 2 + workingset = 3
    run(sim, acc + seq(range(2, 420), READ))
    s = sim.state
    lv = lrugen(sim)
    assert s.pages.flags2[0] & st.F2_SHADOW, "page 0 was not evicted"
    token = int(s.pages.stamp[0])
    assert token & 3 == 2 and s.pages.flags[0] & st.PG_WORKINGSET
    recent = (token >> 2) == int(lv["min_seq"][FILE])
    before = counters(sim)
    refaulted = lv["refaulted"][FILE].copy()
    run(sim, [(0, READ)])
    after = counters(sim)
    assert after["workingset_refault_file"] == before["workingset_refault_file"] + 1
    if recent:
        assert after["workingset_activate_file"] == before["workingset_activate_file"] + 1
        assert after["workingset_restore_file"] == before["workingset_restore_file"] + 1
        assert int(lv["refaulted"][FILE, 2]) == int(refaulted[2]) + 1           # refs 3 -> tier 2
        assert refs_of(sim, 0)[1:] == (True, 3)
    else:
        assert after["workingset_activate_file"] == before["workingset_activate_file"]
    assert recent, "the refault should be recent: nothing advanced min_seq after the eviction"


def test_min_ttl_protects_the_working_set():
    """min_ttl_ms: kswapd finds the oldest generation younger than min_ttl_ms and calls the OOM
    killer rather than evict (the run stops with an out-of-memory error that says so)."""
    regs = [Region("f", "file", 1200, advice="random")]
    sim = make_sim(machine((400, 1, DRAM)), regs, lru_gen="y", min_ttl_ms=100000)
    with pytest.raises(ConfigError, match="min_ttl_ms"):
        run(sim, seq(range(1200), READ))
    assert counters(sim)["oom_kill"] == 1
    ok = make_sim(machine((400, 1, DRAM)), regs, lru_gen="y", min_ttl_ms=0)
    run(ok, seq(range(1200), READ))
    assert counters(ok)["oom_kill"] == 0


def test_switch_classic_and_back():
    """Writing lru_gen moves every folio between the classic lists and the generations
    (fill_evictable / drain_evictable); the invariants hold both ways."""
    regs = [Region("f", "file", 600, advice="random"), Region("a", "anon", 100)]
    sim = make_sim(machine((400, 1, DRAM)), regs, lru_batch_size=1, swap_size=200)
    run(sim, seq(range(600, 700), STORE) + seq(range(300), READ) + seq(range(50), READ))
    check_invariants(sim)
    sim.set_knobs(lru_gen="y")
    check_invariants(sim)
    assert int(lrugen(sim)["nr_pages"].sum()) == int(lrugen(sim)["lru_size"].sum()) > 0
    run(sim, seq(range(300, 600), READ))
    check_invariants(sim)
    sim.set_knobs(lru_gen="n")
    check_invariants(sim)
    assert int(lrugen(sim)["nr_pages"].sum()) == 0


def test_demotion_with_lru_gen():
    """Reclaim on the top tier demotes (as with the classic LRU) the folios eviction selects."""
    regs = [Region("f", "file", 900, "bind", (0,), advice="random")]
    sim = make_sim(machine((300, 1, DRAM), (1000, 0, CXL)), regs, lru_gen="y", demotion_enabled=1)
    run(sim, seq(range(900), READ))
    check_invariants(sim)
    assert node_counter(sim, 0, "pgdemote_kswapd") + node_counter(sim, 0, "pgdemote_direct") > 0


@pytest.mark.parametrize("mode,promoted", [("off", False), ("refs", True), ("tier", True)])
def test_pagecache_promotion_candidates_from_refs(mode, promoted):
    """With lru_gen on the RFC's hook is never reached ("off"); "refs" makes the 4th and later accesses
    through fds candidates, "tier" those sort_folio would protect (here: saturated refs)."""
    regs = [Region("f", "file", 64, "bind", (1,))]
    sim = make_sim(machine((400, 1, DRAM), (400, 0, CXL)), regs, lru_gen="y", numa_balancing=2,
                   pagecache_promotion_enabled=1, pagecache_promotion_lru_gen=mode, hot_threshold_ms=1000)
    acc = []
    for _ in range(8):
        acc += seq(range(32), READ)
    run(sim, acc)
    assert (counters(sim)["pgpromote_success"] > 0) == promoted


@settings(max_examples=30, deadline=None)
@given(scenarios(numa_scan=True, lru_gen=True))
def test_prop_lru_gen_invariants(scn):
    """No folio lost or on two lists, pages per generation = LRU size, capacity never exceeded, the
    counter relations, with lru_gen on."""
    check_chunk_by_chunk(scn)


@settings(max_examples=15, deadline=None)
@given(scenarios(numa_scan=True, tiering=True, lru_gen=True))
def test_prop_lru_gen_tiering(scn):
    sim = build_sim(scn)
    run_chunks(sim, scn.chunks)
    check_invariants(sim)
    check_relations(sim)


def with_lru_gen(sc):
    nodes, regions, tasks, knobs, seed, n = sc
    return nodes, regions, tasks, {**knobs, "lru_gen": 7, "pagecache_promotion_lru_gen": 1}, seed, n


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(access_scenarios().map(with_lru_gen))
def test_prop_fast_and_general_case_agree_with_lru_gen(sc):
    """folio_inc_refs is the fast case's only MGLRU work: the fast and the general case give the
    same state, clocks and samples with lru_gen on."""
    fast, err_fast = _scripted(*sc, fast_case=True)
    slow, err_slow = _scripted(*sc, fast_case=False)
    assert err_fast == err_slow
    assert_same_run(fast, slow, "scenario")
