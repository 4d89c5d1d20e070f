"""`echo 1 > /proc/sys/vm/drop_caches` (fs/drop_caches.c drop_pagecache_sb, mm/truncate.c
invalidate_mapping_pages / mapping_evict_folio): every file's clean page cache that no page table
maps is dropped.

The per-CPU lru_add batches are drained first (the kernel's invalidation skips a folio it cannot
lock or whose refcount is raised by a batch, and a later drop gets it). A folio is dropped when it
is present, on an LRU, not isolated, clean and unmapped; it leaves no shadow entry (remove_mapping()
is not reclaim: a later read is a first fault, not a refault). Dirty, mapped and isolated folios
stay, as in the kernel. `echo 2` (slab: dentries, inodes) has nothing to drop here; 3 is 1 and 2.

Simplifications: each dropped folio costs reclaim_free_ns (the same removal from the mapping and
free as reclaim's, without the xa_lock wait); no drop_pagecache counter (it counts the writes).
"""
from __future__ import annotations

import numpy as np

from ._jit import jit

from .lru import drain_or_resume, lruvec_del_folio
from .fileio import syscall_entry_ns
from .mmzone import free_folio
from .params import P
from .profile import K, charge
from .state import (
    F2_MAPPED, F2_PRESENT, F2_PTE_WRITE, F2_SHADOW, LRU_BATCH_MAX, PG_DIRTY, PG_ISOLATED, PG_LRU, REGION_FILE,
    STAMP_NONE,
    folio_head, folio_nr_pages,
)

DROP_PAGECACHE = 1     # the value written: 1 page cache, 2 slab, 3 both
DROP_SLAB = 2
FOLIO_BATCH_SIZE = LRU_BATCH_MAX   # PAGEVEC_SIZE: the entries find_lock_entries() returns at once


@jit
def drop_pagecache(s, p, task, now):
    """Drop every clean, unmapped, unisolated page-cache folio, one folio batch (FOLIO_BATCH_SIZE
    page-cache folios looked at) per call, as mapping_try_invalidate() may reschedule after each:
    while the write is under way task.ctrl_next is 1 + the page to go on from. Returns (pages
    dropped, cost)."""
    t = s.task[task]
    cost, first = drain_or_resume(s, p, t, 0, now)
    dropped = 0
    seen = 0
    for r in range(s.regions.kind.shape[0]):
        if s.regions.kind[r] != REGION_FILE:
            continue
        x = max(s.regions.start[r], first)
        while x < s.regions.start[r + 1]:
            head = folio_head(s, x)
            nr = folio_nr_pages(s, head)
            f, f2 = s.pages.flags[head], s.pages.flags2[head]
            if f2 & F2_PRESENT:
                seen += 1
            if ((f2 & F2_PRESENT) and not (f2 & F2_MAPPED) and (f & PG_LRU) and not (f & PG_ISOLATED)
                    and not (f & PG_DIRTY)):
                lruvec_del_folio(s, head)
                free_folio(s, head)
                for i in range(nr):
                    s.pages.flags[head + i] = 0
                    s.pages.flags2[head + i] &= ~(F2_PRESENT | F2_MAPPED | F2_PTE_WRITE | F2_SHADOW)
                    s.pages.stamp[head + i] = STAMP_NONE
                    s.pages.order[head + i] = 0
                dropped += nr
                cost += charge(s, K.REMOVE_MAPPING, p[P.RECLAIM_FREE_NS])
            x = head + nr
            if seen == FOLIO_BATCH_SIZE:
                t.ctrl_next = x + 1                  # a batch: the rest in the next step
                return dropped, cost
    return dropped, cost


@jit
def drop_caches_ctrl(s, p, task, what, now):
    """The write() to drop_caches (`what` as written) by `task`. Returns the cost in ns."""
    cost = syscall_entry_ns(s, p) if s.task[task].ctrl_next == 0 else 0.0
    if what & DROP_PAGECACHE:
        cost += drop_pagecache(s, p, task, now + np.int64(cost))[1]
    return cost
