"""Address spaces: VMAs mapped and unmapped, brk, process exit, and the per-mm counters.

Models mm/mmap.c and mm/vma.c mmap_region() (a VMA appears; no page is touched until it faults),
do_vmi_munmap()/unmap_region() and brk() (the heap's end moves; shrinking unmaps the tail),
mm/memory.c unmap_vmas()/zap_pte_range() (each present PTE cleared, each anon folio freed through
an mmu_gather, each swap entry released), mm/mmu_gather.c (tlb_gather_mmu/__tlb_remove_page/
tlb_flush_mmu/tlb_finish_mmu: freed pages are gathered and released in batches after a TLB flush),
mm/mmap.c exit_mmap() (the last user of an mm tears every VMA down) and kernel/exit.c do_exit()
(exit_task_work runs the task's queued work; mmput drops the mm). The RSS counters are the kernel's
MM_ANONPAGES / MM_FILEPAGES / MM_SWAPENTS (include/linux/mm_types_task.h), kept up to date by
faults (memory.py), reclaim (reclaim.py: a mapped folio is unmapped, anon goes to swap) and the
unmaps here; migration moves a folio between nodes and leaves them alone, as the kernel does.

Address space layout. A workload declares region *slots* (state.Regions: pages [start[r],
start[r+1])) and maps them into processes, at start or with CTRL_MMAP ops; a slot whose VMA is
unmapped is free for the next CTRL_MMAP, by any process, so a workload of many short-lived
processes reuses page ids and its state stays bounded. The workload, not the engine, picks the
slot: its generator must know the page ids its accesses name before the engine runs them (the way
a program knows the address mmap returned), and it does so deterministically. A slot is one VMA:
[start[r], end[r]) is mapped, brk moves end[r] within the slot.

Page-cache pages outlive the mapping and the process: unmapping a file VMA only clears its PTEs
(a young PTE marks the folio accessed, as zap_present_folio_ptes does); read()-only files have
no VMA at all. Anon folios of an unmapped range are taken off the LRU and freed; their swap
entries are released.

Simplifications: a VMA is a whole slot (no munmap of a hole: brk-style tail shrinking only); a
large anon folio a brk shrink cuts is split before the zap (huge_memory.deferred_split_at: the
deferred_split shrinker's work done at once), so only the pages past the new end are freed; the
lru_add batches of every CPU are drained before a zap (the kernel drains the local CPU's; folios
in other CPUs' batches are freed when those drain); freed pages go back to their node as they are
walked, not after the gather's next flush (the mmu_gather batches and flushes are counted for the
cost, but another entity may find up to MMU_GATHER_MAX_PAGES pages free a little early);
exit_mmap's flushes are local (no other thread of the mm is left to shoot down), one per VMA.

A large unmap (munmap, a brk shrink, the teardown at exit) goes a page table per call, as
zap_pmd_range() may reschedule after each: the task's step ends at its quantum as after any other
access, and the call goes on in its next step (task.ctrl_next; the mmu_gather lives in the task
record meanwhile). A munmap'd VMA is detached first (VMA_DETACHED), an exiting task is PF_EXITING.
"""
from __future__ import annotations

import numpy as np
from ._jit import jit, jit_inline

from .fadvise import generic_fadvise
from .fileio import syscall_entry_ns
from .huge_memory import deferred_split_at, zap_rmap_batched
from .lru import folio_mark_accessed, folio_mark_accessed_end, lru_add_drain_all, lruvec_del_folio
from .mmzone import free_folio
from .ops import CTRL_BRK, CTRL_CPU, CTRL_EXIT, CTRL_FADVISE, CTRL_KIND_MASK, CTRL_MMAP, CTRL_MUNMAP, ctrl_unpack
from .params import P
from .profile import K, charge
from .sched import sched_exit_task
from .tlb import (
    FLUSH_ALL, cpu_in_mask, current_cpu, flush_tlb_batched_pending, flush_tlb_func, flush_tlb_mm_range, inc_mm_tlb_gen,
    shootdown_ns,
)
from .state import (
    F2_ANON, F2_MAPPED, F2_PRESENT, F2_PTE_WRITE, F2_SWAPPED, MM_CPUMASK_WORDS, MPOL_DEFAULT, NO_MM, ORDER_MASK,
    PG_LRU, PG_PROTNONE, PG_YOUNG, REGION_ANON, REGION_FILE, STAMP_NONE, VMA_DETACHED, VM_WRITE, region_of,
)

