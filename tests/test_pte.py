"""PTE state (memory.py): present, writable, dirty, young, PROT_NONE per mapped folio, as v6.7 sets
them -- the zero page on an anon read fault and the copy on the store after it, write-protect faults
on read-only PTEs (do_wp_page), the PROT_NONE PTE of the NUMA scanner and do_numa_page's restore,
and the PTE a migration rebuilds (remove_migration_pte). Hand-worked from mm/memory.c,
mm/mprotect.c and mm/migrate.c."""
from __future__ import annotations

from simkit import CXL, DRAM, LOAD, STORE, counters, machine, make_sim, pte_state, run, seq
from tierlab.workloads.base import Region

RO_CLEAN = {"present": True, "writable": False, "dirty": False, "young": True, "protnone": False}
RW_DIRTY = {"present": True, "writable": True, "dirty": True, "young": True, "protnone": False}


def one_node(region, **knobs):
    return make_sim(machine((256, 1, DRAM)), [region], **knobs)


def test_anon_read_fault_maps_the_zero_page_then_a_store_copies_it():
    sim = one_node(Region("a", "anon", 8))
    run(sim, [(0, LOAD)])
    assert pte_state(sim, 0) == {"present": "zero", "writable": False, "dirty": False, "young": False,
                                 "protnone": False}
    assert counters(sim)["pgfault"] == 1 and counters(sim)["pgalloc"] == 0
    run(sim, [(0, STORE)])
    # do_wp_page on the zero page: wp_page_copy allocates a zeroed folio, writable and dirty
    c = counters(sim)
    assert c["pgfault"] == 2 and c["pgalloc"] == 1
    assert pte_state(sim, 0) == RW_DIRTY
    run(sim, [(0, STORE), (0, LOAD)])
    assert counters(sim)["pgfault"] == 2          # a writable PTE: no more faults


def test_store_to_a_fresh_anon_page_maps_it_writable_and_dirty():
    sim = one_node(Region("a", "anon", 8))
    run(sim, [(3, STORE)])
    assert pte_state(sim, 3) == RW_DIRTY
    assert counters(sim)["pgfault"] == 1


def test_mapped_file_read_fault_is_read_only_then_a_store_takes_a_write_protect_fault():
    sim = one_node(Region("f", "file", 8, mapped=True))
    run(sim, [(2, LOAD)])
    assert pte_state(sim, 2) == RO_CLEAN
    c = counters(sim)
    assert c["pgfault"] == 1 and c["pgmajfault"] == 1
    run(sim, [(2, STORE)])
    # wp_page_shared: page_mkwrite, the PTE writable, the store dirties it; one more (minor) fault
    assert pte_state(sim, 2) == RW_DIRTY
    c = counters(sim)
    assert c["pgfault"] == 2 and c["pgmajfault"] == 1 and c["pgalloc"] == 1


def test_first_touch_of_a_cached_file_page_through_mmap():
    sim = one_node(Region("f", "file", 8, mapped=True))
    run(sim, [(1, 2 | 8)])                          # read() brings it into the page cache, unmapped
    assert pte_state(sim, 1)["present"] is False
    run(sim, [(1, STORE)])                          # do_shared_fault: writable and dirty at once
    assert pte_state(sim, 1) == RW_DIRTY
    assert counters(sim)["pgfault"] == 1


def test_swap_in_on_a_read_fault_is_read_only():
    # one tiny node with swap: 200 anon pages stored, the early ones swapped out
    sim = make_sim(machine((128, 1, DRAM)), [Region("a", "anon", 200)], swap_size=1024, lru_batch_size=1)
    run(sim, seq(range(200), STORE))
    assert counters(sim)["pswpout"] > 0
    s = sim.state
    swapped = next(p for p in range(200) if not s.pages.flags2[p] & 1)
    before = counters(sim)["pgfault"]
    run(sim, [(swapped, LOAD)])
    assert pte_state(sim, swapped) == RO_CLEAN      # do_swap_page without FAULT_FLAG_WRITE (6.7)
    run(sim, [(swapped, STORE)])                    # the exclusive anon page is reused
    assert pte_state(sim, swapped) == RW_DIRTY
    assert counters(sim)["pgfault"] == before + 2


