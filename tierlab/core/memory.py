"""Faults and accesses through page tables (mm/memory.c).

- fault_in(): handle_mm_fault() for a page that is not present: do_anonymous_page() (a read of
  untouched anon memory maps the shared zero page; a write allocates and zeroes a folio of the
  region's order, alloc_anon_folio()), do_swap_page() (swap-in, major fault), and for file pages a
  page-cache miss (filemap.py: readahead I/O; a fault through mmap counts as a major fault).
- pte_access(): the present-PTE part of a load/store: a first touch of a present folio installs
  the PTE (minor fault), a PROT_NONE PTE takes a NUMA hint fault, the access sets the accessed bit
  (PG_young here) and a store the dirty bit, and the cache line is charged.
- do_numa_page(): the hint fault, counting it and asking NUMA balancing (numa_balancing.py
  numa_migrate_check, should_numa_migrate_memory) whether to migrate the folio (migrate.py).

Simplifications: a folio's PTEs are one bit set per folio (PG_young, PG_protnone on the head); the
zero page is not a folio (it never enters an LRU); faults never fail except on OOM.
"""
from __future__ import annotations

import numpy as np
from ._jit import jit, jit_inline

from .cost import line_load_ns, line_store_ns, seq_page_ns
from .filemap import filemap_miss_ns
from .locks import i_pages_lock
from .lru import folio_add_lru, workingset_refault
from .migrate import migrate_misplaced_folio, migrate_misplaced_folio_prepare
from .mmzone import take_pages
from .numa_balancing import numa_migrate_check
from .ops import ACCESS_DONE, ACCESS_HINT_FAULT, OP_KIND_MASK, OP_LOAD, OP_PAGE, OP_STORE
from .page_alloc import alloc_folio
from .params import P
from .state import (
    F2_ANON, F2_CONTIG, F2_MAPPED, F2_PRESENT, F2_SHADOW, F2_SWAPPED, ORDER_MASK, PG_DIRTY,
    PG_PROTNONE, PG_WORKINGSET, PG_YOUNG, REGION_ANON, STAMP_NONE, folio_nr_pages, region_of,
)
from .vmstat import Vm


@jit_inline
def folio_order_for(s, r, page):
    """The region's folio order, lowered until the naturally aligned folio around `page` lies inside
    the region and none of its pages is present or mapped (thp_vma_suitable_order() and the
    all-PTEs-none test of alloc_anon_folio(); page-cache folios stop at EOF). Order 1 is skipped for
    anon memory, as the kernel does."""
    order = np.int64(s.regions.order[r])
    lo = s.regions.start[r]
    hi = s.regions.start[r + 1]
    anon = s.regions.kind[r] == REGION_ANON
    while order > 0:
        if not (anon and order == 1):
            nr = np.int64(1) << order
            head = page & ~(nr - 1)
            ok = head >= lo and head + nr <= hi
            if ok:
                for i in range(nr):
                    if s.pages.flags2[head + i] & (F2_PRESENT | F2_MAPPED):
                        ok = False
                        break
            if ok:
                return order
        order -= 1
    return np.int64(0)


