"""TLB flush counting (core/tlb.py), hand-worked from arch/x86/mm/tlb.c and mm/rmap.c:

- flush_tlb_mm_range(): more than 33 pages is a full flush; another CPU in mm_cpumask makes it one
  nr_tlb_remote_flush with one nr_tlb_remote_flush_received per other CPU that is not lazy (runs a
  task: an idle CPU or kswapd's keeps the mm loaded lazily and is skipped); the sender's own flush
  counts nr_tlb_local_flush_all (full) or nr_tlb_local_flush_one per page, unless it is lazy;
- an unmap with TTU_BATCH_FLUSH: an unmapped folio adds nothing, nor a PROT_NONE one unless a NUMA
  scan of its mm has its mmu_gather open (pte_accessible); a folio of an mm that
  ran only on the sender is flushed at once, one page per PTE (ptep_clear_flush); otherwise the mm's
  CPUs join the batch, and try_to_unmap_flush() sends one full flush and empties it; a migration
  without 6.4's batched flushing (migrate_batch_flush=0) flushes each PTE as it goes;
- MIGRC: which folios it defers, the order of migrate_pages_batch's end (pending CPUs into
  migrc_ubc, the batch's flush, then its sources held), each release (a flush covering the CPUs,
  migrc_flush_free_folios from a write-protect fault, an allocation that fails its watermark or
  finds the free lists short), and the held pages counted as free by the watermarks only.
"""
from __future__ import annotations

import numpy as np
import pytest

from simkit import CXL, DRAM, STORE, counters, machine, make_sim, run, seq
from tierlab.api import run_config
from tierlab.core import state as st
from tierlab.core.params import P
from tierlab.core.mmzone import take_pages, zone_alloc_ok, zone_watermark_ok
from tierlab.core.tlb import (
    MIGRC_UBC, TLB_UBC, flush_tlb_mm_range, folio_tlb_mm, migrc_batch_flush, migrc_can_defer, migrc_defer,
    migrc_flush_free_folios, tlbbatch_add, try_to_unmap_flush,
)
from tierlab.core.vmstat import Vm
from tierlab.workloads.base import Region

NAMES = ("nr_tlb_remote_flush", "nr_tlb_remote_flush_received", "nr_tlb_local_flush_all",
         "nr_tlb_local_flush_one")


def _sim(**knobs):
    # two nodes, 64 anon pages stored once by one task: CPU slots 0 (the task's, node 0), 1 (node
    # 0's kswapd) and 2 (node 1's kswapd)
    sim = make_sim(machine((4096, 4, DRAM), (4096, 4, CXL)), [Region("a", "anon", 64)], **knobs)
    run(sim, seq(range(64), STORE))
    return sim


def _set_mask(s, cpus, lazy=()):
    """mm 0 ran on `cpus`; each of them runs task 0 now except the `lazy` ones, which run a
    kswapd (CPU 0, the task's, included: kswapd may share it). Each has mm 0 loaded and its TLB at
    the mm's generation, as the switch to it leaves it (sched.switch_mm_irqs_off)."""
    s.mm[0]["cpumask"][:] = 0
    for c in cpus:
        s.mm[0]["cpumask"][c >> 6] |= np.uint64(1) << np.uint64(c & 63)
    s.cpu["curr"][:] = -1
    for c in cpus:
        s.cpu["curr"][c] = s.task.shape[0] if c in lazy else 0
        s.cpu["loaded_mm"][c] = 0
        s.cpu["tlb_gen"][c] = s.mm[0]["tlb_gen"]
        s.cpu["tlb_lazy"][c] = int(c in lazy)


def _tlb(sim, before):
    c = counters(sim)
    return tuple(c[n] - before[n] for n in NAMES)


@pytest.mark.parametrize("cpus, sender, pages, expect", [
    ((0,), 0, 5, (0, 0, 0, 5)),          # the mm ran only here: 5 single-page local flushes
    ((0,), 0, 33, (0, 0, 0, 33)),        # the ceiling itself is still a ranged flush
    ((0,), 0, 34, (0, 0, 1, 0)),         # beyond it: one full local flush
    ((0, 1, 2), 0, 1, (1, 2, 0, 1)),     # one shootdown, received by CPUs 1 and 2, plus the local page
    ((0, 1, 2), 0, 100, (1, 2, 1, 0)),
    ((1, 2), 0, 1, (1, 2, 0, 0)),        # the sender is not in the mask: no local flush
    ((0,), 1, 1, (1, 1, 0, 0)),          # kswapd's CPU sends: CPU 0 receives
])
def test_flush_tlb_mm_range_counts_as_x86_does(cpus, sender, pages, expect):
    sim = _sim()
    s = sim.state
    _set_mask(s, cpus)
    if sender not in cpus:
        s.cpu["curr"][sender] = 0
    before = counters(sim)
    others = flush_tlb_mm_range(s, 0, sender, 0, pages)
    assert _tlb(sim, before) == expect
    assert others == expect[1]