# mm/mmu_gather.c: the first batch is the MMU_GATHER_BUNDLE (8) pages embedded in struct mmu_gather;
# then up to MAX_GATHER_BATCH_COUNT (10000 / MAX_GATHER_BATCH) pages of MAX_GATHER_BATCH pointers
# ((PAGE_SIZE - 16) / 8 = 510) each; when they are full, __tlb_remove_page asks for tlb_flush_mmu
MMU_GATHER_MAX_PAGES = 8 + (10000 // 510) * 510
# zap_pmd_range() may reschedule (cond_resched) after each page table: PTRS_PER_PTE pages
ZAP_STEP_PAGES = 512


@jit_inline
def cpumask_set_cpu(s, mm, cpu):
    """switch_mm(): the CPU slot now runs (or has run) a thread of the mm."""
    w = np.int64(cpu) >> 6
    s.mm[mm].cpumask[w] |= np.uint64(1) << np.uint64(np.int64(cpu) & 63)


@jit_inline
def get_mm_rss(s, mm):
    """get_mm_rss(): MM_FILEPAGES + MM_ANONPAGES (+ MM_SHMEMPAGES, which tierlab has none of)."""
    return s.mm[mm].rss_anon + s.mm[mm].rss_file


@jit
def folio_unmapped_rss(s, head, nr):
    """A mapped folio loses its PTEs outside an unmap (reclaim's try_to_unmap): its mm's counter
    drops by nr pages, and an anon folio going to swap leaves nr swap entries in the mm."""
    mm = s.regions.mm[region_of(s, head)]
    if mm < 0:
        return
    if s.pages.flags2[head] & F2_ANON:
        s.mm[mm].rss_anon -= nr
        s.mm[mm].swapents += nr
    else:
        s.mm[mm].rss_file -= nr


@jit_inline
def force_sig_segv(s, task, page):
    """The task touched `page` outside its VMAs (or misused a slot): record the SIGSEGV that stops
    the run (engine STATUS_SEGV; the API names the task and the page)."""
    s.sys[0].segv_task = task
    s.sys[0].segv_page = page


@jit
def map_file_folio(s, task, head, nr, write):
    """A load/store (`write`) reached a page-cache folio the task's mm does not map yet
    (filemap_map_pages: a minor fault installs its PTEs). Returns False, with the SIGSEGV recorded
    in `sys`, when no VMA of the task's mm covers the page or a store meets a read-only VMA; else
    counts the folio in MM_FILEPAGES."""
    if not vma_covers(s, task, region_of(s, head), head, True, write):
        force_sig_segv(s, task, head)
        return False
    s.mm[s.task[task].mm].rss_file += nr
    return True


@jit_inline
def vma_covers(s, task, r, page, kind_is_pte, write):
    """find_vma() + access_error(): does a VMA of the task's mm map `page` (region slot r), and
    allow a store (`write`: VM_WRITE)? read() and write() of a file need no VMA; a load/store of a
    read()-only file needs the file to be mapped by the task's process (workloads.base.Process.vmas)."""
    if not kind_is_pte and s.regions.kind[r] != REGION_ANON:
        return True
    if write and not (s.regions.vm_flags[r] & VM_WRITE):
        return False
    return (s.regions.mm[r] == s.task[task].mm and page < s.regions.end[r]
            and not (s.regions.vm_flags[r] & VMA_DETACHED))


@jit
def tlb_flush_mmu_ns(s, p, mm, fullmm, start, nr_pages):
    """One tlb_flush_mmu() of the range of nr_pages pages at `start`: a local flush, plus an IPI to every other
    CPU that ran the mm (its mm_cpumask) unless the whole mm is going away (exit_mmap: the exiting
    CPU's flush only), then the release of the batch. Counted as flush_tlb_mm_range (tlb.py)."""
    cost = p[P.TLB_FLUSH_NS]
    sender = current_cpu(s)
    if fullmm:
        gen = inc_mm_tlb_gen(s, mm, 1)
        if cpu_in_mask(s.mm[mm].cpumask, sender):
            flush_tlb_func(s, sender, mm, gen, 0, FLUSH_ALL, True)
        return cost
    cost += shootdown_ns(s, p, flush_tlb_mm_range(s, mm, sender, start, nr_pages))
    return cost


@jit_inline
def tlb_gather_mmu(t):
    """tlb_gather_mmu() into task record t: nothing gathered, no range to flush."""
    t.tlb_gathered = 0
    t.tlb_start = 0
    t.tlb_end = 0


@jit
def tlb_flush_gathered(s, p, t, mm, fullmm):
    """tlb_flush_mmu() of task t's gather: the range of the PTEs cleared since the last flush (none:
    no flush, as tlb_flush_mmu_tlbonly skips an empty range), and the gathered pages go. Returns the
    cost."""
    cost = 0.0
    if t.tlb_end > 0:
        cost = tlb_flush_mmu_ns(s, p, mm, fullmm, t.tlb_start, t.tlb_end - t.tlb_start)
    tlb_gather_mmu(t)
    return cost


@jit_inline
def tlb_track_range(t, x, nr):
    """tlb_remove_tlb_entry(): a present PTE of pages [x, x + nr) was cleared (the walk goes up)."""
    if t.tlb_end == 0:
        t.tlb_start = x
    t.tlb_end = x + nr


@jit
def zap_pte_range(s, p, t, r, lo, hi, fullmm, now):
    """zap_pte_range() over pages [lo, hi) of slot r, gathering into task record t's mmu_gather:
    clear every PTE, free the anon folios (off their LRU), release swap entries; file folios stay
    in the page cache. Pages of the slot go back to their untouched state, so the slot can be mapped
    again. It starts with flush_tlb_batched_pending() (tlb.py), as the kernel's does on entering a
    page table. Returns (cost in ns, the page after the last folio walked: >= hi). The cost: per PTE
    cleared (zap_pte_ns), per rmap removal (zap_rmap_ns: per folio or, under seed 001's v2 policies,
    per PTE: huge_memory.zap_rmap_batched), per freed folio (free_folio_ns), and one tlb_flush_mmu
    of the cleared range each time MMU_GATHER_MAX_PAGES pages are gathered."""
    pg = s.pages
    mm = s.regions.mm[r]
    anon = s.regions.kind[r] == REGION_ANON
    cost = 0.0
    if mm >= 0:
        cost += flush_tlb_batched_pending(s, p, mm, current_cpu(s))
    freed = 0
    nr_ptes = 0
    rmaps = 0                   # folio_remove_rmap_pte(s) calls
    batched = zap_rmap_batched(p)
    x = lo
    while x < hi:
        f2 = pg.flags2[x]
        if f2 & F2_PRESENT:
            nr = np.int64(1) << np.int64(pg.order[x] & ORDER_MASK)
            mapped = (f2 & F2_MAPPED) != 0
            if mapped:
                nr_ptes += nr
                rmaps += 1 if batched else nr
                tlb_track_range(t, x, nr)
            if anon:
                if pg.flags[x] & PG_LRU:
                    lruvec_del_folio(s, x)
                free_folio(s, x)
                if mapped and mm >= 0:
                    s.mm[mm].rss_anon -= nr
                for i in range(nr):
                    pg.flags[x + i] = 0
                    pg.flags2[x + i] = 0
                    pg.order[x + i] = 0
                    pg.stamp[x + i] = STAMP_NONE
                freed += 1
                t.tlb_gathered += nr
                if t.tlb_gathered >= MMU_GATHER_MAX_PAGES:
                    cost += tlb_flush_gathered(s, p, t, mm, fullmm)
            elif mapped:
                if pg.flags[x] & PG_YOUNG:
                    hot, wait = folio_mark_accessed(s, p, x, now + np.int64(cost))
                    cost += wait
                    folio_mark_accessed_end(s, p, x, hot)
                pg.flags[x] &= ~(PG_YOUNG | PG_PROTNONE)
                pg.flags2[x] = f2 & ~(F2_MAPPED | F2_PTE_WRITE)
                if mm >= 0:
                    s.mm[mm].rss_file -= nr
            x += nr
            continue
        if f2 & F2_SWAPPED:
            # free_swap_and_cache(): the swap entry goes with the (not present) PTE: no TLB entry
            s.sys[0].nr_swap_used -= 1
            if mm >= 0:
                s.mm[mm].swapents -= 1
            nr_ptes += 1
        elif f2 & F2_MAPPED:
            nr_ptes += 1                     # the zero page: the PTE goes, nothing is freed
            tlb_track_range(t, x, 1)
        if anon:
            pg.flags[x] = 0
            pg.flags2[x] = 0
            pg.stamp[x] = STAMP_NONE
        else:
            pg.flags2[x] = f2 & ~(F2_MAPPED | F2_PTE_WRITE)
        x += 1
    cost += charge(s, K.ZAP_PTE_RANGE, p[P.ZAP_PTE_NS] * nr_ptes + p[P.ZAP_RMAP_NS] * rmaps)
    cost += charge(s, K.FREE_PAGES_AND_SWAP_CACHE, p[P.FREE_FOLIO_NS] * freed)
    return cost, x


@jit
def zap_begin(s, p, task, r, lo, hi, now):
    """The start of an unmap of pages [lo, hi) of slot r by `task`: the lru_add batches drained, a
    large anon folio the range cuts split (huge_memory.deferred_split_at), the task's mmu_gather
    started (tlb_gather_mmu). Returns the cost."""
    cost = lru_add_drain_all(s, p, now)
    if s.regions.kind[r] == REGION_ANON:
        deferred_split_at(s, lo)        # a large folio the range cuts keeps only its other part
        deferred_split_at(s, hi)
    tlb_gather_mmu(s.task[task])
    return cost


@jit
def zap_step(s, p, task, r, x, hi, fullmm, now):
    """unmap_page_range() of slot r from page x to hi, one page table's pages (ZAP_STEP_PAGES, counted
    from the slot's start) per call, so a large unmap is not one step ahead of every other entity:
    zap_pmd_range() may reschedule after each. Returns (cost, done): not done leaves task.ctrl_next
    at 1 + the page to go on from; done ends the gather with tlb_finish_mmu's flush and clears it."""
    t = s.task[task]
    stop = min(hi, x + ZAP_STEP_PAGES - (x - s.regions.start[r]) % ZAP_STEP_PAGES)
    cost, x = zap_pte_range(s, p, t, r, x, stop, fullmm, now)
    if x < hi:
        t.ctrl_next = x + 1
        return cost, False
    t.ctrl_next = 0
    return cost + tlb_flush_gathered(s, p, t, s.regions.mm[r], fullmm), True


@jit_inline
def unmap_slot_end(s, r):
    """The end of unmap_region() of a whole VMA: the slot is free (regions.mm = NO_MM)."""
    s.regions.mm[r] = NO_MM
    s.regions.vm_flags[r] &= ~VMA_DETACHED
    s.regions.numab[r].allocated = 0      # vm_area_free -> vma_numab_state_free: a later mmap is a new VMA
    if s.regions.kind[r] != REGION_FILE:
        s.regions.end[r] = s.regions.start[r]


@jit
def do_munmap(s, p, task, r, now):
    """munmap() of the task's VMA in slot r: the VMA is detached at once (a fault in it finds no VMA:
    SIGSEGV; present PTEs still translate until zapped, as for a racing thread in the kernel), then
    zapped a page table per call (zap_step), and the slot is free at the end. Returns (ok, cost)."""
    t = s.task[task]
    if t.ctrl_next != 0:                       # under way
        cost, done = zap_step(s, p, task, r, t.ctrl_next - 1, s.regions.end[r], False, now)
    else:
        if s.regions.mm[r] != t.mm:
            return False, 0.0
        s.regions.vm_flags[r] |= VMA_DETACHED
        cost = zap_begin(s, p, task, r, s.regions.start[r], s.regions.end[r], now)
        c, done = zap_step(s, p, task, r, s.regions.start[r], s.regions.end[r], False, now + np.int64(cost))
        cost += c
    if done:
        unmap_slot_end(s, r)
    return True, cost


@jit
def mmap_region(s, task, r, npages):
    """mmap_region(): map free slot r into the task's mm over its first npages (0: all of it). A
    slot without a VMA policy of its own takes the mm's task policy (get_vma_policy falls back to
    it). Returns False (refused: the slot is in use) without changing anything."""
    if s.regions.mm[r] != NO_MM or s.regions.kind[r] == REGION_FILE:
        return False
    mm = s.task[task].mm
    size = s.regions.start[r + 1] - s.regions.start[r]
    s.regions.mm[r] = mm
    s.regions.end[r] = s.regions.start[r] + (size if npages <= 0 else min(npages, size))
    if not s.regions.vma_policy[r]:
        region_takes_task_policy(s, r, mm)
    return True


@jit_inline
def set_region_nodes(s, r, mask):
    """Slot r's policy nodes: the nodes of `mask` (bit n = node n) in node order, -1 padded."""
    m = np.uint64(mask)
    k = 0
    for nid in range(s.regions.nodes.shape[1]):
        s.regions.nodes[r, nid] = -1
    for nid in range(min(64, s.regions.nodes.shape[1])):
        if (m >> np.uint64(nid)) & np.uint64(1):
            s.regions.nodes[r, k] = nid
            k += 1


@jit_inline
def region_takes_task_policy(s, r, mm):
    """A slot without a VMA policy of its own follows mm's task policy (get_vma_policy's fallback)."""
    s.regions.policy[r] = s.mm[mm].policy
    s.regions.pol_flags[r] = s.mm[mm].policy_flags
    set_region_nodes(s, r, s.mm[mm].policy_nodes if s.mm[mm].policy != MPOL_DEFAULT else np.uint64(0))


@jit
def do_brk(s, p, task, r, npages, now):
    """brk(): move the end of the task's VMA in slot r to npages from its start (within the slot);
    shrinking unmaps the tail: the end moves first (a fault past it finds no VMA), then the tail is
    zapped a page table per call (zap_step, its end in task.ctrl_end). Returns (ok, cost)."""
    t = s.task[task]
    if t.ctrl_next != 0:                       # a shrink under way
        return True, zap_step(s, p, task, r, t.ctrl_next - 1, t.ctrl_end, False, now)[0]
    if s.regions.mm[r] != t.mm:
        return False, 0.0
    new_end = s.regions.start[r] + min(max(npages, 0), s.regions.start[r + 1] - s.regions.start[r])
    old_end = s.regions.end[r]
    s.regions.end[r] = new_end
    if new_end >= old_end:
        return True, 0.0
    # a large folio the new end cuts is split (see the module docstring)
    cost = zap_begin(s, p, task, r, new_end, old_end, now)
    t.ctrl_end = old_end
    return True, cost + zap_step(s, p, task, r, new_end, old_end, False, now + np.int64(cost))[0]


@jit_inline
def first_slot_of(s, mm):
    """The first slot mm still maps (-1: none)."""
    for r in range(s.regions.kind.shape[0]):
        if s.regions.mm[r] == mm:
            return r
    return -1


@jit
def exit_mmap_step(s, p, task, mm, now):
    """exit_mmap(): the mm's last user is gone: every VMA is unmapped in slot order (fullmm gathers),
    a page table per call (zap_step), and its slot freed. Returns (cost, done); not done leaves
    task.ctrl_next set (between two VMAs, at the next one's start: it is begun in this call)."""
    t = s.task[task]
    r = first_slot_of(s, mm)
    if r < 0:
        return 0.0, True
    cost = 0.0
    if t.ctrl_next == 0:
        cost = zap_begin(s, p, task, r, s.regions.start[r], s.regions.end[r], now)
        x = s.regions.start[r]
    else:
        x = t.ctrl_next - 1
    while True:
        c, done = zap_step(s, p, task, r, x, s.regions.end[r], True, now + np.int64(cost))
        cost += c
        if not done:
            return cost, False
        unmap_slot_end(s, r)
        r = first_slot_of(s, mm)
        if r < 0:
            return cost, True
        x = s.regions.start[r]
        cost += zap_begin(s, p, task, r, x, s.regions.end[r], now + np.int64(cost))
        if x < s.regions.end[r]:
            t.ctrl_next = x + 1
            return cost, False


@jit
def do_exit(s, p, task, now):
    """do_exit() after exit_task_work (the caller ran the task's queued work): mmput() drops the
    task's mm and the last user tears it down (exit_mmap_step, PF_EXITING meanwhile: no NUMA scan
    tick); then the task is dead. Returns the cost."""
    t = s.task[task]
    mm = t.mm
    if t.ctrl_next == 0:                       # the call's start
        s.mm[mm].users -= 1
        if s.mm[mm].users > 0:
            sched_exit_task(s, task)
            return 0.0
        t.exiting = 1
    cost, done = exit_mmap_step(s, p, task, mm, now)
    if done:
        sched_exit_task(s, task)
    return cost


@jit
def do_ctrl(s, p, task, op, arg, now):
    """A control op (ops.CTRL_*) of `task`. Returns (cost in ns, ok); not ok records a SIGSEGV in
    `sys` (an op on a slot the task's mm does not own, or mmap of a slot in use)."""
    kind = op & CTRL_KIND_MASK
    if kind == CTRL_CPU:
        return np.float64(arg), True        # the task's own CPU work (engine.fast_run charges it alike)
    r, npages = ctrl_unpack(arg)
    # the syscall's entry and exit, and the VMA work of mmap_region / do_vmi_munmap / do_brk_flags
    # (vma_op_ns, charged to the one symbol standing for all three), once: an unmap under way
    # (task.ctrl_next) entered the call in an earlier step
    under_way = s.task[task].ctrl_next != 0
    cost = 0.0 if under_way else syscall_entry_ns(s, p)
    ok = True
    if kind == CTRL_EXIT:
        cost += do_exit(s, p, task, now)
    elif r < 0 or r >= s.regions.kind.shape[0]:
        ok = False
    elif kind == CTRL_FADVISE:
        ok = s.regions.kind[r] != REGION_ANON
        if ok:
            generic_fadvise(s, r, npages)
    elif kind == CTRL_MMAP or kind == CTRL_MUNMAP or kind == CTRL_BRK:
        if not under_way:
            cost += charge(s, K.MMAP_REGION, p[P.VMA_OP_NS])
        if kind == CTRL_MMAP:
            ok = mmap_region(s, task, r, npages)
        elif kind == CTRL_MUNMAP:
            ok, c = do_munmap(s, p, task, r, now + np.int64(cost))
            cost += c
        else:
            ok, c = do_brk(s, p, task, r, npages, now + np.int64(cost))
            cost += c
    else:
        ok = False
    if not ok:
        force_sig_segv(s, task, s.regions.start[r] if 0 <= r < s.regions.kind.shape[0] else -1)
    return cost, ok


def rss_pages(s) -> np.ndarray:
    """Per mm, get_mm_rss() (pages), for results and tests."""
    return (s.mm["rss_anon"] + s.mm["rss_file"]).astype(np.int64)

