"""Invariants, counter relations and determinism over hypothesis-built scenarios (tests/strategies.py:
the machine, regions, knobs and access streams are drawn piece by piece, so a failure shrinks to a
small case). Normal costs here (clocks, kswapd interleaving, NUMA scans and hint faults all run)."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings

from simkit import lru_batches, page_arrays
from strategies import build_sim, scenarios, to_chunk
from test_properties import check_invariants
from tierlab.errors import ConfigError


def run_chunks(sim, chunks):
    """Run the chunks; False at an out-of-memory stop."""
    for per_task in chunks:
        try:
            sim.run(chunks=[to_chunk(per_task)])
        except ConfigError as e:
            assert "out of memory" in str(e)
            return False
    return True


def check_relations(sim):
    res = sim.result()
    c = res.counters
    nodes = res.nodes
    assert c.pgpromote_success <= c.pgpromote_candidate + c.pgpromote_candidate_nrl
    for who in ("kswapd", "direct"):
        assert c[f"pgsteal_{who}"] <= c[f"pgscan_{who}"]
        assert c[f"pgdemote_{who}"] <= c[f"pgsteal_{who}"]
    assert c.numa_hint_faults_local <= c.numa_hint_faults
    assert c.numa_hint_page_cache_local <= c.numa_hint_page_cache
    lru = nodes[["nr_inactive_anon", "nr_active_anon", "nr_inactive_file", "nr_active_file"]].sum(axis=1)
    assert (nodes.nr_free_pages >= 0).all()
    assert (nodes.nr_free_pages <= nodes.managed_pages).all()
    # free + on an LRU + isolated + waiting in an lru_add batch + held by MIGRC == managed, per node
    pa = page_arrays(sim)
    batched = np.zeros(len(nodes), np.int64)
    for b in lru_batches(sim):
        for h in b:
            batched[pa["node"][h]] += 1 << pa["order"][h]
    total = nodes.nr_free_pages + lru + nodes.nr_isolated + batched + nodes.migrc_pending_nr
    assert total.tolist() == nodes.managed_pages.tolist()


def check_chunk_by_chunk(scn):
    """Run the scenario a chunk at a time, checking the invariants and counter relations after each."""
    sim = build_sim(scn)
    for per_task in scn.chunks:
        ok = run_chunks(sim, [per_task])
        check_invariants(sim)
        check_relations(sim)
        if not ok:
            break


@settings(max_examples=40, deadline=None)
@given(scenarios(numa_scan=True))
def test_invariants_and_counter_relations(scn):
    check_chunk_by_chunk(scn)


@settings(max_examples=25, deadline=None)
@given(scenarios(numa_scan=True, tiering=True))
def test_invariants_tiering(scn):
    sim = build_sim(scn)
    run_chunks(sim, scn.chunks)
    check_invariants(sim)
    check_relations(sim)


@settings(max_examples=25, deadline=None)
@given(scenarios(numa_scan=True))
def test_same_scenario_twice_gives_identical_counters(scn):
    a, b = build_sim(scn), build_sim(scn)
    assert run_chunks(a, scn.chunks) == run_chunks(b, scn.chunks)
    ra, rb = a.result(), b.result()
    assert ra.counters.to_dict() == rb.counters.to_dict()
    assert ra.sim_time_s == rb.sim_time_s
    assert page_arrays(a) == page_arrays(b)


@settings(max_examples=25, deadline=None)
@given(scenarios(numa_scan=True, max_chunks=3))
def test_fork_then_run_equals_from_scratch(scn):
    """Run the first chunk, fork, run the rest on the fork: same as running everything on one."""
    scratch = build_sim(scn)
    ok_scratch = run_chunks(scratch, scn.chunks)
    base = build_sim(scn)
    ok = run_chunks(base, scn.chunks[:1])
    fork = base.fork()
    ok = ok and run_chunks(fork, scn.chunks[1:])
    assert ok == ok_scratch
    rf, rs = fork.result(), scratch.result()
    assert rf.counters.to_dict() == rs.counters.to_dict()
    assert rf.sim_time_s == rs.sim_time_s
    assert page_arrays(fork) == page_arrays(scratch)
    # the original is untouched by the fork's run: it equals a run of the first chunk alone
    first = build_sim(scn)
    run_chunks(first, scn.chunks[:1])
    assert base.result().counters.to_dict() == first.result().counters.to_dict()
    assert page_arrays(base) == page_arrays(first)
