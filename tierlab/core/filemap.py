"""The page-cache read/write path (mm/filemap.c filemap_read(), generic_perform_write()).

- filemap_access(): one page of a read()/write() whose folio is in the page cache: a call that
  starts in the folio the previous call ended in does not mark it again (pos_same_folio()), else
  folio_mark_accessed() (lru.py) and, when it reports an already referenced and active folio, the
  page-cache promotion hook (pagecache_promotion.py); then the 4 KiB copy, charged as a streaming
  copy from the folio's node plus a stream break when the page does not physically follow the
  previous one (cost.py), and PG_dirty for a write.
  A page whose read is still in flight (a readahead window being read) is waited for first, as
  filemap_update_page() sleeps on the folio: a synchronous task sleeps until the read completes
  (ACCESS_IO_WAIT: engine.io_sleep, its CPU free meanwhile) and takes the access again; with an
  asynchronous engine the call completes no earlier (fileio.io_wait). Reaching the folio the
  task's readahead marked PG_readahead starts the next window (readahead.page_cache_async_ra).
- filemap_read_miss(): a page-cache miss that must read the page: filemap_get_pages() ->
  page_cache_sync_ra() for a read(), filemap_fault() -> do_sync_mmap_readahead() for a fault
  through mmap (a major fault, which always waits); readahead.py picks the window and blkdev.py
  times the reads. A synchronous read, and every major fault, then sleeps until its page is read
  (task.io_ready, engine.io_sleep): the rest of the access happens when it wakes.

Simplifications: a buffered write of a page that is not cached allocates it without reading it
(tierlab's writes cover whole pages); writes dirty the folio in place: no write-back and no dirty
throttling (balance_dirty_pages) until reclaim writes a dirty folio out (reclaim.py).
"""
from __future__ import annotations

import numpy as np
from ._jit import jit_inline

from .cost import seq_page_ns
from .fileio import io_wait
from .lru import folio_mark_accessed, folio_mark_accessed_end
from .mmzone import tiering_mode
from .ops import (
    ACCESS_DONE, ACCESS_IO_WAIT, ACCESS_PROMOTION_CANDIDATE, ACCESS_READAHEAD, OP_KIND_MASK, OP_READ, OP_STREAM,
    OP_STORE, OP_SYSCALL_END, OP_WRITE,
)
from .pagecache_promotion import promotion_candidate, promotion_candidate_returns_early
from .params import P
from .profile import K, charge
from .readahead import file_ra_pages, page_cache_sync_ra, ra_ready, ra_reset, read_one_folio
from .state import F2_CONTIG, F2_MAPPED, F2_PTE_WRITE, FADV_RANDOM, PG_DIRTY, PG_ISOLATED, folio_head, folio_nr_pages
from .vmstat import Vm


@jit_inline
def filemap_read_miss(s, p, task, cpu, r, page, op, clock, scratch, cands):
    """A page-cache miss at `page` of file region r that must read it (a read(), or a load/store
    through mmap). Returns (cost in ns, ok); ok is False on OOM."""
    t = s.task[task]
    rap = file_ra_pages(s, p, r)
    random = s.regions.advice[r] == FADV_RANDOM or rap == 0
    if (op & OP_KIND_MASK) == OP_READ:
        c = charge(s, K.XAS_LOAD, p[P.PAGECACHE_LOOKUP_NS])     # filemap_get_read_batch found nothing
        if random and t.ra_req <= 1:
            # force_page_cache_ra() of one page (FMODE_RANDOM, or readahead off): inline
            if t.ra_file != r:
                ra_reset(t, r)
            done, ok, cost = read_one_folio(s, p, r, cpu, page, clock, scratch, cands)
        else:
            done, ok, cost = page_cache_sync_ra(s, p, task, cpu, r, page, t.ra_req, clock, scratch, cands)
        cost += c
        if ok:
            if t.iodepth > 0:
                io_wait(t, done, clock + np.int64(cost))
            elif done > clock + np.int64(cost):
                t.io_ready = done                # the task sleeps until its page is read (engine.io_sleep)
        return cost, ok
    # through mmap: filemap_fault() reads and waits for the folio -- a major fault.
    # do_sync_mmap_readahead(): VM_SEQ_READ (an OP_STREAM load) reads a window of ra_pages
    # (page_cache_sync_ra); otherwise the faulting folio alone
    if (op & OP_STREAM) and not random:
        done, ok, cost = page_cache_sync_ra(s, p, task, cpu, r, page, rap, clock, scratch, cands)
    else:
        done, ok, cost = read_one_folio(s, p, r, cpu, page, clock, scratch, cands)
    if not ok:
        return cost, False
    cpu_nid = s.cpu[cpu].node
    s.counters[cpu_nid, Vm.PGFAULT] += 1
    s.counters[cpu_nid, Vm.PGMAJFAULT] += 1
    cost += charge(s, K.HANDLE_MM_FAULT, p[P.FAULT_NS])
    head = folio_head(s, page)
    # do_read_fault: read-only; do_shared_fault: writable (and the store dirties it)
    s.pages.flags2[head] |= F2_MAPPED | (F2_PTE_WRITE if (op & OP_KIND_MASK) == OP_STORE else np.uint8(0))
    s.mm[s.regions.mm[r]].rss_file += folio_nr_pages(s, head)      # filemap_fault mapped it
    if done > clock + np.int64(cost):
        t.io_ready = done                        # a major fault sleeps until its folio is read
    return cost, True