@jit_inline
def fault_in(s, p, task, cpu, page, op, clock, scratch, cands):
    """Bring a non-present page in (anon zero-fill or zero page, swap-in, page-cache miss).
    Returns (cost, ok); ok is False only on OOM."""
    pg = s.pages
    r = region_of(s, page)
    anon = s.regions.kind[r] == REGION_ANON
    kind = op & OP_KIND_MASK
    cpu_nid = s.cpu[cpu].node
    f2 = pg.flags2[page]
    if anon and kind == OP_LOAD and not (f2 & F2_SWAPPED):
        if f2 & F2_MAPPED:
            return 0.0, True     # already mapped to the zero page: a plain load
        # read fault on untouched anonymous memory maps the shared zero page
        pg.flags2[page] = f2 | F2_MAPPED
        s.counters[cpu_nid, Vm.PGFAULT] += 1
        return p[P.FAULT_NS], True
    order = folio_order_for(s, r, page)
    head = page & ~((np.int64(1) << order) - 1)
    nr = np.int64(1) << order
    # the faulting page's shadow entry (or swap entry) decides refault activation
    evict_nid = pg.node[page]
    refault = (pg.flags2[page] & (F2_SHADOW | F2_SWAPPED)) != 0
    shadow_age = pg.stamp[page]
    shadow_ws = pg.flags[page] & PG_WORKINGSET
    nid, cost = alloc_folio(s, p, r, cpu, head, nr, clock, scratch, cands)
    if nid < 0:
        return cost, False
    nr_swapped = 0
    for i in range(nr):
        pg.order[head + i] = (pg.order[head + i] & ~ORDER_MASK) | order
        if pg.flags2[head + i] & F2_SWAPPED:
            nr_swapped += 1
        if i > 0:
            pg.flags2[head + i] = F2_ANON if anon else np.uint8(0)
            pg.flags[head + i] = 0
    take_pages(s, nid, head, nr)
    contig = pg.flags2[head] & F2_CONTIG
    pg.flags2[head] = F2_PRESENT | contig | (F2_ANON if anon else 0)
    pg.flags[head] = shadow_ws if refault else np.uint8(0)
    if refault:
        pg.stamp[head] = shadow_age
        workingset_refault(s, p, head, nid, evict_nid)
    pg.stamp[head] = STAMP_NONE
    t = clock + np.int64(cost)      # the fault's own work starts: its locks are taken within it
    if anon:
        s.counters[cpu_nid, Vm.PGFAULT] += 1
        cost += p[P.FAULT_NS]
        if nr_swapped > 0:
            s.sys[0].nr_swap_used -= nr_swapped
            s.counters[cpu_nid, Vm.PGMAJFAULT] += 1
            s.counters[nid, Vm.PSWPIN] += nr_swapped
            cost += p[P.SWAP_IN_4K_NS] * nr_swapped
        cost += p[P.ZERO_PAGE_NS] * (nr - nr_swapped)
        pg.flags2[head] |= F2_MAPPED
    else:
        # __filemap_add_folio under the mapping's xa_lock, then folio_add_lru, then the read
        wait = i_pages_lock(s, p, head, t)
        t += np.int64(wait + p[P.XA_LOCK_NS])
        cost += wait + filemap_miss_ns(s, p, head, nid, nr, cpu_nid, op)
    cost += folio_add_lru(s, p, cpu, head, t)
    return cost, True


@jit
def do_numa_page(s, p, head, cpu_nid, now):
    """A hint fault on a PROT_NONE folio: restore the PTE, count it, and in tiering mode promote a
    slow-tier folio the decision accepts (migrate_misplaced_folio_prepare + migrate_misplaced_folio).
    No TLB shootdown is charged: the old PTE was PROT_NONE (commit 4d4b6d66db). Returns the cost."""
    s.pages.flags[head] = (s.pages.flags[head] & ~PG_PROTNONE) | PG_YOUNG
    nr = folio_nr_pages(s, head)
    cost = p[P.FAULT_NS] + p[P.NUMA_MIGRATE_CHECK_NS]
    dst = numa_migrate_check(s, p, head, cpu_nid, nr, now, False)
    if dst < 0 or not migrate_misplaced_folio_prepare(s, p, head, dst, nr, now):
        return cost
    ok, c = migrate_misplaced_folio(s, p, head, dst, nr, now)
    return cost + c


@jit_inline
def pte_access(s, p, cpu_nid, head, hu, op, now, cost, fast):
    """A load or store through a present folio's PTE (the access path's LOAD/STORE case). A first
    touch installs the PTE (a minor fault); a PROT_NONE PTE takes a hint fault -- in the fast case
    (`fast`) that returns ACCESS_HINT_FAULT before any side effect, for the general case to take.
    Returns (cost, ACCESS_*)."""
    pg = s.pages
    f = pg.flags[hu]
    if f & PG_PROTNONE:
        if fast:
            return cost, ACCESS_HINT_FAULT
    f2 = pg.flags2[hu]
    if not (f2 & F2_MAPPED):
        # a PROT_NONE PTE is always mapped, so this never runs before a hint fault
        pg.flags2[hu] = f2 | F2_MAPPED
        s.counters[cpu_nid, Vm.PGFAULT] += 1
        cost += p[P.FAULT_NS]
    nid = np.uint64(pg.node[hu])
    if f & PG_PROTNONE:
        cost += do_numa_page(s, p, head, cpu_nid, now)
        nid = np.uint64(pg.node[hu])
        f = pg.flags[hu]
    f |= PG_YOUNG
    kind = op & OP_KIND_MASK
    if kind == OP_STORE:
        pg.flags[hu] = f | PG_DIRTY
        cost += line_store_ns(s, p, nid, now, fast)
    else:
        pg.flags[hu] = f
        if op & OP_PAGE:
            cost += seq_page_ns(s, p, nid, now, fast)
        else:
            cost += line_load_ns(s, p, nid, now, fast)
    return cost, ACCESS_DONE