def test_a_cpu_behind_by_more_than_the_flush_flushes_whole():
    """flush_tlb_func's generations: CPU 0 is up to date; three PTEs go into an unmap batch
    (arch_tlbbatch_add_pending: three generations). A one-page flush_tlb_mm_range() now is the
    fourth, not the CPU's next: it flushes whole (nr_tlb_local_flush_all, not _one), which brings it
    up to date, so the batch's own flush afterwards finds nothing to do on it."""
    sim = _sim()
    s = sim.state
    _set_mask(s, (0,))
    g = int(s.mm[0]["tlb_gen"])
    before = counters(sim)
    flush_tlb_mm_range(s, 0, 0, 0, 1)
    assert _tlb(sim, before) == (0, 0, 0, 1)           # the next generation: one page
    s.mm[0]["tlb_gen"] += 3
    flush_tlb_mm_range(s, 0, 0, 0, 1)
    assert _tlb(sim, before) == (0, 0, 1, 1)           # behind by more: whole
    assert int(s.cpu["tlb_gen"][0]) == g + 5
    batch = s.tlb_ubc[TLB_UBC]
    batch[0] = np.uint64(0b1)
    try_to_unmap_flush(s, batch, 0)
    assert _tlb(sim, before) == (0, 0, 1, 1)           # already up to date: nothing


def test_an_unmap_batch_flushes_only_the_cpus_behind():
    """arch_tlbbatch_flush carries no generation: each CPU reached flushes whole when it is behind
    its mm's generation, nothing otherwise, and its receipt counts either way."""
    sim = _sim()
    s = sim.state
    _set_mask(s, (0, 2))
    batch = s.tlb_ubc[TLB_UBC]
    before = counters(sim)
    batch[0] = np.uint64(0b101)
    assert try_to_unmap_flush(s, batch, 0) == 1
    assert _tlb(sim, before) == (1, 1, 0, 0)           # both up to date: received, nothing flushed
    tlbbatch_add(s, sim.p, batch, 0, 0, 1, 0, 0)           # a PTE deferred: a generation, CPUs 0 and 2
    assert try_to_unmap_flush(s, batch, 0) == 1
    assert _tlb(sim, before) == (2, 2, 1, 0)
    assert list(s.cpu["tlb_gen"][[0, 2]]) == [int(s.mm[0]["tlb_gen"])] * 2


def test_flush_tlb_batched_pending_flushes_the_whole_mm_once_per_batch():
    """mm->tlb_flush_batched: kswapd (CPU 1, lazy) batches a PTE of the mm, which counts it pending,
    and flushes its batch (one shootdown, received by CPUs 0 and 2). The task on CPU 0 then enters a
    page table of the mm (change_pte_range, zap_pte_range): flush_tlb_batched_pending() sees the
    batch not yet met and flushes the whole mm (a shootdown received by CPU 2, CPU 0's full local
    flush; lazy CPU 1 skipped), once: the next call finds nothing pending."""
    from tierlab.core.tlb import flush_tlb_batched_pending
    sim = _sim()
    s, p = sim.state, sim.p
    _set_mask(s, (0, 1, 2), lazy=(1,))
    batch = s.tlb_ubc[TLB_UBC]
    before = counters(sim)
    assert flush_tlb_batched_pending(s, p, 0, 0) == 0.0         # nothing batched yet
    tlbbatch_add(s, p, batch, 0, 0, 1, 1, 0)
    assert try_to_unmap_flush(s, batch, 1) == 2
    assert _tlb(sim, before) == (1, 2, 0, 0)
    assert flush_tlb_batched_pending(s, p, 0, 0) > 0.0
    assert _tlb(sim, before) == (2, 3, 1, 0)
    assert flush_tlb_batched_pending(s, p, 0, 0) == 0.0
    assert _tlb(sim, before) == (2, 3, 1, 0)


def test_the_numa_scan_meets_a_batch_once_per_page_table():
    """While CPU 2 scans the mm (window [1000, 2000), four page tables of 250 ns each), PTEs batched
    by kswapd (CPU 1) are met at the scan's next page table: one whole-mm flush from CPU 2 per page
    table in which batching happened (at 1100 and 1300; the one at 1200 shares 1100's page table),
    after which nothing is left pending. After the window (its end is exclusive) a batch waits for
    the next page-table walk of the mm."""
    from tierlab.core.numa_balancing import open_scan_window
    from tierlab.core.tlb import flush_tlb_batched_pending
    sim = _sim()
    s, p = sim.state, sim.p
    _set_mask(s, (0, 1, 2), lazy=(1,))
    batch = s.tlb_ubc[TLB_UBC]
    open_scan_window(s, 0, 2, 1000, 1000.0, 2048)
    before = counters(sim)
    tlbbatch_add(s, p, batch, 0, 0, 1, 1, 1100)
    assert _tlb(sim, before) == (1, 1, 1, 0)          # CPU 2's flush: CPU 0 receives it
    tlbbatch_add(s, p, batch, 0, 1, 1, 1, 1200)
    assert _tlb(sim, before) == (1, 1, 1, 0)
    tlbbatch_add(s, p, batch, 0, 2, 1, 1, 1300)
    assert _tlb(sim, before) == (2, 2, 2, 0)
    assert flush_tlb_batched_pending(s, p, 0, 0) == 0.0
    tlbbatch_add(s, p, batch, 0, 3, 1, 1, 2000)
    assert _tlb(sim, before) == (2, 2, 2, 0)
    assert flush_tlb_batched_pending(s, p, 0, 0) > 0.0
    assert _tlb(sim, before) == (3, 3, 3, 0)


