"""TLB flushes as the kernel counts them: nr_tlb_remote_flush, nr_tlb_remote_flush_received,
nr_tlb_local_flush_all and nr_tlb_local_flush_one (vm_event_item.h, CONFIG_DEBUG_TLBFLUSH).

Models arch/x86/mm/tlb.c and the unmap batch of mm/rmap.c:
- flush_tlb_mm_range(): a range of more than tlb_single_page_flush_ceiling (33) pages is flushed
  whole. If mm_cpumask holds a CPU other than the sender, flush_tlb_multi() sends it (one
  nr_tlb_remote_flush); flush_tlb_func() then runs on every CPU of the mask, and each one but the
  sender counts nr_tlb_remote_flush_received. Otherwise only the sender flushes, if it runs the
  mm. The sender's own flush counts nr_tlb_local_flush_all, or nr_tlb_local_flush_one per page of
  a partial flush.
- The unmap batch (struct tlbflush_unmap_batch) that try_to_unmap()/try_to_migrate() fill with
  TTU_BATCH_FLUSH. should_defer_flush() defers only when the mm has run on a CPU other than the
  sender (arch_tlbbatch_should_defer); otherwise the PTE is cleared with ptep_clear_flush(), a
  one-page flush_tlb_mm_range(). set_tlb_ubc_flush_pending() adds the mm's CPUs to the batch only
  for a PTE that was accessible (pte_accessible: commit 4d4b6d66db, a PROT_NONE PTE needs no
  flush; ptep_clear_flush() skips it too). try_to_unmap_flush() (arch_tlbbatch_flush) flushes the
  batch's CPUs whole: flush_tlb_multi() if any is not the sender, else a local flush.

Who flushes where: reclaim's evictions (one batch, flushed at the end of shrink_folio_list) and
migrate_pages_batch() (demotion, the page-cache promotion RFC's batch: one flush per batch)
in reclaim.py / pagecache_promotion.py; munmap and exit (tlb_flush_mmu) in mm.py; the NUMA scanner's
change_prot_numa() (tlb_finish_mmu over the range of changed PTEs) in numa_balancing.py. A hint
fault's promotion flushes nothing: do_numa_page() migrates with the PTE still PROT_NONE, and a
model page has one mapping.

Simplifications: mm_cpumask holds every CPU that ever ran the mm (x86 drops a CPU lazily, at a
flush it no longer needs); there is no lazy-TLB filtering (tlb_is_not_lazy) and no per-CPU TLB
generation, so every other CPU of the mask receives each flush (the kernel counts the receipt
before it checks whether there is anything to do); exit_mmap's flushes (fullmm) are the exiting
CPU's local flush only, as mm.py costs them. The costs of flushes stay where they were (mm.py's
tlb_flush_ns and tlb_ipi_ns, migrate_batch_ns): the counters do not move the clock yet.
"""
from __future__ import annotations

import numpy as np

from ._jit import jit_inline
from .state import F2_MAPPED, MM_CPUMASK_WORDS, NO_MM, PG_PROTNONE, region_of
from .vmstat import Vm

TLB_SINGLE_PAGE_FLUSH_CEILING = 33   # arch/x86/mm/tlb.c tlb_single_page_flush_ceiling (debugfs)
FLUSH_ALL = 0                        # nr_pages for a whole-TLB flush (TLB_FLUSH_ALL)


@jit_inline
def current_cpu(s):
    """smp_processor_id(): the CPU of the entity running (sys.current: a task, or a node's kswapd)."""
    t = s.sys[0].current
    nt = s.task.shape[0]
    if t < nt:
        return s.task[t].cpu
    return s.pgdat[t - nt].kswapd_cpu


@jit_inline
def cpu_in_mask(mask, cpu):
    return ((mask[np.int64(cpu) >> 6] >> np.uint64(np.int64(cpu) & 63)) & np.uint64(1)) != 0


@jit_inline
def has_other_cpu(mask, cpu):
    """cpumask_any_but(mask, cpu) < nr_cpu_ids."""
    for w in range(MM_CPUMASK_WORDS):
        x = mask[w]
        if w == np.int64(cpu) >> 6:
            x &= ~(np.uint64(1) << np.uint64(np.int64(cpu) & 63))
        if x:
            return True
    return False


