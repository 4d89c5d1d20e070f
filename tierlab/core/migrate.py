"""Folio migration between nodes: the accounting and the cost of moving a folio.

Models mm/migrate.c migrate_pages()/migrate_pages_batch() for the callers tierlab has so far:
demotion from reclaim (MR_DEMOTION, alloc_demote_folio) and promotion (MR_NUMA_MISPLACED,
alloc_misplaced_dst_folio, migrate_misplaced_folio_batch of the page-cache RFC). A batch costs one
migrate_pages() set-up and TLB shootdown plus, per folio, the fixed migration work and the copy
(cost.py). The destination folio inherits the source's flags (folio_migrate_flags) and goes to the
head of the destination node's LRU list.

Simplifications: migration of an isolated folio succeeds whenever the destination allocation does
(no -EAGAIN from elevated refcounts, no writeback waits); the destination folio is put straight on
the LRU instead of through the per-CPU lru_add batch.
"""
from __future__ import annotations

from ._jit import jit_inline

from .cost import migrate_batch_ns, migrate_folio_ns
from .lru import lruvec_add_folio
from .page_alloc import take_pages
from .state import PG_ISOLATED, folio_nr_pages
from .vmstat import PGMIGRATE_SUCCESS, PGFREE


@jit_inline
def move_isolated_folio(s, p, head, dst, now):
    """Migrate an isolated folio (off the LRU) to `dst` and put it on dst's LRU. Returns the cost in ns.
    The caller has checked that `dst` can take it."""
    src = s.node[head]
    nr = folio_nr_pages(s, head)
    cost = migrate_folio_ns(s, p, src, dst, nr, now)
    s.free[src] += nr
    s.counters[src, PGFREE] += nr
    take_pages(s, dst, head, nr)
    s.flags[head] &= ~PG_ISOLATED
    lruvec_add_folio(s, head)
    s.counters[dst, PGMIGRATE_SUCCESS] += nr
    return cost


@jit_inline
def batch_cost(p, nr_folios):
    """One migrate_pages() call per NR_MAX_BATCHED_MIGRATION (512) pages."""
    if nr_folios == 0:
        return 0.0
    return migrate_batch_ns(p) * ((nr_folios + 511) // 512)