def test_a_cpu_back_from_a_kernel_thread_catches_up_uncounted():
    """switch_mm_irqs_off: kswapd on the CPU leaves it lazy with the mm loaded; the switch back to
    the task flushes its TLB (x86 does not count it) and brings it to the mm's generation, so a
    flush of what happened meanwhile finds nothing to do."""
    from tierlab.core.sched import switch_mm_irqs_off
    sim = _sim()
    s = sim.state
    _set_mask(s, (0,))
    T = s.task.shape[0]
    switch_mm_irqs_off(s, 0, T)                        # kswapd runs on CPU 0
    assert s.cpu["tlb_lazy"][0] == 1
    s.mm[0]["tlb_gen"] += 7
    s.tlbs.need_flush[0] = 0
    switch_mm_irqs_off(s, 0, 0)                        # back to the task
    assert s.cpu["tlb_lazy"][0] == 0 and s.cpu["tlb_gen"][0] == s.mm[0]["tlb_gen"]
    assert s.tlbs.need_flush[0] == 1                   # its TLB is flushed at its next translation
    s.cpu["curr"][0] = 0
    before = counters(sim)
    batch = s.tlb_ubc[TLB_UBC]
    batch[0] = np.uint64(0b1)
    try_to_unmap_flush(s, batch, 0)
    assert _tlb(sim, before) == (0, 0, 0, 0)


@pytest.mark.parametrize("lazy, expect", [
    ((2,), (1, 1, 1, 0)),       # CPU 2 runs a kswapd: the shootdown is counted, CPU 2 is not sent it
    ((0,), (1, 2, 0, 0)),       # the sender is lazy (kswapd's CPU): no local flush counted
    ((1, 2), (1, 0, 1, 0)),     # every other CPU lazy: still one nr_tlb_remote_flush
])
def test_lazy_cpus_are_skipped(lazy, expect):
    sim = _sim()
    s = sim.state
    _set_mask(s, (0, 1, 2), lazy=lazy)
    before = counters(sim)
    others = flush_tlb_mm_range(s, 0, 0, 0, 100)
    assert _tlb(sim, before) == expect
    assert others == expect[1]


def test_an_idle_cpu_is_lazy_but_a_task_between_chunks_is_not():
    sim = _sim()
    s = sim.state
    _set_mask(s, (0, 1, 2))
    s.cpu["curr"][:] = -1                # off the runqueue: CPU 0's task between two chunks
    before = counters(sim)
    flush_tlb_mm_range(s, 0, 1, 0, 100)     # from CPU 1: CPU 0 receives, CPU 2 (no task) is idle
    assert _tlb(sim, before) == (1, 1, 0, 0)
    s.task["dead"][0] = 1                # once its task has exited, CPU 0 is idle too
    flush_tlb_mm_range(s, 0, 1, 0, 100)
    assert _tlb(sim, before) == (2, 1, 0, 0)


def test_received_flushes_are_charged_to_the_receiving_cpus_node():
    sim = _sim()
    s = sim.state
    assert s.cpu["node"].tolist() == [0, 0, 1]
    _set_mask(s, (0, 1, 2))
    flush_tlb_mm_range(s, 0, 0, 0, 1)
    recv = s.counters[:, Vm.NR_TLB_REMOTE_FLUSH_RECEIVED]
    assert recv.tolist() == [1, 1]                   # CPU 1 on node 0, CPU 2 on node 1
    assert s.counters[:, Vm.NR_TLB_REMOTE_FLUSH].tolist() == [1, 0]   # the sender's node


def test_unmap_batch_skips_inaccessible_ptes_and_flushes_once():
    sim = _sim()
    s = sim.state
    _set_mask(s, (0, 2))
    batch = s.tlb_ubc[TLB_UBC]
    assert not batch.any()                                    # empty between calls
    # a PROT_NONE PTE (the NUMA scanner's) needs no flush: commit 4d4b6d66db
    s.pages.flags[10] |= st.PG_PROTNONE
    assert folio_tlb_mm(s, 10, 0) == st.NO_MM
    # a page no page table maps (e.g. read()-only page cache) neither
    s.pages.flags2[11] &= ~st.F2_MAPPED
    assert folio_tlb_mm(s, 11, 0) == st.NO_MM
    assert folio_tlb_mm(s, 12, 0) == 0
    before = counters(sim)
    for x in (10, 11, 12, 13, 14):
        tlbbatch_add(s, sim.p, batch, folio_tlb_mm(s, x, 0), x, 1, 1, 0)   # sender: CPU 1 (node 0's kswapd)
    assert _tlb(sim, before) == (0, 0, 0, 0)                  # deferred
    assert try_to_unmap_flush(s, batch, 1) == 2
    assert _tlb(sim, before) == (1, 2, 0, 0)                  # one full flush to CPUs 0 and 2
    assert not batch.any()
    assert try_to_unmap_flush(s, batch, 1) == 0               # an empty batch sends nothing
    assert _tlb(sim, before) == (1, 2, 0, 0)


