"""The anon fault order policies (core/huge_memory.py), hand-worked on one VMA with populated holes,
and their fallbacks when the buddy allocator has no block of the order."""
from __future__ import annotations

import pytest

from simkit import DRAM, LOAD, STORE, counters, machine, make_sim, run, seq
from tierlab.core import buddy as bd
from tierlab.core import state as st
from tierlab.errors import ConfigError
from tierlab.kernel import Kernel
from tierlab.workloads.base import Region


def sim_of(policy, pages=64, model="counts", nodes=((4096, 1, DRAM),), **knobs):
    return make_sim(machine(*nodes), [Region("a", "anon", pages)], page_alloc_model=model,
                    anon_folio_orders=policy, **knobs)


def folio(sim, page):
    """(head, order) of the folio holding `page`."""
    o = int(sim.state.pages.order[page]) & 15
    return page & ~((1 << o) - 1), o


def stats(sim, order):
    row = sim.result().mthp.set_index("order").loc[order]
    return int(row.anon_fault_alloc), int(row.anon_fault_fallback)


@pytest.mark.parametrize("policy, order", [("baseline-4k", 0), ("v1", 4), ("v2", 4), ("v2-simple-order", 4)])
def test_an_empty_vma_gets_the_preferred_order(policy, order):
    sim = sim_of(policy)
    run(sim, [(5, STORE)])
    assert folio(sim, 5) == (5 & ~((1 << order) - 1), order)
    assert counters(sim)["pgfault"] == 1
    if order:
        assert stats(sim, order) == (1, 0)


@pytest.mark.parametrize("policy, expect", [
    ("v1", (8, 3)),                 # 0..15 holds page 3: the highest order that fits is 3 (8..15)
    ("v2", (8, 3)),
    ("v2-simple-order", (10, 0)),   # the preferred order or nothing
    ("baseline-4k", (10, 0)),
])
def test_a_populated_pte_lowers_the_order(policy, expect):
    sim = sim_of("baseline-4k")
    run(sim, [(3, STORE)])
    sim.set_knobs(anon_folio_orders=policy)
    run(sim, [(10, STORE)])
    assert folio(sim, 10) == expect
    # the order histogram of the VMA (Result.anon_fault_orders): page 3's fault was under
    # baseline-4k, which is a seed-001 policy too
    orders = sim.result().anon_fault_orders.set_index("region").loc["a"]
    assert orders["pages"] == 64 and orders[0] == 1 + (expect[1] == 0) and orders[3] == (expect[1] == 3)
    assert orders.drop(["pages", 0, 3]).sum() == 0


def test_the_zero_page_and_the_vma_end_count_as_populated_and_bounds():
    sim = sim_of("v2", pages=24)
    run(sim, [(20, LOAD), (17, STORE)])     # 16..31 passes the VMA end; 16..23 holds the zero page of 20
    assert folio(sim, 17) == (16, 2)
    run(sim, [(21, STORE)])                 # 20..23: the zero page is still 20's PTE -> order 0
    assert folio(sim, 21) == (21, 0)


def test_mthp_takes_the_highest_enabled_order_that_fits():
    sim = sim_of("mthp", huge_anon_orders_always="16K,64K")
    run(sim, [(3, STORE), (10, STORE)])     # 3: 0..15 (64K); 10: inside it, already present
    assert folio(sim, 3) == (0, 4) and folio(sim, 10) == (0, 4)
    run(sim, [(16 + 9, LOAD), (16 + 1, STORE)])   # 16..31 holds a zero page: 32K is not enabled, 16K is
    assert folio(sim, 17) == (16, 2)
    assert stats(sim, 4) == (1, 0) and stats(sim, 2) == (1, 0)


def test_mthp_pmd_order_counts_thp_fault_alloc():
    sim = sim_of("mthp", pages=1024)
    run(sim, [(700, STORE)])
    assert folio(sim, 700) == (512, 9)
    assert counters(sim)["thp_fault_alloc"] == 1 and stats(sim, 9) == (1, 0)


def fragmented(policy, **knobs):
    """One node whose free memory is scattered pages and one order-2 block (frames 8..11)."""
    sim = sim_of(policy, model="buddy", **knobs)
    s = sim.state
    s.pgdat.wmark[0, :] = 0
    for o in range(bd.NR_PAGE_ORDERS):
        head = bd.free_list_sentinel_of(s.buddy, 0, o)
        while s.buddy.next[head] != head:
            bd.del_from_free_list(s, 0, int(s.buddy.next[head]), o)
    for f in range(20, 100, 2):
        bd.add_to_free_list(s, 0, f, 0, True)
    bd.add_to_free_list(s, 0, 8, 2, True)
    return sim