def tiering(**knobs):
    """A 64-page DRAM node with the CPU and a CPU-less CXL node; 128 anon pages (default policy:
    the NUMA scanner walks it) stored in order spill to CXL once DRAM is at its LOW watermark.
    Returns the sim and a page on CXL."""
    sim = make_sim(machine((64, 1, DRAM), (512, 0, CXL)), [Region("a", "anon", 128)], lru_batch_size=1,
                   scan_delay_ms=0, scan_period_min_ms=1, scan_size_mb=1, **knobs)
    run(sim, seq(range(128), STORE))
    far = [p for p in range(128) if int(sim.state.pages.node[p]) == 1]
    assert len(far) > 32
    return sim, far[-1]


def test_numa_scan_drops_the_write_bit_and_keeps_dirty_and_young():
    sim, x = tiering()
    assert pte_state(sim, x) == RW_DIRTY
    sim.set_knobs(numa_balancing=2)
    # loads of page 0 only (on DRAM), long enough for a scan pass (at a scheduler tick, every 4 ms)
    run(sim, seq([0] * 100_000, LOAD))
    assert counters(sim)["numa_pte_updates"] > 0
    assert pte_state(sim, x) == {"present": True, "writable": False, "dirty": True, "young": True,
                                 "protnone": True}


def test_hint_fault_promotion_leaves_a_read_only_pte_and_a_store_takes_a_wp_fault():
    sim, x = tiering()
    # lower watermarks: DRAM, filled to its old LOW watermark, now has room above HIGH for a promotion
    sim.set_knobs(numa_balancing=2, min_free_kbytes=128)
    run(sim, seq([0] * 100_000, LOAD))
    assert pte_state(sim, x)["protnone"]
    assert sim.state.pgdat["free"][0] > sim.state.pgdat["wmark"][0][2] + 1
    c0 = counters(sim)
    run(sim, [(x, LOAD)])
    c1 = counters(sim)
    # the hint fault promoted it (hot: scanned a few ms ago); remove_migration_pte
    # rebuilt the PTE from the PROT_NONE one's migration entry: read-only, dirty as it was
    assert c1["numa_hint_faults"] == c0["numa_hint_faults"] + 1
    assert c1["pgpromote_success"] == c0["pgpromote_success"] + 1 and int(sim.state.pages.node[x]) == 0
    assert pte_state(sim, x) == {"present": True, "writable": False, "dirty": True, "young": True,
                                 "protnone": False}
    run(sim, [(x, STORE)])
    assert pte_state(sim, x) == RW_DIRTY
    assert counters(sim)["pgfault"] == c1["pgfault"] + 1


def test_hint_fault_without_migration_restores_a_writable_anon_pte():
    # DRAM is at its LOW watermark: no free-space shortcut, and migrate_misplaced_folio_prepare()
    # refuses (it wants HIGH + nr free on DRAM), so the folio stays on CXL
    sim, x = tiering()
    sim.set_knobs(numa_balancing=2, hot_threshold_ms=1)
    run(sim, seq([0] * 20000, LOAD) + seq([1] * 30000, LOAD))
    assert pte_state(sim, x)["protnone"]
    c0 = counters(sim)
    run(sim, [(x, LOAD)])
    c1 = counters(sim)
    assert c1["numa_hint_faults"] == c0["numa_hint_faults"] + 1
    assert c1["pgpromote_success"] == c0["pgpromote_success"] and int(sim.state.pages.node[x]) == 1
    # do_numa_page's out_map: can_change_pte_writable() for an exclusive anon folio
    assert pte_state(sim, x) == RW_DIRTY
    assert c1["pgfault"] == c0["pgfault"] + 1     # handle_mm_fault() counts the hint fault too


def test_demotion_keeps_writable_dirty_and_young():
    sim = make_sim(machine((256, 1, DRAM), (1024, 0, CXL)), [Region("a", "anon", 400, "bind", (0,))],
                   min_free_kbytes=640, demotion_enabled=1, lru_batch_size=1)
    run(sim, seq(range(400), STORE))
    s = sim.state
    demoted = [p for p in range(400) if int(s.pages.node[p]) == 1]
    assert demoted
    for p in demoted:
        st = pte_state(sim, p)
        # try_to_migrate_one made a writable migration entry; reclaim had cleared young
        assert st["present"] is True and st["writable"] and st["dirty"] and not st["protnone"]