@jit_inline
def flush_tlb_mask(s, mask, sender, nr_pages, local_runs_mm):
    """One flush of the CPUs in `mask` from `sender`: nr_pages pages, or FLUSH_ALL. Counts it as
    flush_tlb_multi()/flush_tlb_func() do; `local_runs_mm`: without another CPU to send to, the
    sender flushes only if it runs the mm. Returns the number of other CPUs flushed."""
    others = 0
    if has_other_cpu(mask, sender):
        s.counters[s.cpu[sender].node, Vm.NR_TLB_REMOTE_FLUSH] += 1
        for w in range(MM_CPUMASK_WORDS):
            x = mask[w]
            while x:
                # the lowest set bit's index (a power of two is exact in a float64)
                b = np.int64(np.log2(np.float64(x & (~x + np.uint64(1)))))
                x &= x - np.uint64(1)
                c = w * 64 + b
                if c != sender:
                    s.counters[s.cpu[c].node, Vm.NR_TLB_REMOTE_FLUSH_RECEIVED] += 1
                    others += 1
        local = cpu_in_mask(mask, sender)
    else:
        local = local_runs_mm
    if local:
        local_flush(s, sender, nr_pages)
    return others


@jit_inline
def local_flush(s, cpu, nr_pages):
    """The flushing CPU's own flush (flush_tlb_func with local set): nr_tlb_local_flush_all for a
    whole flush, nr_tlb_local_flush_one per page of a ranged one."""
    if nr_pages == FLUSH_ALL:
        s.counters[s.cpu[cpu].node, Vm.NR_TLB_LOCAL_FLUSH_ALL] += 1
    else:
        s.counters[s.cpu[cpu].node, Vm.NR_TLB_LOCAL_FLUSH_ONE] += nr_pages


@jit_inline
def flush_tlb_mm_range(s, mm, sender, nr_pages):
    """flush_tlb_mm_range() of nr_pages pages of the mm from CPU `sender` (a range beyond the
    ceiling becomes a full flush). Returns the number of other CPUs flushed."""
    if nr_pages > TLB_SINGLE_PAGE_FLUSH_CEILING:
        nr_pages = FLUSH_ALL
    mask = s.mm[mm].cpumask
    return flush_tlb_mask(s, mask, sender, nr_pages, cpu_in_mask(mask, sender))


# Rows of SimState.tlb_ubc, the pending batches (the CPUs to flush, mm_cpumask words). The kernel
# keeps one per task (current->tlb_ubc); every batch here is filled and flushed (emptied) within
# one call, so one per kind is enough and each is empty between calls.
UNMAP_BATCH = 0     # try_to_unmap()'s batch (reclaim's evictions)
MIGRATE_BATCH = 1   # migrate_pages_batch()'s (demotion, promotion batches)


@jit_inline
def folio_tlb_mm(s, head):
    """The mm whose TLBs may hold the folio at `head`: the mm mapping it through an accessible PTE
    (pte_accessible), or NO_MM when no page table maps it or its PTE is PROT_NONE. Read it before
    unmapping or migrating the folio changes its PTE state."""
    if not (s.pages.flags2[head] & F2_MAPPED) or (s.pages.flags[head] & PG_PROTNONE):
        return NO_MM
    return s.regions.mm[region_of(s, head)]


@jit_inline
def tlbbatch_add(s, batch, mm, nr, sender):
    """The TLB side of unmapping a folio of nr pages that `mm` maps accessibly (folio_tlb_mm), from
    CPU `sender` with TTU_BATCH_FLUSH: the mm's CPUs join the batch when it ran on another CPU
    (should_defer_flush, set_tlb_ubc_flush_pending); otherwise each PTE is flushed at once
    (ptep_clear_flush: a one-page flush_tlb_mm_range)."""
    if mm == NO_MM:
        return
    mask = s.mm[mm].cpumask
    if has_other_cpu(mask, sender):
        for w in range(MM_CPUMASK_WORDS):
            batch[w] |= mask[w]
    else:
        local = cpu_in_mask(mask, sender)
        for i in range(nr):
            flush_tlb_mask(s, mask, sender, 1, local)


@jit_inline
def try_to_unmap_flush(s, batch, sender):
    """try_to_unmap_flush(): one whole flush of the batch's CPUs (arch_tlbbatch_flush), if any
    (an empty batch sends nothing); the batch is emptied. Returns the number of other CPUs flushed."""
    others = flush_tlb_mask(s, batch, sender, FLUSH_ALL, cpu_in_mask(batch, sender))
    for w in range(MM_CPUMASK_WORDS):
        batch[w] = 0
    return others