def test_unmap_from_the_only_cpu_flushes_each_pte_at_once():
    sim = _sim()
    s = sim.state
    _set_mask(s, (0,))
    batch = s.tlb_ubc[TLB_UBC]
    before = counters(sim)
    tlbbatch_add(s, sim.p, batch, folio_tlb_mm(s, 20, 0), 20, 4, 0, 0)   # a 4-page folio, direct reclaim on CPU 0
    assert _tlb(sim, before) == (0, 0, 0, 4)                  # ptep_clear_flush: one page per PTE
    assert not batch.any()


def test_migration_without_batched_flushing_shoots_down_each_pte_as_it_goes():
    """migrate_batch_flush=0 (before 6.4's "migrate_pages: batch flushing TLB"): a migrated folio's
    PTEs are flushed one page each as they are cleared, and the shootdowns are charged to the
    sender; with 1 (the default) the folio's CPUs join the batch and nothing is sent yet."""
    from tierlab.core.tlb import try_to_migrate_tlb
    sim = _sim(migrate_batch_flush=0)
    s, p = sim.state, sim.p
    _set_mask(s, (0, 2))
    batch = s.tlb_ubc[TLB_UBC]
    before = counters(sim)
    cost = try_to_migrate_tlb(s, p, batch, folio_tlb_mm(s, 30, 0), 30, 2, 1, False, 0)   # 2 PTEs, from kswapd's CPU 1
    assert _tlb(sim, before) == (2, 4, 0, 0)                  # a one-page shootdown per PTE, to CPUs 0 and 2
    assert not batch.any()
    per_flush = p[P.TLB_SHOOTDOWN_NS] + 2 * p[P.TLB_IPI_NS]
    assert cost == 2 * per_flush
    sim = _sim()
    s, p = sim.state, sim.p
    _set_mask(s, (0, 2))
    batch = s.tlb_ubc[TLB_UBC]
    before = counters(sim)
    assert try_to_migrate_tlb(s, p, batch, folio_tlb_mm(s, 30, 0), 30, 2, 1, False, 0) == 0.0
    assert _tlb(sim, before) == (0, 0, 0, 0) and batch.any()      # deferred to the batch's one flush


def test_demotion_without_batched_flushing_sends_a_shootdown_per_page():
    base, unbatched = _demotion("mmap"), _demotion("mmap", migrate_batch_flush=0)
    b, u = base.counters, unbatched.counters
    assert u["pgdemote_kswapd"] > 0 and b["nr_tlb_remote_flush"] > 0
    assert u["nr_tlb_remote_flush"] > 4 * b["nr_tlb_remote_flush"]


def test_migrc_needs_batched_flushing():
    from tierlab.errors import ConfigError
    from tierlab.kernel import Kernel
    with pytest.raises(ConfigError, match="migrate_batch_flush"):
        Kernel(migrc="on", migrate_batch_flush=0).check_combination()


def test_migrc_with_migration_entry_ad_warns_with_the_reason():
    """#33: migrc=on under the default migration_entry_ad=1 is valid (clean read-only mappings are
    deferred) but for memory written first it does nothing; the one validator says so."""
    import warnings
    from tierlab.errors import LimitedEffectWarning
    from tierlab.kernel import Kernel
    with pytest.warns(LimitedEffectWarning, match="never deferred"):
        Kernel(migrc="on").check_combination()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Kernel(migrc="on", migration_entry_ad=0).check_combination()
        Kernel().check_combination()


def _demotion(io, **knobs):
    """kswapd demoting a file the task reads (io=read) or loads through a mapping (io=mmap)."""
    return run_config({"machine": "qemu-2node", "workload": "random-read", "scale": 64, "seed": 1,
                       "params": {"file_size": "2GiB", "accesses": "100000", "io": io, "policy": "bind:0"},
                       "knobs": {"demotion_enabled": 1, **knobs}})


def _tlb_and_demoted(io):
    res = _demotion(io)
    return {n: int(res.counters[n]) for n in NAMES}, int(res.counters["pgdemote_kswapd"])


def test_demoting_read_only_page_cache_flushes_nothing_and_mapped_pages_shoot_down():
    c, demoted = _tlb_and_demoted("read")
    assert demoted > 0 and c == dict.fromkeys(NAMES, 0)       # page cache without PTEs
    c, demoted = _tlb_and_demoted("mmap")
    # kswapd's CPU never ran the task's mm: each shrink batch that demoted a mapped folio sends one
    # full flush to the task's one CPU; kswapd flushes nothing locally. The task sleeps through
    # each major fault's read, its CPU idle and so lazy: flush_tlb_multi skips it then, and it
    # receives only the flushes sent while it runs
    assert demoted > 0 and c["nr_tlb_remote_flush"] > 0
    assert 0 < c["nr_tlb_remote_flush_received"] < c["nr_tlb_remote_flush"]
    assert c["nr_tlb_remote_flush"] <= demoted


# ---- MIGRC -------------------------------------------------------------------------------------

def _read_only_clean(s, x):
    """The folio's PTE as after a hint-fault promotion with clean migration entries: present,
    read-only, clean."""
    s.pages.flags2[x] &= ~st.F2_PTE_WRITE
    s.pages.flags[x] &= ~st.PG_DIRTY


