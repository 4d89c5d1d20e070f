"""Promotion of unmapped page-cache folios (RFC, Gregory Price, v3 January 2025; not merged).

Models the series' mm/swap.c hook in folio_mark_accessed(), promotion_candidate() in mm/migrate.c,
the task_work task_numa_promotion_work() and migrate_misplaced_folio_batch():

- folio_mark_accessed() on a folio that is already referenced and active, not isolated, with the
  tiering bit of numa_balancing set and pagecache_promotion_enabled, calls promotion_candidate().
  (The inline checks cost fma_hook_check_ns whenever the branch is reached with tiering on.)
- promotion_candidate(): return at once for a top-tier folio (or a kthread); v3 also returns when
  the task's promo_count has reached numa_balancing_promote_rate_limit_MBps -- a page count compared
  with the MB/s value, as the patch does. Then numa_migrate_check() with no vmf
  (numa_hint_page_cache[_local]), mpol_misplaced() with the default policy (target: the task's
  CPU's node) and should_numa_migrate_memory(); migrate_misplaced_folio_prepare() (fails and wakes
  kswapd on the target unless it has WMARK_HIGH + nr free; isolates the folio); and the folio goes
  on the task's promo_list: list_add_tail in v3, list_add before.
- On return to user, task_numa_promotion_work() migrates the list to the task's node in one
  migrate_pages() call (alloc_misplaced_dst_folio: no reclaim, so a destination below its MIN
  watermark fails the folio, which is put back) and zeroes promo_count. Successes count
  numa_pages_migrated and pgpromote_success on the destination.

The folios' physical order on the destination follows the list order (take_pages records
contiguity), which is what makes list_add costly for a later sequential read.

The earlier versions differ in more than the two knobs model. v2 (2024-12-10,
20241210213744.2968-6-gourry@gourry.net) also called numa_hint_fault_latency() in
promotion_candidate() and gave up when the latency reached PAGE_ACCESS_TIME_MASK, which an access
time that wraps modulo the mask almost never does (v3 dropped the check: "tests showed it did not
make a difference"). And its task work migrated the list one folio at a time with
migrate_misplaced_folio(), one migrate_pages() call each. PROMO_CAP_UNLIMITED removes only the
cap and keeps v3's batched migration: the seed's "Before" figure (40 s over ~2 rounds) is the
effect of the cap, which v3 was comparing against.
"""
from __future__ import annotations

import numpy as np
from ._jit import jit, jit_inline

from .migrate import batch_cost, migrate_misplaced_folio, migrate_misplaced_folio_prepare
from .numa_balancing import numa_migrate_check
from .params import P
from .state import folio_nr_pages, list_add, list_add_tail, list_del, promo_sentinel
from .tlb import TLB_UBC, current_cpu, migrc_batch_flush, shootdown_ns
from .vmstat import Vm

# enum PromoCap
PROMO_CAP_RATE_LIMIT = 0   # v3: stop adding once promo_count >= promote_rate_limit_MBps
PROMO_CAP_UNLIMITED = 1    # v1/v2 (and v3 before the cap): every candidate of the syscall is queued
# enum PromoListOrder
PROMO_ORDER_ADD_TAIL = 0   # v3: list_add_tail, promoted in access order
PROMO_ORDER_ADD = 1        # earlier: list_add, promoted in reverse order


@jit_inline
def promotion_candidate_returns_early(s, p, task, head):
    """promotion_candidate()'s first tests, inlined on the access path: a top-tier folio returns at
    node_is_toptier(); in v3 a task whose promo_count has reached the cap returns too (the folio
    is counted in promote_deferred_pages). Returns the call's cost when it returns there, -1.0
    when the folio goes on to the decision (no side effect then)."""
    nid = np.uint64(s.pages.node[head])
    if s.pgdat[nid].tier == 0:
        return p[P.PROMOTION_CANDIDATE_NS]
    if (np.int64(p[P.PAGECACHE_PROMOTION_CAP]) == PROMO_CAP_RATE_LIMIT
            and s.task[task].promo_count >= np.int64(p[P.PROMOTE_RATE_LIMIT_MBPS])):
        s.counters[nid, Vm.PROMOTE_DEFERRED_PAGES] += folio_nr_pages(s, head)
        return p[P.PROMOTION_CANDIDATE_NS]
    return -1.0


@jit
def promotion_candidate(s, p, task, cpu_nid, head, clock):
    """Returns the cost in ns of the call (and queues the folio when it qualifies)."""
    early = promotion_candidate_returns_early(s, p, task, head)
    if early >= 0.0:
        return early
    cost = p[P.PROMOTION_CANDIDATE_NS]
    nr = folio_nr_pages(s, head)
    cost += p[P.NUMA_MIGRATE_CHECK_NS]
    dst = numa_migrate_check(s, p, head, cpu_nid, nr, clock, True, True, s.task[task].mm)
    if dst < 0 or not migrate_misplaced_folio_prepare(s, p, head, dst, nr, clock):
        return cost
    if np.int64(p[P.PAGECACHE_PROMOTION_ORDER]) == PROMO_ORDER_ADD:
        list_add(s, promo_sentinel(s, task), head)
    else:
        list_add_tail(s, promo_sentinel(s, task), head)
    s.task[task].promo_count += nr
    return cost


@jit
def task_numa_promotion_work(s, p, task, cpu_nid, clock):
    """Task work at return to user: migrate_misplaced_folio_batch(promo_list, this node).
    Returns the cost in ns (0 when nothing was queued)."""
    sent = promo_sentinel(s, task)
    if s.pages.next[sent] == sent:
        s.task[task].promo_count = 0
        return 0.0
    cost = p[P.TASK_WORK_NS]
    dst = cpu_nid
    nr_folios = 0
    # migrate_pages_batch's TLB batch: only a folio also mmap'd (accessible PTE) needs a flush, and
    # MIGRC may defer it (MR_NUMA_MISPLACED)
    sender = current_cpu(s)
    batch = s.tlb_ubc[TLB_UBC]
    while s.pages.next[sent] != sent:
        x = s.pages.next[sent]
        list_del(s, x)
        nr = folio_nr_pages(s, x)
        src = s.pages.node[x]
        nr_folios += 1
        ok, c, _ = migrate_misplaced_folio(s, p, x, dst, nr, batch, sender, clock + np.int64(cost))
        cost += c
        if not ok:
            s.counters[src, Vm.PROMOTE_PUTBACK_PAGES] += nr
    cost += shootdown_ns(s, p, migrc_batch_flush(s, batch, sender)) + batch_cost(p, nr_folios)
    s.task[task].promo_count = 0
    return cost
