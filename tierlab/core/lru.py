"""The classic two-list LRU: active/inactive lists per node and type, folio_mark_accessed, lru_add
batching, and workingset shadow entries with refault activation.

Models mm/swap.c (folio_add_lru, the per-CPU lru_add batch, folio_mark_accessed, folio_activate) and
mm/workingset.c (workingset_eviction, workingset_refault, workingset_activation). Reclaim's side of
the lists (shrink_active_list, shrink_inactive_list) is in reclaim.py. The batch drain and
activation take the node's lru_lock (locks.py) and return the wait to their caller.

With lru_gen on (a lruvec's lru_gen_enabled, the kernel's lrugen->enabled) the same entry points go
to the multi-gen LRU (mglru.py), as the kernel's do: lruvec_add_folio/lruvec_del_folio to
lru_gen_add_folio/lru_gen_del_folio, folio_mark_accessed to folio_inc_refs, folio_add_lru marks a
folio faulted in through page tables active (lru_gen_in_fault), the workingset shadows to
lru_gen_eviction/lru_gen_refault. lru_gen_change_state() moves every folio between the two when the
knob changes (fill_evictable/drain_evictable).

Simplifications, and why:
- folio_activate() queues the folio in a per-CPU lru_activate batch and sets PG_active when the batch
  drains; here activation is immediate. It only shifts when PG_active appears by up to 31
  activations, which matters for nothing we reproduce (the 4th-access rule of the page-cache RFC
  holds either way because accesses to one folio are far apart in the workloads).
- An lru_add batch belongs to a CPU; folio_mark_accessed() on a folio still in *any* batch sets
  PG_active directly (the kernel only looks in the local CPU's batch).
- One memcg (the root); one lruvec per node.
"""
from __future__ import annotations

import numpy as np
from ._jit import jit, jit_inline

from .locks import lru_lock
from .mglru import (
    folio_inc_refs, lru_gen_add_folio, lru_gen_del_folio, lru_gen_enabled, lru_gen_eviction, lru_gen_promotion_hot,
    lru_gen_refault,
)
from .params import P
from .profile import K, charge
from .state import (
    ANON_AND_FILE, F2_ANON, F2_BATCHED, ORDER_MASK, F2_SHADOW, F2_SWAPPED, LRU_ACTIVE_ANON, LRU_ACTIVE_FILE,
    LRU_INACTIVE_ANON, LRU_INACTIVE_FILE, MAX_NR_GENS, NR_LRU_LISTS, PG_ACTIVE, PG_LRU, PG_REFERENCED,
    PG_WORKINGSET, folio_lru, folio_nr_pages, list_add, list_del, lru_gen_sentinel, lru_sentinel,
)
from .vmstat import Vm


@jit_inline
def lruvec_add_folio(s, head):
    """Put a folio at the head (newest end) of the list its flags select, and mark it PG_lru."""
    nid = s.pages.node[head]
    if s.lruvec[nid].lru_gen_enabled:
        lru_gen_add_folio(s, head, False)
        s.pages.flags[head] |= PG_LRU
        return
    lru = folio_lru(s, head)
    list_add(s, lru_sentinel(s, nid, lru), head)
    s.lruvec[nid].lru_size[lru] += folio_nr_pages(s, head)
    s.pages.flags[head] |= PG_LRU


@jit_inline
def lruvec_del_folio(s, head):
    """Unlink a folio from its LRU list (the caller then isolates, moves or frees it)."""
    nid = s.pages.node[head]
    if s.lruvec[nid].lru_gen_enabled:
        lru_gen_del_folio(s, head, False)
        s.pages.flags[head] &= ~PG_LRU
        return
    lru = folio_lru(s, head)
    list_del(s, head)
    s.lruvec[nid].lru_size[lru] -= folio_nr_pages(s, head)
    s.pages.flags[head] &= ~PG_LRU


