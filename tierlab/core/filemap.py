"""The page-cache read/write path (mm/filemap.c filemap_read(), generic_perform_write()).

- filemap_access(): one page of a read()/write() whose folio is in the page cache: a call that
  starts in the folio the previous call ended in does not mark it again (pos_same_folio()), else
  folio_mark_accessed() (lru.py) and, when it reports an already referenced and active folio, the
  page-cache promotion hook (pagecache_promotion.py); then the 4 KiB copy, charged as a streaming
  copy from the folio's node plus a stream break when the page does not physically follow the
  previous one (cost.py), and PG_dirty for a write.
- filemap_miss_ns(): a page-cache miss (page_cache_ra_order / filemap_add_folio): insertion plus
  the device read, sequential (readahead) or random; a miss through mmap is a major fault.

Simplifications: readahead is a per-page I/O cost (sequential or random) rather than windows of
folios; writes dirty the folio in place (no write-back until reclaim).
"""
from __future__ import annotations

import numpy as np
from ._jit import jit_inline

from .cost import seq_page_ns
from .lru import folio_mark_accessed
from .mmzone import tiering_mode
from .ops import ACCESS_DONE, ACCESS_PROMOTION_CANDIDATE, OP_KIND_MASK, OP_STORE, OP_STREAM, OP_SYSCALL_END, OP_WRITE
from .pagecache_promotion import promotion_candidate, promotion_candidate_returns_early
from .params import P
from .state import F2_CONTIG, F2_MAPPED, PG_DIRTY, PG_ISOLATED
from .vmstat import Vm


@jit_inline
def filemap_miss_ns(s, p, head, nid, nr, cpu_nid, op):
    """A page-cache miss that allocated the folio at `head` (nr pages) on `nid`. Returns its cost."""
    io = p[P.IO_SEQ_4K_NS] if (op & OP_STREAM) else p[P.IO_RAND_4K_NS]
    cost = p[P.PAGECACHE_INSERT_NS] + io * nr
    s.counters[nid, Vm.PGPGIN] += 4 * nr
    if (op & OP_KIND_MASK) <= OP_STORE:
        # through mmap: filemap_fault() waited for the read
        s.counters[cpu_nid, Vm.PGFAULT] += 1
        s.counters[cpu_nid, Vm.PGMAJFAULT] += 1
        cost += p[P.FAULT_NS]
        s.pages.flags2[head] |= F2_MAPPED
    return cost


@jit_inline
def filemap_access(s, p, task, cpu_nid, page, head, hu, nr, op, now, cost, fast):
    """One page of a read()/write() of a present folio (the access path's READ/WRITE case). In the
    fast case (`fast`), a folio that needs promotion_candidate()'s out-of-line work returns
    ACCESS_PROMOTION_CANDIDATE before any side effect. Returns (cost, ACCESS_*)."""
    pg = s.pages
    t = s.task[task]
    cost += p[P.FMA_NS]
    last = t.last_page
    same = t.call_start != 0 and (last & ~(nr - 1)) == head
    hot = False
    if not same:
        hot, wait = folio_mark_accessed(s, p, hu, now)
        cost += wait
    if hot:
        if tiering_mode(p) and not (pg.flags[hu] & PG_ISOLATED):
            cost += p[P.FMA_HOOK_CHECK_NS]
            if p[P.PAGECACHE_PROMOTION_ENABLED] != 0:
                early = promotion_candidate_returns_early(s, p, task, hu)
                if early >= 0.0:
                    cost += early
                elif fast:
                    return cost, ACCESS_PROMOTION_CANDIDATE
                else:
                    cost += promotion_candidate(s, p, task, cpu_nid, head, now)
    t.call_start = 1 if (op & OP_SYSCALL_END) else 0
    nid = np.uint64(pg.node[hu])
    cost += seq_page_ns(s, p, nid, now, fast)
    if not (page == last + 1 and (pg.flags2[hu] & F2_CONTIG)):
        sb = p[P.STREAM_BREAK_NS]
        cost += s.mem[nid].line_ns if sb < 0 else sb
    t.last_page = page
    if (op & OP_KIND_MASK) == OP_WRITE:
        pg.flags[hu] |= PG_DIRTY
    return cost, ACCESS_DONE