def test_migrc_defers_only_small_read_only_clean_folios_whose_flush_is_deferred():
    sim = _sim(migrc="on")
    s, p = sim.state, sim.p
    _set_mask(s, (0, 2))
    for x in (20, 21, 22, 23):
        _read_only_clean(s, x)
    s.pages.flags2[21] |= st.F2_PTE_WRITE            # writable: can_migrc_fail
    s.pages.flags[22] |= st.PG_DIRTY                 # dirty (set_tlb_ubc_flush_pending's `writable`)
    s.pages.flags[23] |= st.PG_PROTNONE              # inaccessible: no flush needed at all
    assert migrc_can_defer(s, p, 20, folio_tlb_mm(s, 20, 0), 1, 1)
    assert not migrc_can_defer(s, p, 20, folio_tlb_mm(s, 20, 0), 4, 1)    # a large folio
    for x in (21, 22, 23):
        assert not migrc_can_defer(s, p, x, folio_tlb_mm(s, x, 0), 1, 1)
    _set_mask(s, (0,))
    # the mm ran only on the sender: ptep_clear_flush flushes at once, the read-only batch stays empty
    assert not migrc_can_defer(s, p, 20, folio_tlb_mm(s, 20, 0), 1, 0)
    off = _sim()
    _set_mask(off.state, (0, 2))
    _read_only_clean(off.state, 20)
    assert not migrc_can_defer(off.state, off.p, 20, 0, 1, 1)


def _held(s):
    return s.pgdat["migrc_pending_nr"].tolist()


def test_migrc_batch_end_holds_sources_until_a_flush_covers_their_cpus():
    sim = _sim(migrc="on")
    s = sim.state
    _set_mask(s, (0, 2))
    batch = s.tlb_ubc[TLB_UBC]
    free0 = int(s.pgdat["free"][0])
    before = counters(sim)
    # a demotion batch of 3 deferred folios from node 0 (kswapd on CPU 1 sends)
    for _ in range(3):
        migrc_defer(s, 0, 0)
    s.pgdat["migrc_batch_nr"][0] += 3                # what move_isolated_folio(keep_src) books
    assert migrc_batch_flush(s, batch, 1) == 0
    assert _tlb(sim, before) == (0, 0, 0, 0)         # no shootdown
    assert _held(s) == [3, 0] and int(s.pgdat["free"][0]) == free0
    assert bin(int(s.tlb_ubc[MIGRC_UBC][0])) == bin(0b101)
    # a flush of CPU 2 only leaves CPU 0 pending: still held
    batch[0] = np.uint64(0b100)
    try_to_unmap_flush(s, batch, 1)
    assert _held(s) == [3, 0] and int(s.tlb_ubc[MIGRC_UBC][0]) == 0b1
    # one covering CPU 0 frees them (migrc_flush_end)
    batch[0] = np.uint64(0b1)
    try_to_unmap_flush(s, batch, 1)
    assert _held(s) == [0, 0] and int(s.pgdat["free"][0]) == free0 + 3
    assert not s.tlb_ubc[MIGRC_UBC].any()
    assert counters(sim)["pgfree"] - before["pgfree"] == 3


def test_migrc_a_batch_that_also_flushes_keeps_its_own_sources_for_the_next_flush():
    """migrc_add_pending_ubc before the batch's flush, migrc_add_pending_folios after it: a flush
    that covers the deferred CPUs frees the earlier sources, not this batch's; they wait (with
    migrc_ubc now empty) for the next flush of anything."""
    sim = _sim(migrc="on")
    s = sim.state
    _set_mask(s, (0, 2))
    s.pgdat["migrc_pending_nr"][0] = 5               # held from an earlier batch
    s.pgdat["free"][0] -= 5
    batch = s.tlb_ubc[TLB_UBC]
    migrc_defer(s, 0, 0)
    s.pgdat["migrc_batch_nr"][0] += 1
    tlbbatch_add(s, sim.p, batch, 0, 0, 1, 1, 0)           # a dirty folio in the same batch
    before = counters(sim)
    assert migrc_batch_flush(s, batch, 1) == 2
    assert _tlb(sim, before) == (1, 2, 0, 0)
    assert _held(s) == [1, 0] and not s.tlb_ubc[MIGRC_UBC].any()
    batch[0] = np.uint64(0b1)
    try_to_unmap_flush(s, batch, 1)
    assert _held(s) == [0, 0]


def test_migrc_flush_free_folios_sends_the_deferred_flush_from_the_faulting_cpu():
    sim = _sim(migrc="on")
    s = sim.state
    _set_mask(s, (0, 2))
    assert migrc_flush_free_folios(s, 0) == 0        # nothing held: nothing sent
    s.pgdat["migrc_pending_nr"][0] = 2
    s.pgdat["free"][0] -= 2
    s.tlb_ubc[MIGRC_UBC][0] = np.uint64(0b101)
    s.mm[0]["tlb_gen"] += 2                          # the two deferrals' arch_tlbbatch_add_pending
    before = counters(sim)
    assert migrc_flush_free_folios(s, 0) == 1        # CPU 0 faults: CPU 2 receives, CPU 0 flushes itself
    assert _tlb(sim, before) == (1, 1, 1, 0)
    assert _held(s) == [0, 0] and not s.tlb_ubc[MIGRC_UBC].any()