@jit
def lru_add_drain_cpu(s, p, cpu, now):
    """Move a CPU's lru_add batch onto the LRU lists (lru_add_drain_cpu / folio_batch_move_lru),
    taking each node's lru_lock once per run of its folios (folio_lruvec_relock_irqsave), one run
    after the other. Returns the time spent waiting for the locks."""
    n = s.cpu[cpu].lru_batch_len
    wait = 0.0
    held = 0.0
    i = 0
    while i < n:
        nid = s.pages.node[s.cpu[cpu].lru_batch[i]]
        j = i + 1
        while j < n and s.pages.node[s.cpu[cpu].lru_batch[j]] == nid:
            j += 1
        wait += lru_lock(s, p, nid, now + np.int64(wait + held), j - i)
        held += p[P.LRU_LOCK_NS] + p[P.LRU_LOCK_FOLIO_NS] * (j - i)
        for k in range(i, j):
            h = s.cpu[cpu].lru_batch[k]
            s.pages.flags2[h] &= ~F2_BATCHED
            lruvec_add_folio(s, h)
        i = j
    s.cpu[cpu].lru_batch_len = 0
    return wait


@jit
def lru_add_drain_all(s, p, now):
    """lru_add_drain_all(): every CPU's lru_add batch onto the LRU lists, one after the other.
    Returns the lock wait."""
    wait = 0.0
    for cpu in range(s.cpu.shape[0]):
        wait += lru_add_drain_cpu(s, p, cpu, now + np.int64(wait))
    return wait


@jit_inline
def drain_or_resume(s, p, t, lo, now):
    """The start of a system call that walks pages a piece per step from page lo: every lru_add
    batch drained first (lru_add_drain_all, or lru_cache_disable for move_pages); or, for the call
    task record t has under way (t.ctrl_next = 1 + the page it goes on from), nothing to drain.
    Returns (cost, the page to start from); the cursor is cleared for the call to set again."""
    cost = 0.0
    first = lo
    if t.ctrl_next == 0:
        cost = lru_add_drain_all(s, p, now)
    else:
        first = t.ctrl_next - 1
    t.ctrl_next = 0
    return cost, first


@jit_inline
def folio_add_lru(s, p, cpu, head, now):
    """folio_add_lru(): queue a new folio in the CPU's lru_add batch; drain when the batch is full
    or the folio is large (the kernel drains at once for large folios). With lru_gen on, a folio
    added by a fault of a VMA with recency (the CPU's in_lru_fault) is made active (the youngest
    generation). Returns the lock wait."""
    if lru_gen_enabled(p) and s.cpu[cpu].in_lru_fault:
        s.pages.flags[head] |= PG_ACTIVE
    s.pages.flags2[head] |= F2_BATCHED
    n = s.cpu[cpu].lru_batch_len
    s.cpu[cpu].lru_batch[n] = head
    s.cpu[cpu].lru_batch_len = n + 1
    if n + 1 >= p[P.LRU_BATCH_SIZE] or folio_nr_pages(s, head) > 1:
        return lru_add_drain_cpu(s, p, cpu, now)
    return 0.0


@jit_inline
def folio_activate(s, p, head, now):
    """Move an inactive folio on the LRU to the active list (pgactivate) under its node's lru_lock.
    Returns the lock wait and the activation's own cost (activate_ns: __activate_page)."""
    wait = lru_lock(s, p, s.pages.node[head], now, 1) + charge(s, K.ACTIVATE_PAGE, p[P.ACTIVATE_NS])
    lruvec_del_folio(s, head)
    s.pages.flags[head] |= PG_ACTIVE
    lruvec_add_folio(s, head)
    s.counters[s.pages.node[head], Vm.PGACTIVATE] += folio_nr_pages(s, head)
    return wait


@jit_inline
def workingset_age_nonresident(s, nid, nr):
    s.lruvec[nid].nonresident_age += nr


