"""The task's side of file I/O: when a read()/write() call waits for the device, and how long the
call took (its completion latency, in fio's histogram).

Two engines, per task (`task.iodepth`), as fio's psync and io_uring engines drive the kernel:

- synchronous (iodepth 0, pread()/pwrite()): a page whose read is in flight -- a miss, or a page of
  a readahead window not yet read -- stops the task until the read completes (filemap_read() waits
  on the folio lock; the task sleeps, its CPU is free for others: the wait advances only the
  task's clock).
- asynchronous (iodepth n >= 1, io_uring with buffered reads): the call is submitted and the task
  goes on; a page in flight makes the *call* complete when its read completes (io_uring's async
  buffered reads wait on the folio through a wait-queue callback, not in the task). The task keeps
  the completion times of its calls in flight (`task.inflight`, at most IODEPTH_MAX); after each
  submission it reaps those completed by its clock and, with n calls in flight, waits for the
  earliest (fio's iodepth with iodepth_batch_complete_min=1).

In the op stream a call is its pages up to the op carrying SYSCALL_END (ops.py) in both engines; the
engine is a property of the task, not of the ops. Faults through mmap always wait (a fault cannot
be asynchronous).

Completion latency (fio's clat) of each call is recorded at its end, from the clock at which it
started (the previous call's end, or the start of the task's quantum if the task was not running)
to its completion, into a per-task histogram with fio's log-linear buckets (stat.h
FIO_IO_U_PLAT_BITS = 6, FIO_IO_U_PLAT_GROUP_NR = 29: 64 buckets per power of two, ~0.8 % error,
up to ~17 s), read and write calls apart. `clat_percentiles()` reads them the way fio's
calc_clat_percentiles() does.

Simplifications: the copy of an asynchronous read is charged to the task when it submits the call
(io_uring copies in its completion path, on the same CPU); a call's pages are not re-checked
against another task's reads in flight (a page another task's readahead is still reading counts as
read); the calls still in flight when a task's stream ends are not waited for (at most one device
latency at the end of a run).
"""
from __future__ import annotations

import numpy as np
from ._jit import jit_inline

from .ops import OP_KIND_MASK, OP_READ, OP_WRITE
from .params import P
from .profile import K, charge
from .state import NR_CLAT_BUCKETS

PLAT_BITS = 6
PLAT_VAL = 1 << PLAT_BITS
FIO_PERCENTILES = (1.0, 5.0, 10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0, 90.0, 95.0, 99.0, 99.5,
                   99.9, 99.95, 99.99)   # fio's default percentile_list


@jit_inline
def plat_val_to_idx(v):
    """fio's bucket of a latency of v ns: exact below 128 ns, then 64 buckets per power of two."""
    if v < 2 * PLAT_VAL:
        return max(v, 0)
    msb = PLAT_BITS
    x = v >> (PLAT_BITS + 1)
    while x > 0:
        msb += 1
        x >>= 1
    error_bits = msb - PLAT_BITS
    idx = ((error_bits + 1) << PLAT_BITS) + ((PLAT_VAL - 1) & (v >> error_bits))
    return min(idx, NR_CLAT_BUCKETS - 1)


def plat_idx_to_val(idx: int) -> float:
    """The value fio reports for bucket idx: the bucket's middle (its own value when exact)."""
    if idx < 2 * PLAT_VAL:
        return float(idx)
    error_bits = (idx >> PLAT_BITS) - 1
    base = 1 << (error_bits + PLAT_BITS)
    return base + ((idx % PLAT_VAL) + 0.5) * (1 << error_bits)


def clat_percentiles(hist: np.ndarray, percentiles=FIO_PERCENTILES) -> dict[float, float]:
    """fio's calc_clat_percentiles(): for each percentile p, the value of the first bucket at which
    the running count reaches p/100 of all samples. Empty histogram: {}."""
    nr = int(hist.sum())
    if nr == 0:
        return {}
    out = {}
    plist = sorted(percentiles)
    j = 0
    acc = 0
    for i in np.flatnonzero(hist):
        acc += int(hist[i])
        while j < len(plist) and acc >= plist[j] / 100.0 * nr:
            out[plist[j]] = plat_idx_to_val(int(i))
            j += 1
        if j == len(plist):
            break
    return out


@jit_inline
def io_wait(t, ready, at):
    """A page an asynchronous call (iodepth > 0) reads at `at` is ready at `ready` (its read's
    completion; 0 when not in flight): the call completes no earlier, and the task goes on. (A
    synchronous task sleeps until its page is read instead: filemap.py, engine.io_sleep.)"""
    if ready > at and ready > t.call_ready:
        t.call_ready = ready


@jit_inline
def syscall_entry_ns(s, p):
    """A system call's entry and exit (do_syscall_64): a read()/write() at its end, each control op
    that is a system call."""
    return charge(s, K.DO_SYSCALL_64, p[P.SYSCALL_NS])


@jit_inline
def syscall_end(s, p, task, op, clock):
    """The end of a read()/write() call at `clock`: the system call's exit, the call's completion
    (asynchronous engine: queued in flight, and a wait while the queue is full), its completion
    latency into the histogram (from task.stats_from on), and prev_pos for readahead. Returns the task's clock."""
    t = s.task[task]
    clock += np.int64(syscall_entry_ns(s, p))
    ready = clock
    if t.call_ready > clock:
        ready = t.call_ready
        queued = uring_queue(t, ready, clock)
        charge(s, K.IO_WAIT, np.float64(queued - clock))
        clock = queued
    t.call_ready = 0
    kind = op & OP_KIND_MASK
    if kind == OP_READ:
        t.prev_pos = t.last_page + 1       # ra->prev_pos: the byte after the last one read
    if ready >= t.stats_from:             # after fio's ramp_time (0: always)
        t.clat_hist[1 if kind == OP_WRITE else 0, plat_val_to_idx(ready - t.call_clock)] += 1
    t.call_clock = clock
    return clock


@jit_inline
def uring_queue(t, ready, clock):
    """Queue a call completing at `ready` among the task's calls in flight; reap those done by
    `clock`; with iodepth in flight, wait for the earliest. Returns the task's clock."""
    n = t.nr_inflight
    t.inflight[n] = ready
    n += 1
    i = 0
    while i < n:
        if t.inflight[i] <= clock:
            n -= 1
            t.inflight[i] = t.inflight[n]
        else:
            i += 1
    if n >= t.iodepth:
        m = 0
        for k in range(1, n):
            if t.inflight[k] < t.inflight[m]:
                m = k
        clock = t.inflight[m]
        n -= 1
        t.inflight[m] = t.inflight[n]
    t.nr_inflight = n
    return clock
