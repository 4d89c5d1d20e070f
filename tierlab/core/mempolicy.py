"""Memory policy system calls: migrate_pages(2), mbind(2) and set_mempolicy(2) (mm/mempolicy.c).

- migrate_pages(2) of the calling task's own process (kernel_migrate_pages with pid 0, what
  `migratepages` runs for a pid): do_migrate_pages() drains the lru_add batches
  (lru_cache_disable) and, for each source node of `from` other than the target, migrate_to_node():
  queue_pages_range() over every VMA of the mm with MPOL_MF_MOVE isolates the folios mapped there
  on that node, and migrate_pages(MR_SYSCALL) moves them (migrate.migrate_folio_list).
- mbind(2) of a slot (do_mbind): the VMA gets the policy (mode, nodes, MPOL_F_NUMA_BALANCING as
  config.policy_code gives it for a Region); with MPOL_MF_MOVE, queue_pages_range() with
  MPOL_MF_INVERT isolates the mapped folios on nodes outside the new nodemask and
  alloc_migration_target_by_mpol() sends each where the new policy would allocate it now (its
  zonelist's first node, page_alloc.policy_nodes). A slot mapped later (CTRL_MMAP) keeps the
  policy, as the slot's own VMA policy.
- set_mempolicy(2) (do_set_mempolicy): the process's task policy, which its VMAs without a policy
  of their own follow from then on (the model keeps one task policy per mm: its threads share it).

Only folios mapped by the mm's page tables are queued (page cache that the mm has not mapped is
not part of its address space), and only those on an LRU (the kernel's isolation fails for the
others and they stay). Counters: pgmigrate_success/fail; NUMA balancing's are not touched.

Simplifications: one pass over the mm's VMAs queues every source node's folios (the kernel calls
migrate_to_node() once per source node, in an order that avoids moving a folio twice: with one
target node the result is the same); migrate_pages(2)'s target is one node (the kernel maps each
source node to a node of `to`); a folio's walk costs nothing besides its migration (as in
migrate.py).
"""
from __future__ import annotations

import numpy as np

from ._jit import jit, jit_inline

from .lru import drain_or_resume, lru_add_drain_all
from .migrate import do_pages_move, folio_isolate_lru, migrate_folio_list, queue_folio
from .fileio import syscall_entry_ns
from .mm import force_sig_segv, region_takes_task_policy, set_region_nodes
from .ops import CTRL_KIND_MASK, CTRL_MBIND, CTRL_MIGRATE_PAGES, CTRL_SET_MEMPOLICY, MOVE_NODE_SHIFT, ctrl_unpack
from .page_alloc import policy_nodes
from .state import (
    F2_MAPPED, F2_PRESENT, MPOL_DEFAULT, MPOL_F_MOF, MPOL_F_MORON, MPOL_F_NUMA_BALANCING, folio_head, folio_nr_pages,
)

MPOL_MF_MOVE = 1             # the mbind flag (include/uapi/linux/mempolicy.h 1 << 1, encoded here as bit 0)
MBIND_NUMA_BALANCING = 2     # the mode flag MPOL_F_NUMA_BALANCING, encoded as bit 1 of the op's flags
MBIND_MODE_SHIFT = 20        # a CTRL_MBIND arg: slot | mode << 20 | flags << 24 | nodemask << 32
MBIND_FLAGS_SHIFT = 24
MBIND_NODES_SHIFT = 32
MIGRATE_FROM_SHIFT = 8       # a CTRL_MIGRATE_PAGES arg: to_node | from_nodemask << 8


def nodemask(nodes) -> int:
    """A nodemask of node numbers (bit n = node n)."""
    mask = 0
    for n in nodes:
        mask |= 1 << int(n)
    return mask


def mbind_arg(slot: int, mode: int, nodes, move: bool = False, numa_balancing: bool = False) -> int:
    """The `page` slot of a CTRL_MBIND op."""
    mask = nodemask(nodes)
    flags = (MPOL_MF_MOVE if move else 0) | (MBIND_NUMA_BALANCING if numa_balancing else 0)
    return int(slot) | int(mode) << MBIND_MODE_SHIFT | flags << MBIND_FLAGS_SHIFT | mask << MBIND_NODES_SHIFT