@jit_inline
def filemap_access(s, p, task, cpu_nid, page, head, hu, nr, op, now, cost, fast):
    """One page of a read()/write() of a present folio (the access path's READ/WRITE case). In the
    fast case (`fast`), a folio that needs promotion_candidate()'s out-of-line work returns
    ACCESS_PROMOTION_CANDIDATE, and the folio the task's readahead marked ACCESS_READAHEAD, before
    any side effect: the run loop's general case starts the async readahead
    (readahead.page_cache_async_ra) before it takes the access. Returns (cost, ACCESS_*)."""
    pg = s.pages
    t = s.task[task]
    if t.ra_done > now and t.iodepth == 0:
        ready = ra_ready(t, page, now)
        if ready > now:
            # the folio is still being read: filemap_update_page() sleeps on it before anything
            # else (the fast case leaves that to the general case)
            if not fast:
                t.io_ready = ready
            return cost, ACCESS_IO_WAIT
    if page == t.ra_mark and fast:
        return cost, ACCESS_READAHEAD
    mark = p[P.FMA_NS]
    cost += mark
    last = t.last_page
    same = t.call_start != 0 and (last & ~(nr - 1)) == head
    hot = False
    if not same:
        hot, wait = folio_mark_accessed(s, p, hu, now)
        cost += wait
    if hot:
        if tiering_mode(p) and not (pg.flags[hu] & PG_ISOLATED):
            mark += p[P.FMA_HOOK_CHECK_NS]
            cost += p[P.FMA_HOOK_CHECK_NS]
            if p[P.PAGECACHE_PROMOTION_ENABLED] != 0:
                early = promotion_candidate_returns_early(s, p, task, hu)
                if early >= 0.0:
                    cost += early
                elif fast:
                    return cost, ACCESS_PROMOTION_CANDIDATE
                else:
                    cost += promotion_candidate(s, p, task, cpu_nid, head, now)
        folio_mark_accessed_end(s, p, hu, hot)
    # the profile is charged after the fast case's last return (the costs were added where they
    # arise, in the same order as ever): mark_page_accessed (with the hook's checks)
    charge(s, K.MARK_PAGE_ACCESSED, mark)
    write = (op & OP_KIND_MASK) == OP_WRITE
    if not write:
        cost += charge(s, K.XAS_LOAD, p[P.PAGECACHE_LOOKUP_NS])
    t.call_start = 1 if (op & OP_SYSCALL_END) else 0
    if t.ra_done > now:
        at = now + np.int64(cost)                   # an asynchronous call's page still in flight
        io_wait(t, ra_ready(t, page, at), at)
    nid = np.uint64(pg.node[hu])
    copy = K.COPY_FROM_ITER if write else K.COPY_TO_ITER
    cost += charge(s, copy, seq_page_ns(s, p, nid, now, fast))
    if not (page == last + 1 and (pg.flags2[hu] & F2_CONTIG)):
        sb = p[P.STREAM_BREAK_NS]
        cost += charge(s, copy, s.mem[nid].line_ns if sb < 0 else sb)
    t.last_page = page
    if write:
        pg.flags[hu] |= PG_DIRTY
    if page == t.ra_mark:
        t.ra_mark = -1     # the general case reaches a marked page only when its folio was evicted and read again
    return cost, ACCESS_DONE