def test_migrc_held_pages_count_for_watermarks_and_are_freed_on_demand():
    sim = _sim(migrc="on")
    s = sim.state
    _set_mask(s, (0, 2))
    s.sys[0].current = 0                             # the allocating task, on CPU 0
    wm = s.pgdat["wmark"][0]
    low = int(wm[st.WMARK_LOW])
    # free just below LOW, with held sources: the watermark passes on them (no flush)
    s.pgdat["migrc_pending_nr"][0] = 10
    s.pgdat["free"][0] = low - 1
    s.tlb_ubc[MIGRC_UBC][0] = np.uint64(0b101)
    s.mm[0]["tlb_gen"] += 10                         # their deferrals' arch_tlbbatch_add_pending
    before = counters(sim)
    assert zone_watermark_ok(s, 0, 1, st.WMARK_LOW)
    assert zone_alloc_ok(s, 0, 1, st.WMARK_LOW)
    assert _tlb(sim, before) == (0, 0, 0, 0) and _held(s) == [10, 0]
    # a check that fails with held sources in the zone flushes and frees them, then fails again
    s.pgdat["free"][0] = low - 20
    assert not zone_alloc_ok(s, 0, 1, st.WMARK_LOW)
    assert _tlb(sim, before) == (1, 1, 1, 0)
    assert _held(s) == [0, 0] and int(s.pgdat["free"][0]) == low - 10
    # the free lists short of the allocation while the watermark passed on held pages: freed first
    s.pgdat["migrc_pending_nr"][0] = 4
    s.pgdat["free"][0] = 0
    s.tlb_ubc[MIGRC_UBC][0] = np.uint64(0b101)
    s.mm[0]["tlb_gen"] += 4
    take_pages(s, 0, 30, 1)
    assert _held(s) == [0, 0] and int(s.pgdat["free"][0]) == 3
    assert _tlb(sim, before) == (2, 2, 2, 0)


def test_migrc_removes_the_shootdowns_of_demoting_a_read_only_mapped_file():
    """kswapd demotes a file the task maps read-only (clean PTEs): v6.7 sends one shootdown per
    shrink batch; MIGRC defers every one, holds the sources and frees them when an allocation
    needs them -- far fewer flushes, the same pages demoted."""
    base, migrc = _demotion("mmap"), _demotion("mmap", migrc="on")
    b, m = base.counters, migrc.counters
    assert b["nr_tlb_remote_flush"] > 20
    assert m["nr_tlb_remote_flush"] < b["nr_tlb_remote_flush"] / 4
    assert m["pgdemote_kswapd"] > 0.5 * b["pgdemote_kswapd"]
    assert (base.nodes.migrc_pending_nr == 0).all()


def test_migrc_write_protect_fault_gives_up_before_the_pte_becomes_writable():
    """do_wp_page(): the folio may be a held source's copy, so every deferred flush is sent and
    every held source freed before any PTE turns writable (no stale read-only TLB entry can then
    see an old copy while the new one is written)."""
    from tierlab.core.memory import do_wp_page
    sim = _sim(migrc="on")
    s, p = sim.state, sim.p
    _set_mask(s, (0, 2))
    s.sys[0].current = 0
    _read_only_clean(s, 40)
    s.pgdat["migrc_pending_nr"][0] = 3
    s.pgdat["free"][0] -= 3
    s.tlb_ubc[MIGRC_UBC][0] = np.uint64(0b101)
    s.mm[0]["tlb_gen"] += 3                          # their deferrals' arch_tlbbatch_add_pending
    before = counters(sim)
    do_wp_page(s, p, 40, 0)
    assert _held(s) == [0, 0] and not s.tlb_ubc[MIGRC_UBC].any()
    assert _tlb(sim, before) == (1, 1, 1, 0)          # from the faulting CPU 0 to CPU 2
    assert s.pages.flags2[40] & st.F2_PTE_WRITE
    assert counters(sim)["pgfault"] - before["pgfault"] == 1


# ---- MIGRC's releases, path by path (v7/v8 7/8 and v8 8/8 of the series; see tlb.py) -----------

def _hold(s, nid, n, cpus_mask=0b101):
    """n sources held on node nid (taken from its free count, as migrc_keep_folio leaves them), their
    CPUs in migrc_ubc, and the n deferrals' arch_tlbbatch_add_pending generations on mm 0."""
    s.pgdat["migrc_pending_nr"][nid] += n
    s.pgdat["free"][nid] -= n
    s.tlb_ubc[MIGRC_UBC][0] |= np.uint64(cpus_mask)
    s.mm[0]["tlb_gen"] += n