def set_mempolicy_arg(mode: int, nodes, numa_balancing: bool = False) -> int:
    """The `page` slot of a CTRL_SET_MEMPOLICY op (mbind_arg's layout without a slot or MF_MOVE)."""
    return mbind_arg(0, mode, nodes, False, numa_balancing)


def mbind_unpack(arg: int):
    """(slot, mode, flags, nodemask) of a CTRL_MBIND arg (mbind_arg's inverse), for Python."""
    return (arg & ((1 << MBIND_MODE_SHIFT) - 1), (arg >> MBIND_MODE_SHIFT) & 15, (arg >> MBIND_FLAGS_SHIFT) & 255,
            arg >> MBIND_NODES_SHIFT)


def migrate_arg(from_nodes, to_node: int) -> int:
    """The `page` slot of a CTRL_MIGRATE_PAGES op."""
    return int(to_node) | nodemask(from_nodes) << MIGRATE_FROM_SHIFT


@jit_inline
def folio_queueable(s, head):
    """queue_folios_pte_range()'s first tests: a folio present and mapped by the mm's page tables."""
    f2 = s.pages.flags2[head]
    return (f2 & F2_PRESENT) != 0 and (f2 & F2_MAPPED) != 0


@jit
def do_migrate_pages(s, p, task, from_mask, dst, now, folios):
    """migrate_pages(2) of the task's own mm: every mapped folio on a node of from_mask (dst
    excluded) to node dst, one migration batch per call (as do_pages_move: task.ctrl_next is 1 +
    the page to go on from while the call is under way). Returns (folios not migrated, cost in ns)."""
    t = s.task[task]
    cost, first = drain_or_resume(s, p, t, 0, now)
    mm = t.mm
    m = np.uint64(from_mask)
    n = 0
    queued = 0
    failed = 0
    for r in range(s.regions.kind.shape[0]):
        if s.regions.mm[r] != mm:
            continue
        x = max(s.regions.start[r], first)
        while x < s.regions.end[r]:
            head = folio_head(s, x)
            nr = folio_nr_pages(s, head)
            nid = s.pages.node[head]
            if (folio_queueable(s, head) and nid != dst and (m >> np.uint64(nid)) & np.uint64(1)
                    and folio_isolate_lru(s, head)):
                n, queued, f, c = queue_folio(s, p, folios, n, queued, head, dst, now + np.int64(cost))
                failed += f
                cost += c
                if n == 0:
                    t.ctrl_next = head + nr + 1      # a batch went: the rest in the next step
                    return failed, cost
            x = head + nr
    if n > 0:
        f, c = migrate_folio_list(s, p, folios, n, dst, now + np.int64(cost))
        failed += f
        cost += c
    return failed, cost


@jit_inline
def policy_flags_of(mode, flags):
    """pol->flags of a new policy: MOF | MORON for the default one and for one given
    MPOL_F_NUMA_BALANCING (config.policy_code's rule)."""
    pol_flags = 0
    if mode == MPOL_DEFAULT or (flags & MBIND_NUMA_BALANCING):
        pol_flags = MPOL_F_MOF | MPOL_F_MORON
    if flags & MBIND_NUMA_BALANCING:
        pol_flags |= MPOL_F_NUMA_BALANCING
    return pol_flags


@jit_inline
def set_region_policy(s, r, mode, flags, mask):
    """Slot r's effective policy: mode, its nodes in node order, its flags."""
    s.regions.policy[r] = mode
    s.regions.pol_flags[r] = policy_flags_of(mode, flags)
    set_region_nodes(s, r, mask)


@jit
def do_set_mempolicy(s, task, mode, flags, mask):
    """set_mempolicy(2): the task policy of the task's mm (one policy per process here), which every
    VMA without a policy of its own follows from its next allocation on (get_vma_policy falls back
    to it); pages already placed stay."""
    mm = s.task[task].mm
    s.mm[mm].policy = mode
    s.mm[mm].policy_flags = policy_flags_of(mode, flags)
    s.mm[mm].policy_nodes = np.uint64(mask) if mode != MPOL_DEFAULT else np.uint64(0)
    for r in range(s.regions.kind.shape[0]):
        if s.regions.mm[r] == mm and not s.regions.vma_policy[r]:
            region_takes_task_policy(s, r, mm)


