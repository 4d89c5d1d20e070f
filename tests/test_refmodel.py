"""The engine against the naive reference model (tests/refmodel.py) on hypothesis-built scenarios:
after every chunk, per-node counters, free pages, every page's node/flags/flags2/order/stamp, the
order of every LRU list, the lru_add batches and the promotion lists must be identical.

The scenarios run in the model's exact regime: every time-model cost 0 (see refmodel.py), so the
schedule (tasks, kswapd) and the promotion decision depend on no clock."""
from __future__ import annotations

from hypothesis import event, given, settings

import refmodel
from simkit import lru_batches, lru_lists, page_arrays, promo_lists, swap_used
from strategies import build_sim, scenarios, to_chunk
from tierlab.errors import ConfigError


def model_for(sim, scn):
    nodes = sim.result().nodes
    wm = nodes[["wmark_min", "wmark_low", "wmark_high", "wmark_promo"]].to_numpy().tolist()
    knobs = {k: sim.kernel.get(k, int(nodes.managed_pages.sum())) for k in refmodel_knobs()}
    return refmodel.RefModel(sim.machine, scn.regions, knobs, scn.nr_tasks, scn.seed, wm,
                             nodes.managed_pages.tolist())


def refmodel_knobs():
    return ("numa_balancing", "demotion_enabled", "swap_size", "swappiness", "lru_batch_size",
            "hot_threshold_ms", "promote_rate_limit_MBps", "scan_period_max_ms", "access_time_bits",
            "pagecache_promotion_enabled", "pagecache_promotion_cap", "pagecache_promotion_order")


def compare(sim, model, where):
    res = sim.result()
    eng_counters = [{k: int(v) for k, v in row.items() if int(v)} for _, row in res.node_counters.iterrows()]
    assert eng_counters == model.node_counters(), f"{where}: counters"
    assert res.nodes.nr_free_pages.tolist() == model.free, f"{where}: free pages"
    pa = page_arrays(sim)
    for key, mine in (("node", model.node), ("flags", model.flags), ("flags2", model.flags2),
                      ("order", model.order), ("stamp", model.stamp)):
        bad = [i for i, (a, b) in enumerate(zip(pa[key], mine)) if a != b]
        assert not bad, f"{where}: {key} differs at pages {bad[:8]}: engine {[pa[key][i] for i in bad[:8]]} " \
                        f"model {[mine[i] for i in bad[:8]]}"
    assert lru_lists(sim) == model.lru, f"{where}: LRU list order"
    assert lru_batches(sim) == model.batch, f"{where}: lru_add batches"
    assert promo_lists(sim) == model.promo, f"{where}: promotion lists"
    assert swap_used(sim) == model.swap_used, f"{where}: swap in use"


def run_both(scn):
    sim = build_sim(scn)
    model = model_for(sim, scn)
    for i, per_task in enumerate(scn.chunks):
        eng_oom = mod_oom = False
        try:
            sim.run(chunks=[to_chunk(per_task)])
        except ConfigError as e:
            assert "out of memory" in str(e)
            eng_oom = True
        try:
            model.run_chunk(per_task)
        except refmodel.OutOfMemory:
            mod_oom = True
        assert eng_oom == mod_oom, f"chunk {i}: engine OOM {eng_oom}, model OOM {mod_oom}"
        if eng_oom:
            return sim, model          # the engine stops mid-chunk; states are not comparable
        compare(sim, model, f"after chunk {i}")
    return sim, model


@settings(max_examples=60, deadline=None)
@given(scenarios(zero_cost=True))
def test_engine_matches_reference_model(scn):
    sim, model = run_both(scn)
    events(sim)


@settings(max_examples=40, deadline=None)
@given(scenarios(zero_cost=True, tiering=True))
def test_engine_matches_reference_model_tiering(scn):
    sim, model = run_both(scn)
    events(sim)


def events(sim):
    c = sim.result().counters
    for name in ("pgsteal_kswapd", "pgsteal_direct", "pgdemote_kswapd", "pgdemote_direct", "pswpout",
                 "workingset_activate_file", "workingset_refault_anon", "pgpromote_success",
                 "promote_deferred_pages", "pgpromote_candidate", "pgactivate", "oom_kill"):
        event(f"{name} > 0: {bool(c[name] > 0)}")