def test_migrc_promotion_finding_the_free_lists_short_fails_after_the_pause():
    """alloc_misplaced_dst_folio() may not reclaim. With node 1's free lists empty and 200 held
    sources counted as free, its check at MIN (90 pages here) passes, rmqueue() finds nothing, and
    the slow path's migrc pause flushes (from the faulting CPU 0: one shootdown to CPU 2, CPU 0's own
    full flush, as it is behind the deferrals' generations) and frees them; then `!can_direct_reclaim`
    fails the allocation: the folio goes back on its LRU, pgmigrate_fail. The next promotion gets
    the freed pages, with no flush."""
    from tierlab.core.migrate import folio_isolate_lru, migrate_misplaced_folio
    from tierlab.core.mmzone import alloc_nowait_ok
    sim = _sim(migrc="on")
    s, p = sim.state, sim.p
    _set_mask(s, (0, 2))
    s.sys[0].current = 0                             # the faulting task, on CPU 0
    assert int(s.pgdat["wmark"][1][st.WMARK_MIN]) < 200
    s.pgdat["free"][1] = 200
    _hold(s, 1, 200)
    assert int(s.pgdat["free"][1]) == 0
    before = counters(sim)
    x = 10                                           # a node 0 folio, isolated as migrate_misplaced_folio_prepare does
    assert folio_isolate_lru(s, x)
    s.pgdat["nr_isolated"][0] += 1
    ok, _, _ = migrate_misplaced_folio(s, p, x, 1, 1, s.tlb_ubc[TLB_UBC], 0, 0)   # from CPU 0
    assert not ok and int(s.pages.node[x]) == 0 and not (s.pages.flags[x] & st.PG_ISOLATED)
    assert _tlb(sim, before) == (1, 1, 1, 0)
    assert _held(s) == [0, 0] and int(s.pgdat["free"][1]) == 200
    c = counters(sim)
    assert c["pgmigrate_fail"] - before["pgmigrate_fail"] == 1
    assert c["numa_pages_migrated"] == before["numa_pages_migrated"]
    assert alloc_nowait_ok(s, 1, 1, st.WMARK_MIN)    # the next one: the freed pages, no flush
    assert _tlb(sim, before) == (1, 1, 1, 0)


def test_migrc_allocation_that_may_reclaim_gets_its_folio_after_the_pause():
    """take_pages() for an allocation that may reclaim (a fault's, a move_pages target's) or retry
    (alloc_demote_folio): the pause frees the held sources and the allocation is served from them.
    Free lists holding the folio need no release, held sources or not."""
    sim = _sim(migrc="on")
    s = sim.state
    _set_mask(s, (0, 2))
    s.sys[0].current = 0
    free0 = int(s.pgdat["free"][0])
    _hold(s, 0, 3)
    before = counters(sim)
    take_pages(s, 0, 30, 1)                          # free lists hold plenty: nothing released
    assert _held(s) == [3, 0] and _tlb(sim, before) == (0, 0, 0, 0)
    s.pgdat["free"][0] = 0
    take_pages(s, 0, 31, 1)
    assert _held(s) == [0, 0] and int(s.pgdat["free"][0]) == 2 and _tlb(sim, before) == (1, 1, 1, 0)
    assert free0 > 3


def test_migrc_free_lists_short_with_the_buddy_asks_the_cpus_own_list_first():
    """rmqueue() serves an order-0 folio from the CPU's per-CPU list before the free lists: a CPU
    whose list holds pages is not short even with the free lists empty (NR_FREE_PAGES 0), one with
    an empty list is."""
    from tierlab.core.mmzone import free_lists_short
    sim = make_sim(machine((4096, 4, DRAM), (4096, 4, CXL)), [Region("a", "anon", 64)], migrc="on",
                   page_alloc_model="buddy")
    run(sim, seq(range(64), STORE))
    s = sim.state
    from tierlab.core.buddy import rmqueue_bulk
    if int(s.buddy.pcp_count[0, 0]) == 0:
        rmqueue_bulk(s, 0, 0, 0, 2)                   # a refill of CPU 0's list, as rmqueue_pcplist makes
    assert int(s.buddy.pcp_count[0, 0]) > 0
    assert int(s.buddy.pcp_count[1, 0]) == 0          # kswapd's CPU never allocated here
    assert not free_lists_short(s, 0, 0, 1) and not free_lists_short(s, 1, 0, 1)
    saved = s.buddy.nr_free[0].copy()
    s.buddy.nr_free[0] = 0                            # the free lists empty (as far as rmqueue looks)
    try:
        assert not free_lists_short(s, 0, 0, 1)
        assert free_lists_short(s, 1, 0, 1)
        assert free_lists_short(s, 0, 0, 2)           # order 1 is a pcp order too: its list is empty
    finally:
        s.buddy.nr_free[0] = saved


def test_migrc_release_from_a_cpu_already_up_to_date_flushes_only_the_others():
    """arch_tlbbatch_flush() of migrc_ubc carries no generation: a CPU that a later flush brought up
    to date (here the NUMA scanner's change_prot_numa range from CPU 0, a full flush reaching CPU 2
    too) skips it. Released from CPU 0, the flush is still sent to CPU 2 (one nr_tlb_remote_flush and
    one receipt, counted before the generation test) and CPU 0 counts no nr_tlb_local_flush_all."""
    sim = _sim(migrc="on")
    s = sim.state
    _set_mask(s, (0, 2))
    _hold(s, 0, 2)
    before = counters(sim)
    flush_tlb_mm_range(s, 0, 0, 0, 100)
    assert _tlb(sim, before) == (1, 1, 1, 0)
    assert migrc_flush_free_folios(s, 0) == 1
    assert _tlb(sim, before) == (2, 2, 1, 0)
    assert _held(s) == [0, 0]