@pytest.mark.parametrize("policy, order, fallbacks", [
    ("v1", 2, {4: 1, 3: 1}),        # 64K and 32K fail, 16K is the order-2 block
    ("v2", 0, {4: 1}),              # straight to order 0
    ("v2-simple-order", 0, {4: 1}),
])
def test_allocation_failure_falls_back(policy, order, fallbacks):
    sim = fragmented(policy)
    run(sim, [(5, STORE)])
    assert folio(sim, 5)[1] == order
    for o in (2, 3, 4):
        alloc, fb = stats(sim, o)
        assert fb == fallbacks.get(o, 0) and alloc == (1 if o == order else 0)
    if order == 2:
        assert sim.state.buddy.pfn[4] == 8           # the order-2 block's frames
    assert counters(sim)["oom_kill"] == 0


def test_mthp_falls_back_through_the_enabled_orders_only():
    sim = fragmented("mthp", huge_anon_orders_always="16K,64K")
    run(sim, [(5, STORE)])
    assert folio(sim, 5) == (4, 2)
    assert stats(sim, 4) == (0, 1) and stats(sim, 3) == (0, 0) and stats(sim, 2) == (1, 0)


def test_swap_in_under_a_policy_is_order_0():
    sim = make_sim(machine((256, 1, DRAM)), [Region("a", "anon", 1024)], anon_folio_orders="v2",
                   swap_size=2048, lru_batch_size=1)
    run(sim, seq(range(1024), STORE) + seq(range(0, 64), LOAD))
    c = counters(sim)
    assert c["pswpin"] > 0 and c["oom_kill"] == 0
    swapped_in = [p for p in range(64) if sim.state.pages.flags2[p] & 1]
    assert swapped_in and all(folio(sim, p)[1] == 0 for p in swapped_in)


@pytest.mark.parametrize("knob, value", [
    ("anon_folio_orders", "v3"), ("arch_wants_pte_order", 1), ("arch_wants_pte_order", 10),
    ("huge_anon_orders_always", "8K"), ("huge_anon_orders_always", 2), ("huge_anon_orders_always", "64K,4M"),
    ("huge_anon_orders_always", "16KB"),        # 16,000 bytes
])
def test_bad_knobs_are_refused(knob, value):
    with pytest.raises(ConfigError, match=knob):
        Kernel(**{knob: value})


def test_sizes_as_the_sysfs_directories_spell_them():
    def mask(v):
        return Kernel(huge_anon_orders_always=v).get("huge_anon_orders_always")
    assert mask("16kB,2048kB") == mask("16K,2M") == (1 << 2) | (1 << 9)
    assert mask("never") == 0
    assert repr(Kernel(anon_folio_orders="mthp", huge_anon_orders_always="64kB")) == \
        "Kernel(anon_folio_orders=mthp, huge_anon_orders_always=64K)"


# ---- deferred split ---------------------------------------------------------------------------------

@pytest.mark.parametrize("model", ["counts", "buddy"])
def test_a_brk_shrink_splits_the_folio_it_cuts(model):
    from test_buddy import check_buddy
    from test_processes import ctl, make
    from tierlab.core.mm import rss_pages
    from tierlab.workloads.base import Process
    from simkit import chunk
    sim = make(machine((4096, 1, DRAM)), [Region("heap", "anon", 64)], [Process("p")], lru_batch_size=1,
               anon_folio_orders="v2")
    if model == "buddy":
        sim = make_buddy(sim)
    s = sim.state
    sim.run(chunks=[chunk([ctl("mmap", 0, 32), (0, STORE), (16, STORE), ctl("brk", 0, 20)])])
    assert folio(sim, 0) == (0, 4) and [folio(sim, x) for x in (16, 17, 19)] == [(16, 0), (17, 0), (19, 0)]
    assert int(rss_pages(s)[0]) == 20 and sim.result().counters["pgfree"] == 12
    row = sim.result().mthp.set_index("order").loc[4]
    assert (row.split_deferred, row.split, row.split_failed) == (1, 1, 0)
    sim.run(chunks=[chunk([ctl("brk", 0, 32), (24, STORE)])])
    assert folio(sim, 24) == (24, 3)              # 16..19 are still populated
    if model == "buddy":
        check_buddy(s)


def make_buddy(sim):
    """The same simulation rebuilt with the buddy allocator."""
    from tierlab.api import Simulation
    return Simulation(sim.machine, sim.kernel, sim.workload, page_alloc_model="buddy")


