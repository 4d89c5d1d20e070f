"""Contended kernel locks: lruvec->lru_lock per node and mapping->i_pages' xa_lock per file.

Models who takes the two locks the seed 003 thread argues about, and for how long:

    lruvec->lru_lock (one lruvec per node: the root memcg)
        folio_batch_move_lru()    draining a CPU's lru_add batch (lru.lru_add_drain_cpu), once per
                                  run of folios of one node, as folio_lruvec_relock_irqsave() relocks
        folio_activate()          moving a folio to the active list (lru.folio_mark_accessed)
        isolate_lru_folios()      reclaim taking up to SWAP_CLUSTER_MAX folios off a list
                                  (reclaim.shrink_inactive_list, shrink_active_list)
        move_folios_to_lru()      reclaim putting the folios it keeps back (same two)
    mapping->i_pages xa_lock (one per file: a REGION_FILE / REGION_FILE_MAPPED region)
        __filemap_add_folio()     a page-cache miss inserting the new folio (memory.fault_in)
        __remove_mapping()        reclaim dropping a clean or written-back file folio
                                  (reclaim.reclaim_folio)

The model. A lock is a contended resource of rate 1 ns of hold per ns: a capacity calendar
(resource.py) in bins of state.LOCK_BIN_NS = 256 ns, s.locks[lock]. Taking the lock books its hold time
at the taker's virtual time and returns the wait, which is charged to the taker (a spinning CPU
does nothing else). The hold time itself is not charged again: it is part of the cost the caller
already charges for the work (pagecache_insert_ns, fault_ns, reclaim_scan_ns, reclaim_free_ns,
the calibrated per-page read cost), so an uncontended lock changes no result. So that one
entity's holds never overlap each other, each is booked inside the interval its work is charged
for: a fault's at the start of the fault's own work, reclaim's isolation at the start of a batch
and its putback at the end, __remove_mapping after the write-back. A 256-ns bin is about
one or two short critical sections, so two holds that overlap in virtual time serialise as on a
FIFO ticket lock, to within one bin: the second waits for the first one's bins to fill. The holds
of clients that run later in host order but earlier in virtual time find the room of their own
time (the calendar's point). The ring of state.LOCK_BINS = 8192 bins spans 2.1 ms of virtual
time, at least 4x the most the clocks spread: a quantum (at most 24 us, config.QUANTUM_US) plus
one step (time_rules.MAX_STEP_NS, 500 us: a reclaim batch that swaps out 32 pages, ~330 us, or a
move_pages migration batch of 512 pages, ~460 us; a read's wait ends a step, the task sleeps
through it). A hold booked further back than that is served without a wait and counted
(`beyond` in the Result's `locks` table): Simulation.run warns (TimeRulesWarning) when a longer
step did it -- only costs set far above their defaults make one: system calls that move, drop or
unmap many pages go a bounded piece per step -- and otherwise stops with an error, an engine bug. 128 KiB per lock: one per node and
per region.

Hold times are costs (costs.py: lru_lock_ns + lru_lock_folio_ns per folio, xa_lock_ns), each with
its assumption.

Simplifications: activation takes the lock per folio (the kernel queues activations in a per-CPU
lru_activate batch and takes the lock once per 31; the total hold is the same, the number of
acquisitions is not); a migrated folio goes onto the destination LRU without the lock (migrate.py
puts it there directly), and folio_isolate_lru() for promotion, folio_migrate_mapping() and the
swap cache's address_space lock are not modelled; a spinlock's cache-line transfer between
sockets is part of the fixed hold (lru_lock_ns), not a function of where the last holder ran.
"""
from __future__ import annotations

import numpy as np
from ._jit import jit_inline

from .params import P
from .profile import K, charge
from .resource import calendar_book
from .state import region_of

# s.locks (state.allocate, bins of state.LOCK_BIN_NS): lru_lock of node n at n, the xa_lock of
# region r at nr_nodes + r (regions that are not files never take theirs)


@jit_inline
def lru_lock_hold(p, nr_folios):
    return p[P.LRU_LOCK_NS] + p[P.LRU_LOCK_FOLIO_NS] * nr_folios


@jit_inline
def lru_lock(s, p, nid, now, nr_folios):
    """Take and release lruvec->lru_lock of node `nid` at `now`, moving nr_folios folios under it.
    Returns the wait in ns (charged to spin(lru_lock): native_queued_spin_lock_slowpath)."""
    return charge(s, K.SPIN_LRU_LOCK, calendar_book(s.locks, np.int64(nid), now, lru_lock_hold(p, nr_folios)))


@jit_inline
def i_pages_lock(s, p, page, now):
    """Take and release the xa_lock of the mapping (file) holding `page` at `now` for one xarray
    store. Returns the wait in ns (charged to spin(xa_lock))."""
    return charge(s, K.SPIN_XA_LOCK, calendar_book(s.locks, s.lruvec.shape[0] + region_of(s, page), now,
                                                   p[P.XA_LOCK_NS]))