def test_migrc_release_by_kswapds_flush_counts_no_local_flush():
    """migrc_flush_end() in kswapd's try_to_unmap_flush(): a batch of a dirty folio covers every CPU
    of migrc_ubc, so the held sources are freed with it. kswapd's CPU is lazy: one shootdown, one
    receipt per CPU running the task (0 and 2), no local flush anywhere."""
    sim = _sim(migrc="on")
    s = sim.state
    _set_mask(s, (0, 1, 2), lazy=(1,))
    _hold(s, 0, 4)
    batch = s.tlb_ubc[TLB_UBC]
    before = counters(sim)
    tlbbatch_add(s, sim.p, batch, 0, 5, 1, 1, 0)         # a dirty folio's PTE, kswapd on CPU 1 sending
    assert try_to_unmap_flush(s, batch, 1) == 2
    assert _tlb(sim, before) == (1, 2, 0, 0)
    assert _held(s) == [0, 0] and not s.tlb_ubc[MIGRC_UBC].any()


def _promotion_sim(**knobs):
    # node 0 (DRAM, CPUs 0-3) too small for the 256 pages task 0 stores, so they spill to the CXL
    # node 1; then tiering mode, and room on node 0 for the promotions below
    sim = make_sim(machine((64, 4, DRAM), (16384, 0, CXL)), [Region("a", "anon", 256)], lru_batch_size=1, **knobs)
    run(sim, seq(range(256), STORE))
    sim.set_knobs(numa_balancing=2)
    s = sim.state
    s.pgdat["free"][0] += 1000
    _set_mask(s, (0, 1))                            # the mm ran on CPUs 0 and 1, both running its task
    s.sys[0].current = 0
    s.task[0]["cpu"] = 0
    on_cxl = np.flatnonzero(s.pages.node[:256] == 1)
    for x in on_cxl[:3]:                             # the NUMA scanner made their PTEs PROT_NONE
        s.pages.flags[x] |= st.PG_PROTNONE
        s.pages.flags2[x] &= ~st.F2_PTE_WRITE
        s.pages.flags[x] &= ~st.PG_DIRTY             # clean (as after a migration with migration_entry_ad=0)
    return sim, on_cxl[:3]


def test_a_promotion_flushes_only_while_a_scan_of_its_mm_is_open():
    """x86's pte_accessible(): a PROT_NONE PTE is accessible only while mm->tlb_flush_pending is
    raised, i.e. while a NUMA scan of the mm has its mmu_gather open (change_prot_numa). A hint-fault
    promotion then puts the PTE in migrate_pages_batch()'s TLB batch, flushed at the end of the unmap
    (try_to_unmap_flush: one full flush, a shootdown to CPU 1 and CPU 0's own, behind the batch's
    generation); outside that window it flushes nothing (commit 4d4b6d66db). The scan (on CPU 1)
    meets the batched PTE at its next page table and flushes the whole mm first
    (flush_tlb_batched_pending: CPU 0 receives it, CPU 1 flushes all); the batch's own flush from
    CPU 0 then reaches CPU 1 already up to date (a receipt, no flush), and CPU 0 is up to date too."""
    from tierlab.core.memory import do_numa_page
    from tierlab.core.numa_balancing import open_scan_window
    sim, (x, y, _) = _promotion_sim()
    s, p = sim.state, sim.p
    before = counters(sim)
    do_numa_page(s, p, 0, x, 0, 1000)                # no scan open
    assert int(s.pages.node[x]) == 0 and _tlb(sim, before) == (0, 0, 0, 0)
    open_scan_window(s, 0, 1, 2000, 1000.0, 512)     # CPU 1 scans one page table over [2000, 3000)
    do_numa_page(s, p, 0, y, 0, 2500)
    assert int(s.pages.node[y]) == 0 and _tlb(sim, before) == (2, 2, 1, 0)
    assert not s.tlb_ubc[TLB_UBC].any()              # the batch was flushed and emptied
    assert counters(sim)["pgpromote_success"] - before["pgpromote_success"] == 2


def test_migrc_defers_a_promotions_flush_while_a_scan_is_open():
    """Under MIGRC the same promotion of a clean folio goes into the read-only batch instead: nothing
    is deferred, the source is held until a flush covers CPUs 0 and 1. The deferred PTE still counts in
    mm->tlb_flush_batched (the series keeps that part of set_tlb_ubc_flush_pending), so the scan on
    CPU 1 meets it and flushes the whole mm (flush_tlb_mm: not try_to_unmap_flush, so MIGRC's held
    source stays held). At the window's end (exclusive) the PTE is not accessible any more: no
    flush, nothing held."""
    from tierlab.core.memory import do_numa_page
    from tierlab.core.numa_balancing import open_scan_window
    sim, (x, y, _) = _promotion_sim(migrc="on", migration_entry_ad=0)
    s, p = sim.state, sim.p
    open_scan_window(s, 0, 1, 2000, 1000.0, 512)
    before = counters(sim)
    do_numa_page(s, p, 0, x, 0, 2500)
    assert int(s.pages.node[x]) == 0 and _tlb(sim, before) == (1, 1, 1, 0)
    assert _held(s) == [0, 1]
    do_numa_page(s, p, 0, y, 0, 3000)
    assert int(s.pages.node[y]) == 0 and _tlb(sim, before) == (1, 1, 1, 0) and _held(s) == [0, 1]