# ---- zap costs --------------------------------------------------------------------------------------

@pytest.mark.parametrize("policy, ptes, rmaps, folios", [
    ("baseline-4k", 16, 16, 16),
    ("v1", 16, 1, 1),               # batch zap: one rmap removal per folio
    ("v2", 16, 16, 1),              # v2 dropped it: one per PTE, the folio freed once
    ("mthp", 16, 1, 1),             # mainline (6.9+) zaps a folio's PTEs in one batch
])
def test_munmap_charges_ptes_rmaps_and_folios(policy, ptes, rmaps, folios):
    from test_processes import ctl, make
    from tierlab.core.costs import COSTS
    from tierlab.workloads.base import Process
    from simkit import chunk
    sim = make(machine((4096, 1, DRAM)), [Region("heap", "anon", 16)], [Process("p")], lru_batch_size=1,
               anon_folio_orders=policy, huge_anon_orders_always="64K")
    sim.run(chunks=[chunk([ctl("mmap", 0, 16)] + [(i, STORE) for i in range(16)] + [ctl("munmap", 0)])])
    prof = sim.result().profile.set_index("function").ns
    c = {k: v[0] for k, v in COSTS.items()}
    assert prof["zap_pte_range"] == pytest.approx(ptes * c["zap_pte_ns"] + rmaps * c["zap_rmap_ns"])
    assert prof["free_pages_and_swap_cache"] == pytest.approx(folios * c["free_folio_ns"])
    # the two calls' entries and their VMA work
    assert prof["do_syscall_64"] == pytest.approx(2 * c["syscall_ns"])
    assert prof["mmap_region"] == pytest.approx(2 * c["vma_op_ns"])
    assert sim.result().counters["pgfree"] == 16


@pytest.mark.parametrize("policy, faults, ptes_beyond", [
    ("baseline-4k", 16, 0),
    ("v1", 1, 15),                  # one fault maps the 64 KiB folio: set_ptes() writes its 16 PTEs
    ("mthp", 1, 15),
])
def test_a_fault_charges_once_per_folio_and_set_ptes_per_pte(policy, faults, ptes_beyond):
    from test_processes import ctl, make
    from tierlab.core.costs import COSTS
    from tierlab.workloads.base import Process
    from simkit import chunk
    sim = make(machine((4096, 1, DRAM)), [Region("heap", "anon", 16)], [Process("p")], lru_batch_size=1,
               anon_folio_orders=policy, huge_anon_orders_always="64K")
    sim.run(chunks=[chunk([ctl("mmap", 0, 16)] + [(i, STORE) for i in range(16)])])
    prof = sim.result().profile.set_index("function").ns
    c = {k: v[0] for k, v in COSTS.items()}
    assert sim.result().counters["pgfault"] == faults
    assert prof["handle_mm_fault"] == pytest.approx(faults * c["fault_ns"] + ptes_beyond * c["set_pte_ns"])
    assert prof["clear_page_erms"] == pytest.approx(16 * c["zero_page_ns"])


def test_swap_out_splits_a_folio_that_swap_has_no_room_for():
    """shrink_folio_list(): add_to_swap() of a 64 KiB folio needs 16 entries. With swap for 40
    pages, two folios go out whole (swpout), the third finds 8 entries: it is split
    (swpout_fallback, split), 8 of its pages go out and the other 8 are activated
    (activate_locked_split). Swap is then full, and the 640-page VMA on a 512-page node OOMs."""
    sim = sim_of("mthp", pages=640, nodes=((512, 1, DRAM),), huge_anon_orders_always="64K",
                 swap_size=f"{40 * 4}KiB")
    with pytest.raises(ConfigError, match="out of memory"):
        run(sim, seq(range(640), STORE))
    row = sim.result().mthp.set_index("order").loc[4]
    assert (int(row.swpout), int(row.swpout_fallback), int(row.split)) == (2, 1, 1)
    c = counters(sim)
    assert c["pswpout"] == 40 and int(sim.state.sys[0].nr_swap_used) == 40
    assert c["pgactivate"] >= 8
    assert c["thp_swpout"] == c["thp_swpout_fallback"] == 0      # PMD size only
    # pages in swap per 64 KiB range: two whole folios and the split one's 8
    swapped = (sim.state.pages.flags2[:640].reshape(-1, 16) & st.F2_SWAPPED != 0).sum(axis=1)
    assert sorted(swapped[swapped > 0].tolist()) == [8, 16, 16]
