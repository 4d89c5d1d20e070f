"""Readahead: how a page-cache miss becomes a read of a window of pages (mm/readahead.c).

The task's open file has a file_ra_state (fields ra_* and prev_pos of the task record): the last
window [start, start + size), its async_size, and the last page of the previous read() call.

- page_cache_sync_ra(): a read() found no folio at `index`. With POSIX_FADV_RANDOM (FMODE_RANDOM)
  or readahead off, force_page_cache_ra() reads exactly the request's pages (at most
  max(io_pages, ra_pages)). Otherwise, at the start of the file, for a request larger than the
  window limit (ractl_max_pages: ra_pages, or up to the device's io_pages = max_sectors_kb for a
  larger request), or right after the previous read (index - prev_index <= 1), a new window starts
  at index: size get_init_ra_size(req, max) (the request rounded up to a power of two, x4 when
  small, x2 when medium, else max), async_size size - req (or size / 2). Else the pages cached
  just before index (page_cache_prev_miss) tell a stream from a random read: no more than the
  request -> a standalone read of the request that leaves the state alone; more -> a window of
  contig + req pages (doubled contig when cached from the file's start), async_size 1.
- page_cache_ra_order() (windows) / page_cache_ra_unbounded(): a folio for every absent page of the
  window, added to the page cache and the LRU; the folio at start + size - async_size gets
  PG_readahead; each run of new folios is one bio (read_pages()), split by the device
  (blkdev.blk_submit) into requests of at most max_sectors_kb.
- page_cache_async_ra(): a read reaching the PG_readahead folio at the expected index pushes the
  window forward: start += size, size = max(size, get_next_ra_size()) (x4 while small, x2, then
  max), trimmed to the window alignment of order 2, async_size = size: the next window is read
  while the task copies this one ("readahead pipelining").
- do_sync_mmap_readahead(): a fault through mmap with VM_SEQ_READ (madvise(MADV_SEQUENTIAL); here
  an OP_STREAM load) runs page_cache_sync_ra() for ra_pages; otherwise only the faulting folio is
  read (with VM_RAND_READ, or once mmap_miss passed MMAP_LOTSAMISS).

ra_pages is the device's read_ahead_kb (the `read_ahead_kb` knob, default 128 KiB = 32 pages),
doubled for POSIX_FADV_SEQUENTIAL (generic_fadvise). The task keeps the completion time of its last
two windows, so a page of a window still being read makes the task sleep until it is read
(engine.io_sleep), or an asynchronous call complete no earlier (fileio.io_wait).

Simplifications, and why:
- One file_ra_state per task (the file it last missed in): a task's second open file starts over.
- PG_readahead is kept as the task's own mark (`ra_mark`), not a per-folio flag (per-page state is
  16 bytes): another task reaching the folio does not start readahead for it, so the kernel's
  "marked folio without valid readahead state" case never arises; and a page of another task's
  window still being read counts as read.
- Readahead folios have the region's folio order (tierlab's page-cache folio size), so a window's
  first and last folio may reach past it; the kernel's ra->order ramp for large-folio mappings is
  not modelled (the async window is trimmed to order-2 alignment, as for a mapping without large
  folios).
- All pages of a window complete when its last request does; a window's requests are submitted
  together.
- mmap read-around (the first MMAP_LOTSAMISS faults of a random mmap reader read ra_pages around
  the fault) and async readahead from mmap faults are not modelled.
"""
from __future__ import annotations

import numpy as np
from ._jit import jit, jit_inline

from .blkdev import FILE_DEV, blk_submit
from .ops import OP_SYSCALL_END
from .page_alloc import GFP_KERNEL, filemap_add_folio, folio_alloc_add, folio_order_for
from .params import P
from .profile import K, charge
from .state import F2_PRESENT, FADV_RANDOM, FADV_SEQUENTIAL, folio_head, folio_nr_pages
from .vmstat import Vm

@jit_inline
def get_init_ra_size(size, mx):
    """The first window for a request of `size` pages: rounded up to a power of two, x4 when at
    most max/32, x2 when at most max/4, else max."""
    newsize = np.int64(1)
    while newsize < size:
        newsize <<= 1
    if newsize <= mx // 32:
        return newsize * 4
    if newsize <= mx // 4:
        return newsize * 2
    return mx


@jit_inline
def get_next_ra_size(cur, mx):
    """The next window after one of `cur` pages: x4 below max/16, x2 up to max/2, else max."""
    if cur < mx // 16:
        return 4 * cur
    if cur <= mx // 2:
        return 2 * cur
    return mx


@jit_inline
def file_ra_pages(s, p, r):
    """file->f_ra.ra_pages: the device's ra_pages (read_ahead_kb), doubled by POSIX_FADV_SEQUENTIAL."""
    ra = np.int64(p[P.READ_AHEAD_KB]) // 4
    if s.regions.advice[r] == FADV_SEQUENTIAL:
        ra *= 2
    return ra


