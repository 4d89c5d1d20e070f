"""TLB flush counting (core/tlb.py), hand-worked from arch/x86/mm/tlb.c and mm/rmap.c:

- flush_tlb_mm_range(): more than 33 pages is a full flush; another CPU in mm_cpumask makes it one
  nr_tlb_remote_flush with one nr_tlb_remote_flush_received per other CPU; the sender's own flush
  counts nr_tlb_local_flush_all (full) or nr_tlb_local_flush_one per page;
- an unmap with TTU_BATCH_FLUSH: a PROT_NONE or unmapped folio adds nothing; a folio of an mm that
  ran only on the sender is flushed at once, one page per PTE (ptep_clear_flush); otherwise the mm's
  CPUs join the batch, and try_to_unmap_flush() sends one full flush and empties it.
"""
from __future__ import annotations

import numpy as np
import pytest

from simkit import CXL, DRAM, STORE, counters, machine, make_sim, run, seq
from tierlab.api import run_config
from tierlab.core import state as st
from tierlab.core.tlb import (
    MIGRATE_BATCH, flush_tlb_mm_range, folio_tlb_mm, tlbbatch_add, try_to_unmap_flush,
)
from tierlab.core.vmstat import Vm
from tierlab.workloads.base import Region

NAMES = ("nr_tlb_remote_flush", "nr_tlb_remote_flush_received", "nr_tlb_local_flush_all",
         "nr_tlb_local_flush_one")


def _sim():
    # two nodes, 64 anon pages stored once by one task: CPU slots 0 (the task's, node 0), 1 (node
    # 0's kswapd) and 2 (node 1's kswapd)
    sim = make_sim(machine((4096, 4, DRAM), (4096, 4, CXL)), [Region("a", "anon", 64)])
    run(sim, seq(range(64), STORE))
    return sim


def _set_mask(s, cpus):
    s.mm[0]["cpumask"][:] = 0
    for c in cpus:
        s.mm[0]["cpumask"][c >> 6] |= np.uint64(1) << np.uint64(c & 63)


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
    before = counters(sim)
    others = flush_tlb_mm_range(s, 0, sender, pages)
    assert _tlb(sim, before) == expect
    assert others == expect[1]


def test_received_flushes_are_charged_to_the_receiving_cpus_node():
    sim = _sim()
    s = sim.state
    assert s.cpu["node"].tolist() == [0, 0, 1]
    _set_mask(s, (0, 1, 2))
    flush_tlb_mm_range(s, 0, 0, 1)
    recv = s.counters[:, Vm.NR_TLB_REMOTE_FLUSH_RECEIVED]
    assert recv.tolist() == [1, 1]                   # CPU 1 on node 0, CPU 2 on node 1
    assert s.counters[:, Vm.NR_TLB_REMOTE_FLUSH].tolist() == [1, 0]   # the sender's node


def test_unmap_batch_skips_inaccessible_ptes_and_flushes_once():
    sim = _sim()
    s = sim.state
    _set_mask(s, (0, 2))
    batch = s.tlb_ubc[MIGRATE_BATCH]
    assert not batch.any()                                    # empty between calls
    # a PROT_NONE PTE (the NUMA scanner's) needs no flush: commit 4d4b6d66db
    s.pages.flags[10] |= st.PG_PROTNONE
    assert folio_tlb_mm(s, 10) == st.NO_MM
    # a page no page table maps (e.g. read()-only page cache) neither
    s.pages.flags2[11] &= ~st.F2_MAPPED
    assert folio_tlb_mm(s, 11) == st.NO_MM
    assert folio_tlb_mm(s, 12) == 0
    before = counters(sim)
    for x in (10, 11, 12, 13, 14):
        tlbbatch_add(s, batch, folio_tlb_mm(s, x), 1, 1)      # sender: CPU 1 (node 0's kswapd)
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
    batch = s.tlb_ubc[MIGRATE_BATCH]
    before = counters(sim)
    tlbbatch_add(s, batch, folio_tlb_mm(s, 20), 4, 0)        # a 4-page folio, direct reclaim on CPU 0
    assert _tlb(sim, before) == (0, 0, 0, 4)                  # ptep_clear_flush: one page per PTE
    assert not batch.any()


def _demotion(io):
    res = run_config({"machine": "qemu-2node", "workload": "random-read", "scale": 64, "seed": 1,
                      "params": {"file_size": "2GiB", "accesses": "100000", "io": io, "policy": "bind:0"},
                      "knobs": {"demotion_enabled": 1}})
    return {n: int(res.counters[n]) for n in NAMES}, int(res.counters["pgdemote_kswapd"])


def test_demoting_read_only_page_cache_flushes_nothing_and_mapped_pages_shoot_down():
    c, demoted = _demotion("read")
    assert demoted > 0 and c == dict.fromkeys(NAMES, 0)       # page cache without PTEs
    c, demoted = _demotion("mmap")
    # kswapd's CPU never ran the task's mm: each shrink batch that demoted a mapped folio sends one
    # full flush, received by the task's one CPU; kswapd flushes nothing locally
    assert demoted > 0 and c["nr_tlb_remote_flush"] > 0
    assert c["nr_tlb_remote_flush_received"] == c["nr_tlb_remote_flush"]
    assert c["nr_tlb_remote_flush"] <= demoted