@jit_inline
def folio_mark_accessed(s, p, head, now):
    """mm/swap.c folio_mark_accessed(). Returns (True when the folio was already referenced and
    active: the branch where the page-cache promotion RFC hooks in, the cost of an activation: its
    lru_lock wait and activate_ns). With lru_gen on: folio_inc_refs(), or True when
    mglru.lru_gen_promotion_hot() -- then the increment waits for folio_mark_accessed_end() after the
    promotion hook, so the access path's fast case can stop at a promotion candidate before any side
    effect."""
    if lru_gen_enabled(p):
        if lru_gen_promotion_hot(s, p, head):
            return True, 0.0
        folio_inc_refs(s, head)
        return False, 0.0
    f = s.pages.flags[head]
    if not (f & PG_REFERENCED):
        s.pages.flags[head] = f | PG_REFERENCED
        return False, 0.0
    if not (f & PG_ACTIVE):
        wait = 0.0
        if f & PG_LRU:
            wait = folio_activate(s, p, head, now)
        elif s.pages.flags2[head] & F2_BATCHED:
            s.pages.flags[head] |= PG_ACTIVE   # __lru_cache_activate_folio: lands on the active list at drain
        s.pages.flags[head] &= ~PG_REFERENCED
        workingset_age_nonresident(s, s.pages.node[head], folio_nr_pages(s, head))
        return False, wait
    return True, 0.0


@jit_inline
def folio_mark_accessed_end(s, p, head, hot):
    """The rest of folio_mark_accessed() after the page-cache promotion hook: with lru_gen on, the
    refs increment of a folio it reported hot."""
    if hot and lru_gen_enabled(p):
        folio_inc_refs(s, head)


@jit_inline
def can_swap(s, p):
    return swap_has_room(s, p, 1)


@jit_inline
def swap_has_room(s, p, nr):
    """add_to_swap() can get nr swap entries for a folio (the swap device's entries counted, not
    placed: no cluster fragmentation, simplified)."""
    return s.sys[0].nr_swap_used + nr <= p[P.SWAP_SIZE]


@jit_inline
def workingset_eviction(s, head):
    """Age the lruvec and leave a shadow entry (eviction age + workingset bit) in the page's slot."""
    nid = s.pages.node[head]
    nr = folio_nr_pages(s, head)
    if s.lruvec[nid].lru_gen_enabled:
        age, refs = lru_gen_eviction(s, nid, head)       # the token; refs > 0 is the workingset bit
        ws = PG_WORKINGSET if refs else np.uint8(0)
    else:
        # the shadow records the age before this eviction is counted, so a refault's distance
        # includes the folio's own eviction
        age = np.uint32(s.lruvec[nid].nonresident_age & 0xFFFFFFFF)
        workingset_age_nonresident(s, nid, nr)
        ws = s.pages.flags[head] & PG_WORKINGSET
    mark = F2_SWAPPED if (s.pages.flags2[head] & F2_ANON) else F2_SHADOW
    # the folio is gone: each page keeps its own swap entry / shadow (and is order 0 again)
    for i in range(nr):
        s.pages.stamp[head + i] = age
        s.pages.flags2[head + i] |= mark
        s.pages.flags[head + i] = ws
        s.pages.order[head + i] = 0