@jit
def do_mbind(s, p, task, r, mode, flags, mask, now, folios, cands):
    """mbind(2) of slot r by `task` (its VMA must be the task's mm's): set the policy and, with
    MPOL_MF_MOVE, move the mapped folios on nodes outside `mask` to where the new policy places
    them, one migrate_pages() per run of folios with the same target, and one migration (a batch or
    a run's end) per call, as do_pages_move (task.ctrl_next). Returns (ok, cost in ns)."""
    t = s.task[task]
    cost = 0.0
    if t.ctrl_next == 0:
        if s.regions.mm[r] != t.mm:
            return False, 0.0
        set_region_policy(s, r, mode, flags, mask)
        s.regions.vma_policy[r] = 1
        if not (flags & MPOL_MF_MOVE) or mode == MPOL_DEFAULT:
            return True, 0.0
        cost = lru_add_drain_all(s, p, now)
        x = s.regions.start[r]
    else:
        x = t.ctrl_next - 1
    t.ctrl_next = 0
    cpu_nid = s.cpu[t.cpu].node
    m = np.uint64(mask)
    n = 0
    queued = 0
    dst = -1
    while x < s.regions.end[r]:
        head = folio_head(s, x)
        nr = folio_nr_pages(s, head)
        nid = s.pages.node[head]
        if folio_queueable(s, head) and not ((m >> np.uint64(nid)) & np.uint64(1)):
            to = cands[0] if policy_nodes(s, r, cpu_nid, head - s.regions.start[r], cands) > 0 else -1
            if n > 0 and to != dst:
                cost += migrate_folio_list(s, p, folios, n, dst, now + np.int64(cost))[1]   # a list per target
                t.ctrl_next = head + 1               # this folio, in the next step
                return True, cost
            if to >= 0 and folio_isolate_lru(s, head):
                dst = to
                n, queued, _, c = queue_folio(s, p, folios, n, queued, head, dst, now + np.int64(cost))
                cost += c
                if n == 0:
                    t.ctrl_next = head + nr + 1      # a batch went: the rest in the next step
                    return True, cost
        x = head + nr
    if n > 0:
        cost += migrate_folio_list(s, p, folios, n, dst, now + np.int64(cost))[1]
    return True, cost


@jit
def page_movement_ctrl(s, p, task, op, arg, now, folios, cands):
    """The memory-policy and page-movement control ops (ops.CTRL_MOVE_PAGES, CTRL_MIGRATE_PAGES,
    CTRL_MBIND, CTRL_SET_MEMPOLICY) of `task`: the syscall's entry and exit, then the call. Returns (cost in ns, ok); not ok (mbind
    of a slot the task's mm does not map) records a SIGSEGV as mm.do_ctrl does."""
    kind = op & CTRL_KIND_MASK
    # a call that goes on (task.ctrl_next) entered the system call in an earlier step
    cost = syscall_entry_ns(s, p) if s.task[task].ctrl_next == 0 else 0.0
    t = now + np.int64(cost)
    if kind == CTRL_MIGRATE_PAGES:
        return cost + do_migrate_pages(s, p, task, arg >> MIGRATE_FROM_SHIFT, arg & 255, t, folios)[1], True
    if kind == CTRL_SET_MEMPOLICY:
        do_set_mempolicy(s, task, (arg >> MBIND_MODE_SHIFT) & 15, (arg >> MBIND_FLAGS_SHIFT) & 255,
                         arg >> MBIND_NODES_SHIFT)
        return cost, True
    if kind == CTRL_MBIND:
        r = arg & ((np.int64(1) << MBIND_MODE_SHIFT) - 1)
        ok, c = do_mbind(s, p, task, r, (arg >> MBIND_MODE_SHIFT) & 15, (arg >> MBIND_FLAGS_SHIFT) & 255,
                         arg >> MBIND_NODES_SHIFT, t, folios, cands)
        if not ok:
            force_sig_segv(s, task, s.regions.start[r])
        return cost + c, ok
    slot, npages = ctrl_unpack(arg)                # CTRL_MOVE_PAGES
    r = slot & ((np.int64(1) << MOVE_NODE_SHIFT) - 1)
    return cost + do_pages_move(s, p, task, r, npages, slot >> MOVE_NODE_SHIFT, t, folios), True