@jit_inline
def ractl_max_pages(s, ra_pages, req):
    """The window limit: ra_pages, or for a larger request up to the device's io_pages."""
    mx = ra_pages
    io = s.blkdev[FILE_DEV].max_sectors_pages
    if req > mx and io > mx:
        mx = min(req, io)
    return mx


@jit_inline
def page_present(s, x):
    return (s.pages.flags2[folio_head(s, x)] & F2_PRESENT) != 0


@jit
def page_cache_prev_miss(s, lo, index, max_scan):
    """The first absent page at or before `index` within max_scan pages; index - max_scan if none;
    lo - 1 when every page down to the file's start is cached (the kernel's ULONG_MAX)."""
    x = index
    for _ in range(max_scan):
        if x < lo:
            return lo - 1
        if not page_present(s, x):
            return x
        x -= 1
    return x


@jit_inline
def ra_add_folio(s, p, r, cpu, x, now, scratch, cands):
    """filemap_add_folio() for an absent page x of file region r: a folio of the region's order
    where its pages are all absent (not cut at a window: an absent page keeps the order of the folio
    it was last in, which must stay its folio), added to the page cache and the LRU (page_alloc.filemap_add_folio: its locks) and counted in
    pgpgin. Returns (node or -1 on OOM, head, nr, cost in ns)."""
    nid, head, nr, _, cost = folio_alloc_add(s, p, r, cpu, x, folio_order_for(s, r, x), now, scratch, cands,
                                          GFP_KERNEL)
    if nid >= 0:
        cost += filemap_add_folio(s, p, cpu, head, now + np.int64(cost))
        s.counters[nid, Vm.PGPGIN] += 4 * nr
    return nid, head, nr, cost