@jit
def workingset_refault(s, p, head, new_nid, evict_nid, in_fault):
    """workingset_refault()/workingset_test_recent(): on a refault of an evicted (or swapped) folio,
    activate it if its refault distance fits in the workingset. Sets flags on `head`; counters go to
    the node the folio is refaulting into. With lru_gen on: lru_gen_refault (in_fault: the refault
    is a page fault)."""
    if s.lruvec[evict_nid].lru_gen_enabled:
        lru_gen_refault(s, head, new_nid, evict_nid, in_fault)
        return
    nr = folio_nr_pages(s, head)
    anon = (s.pages.flags2[head] & F2_ANON) != 0
    had_ws = (s.pages.flags[head] & PG_WORKINGSET) != 0
    s.pages.flags[head] &= ~PG_WORKINGSET
    s.counters[new_nid, Vm.WORKINGSET_REFAULT_ANON if anon else Vm.WORKINGSET_REFAULT_FILE] += nr
    age_now = np.uint32(s.lruvec[evict_nid].nonresident_age & 0xFFFFFFFF)
    distance = np.int64(np.uint32(age_now - s.pages.stamp[head]))
    ws = s.lruvec[evict_nid].lru_size[LRU_ACTIVE_FILE]
    if anon:
        ws += s.lruvec[evict_nid].lru_size[LRU_INACTIVE_FILE]
    if can_swap(s, p):
        ws += s.lruvec[evict_nid].lru_size[LRU_ACTIVE_ANON]
        if not anon:
            ws += s.lruvec[evict_nid].lru_size[LRU_INACTIVE_ANON]
    if distance > ws:
        return
    s.pages.flags[head] |= PG_ACTIVE
    workingset_age_nonresident(s, evict_nid, nr)
    s.counters[new_nid, Vm.WORKINGSET_ACTIVATE_ANON if anon else Vm.WORKINGSET_ACTIVATE_FILE] += nr
    if had_ws:
        s.pages.flags[head] |= PG_WORKINGSET
        s.counters[new_nid, Vm.WORKINGSET_RESTORE_ANON if anon else Vm.WORKINGSET_RESTORE_FILE] += nr


@jit_inline
def inactive_is_low(s, p, nid, file):
    """inactive_is_low(): inactive * int_sqrt(10 * total_GiB) < active (ratio 1 below 1 GiB). The GiB
    are the full-size machine's: the list sizes times --scale (docs/scaling.md), so a scaled run
    keeps the full-size inactive:active target (31:1 at 100 GiB) instead of 1:1 below 1 GiB."""
    base = 2 if file else 0
    inactive = s.lruvec[nid].lru_size[base]
    active = s.lruvec[nid].lru_size[base + 1]
    gb = np.int64((inactive + active) * p[P.SCALE]) >> 18
    ratio = np.int64(np.sqrt(10.0 * gb)) if gb > 0 else np.int64(1)
    return inactive * ratio < active


@jit_inline
def node_lru_pages(s, nid):
    return (s.lruvec[nid].lru_size[LRU_INACTIVE_ANON] + s.lruvec[nid].lru_size[LRU_ACTIVE_ANON]
            + s.lruvec[nid].lru_size[LRU_INACTIVE_FILE] + s.lruvec[nid].lru_size[LRU_ACTIVE_FILE])


@jit
def lru_gen_change_state(s, enable):
    """lru_gen_change_state(): switch every lruvec between the classic lists and the generations,
    moving its folios as fill_evictable() / drain_evictable() do (each list from its tail; active
    folios to the youngest generation, and back to the active list from the two youngest)."""
    for nid in range(s.lruvec.shape[0]):
        if (s.lruvec[nid].lru_gen_enabled != 0) == enable:
            continue
        if enable:
            s.lruvec[nid].lru_gen_enabled = 1
            for lru in range(NR_LRU_LISTS):
                sent = lru_sentinel(s, nid, lru)
                while s.pages.prev[sent] != sent:
                    x = s.pages.prev[sent]
                    list_del(s, x)
                    s.lruvec[nid].lru_size[lru] -= folio_nr_pages(s, x)
                    lru_gen_add_folio(s, x, False)
        else:
            for gen in range(MAX_NR_GENS):
                for type in range(ANON_AND_FILE):
                    sent = lru_gen_sentinel(s, nid, gen, type)
                    while s.pages.prev[sent] != sent:
                        x = s.pages.prev[sent]
                        lru_gen_del_folio(s, x, False)
                        s.pages.order[x] &= ORDER_MASK          # no generation, no refs
                        nid_x = s.pages.node[x]
                        lru = folio_lru(s, x)
                        list_add(s, lru_sentinel(s, nid_x, lru), x)
                        s.lruvec[nid_x].lru_size[lru] += folio_nr_pages(s, x)
            s.lruvec[nid].lru_gen_enabled = 0
