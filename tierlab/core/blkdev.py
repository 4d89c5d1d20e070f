"""A block device: the storage that page-cache misses read from and write-back writes to.

Models what the block layer and an NVMe SSD do with the bios that readahead and write-back submit
(block/blk-merge.c: a bio is split into requests of at most queue/max_sectors_kb; the device serves
up to its queue depth of requests at once, with a bandwidth and an IOPS ceiling), and counts what
/proc/diskstats counts (reads/writes completed, sectors, time spent).

The time model. A request of b bytes submitted at time t has a service time

    S = latency + b / bandwidth          (the device's unloaded 4 KiB latency, plus the transfer)

and completes at t + wait + S. The wait comes from three capacity calendars (resource.py), which
every reader and writer of the device books at its own virtual time:

    ops     rate = the device's peak 4 KiB IOPS; a read books 1, a write read_iops/write_iops
    bytes   rate = the peak read bandwidth; a read books b, a write b * read_bw/write_bw
    slots   rate = queue_depth (requests served at once); a request books S (ns of a slot)

and wait = the largest of the three calendars' waits. So one task doing synchronous 4 KiB reads is
latency-bound (1/S per second), many tasks are IOPS-bound (the ops calendar's rate), large
sequential requests are bandwidth-bound, and the device never completes more operations or bytes
per unit of time than its figures, for any number of tasks in any order (tests/test_blkdev.py).
Writes share the read budgets in proportion to their own figures (a write costs what it displaces).

Simplifications, and why: below saturation requests do not wait (the calendars have room), so
latency does not rise with load before the ceiling (a real SSD's does, a little: its internal queues);
the device has no internal cache, no read/write interference beyond the shared budgets, no
garbage collection. One request queue per device, no I/O scheduler (NVMe's default is none).
Requests of one bio are submitted at the same time.
"""
from __future__ import annotations

import numpy as np
from ._jit import jit_inline

from .resource import CAL_BINS, calendar_array, calendar_book
from .state import BLKDEV_DTYPE

FILE_DEV = 0          # the device every file lives on
CAL_OPS = 0
CAL_BYTES = 1
CAL_SLOTS = 2
NR_DEV_CALS = 3
SECTOR_SHIFT = 9
PAGE_SECTORS = 8

DEV_BINS = CAL_BINS     # ring size of the device calendars: the horizon is 8192 bins of `dev_bin_ns`

DEVICE_FIELDS = ("read_lat_ns", "write_lat_ns", "read_bw", "write_bw", "read_iops", "write_iops",
                 "queue_depth", "max_sectors_pages")


def blkdev_array(devices, bin_ns: int):
    """The devices' records (BLKDEV_DTYPE, figures from `devices`: dicts of DEVICE_FIELDS, rates per
    ns) and their NR_DEV_CALS calendars each, with bins of `bin_ns` ns."""
    dev = np.zeros(len(devices), BLKDEV_DTYPE)
    for i, d in enumerate(devices):
        for k in DEVICE_FIELDS:
            dev[i][k] = d[k]
    rates = []
    for d in dev:
        rates += [d["read_iops"], d["read_bw"], float(d["queue_depth"])]
    return dev, calendar_array(rates if rates else [1.0], bin_ns, DEV_BINS)


@jit_inline
def blk_submit(s, dev, now, nr_pages, write):
    """submit_bio() of `nr_pages` contiguous pages at time `now` (ns): the bio is split into
    requests of at most max_sectors_kb, each booked on the device's calendars. Returns the time
    the last request completes (ns). Nothing waits here: the caller decides who waits for it.
    Inlined (a random read's miss path makes no out-of-line call but a calendar's slow case)."""
    d = s.blkdev[dev]
    cal = dev * NR_DEV_CALS
    done = now
    left = nr_pages
    while left > 0:
        n = min(left, d.max_sectors_pages)
        left -= n
        nbytes = np.float64(n * 4096)
        if write:
            svc = d.write_lat_ns + nbytes / d.write_bw
            ops = d.read_iops / d.write_iops
            units = nbytes * (d.read_bw / d.write_bw)
        else:
            svc = d.read_lat_ns + nbytes / d.read_bw
            ops = 1.0
            units = nbytes
        w = calendar_book(s.devcal, cal + CAL_OPS, now, ops)
        w = max(w, calendar_book(s.devcal, cal + CAL_BYTES, now, units))
        w = max(w, calendar_book(s.devcal, cal + CAL_SLOTS, now, svc))
        t = now + np.int64(w + svc)
        if write:
            d.wr_ios += 1
            d.wr_sectors += n * PAGE_SECTORS
            d.wr_ticks_ns += t - now
        else:
            d.rd_ios += 1
            d.rd_sectors += n * PAGE_SECTORS
            d.rd_ticks_ns += t - now
        if t > done:
            done = t
    if done > d.last_done_ns:
        d.last_done_ns = done
    return done