@jit_inline
def bio_cost(s, p, nr_pages):
    """The submitting task's CPU work for a bio of nr_pages: bio_ns per request it is split into
    (max_sectors_kb), submission and completion (submit_bio)."""
    mx = s.blkdev[FILE_DEV].max_sectors_pages
    return charge(s, K.SUBMIT_BIO, p[P.BIO_NS] * ((nr_pages + mx - 1) // mx))


@jit_inline
def read_one_folio(s, p, r, cpu, page, now, scratch, cands):
    """The folio of an absent `page` alone, read with one request (filemap_read_folio(), or a
    readahead of one page): inline, the common case of random reads. Returns (completion, ok, cost)."""
    nid, head, nr, cost = ra_add_folio(s, p, r, cpu, page, now, scratch, cands)
    if nid < 0:
        return np.int64(0), False, cost
    return blk_submit(s, FILE_DEV, now + np.int64(cost), nr, False), True, cost + bio_cost(s, p, nr)


@jit
def ra_read(s, p, task, cpu, r, start, end, mark, now, scratch, cands):
    """page_cache_ra_unbounded(): a folio for every absent page of [start, end) (cut at the end of
    the file), added to the page cache and the LRU, the one holding `mark` marked PG_readahead
    (mark -1: none); each run of new folios is one bio submitted at the time it is complete.
    Returns (completion of the window's reads (0: nothing read), the head of the marked folio or -1,
    the first page not handled (< end only when an allocation failed: OOM), cost in ns)."""
    end = min(end, s.regions.start[r + 1])
    cost = 0.0
    done = np.int64(0)
    marked = np.int64(-1)
    run = np.int64(-1)
    x = start
    while x < end:
        if page_present(s, x):
            if run >= 0:
                done = max(done, blk_submit(s, FILE_DEV, now + np.int64(cost), x - run, False))
                cost += bio_cost(s, p, x - run)
                run = -1
            x = folio_head(s, x) + folio_nr_pages(s, folio_head(s, x))
            continue
        # the folios added so far are locked until read: a later one's allocation cannot reclaim them
        s.sys[0].ra_add_start = start
        s.sys[0].ra_add_end = x
        nid, head, nr, c = ra_add_folio(s, p, r, cpu, x, now + np.int64(cost), scratch, cands)
        cost += c
        if nid < 0:
            break
        if head <= mark < head + nr:
            marked = head
        if run < 0:
            run = head
        x = head + nr
    s.sys[0].ra_add_end = 0
    if run >= 0:
        done = max(done, blk_submit(s, FILE_DEV, now + np.int64(cost), x - run, False))
        cost += bio_cost(s, p, x - run)
    return done, marked, x, cost


@jit_inline
def ra_reset(t, r):
    """A fresh file_ra_state (file_ra_state_init: prev_pos -1) for the task's file r."""
    t.ra_file = r
    t.ra_start = 0
    t.ra_size = 0
    t.ra_async_size = 0
    t.ra_mark = -1
    t.ra_done = 0
    t.ra_prev_start = 0
    t.ra_prev_end = 0
    t.ra_prev_done = 0
    t.prev_pos = -1


@jit
def ra_window(s, p, task, cpu, r, start, size, async_size, now, scratch, cands):
    """readit: record the window in the file_ra_state (the previous one stays known while its reads
    may be in flight) and read it (page_cache_ra_order). Returns (done, first page not handled, cost)."""
    t = s.task[task]
    t.ra_prev_start = t.ra_start
    t.ra_prev_end = t.ra_start + t.ra_size
    t.ra_prev_done = t.ra_done
    t.ra_start = start
    t.ra_size = size
    t.ra_async_size = async_size
    done, marked, x, cost = ra_read(s, p, task, cpu, r, start, start + size, start + size - async_size,
                                    now, scratch, cands)
    t.ra_mark = marked
    t.ra_done = done
    return done, x, cost


@jit
def page_cache_sync_ra(s, p, task, cpu, r, page, req, now, scratch, cands):
    """A read that found no folio at `page` (req: pages the call still asks for). Reads the page and
    whatever readahead adds. Returns (completion of the page's read, ok, cost); ok is False when
    the page itself could not be allocated (OOM)."""
    t = s.task[task]
    if t.ra_file != r:
        ra_reset(t, r)
    lo = s.regions.start[r]
    req = max(req, 1)
    rap = file_ra_pages(s, p, r)
    if s.regions.advice[r] == FADV_RANDOM or rap == 0:
        # force_page_cache_ra(): just the request (one page with readahead off)
        n = 1 if rap == 0 else min(req, max(s.blkdev[FILE_DEV].max_sectors_pages, rap))
        done, _, x, cost = ra_read(s, p, task, cpu, r, page, page + n, -1, now, scratch, cands)
        return done, x > page, cost
    mx = ractl_max_pages(s, rap, req)
    if page == lo or req > mx or (t.prev_pos >= 0 and 0 <= page - t.prev_pos <= 1):
        size = get_init_ra_size(req, mx)
        async_size = size - req if size > req else size >> 1
    else:
        miss = page_cache_prev_miss(s, lo, page - 1, mx)
        contig = page - miss - 1
        if contig <= req:
            # a standalone small random read: read as is, leave the state alone
            done, _, x, cost = ra_read(s, p, task, cpu, r, page, page + req, -1, now, scratch, cands)
            return done, x > page, cost
        if miss < lo:
            contig *= 2              # cached from the file's start: a long stream
        size = min(contig + req, mx)
        async_size = 1
    done, x, cost = ra_window(s, p, task, cpu, r, page, size, async_size, now, scratch, cands)
    return done, x > page, cost


@jit
def page_cache_async_ra(s, p, task, cpu, page, req, now, scratch, cands):
    """A read reached the folio the task's last window marked PG_readahead (`page`): push the window
    forward and read it while the task goes on. Returns the cost in ns."""
    t = s.task[task]
    t.ra_mark = -1                       # folio_clear_readahead()
    r = t.ra_file
    mx = ractl_max_pages(s, file_ra_pages(s, p, r), max(req, 1))
    expected = t.ra_start + t.ra_size - t.ra_async_size
    expected &= ~(folio_nr_pages(s, page) - 1)
    if page != expected:
        return 0.0                       # cannot happen with the task's own mark (see the docstring)
    start = t.ra_start + t.ra_size
    size = max(t.ra_size, get_next_ra_size(t.ra_size, mx))
    # readit: the window's end aligned down to ra->order (2 for a mapping without large folios)
    align = np.int64(1) << min(2, trailing_zeros(mx))
    end = start + size
    aligned_end = end & ~(align - 1)
    if aligned_end > start:
        size -= end - aligned_end
    done, x, cost = ra_window(s, p, task, cpu, r, start, size, size, now, scratch, cands)
    return cost


@jit_inline
def trailing_zeros(x):
    """ffs(x) - 1 for x > 0."""
    n = 0
    while x > 0 and not (x & 1):
        x >>= 1
        n += 1
    return n


@jit_inline
def ra_ready(t, page, now):
    """When `page`, present, has been read: the completion of the task's window holding it, or 0
    when it is not in one still being read."""
    if t.ra_done <= now:
        return np.int64(0)
    if t.ra_start <= page < t.ra_start + t.ra_size:
        return t.ra_done
    if t.ra_prev_start <= page < t.ra_prev_end:
        return t.ra_prev_done
    return np.int64(0)


@jit_inline
def call_pages_left(ops, pos, end, cap):
    """Pages of the current read() from `pos` to the op that ends the call (the buffer's end at the
    latest; at most cap): readahead's req_count."""
    n = 0
    while pos + n < end and n < cap:
        n += 1
        if ops[np.uint64(pos + n - 1)] & OP_SYSCALL_END:
            break
    return n


@jit_inline
def call_goes_on(ops, pos, n, end, cap):
    """Whether the read() that call_pages_left() counted n pages of goes on past the buffer's `end`
    (its end op not buffered yet, and fewer than cap pages counted): req_count needs more input."""
    return n < cap and pos + n >= end and not (ops[np.uint64(pos + n - 1)] & OP_SYSCALL_END)
