"""TLB flushes as the kernel counts them: nr_tlb_remote_flush, nr_tlb_remote_flush_received,
nr_tlb_local_flush_all and nr_tlb_local_flush_one (vm_event_item.h, CONFIG_DEBUG_TLBFLUSH).

Models arch/x86/mm/tlb.c and the unmap batch of mm/rmap.c:
- flush_tlb_mm_range(): a range of more than tlb_single_page_flush_ceiling (33) pages is flushed
  whole. If mm_cpumask holds a CPU other than the sender, flush_tlb_multi() sends it (one
  nr_tlb_remote_flush); flush_tlb_func() then runs on every CPU of the mask that is not lazy
  (below), and each one but the sender counts nr_tlb_remote_flush_received. Otherwise only the sender flushes, if it runs the
  mm. The sender's own flush counts nr_tlb_local_flush_all, or nr_tlb_local_flush_one per page of
  a partial flush.
- The unmap batch (struct tlbflush_unmap_batch) that try_to_unmap()/try_to_migrate() fill with
  TTU_BATCH_FLUSH. should_defer_flush() defers only when the mm has run on a CPU other than the
  sender (arch_tlbbatch_should_defer); otherwise the PTE is cleared with ptep_clear_flush(), a
  one-page flush_tlb_mm_range(). set_tlb_ubc_flush_pending() adds the mm's CPUs to the batch only
  for a PTE that was accessible (pte_accessible: commit 4d4b6d66db, a PROT_NONE PTE needs no
  flush; ptep_clear_flush() skips it too). try_to_unmap_flush() (arch_tlbbatch_flush) flushes the
  batch's CPUs whole: flush_tlb_multi() if any is not the sender, else a local flush.

Who flushes where: shrink_folio_list's evictions and its demote_folio_list's migrate_pages_batch()
share current->tlb_ubc, flushed once at the end (reclaim.py); the page-cache promotion RFC's
batch flushes once per batch (pagecache_promotion.py); MIGRC defers what it can in both (below);
munmap and exit (tlb_flush_mmu) in mm.py; the NUMA scanner's change_prot_numa() (tlb_finish_mmu
over the range of changed PTEs) in numa_balancing.py. Both of those page-table walks first call
flush_tlb_batched_pending(): a PTE of the mm put in any unmap batch (MIGRC's read-only one too) and
not yet met by such a walk (mm->tlb_flush_batched) makes the walk flush the whole mm, once per
page table that finds one pending; a scan that is walking the mm meets a batch made meanwhile at
its next page table (scanner_meets_batch). A hint
fault's promotion (memory.do_numa_page) migrates with the PTE still PROT_NONE, and a model page has
one mapping, so it flushes nothing -- except that x86's pte_accessible() also counts a PROT_NONE
PTE as accessible while mm->tlb_flush_pending is raised (tlb_gather_mmu to tlb_finish_mmu: another
CPU's change_prot_numa() of the same mm in progress; mm_tlb_flush_pending, the scanner's window
set by numa_balancing.task_numa_work). A promotion faulting inside that window puts its mm's CPUs
in migrate_pages_batch()'s batch, flushed at the end of the unmap from the faulting CPU (a full
flush: nr_tlb_local_flush_all plus a shootdown), or under MIGRC defers a read-only clean PTE. It
is the only way a hint fault's promotion flushes (the 6.12 guest: 175 of 5,616 promotions in a
traced XSBench-shaped run, docs/oracle.md), and MIGRC's deferral of it is the candidate for the
fall of seed 004's nr_tlb_local_flush_all (#32).

Lazy TLB (6.7's x86): a CPU running a kernel thread (kswapd) or idle keeps the last user mm loaded
lazily; flush_tlb_multi() skips it (tlb_is_not_lazy) and, as a sender, it flushes nothing of its
own. So kswapd's shootdowns count one remote flush, a receipt per other CPU running a task, and
no local flush (the seed 004 guest: 45.2 M received for 3.03 M sent, 14.9 per flush on 16 CPUs).

Simplifications: mm_cpumask holds every CPU that ever ran the mm (x86 6.7 clears a CPU when it
switches to another mm, so a CPU now running another process is still sent the flush here);
freed page tables (which make x86 send to lazy CPUs too) are not tracked, so munmap's flushes
skip lazy CPUs as well; what a flush does to the CPUs' TLBs is tlb_hw.py's; exit_mmap's flushes
(fullmm) are the exiting CPU's local flush only, as mm.py costs them.

TLB generations (x86's tlb_gen). Every flush request bumps the mm's generation first
(inc_mm_tlb_gen: flush_tlb_mm_range() once, arch_tlbbatch_add_pending() once per PTE put in an
unmap batch, MIGRC's read-only batch included), and each CPU keeps the generation its TLB is up
to date with for the mm it runs (cpu_tlbstate.ctxs[].tlb_gen). flush_tlb_func() then decides on
each CPU the flush reaches, after counting the receipt: nothing for a CPU now running another mm
(it was left in the mask) or already at the flush's generation or the mm's; a ranged flush only
when it is exactly the next generation and the latest (otherwise the CPU is behind by more than
this flush and flushes whole: nr_tlb_local_flush_all instead of _one); and the CPU is then up to
date. An unmap batch's flush (arch_tlbbatch_flush) carries no generation, so it flushes whole any
CPU behind its mm's generation and skips one that is not. A CPU that switches to another mm, or
back from a kernel thread (lazy) behind its mm, flushes its TLB there (not counted in vmstat) and
is up to date (sched.switch_mm_irqs_off); with a single generation per CPU (simplified: x86 keeps
one per cached ASID), a CPU switching between two mm's flushes each time.

Costs: a sender pays shootdown_ns() for a flush it sends (migration and demotion batches,
munmap, a write-protect fault giving MIGRC up; the NUMA scanner's range flushes are in
numa_scan_update_ns, and the MIGRC releases an allocation makes are not costed), each target
tlb_flush_recv_ns (flush_irqs_ns, at its task's next access through page tables; a task doing
only read()/write() never pays it). The flush paths that run per batch, not per access, are
compiled out of line (`jit`).
"""
from __future__ import annotations

import numpy as np

from ._jit import jit, jit_inline
from .buddy import buddy_on, held_batch_done, release_held
from .params import P
from .profile import K, charge
from .tlb_hw import cpu_tlb_flush, cpu_tlb_skip_lazy
from .state import F2_MAPPED, F2_PTE_WRITE, MM_CPUMASK_WORDS, NO_MM, PG_DIRTY, PG_PROTNONE, region_of
from .vmstat import Vm

TLB_SINGLE_PAGE_FLUSH_CEILING = 33   # arch/x86/mm/tlb.c tlb_single_page_flush_ceiling (debugfs)
FLUSH_ALL = 0                        # nr_pages for a whole-TLB flush (TLB_FLUSH_ALL)
GEN_INVALID = -1                     # TLB_GENERATION_INVALID: an unmap batch's flush carries none
MIGRC_OFF = 0                        # the `migrc` knob
MIGRC_ON = 1


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
def cpu_is_lazy(s, cpu):
    """cpu_tlbstate_shared.is_lazy: the CPU runs no user task -- it runs a kernel thread (kswapd)
    or is idle -- and keeps the last user mm loaded lazily (enter_lazy_tlb). Idle means no task
    of the CPU is alive and started: a task whose part of the current chunk is done is off the
    runqueue (curr -1) only because the engine waits for the workload's next chunk, not because it
    sleeps (its CPU's clock is ahead of the flush, and it was running then)."""
    curr = s.cpu[cpu].curr
    nt = s.task.shape[0]
    if curr >= nt:
        return True
    if curr >= 0:
        return False
    t = s.cpu[cpu].first_task
    while t >= 0:
        if not s.task[t].dead and s.task[t].start <= s.cpu[cpu].clock:
            return False
        t = s.task[t].next_on_cpu
    return True


@jit
def flush_tlb_mask(s, mask, sender, start, nr_pages, local_in_mask, mm, new_gen):
    """One flush of the CPUs in `mask` from `sender`: pages [start, start + nr_pages) of `mm` at
    generation `new_gen` (flush_tlb_mm_range), or the whole TLB of whatever mm each CPU runs
    (mm NO_MM, GEN_INVALID: an unmap batch's flush). Counts it as native_flush_tlb_multi() does:
    with another CPU in the mask, one nr_tlb_remote_flush, then flush_tlb_func() on every CPU of the
    mask that is not lazy (on_each_cpu_cond_mask with tlb_is_not_lazy), each other one counting
    nr_tlb_remote_flush_received first; without one, the sender's flush alone if `local_in_mask`.
    A lazy sender (kswapd) switches to init_mm instead of flushing and counts nothing; a lazy CPU
    skipped owes a flush when it next runs a task (tlb_hw.py). Returns the number of other CPUs
    sent the flush."""
    others = 0
    local = local_in_mask
    if has_other_cpu(mask, sender):
        s.counters[s.cpu[sender].node, Vm.NR_TLB_REMOTE_FLUSH] += 1
        for w in range(MM_CPUMASK_WORDS):
            x = mask[w]
            while x:
                # the lowest set bit's index (a power of two is exact in a float64)
                b = np.int64(np.log2(np.float64(x & (~x + np.uint64(1)))))
                x &= x - np.uint64(1)
                c = w * 64 + b
                if c == sender:
                    continue
                if cpu_is_lazy(s, c):
                    cpu_tlb_skip_lazy(s, c)
                else:
                    s.counters[s.cpu[c].node, Vm.NR_TLB_REMOTE_FLUSH_RECEIVED] += 1
                    s.cpu[c].flush_irqs += 1
                    flush_tlb_func(s, c, mm, new_gen, start, nr_pages, False)
                    others += 1
        local = cpu_in_mask(mask, sender)
    if local:
        if cpu_is_lazy(s, sender):
            cpu_tlb_skip_lazy(s, sender)
        else:
            flush_tlb_func(s, sender, mm, new_gen, start, nr_pages, True)
    return others


@jit_inline
def shootdown_ns(s, p, others):
    """What sending a flush to `others` other CPUs costs the sender (charged to
    native_flush_tlb_multi): the round trip (tlb_shootdown_ns) and a per-target part (tlb_ipi_ns);
    nothing when none was sent."""
    if others == 0:
        return 0.0
    return charge(s, K.NATIVE_FLUSH_TLB_MULTI, p[P.TLB_SHOOTDOWN_NS] + p[P.TLB_IPI_NS] * others)


@jit_inline
def flush_irqs_ns(s, p, cpu):
    """The flush IPIs `cpu` received since its task last paid for them (tlb_flush_recv_ns each),
    charged to the task's next access through page tables."""
    n = s.cpu[cpu].flush_irqs
    if n == 0:
        return 0.0
    s.cpu[cpu].flush_irqs = 0
    return charge(s, K.FLUSH_TLB_FUNC, n * p[P.TLB_FLUSH_RECV_NS])


@jit_inline
def inc_mm_tlb_gen(s, mm, n):
    """inc_mm_tlb_gen() n times (once per flush request or per PTE batched); returns the new
    generation."""
    s.mm[mm].tlb_gen += n
    return s.mm[mm].tlb_gen


@jit_inline
def flush_tlb_func(s, cpu, mm, new_gen, start, nr_pages, local):
    """flush_tlb_func() on `cpu` (not lazy; its receipt already counted): the flush of `mm` at
    `new_gen` (mm NO_MM and GEN_INVALID for an unmap batch's), pages [start, start + nr_pages) or
    FLUSH_ALL. Nothing on a CPU running another mm or already up to date; a ranged flush only when
    it is the CPU's next generation and the mm's latest, else a whole one. The flushing CPU's own
    flush (`local`) counts nr_tlb_local_flush_all, or nr_tlb_local_flush_one per page."""
    loaded = s.cpu[cpu].loaded_mm
    if loaded == NO_MM or (mm != NO_MM and mm != loaded):
        return                      # left in the mask while running another mm (or none yet)
    local_gen = s.cpu[cpu].tlb_gen
    if new_gen != GEN_INVALID and new_gen <= local_gen:
        return
    mm_gen = s.mm[loaded].tlb_gen
    if local_gen == mm_gen:
        return                      # an earlier flush already brought it up to date
    if not (nr_pages != FLUSH_ALL and new_gen == local_gen + 1 and new_gen == mm_gen):
        nr_pages = FLUSH_ALL
    if local:
        if nr_pages == FLUSH_ALL:
            s.counters[s.cpu[cpu].node, Vm.NR_TLB_LOCAL_FLUSH_ALL] += 1
        else:
            s.counters[s.cpu[cpu].node, Vm.NR_TLB_LOCAL_FLUSH_ONE] += nr_pages
    cpu_tlb_flush(s, cpu, start, nr_pages)
    s.cpu[cpu].tlb_gen = mm_gen


@jit_inline
def flush_tlb_mm_range(s, mm, sender, start, nr_pages):
    """flush_tlb_mm_range() of pages [start, start + nr_pages) of the mm from CPU `sender` (a range
    beyond the ceiling becomes a full flush), at the mm's next generation. Returns the number of
    other CPUs sent the flush."""
    if nr_pages > TLB_SINGLE_PAGE_FLUSH_CEILING:
        nr_pages = FLUSH_ALL
    gen = inc_mm_tlb_gen(s, mm, 1)
    mask = s.mm[mm].cpumask
    return flush_tlb_mask(s, mask, sender, start, nr_pages, cpu_in_mask(mask, sender), mm, gen)


# Rows of SimState.tlb_ubc (mm_cpumask words: the CPUs each pending batch must flush).
TLB_UBC = 0            # current->tlb_ubc: try_to_unmap()'s and try_to_migrate()'s batch. The kernel keeps
                       # one per task; every caller here fills it and flushes it within one call, so one
                       # row serves all, and it is empty between calls
MIGRC_UBC = 1          # MIGRC's migrc_ubc: the CPUs that may still cache the PTEs of held source folios
MIGRC_PENDING_UBC = 2  # migrate_pages_batch()'s pending_ubc: the read-only batch of the folios it defers
NR_TLB_UBC = 3


@jit_inline
def folio_tlb_mm(s, head, now):
    """The mm whose TLBs may hold the folio at `head` at time `now`: the mm mapping it through an
    accessible PTE, or NO_MM when no page table maps it or its PTE is not accessible. x86's
    pte_accessible(): a present PTE is; a PROT_NONE one only while the mm has a TLB flush pending
    (mm_tlb_flush_pending: another CPU may still cache the translation the NUMA scanner has just
    made PROT_NONE and not yet flushed), so an unmap then flushes. Read it before unmapping or
    migrating the folio changes its PTE state."""
    if not (s.pages.flags2[head] & F2_MAPPED):
        return NO_MM
    mm = s.regions.mm[region_of(s, head)]
    if (s.pages.flags[head] & PG_PROTNONE) and not mm_tlb_flush_pending(s, mm, now):
        return NO_MM
    return mm


@jit_inline
def mm_tlb_flush_pending(s, mm, now):
    """mm_tlb_flush_pending(): an mmu_gather of the mm is open at `now` -- in the model the NUMA
    scanner's task_numa_work() call, whose change_prot_numa() ranges raise mm->tlb_flush_pending
    (tlb_gather_mmu) until their flush (tlb_finish_mmu). Simplified: one window over the whole call
    (the kernel lowers it for a moment between ranges); munmap's and reclaim's own gathers are not
    windows here (they flush what they change before anything else can fault on it)."""
    return s.mm[mm].flush_pending_start <= now < s.mm[mm].flush_pending_end


@jit_inline
def set_tlb_ubc_flush_pending(s, mm, nr, now):
    """The mm's side of set_tlb_ubc_flush_pending() for nr PTEs put in an unmap batch at `now`
    (arch_tlbbatch_add_pending: a generation each; mm->tlb_flush_batched: one pending each). Until
    the batch is flushed another CPU may still cache them, so a page-table walk that meets the mm
    first flushes all of it (flush_tlb_batched_pending). If the NUMA scanner is walking the mm now,
    it meets them (scanner_meets_batch)."""
    inc_mm_tlb_gen(s, mm, nr)
    s.mm[mm].tlb_flush_batched += nr
    if mm_tlb_flush_pending(s, mm, now):
        scanner_meets_batch(s, mm, now)


@jit
def flush_tlb_batched_pending(s, p, mm, sender):
    """flush_tlb_batched_pending(), which change_pte_range() (the NUMA scanner) and zap_pte_range()
    (munmap, exit) call on entering each page table: if PTEs of the mm went into an unmap batch
    since the last such call (mm->tlb_flush_batched: pending != flushed), a PTE the walk changes may
    still be cached by a CPU that batch has not flushed yet, and the walk cannot tell which, so the
    whole mm is flushed first (flush_tlb_mm from `sender`: a shootdown to the mm's other CPUs and a
    full local flush). Returns what it costs the sender."""
    mmr = s.mm[mm]
    if mmr.tlb_flush_batched == mmr.tlb_flush_batched_done:
        return 0.0
    mmr.tlb_flush_batched_done = mmr.tlb_flush_batched
    return p[P.TLB_FLUSH_NS] + shootdown_ns(s, p, flush_tlb_mm_range(s, mm, sender, 0, FLUSH_ALL))


@jit
def scanner_meets_batch(s, mm, now):
    """PTEs of the mm batched at `now`, while the NUMA scanner walks it (its window,
    mm_tlb_flush_pending): its change_pte_range() calls flush_tlb_batched_pending() at the next page
    table it enters, so the scanner's CPU flushes the whole mm then, once for every batch made
    while it walked one page table. Simplified: the walk's page tables are evenly spaced over the
    window (numa_balancing.open_scan_window), the flush is made at the first batching within a page
    table's time (at most that much early: one 2 MiB page table of a 2 ms, 256 MiB scan is ~16 us),
    and it is not charged to the scanner, whose walk's cost is booked when it starts."""
    mmr = s.mm[mm]
    k = (now - mmr.flush_pending_start) // max(np.int64(1), mmr.flush_pending_pmd_ns)
    if k != mmr.flush_pending_poll:
        mmr.flush_pending_poll = k
        flush_tlb_mm_range(s, mm, mmr.flush_pending_cpu, 0, FLUSH_ALL)
    mmr.tlb_flush_batched_done = mmr.tlb_flush_batched     # the scanner's next page table covers them


@jit_inline
def should_defer_flush(s, mm, sender):
    """should_defer_flush() with TTU_BATCH_FLUSH: x86 defers only when the mm ran on a CPU other
    than the sender (arch_tlbbatch_should_defer)."""
    return has_other_cpu(s.mm[mm].cpumask, sender)


@jit_inline
def tlbbatch_add(s, p, batch, mm, head, nr, sender, now):
    """The TLB side of unmapping the folio of nr pages at `head` that `mm` maps accessibly (folio_tlb_mm), from
    CPU `sender` at `now` with TTU_BATCH_FLUSH: the mm's CPUs join the batch when the flush can be deferred
    (set_tlb_ubc_flush_pending); otherwise each PTE is flushed at once (ptep_clear_flush: a
    one-page flush_tlb_mm_range)."""
    if mm == NO_MM:
        return
    mask = s.mm[mm].cpumask
    if should_defer_flush(s, mm, sender):
        set_tlb_ubc_flush_pending(s, mm, nr, now)
        for w in range(MM_CPUMASK_WORDS):
            batch[w] |= mask[w]
    else:
        ptep_clear_flush(s, p, mm, sender, head, nr)


@jit_inline
def ptep_clear_flush(s, p, mm, sender, head, nr):
    """Each of the folio's nr PTEs flushed as it is cleared: a one-page flush_tlb_mm_range() of the
    mm per PTE. Returns what the shootdowns cost the sender (nothing when only the sender flushed)."""
    cost = 0.0
    for i in range(nr):
        cost += shootdown_ns(s, p, flush_tlb_mm_range(s, mm, sender, head + i, 1))
    return cost


@jit_inline
def fold_ubc(dst, src):
    """fold_ubc() of the MIGRC series: src's CPUs join dst, src is emptied."""
    for w in range(MM_CPUMASK_WORDS):
        dst[w] |= src[w]
        src[w] = 0


@jit_inline
def batch_empty(batch):
    for w in range(MM_CPUMASK_WORDS):
        if batch[w]:
            return False
    return True


@jit
def try_to_unmap_flush(s, batch, sender):
    """try_to_unmap_flush(): if the batch holds CPUs (flush_required), one whole flush of them
    (arch_tlbbatch_flush), MIGRC's check of what that flush covered (migrc_flush_end), and the batch
    is emptied. Returns the number of other CPUs flushed."""
    if batch_empty(batch):
        return 0
    others = flush_tlb_mask(s, batch, sender, 0, FLUSH_ALL, cpu_in_mask(batch, sender), NO_MM, GEN_INVALID)
    migrc_flush_end(s, batch)
    for w in range(MM_CPUMASK_WORDS):
        batch[w] = 0
    return others


# ---- MIGRC ("Migration Read Copy", Byungchul Park, v8, 2024-02-19; not merged) -----------------
# Models the series' mm/rmap.c, mm/migrate.c and mm/page_alloc.c parts:
# - set_tlb_ubc_flush_pending() puts an accessible PTE that is neither writable nor dirty in the
#   read-only batch (tlb_ubc_ro) instead of tlb_ubc; any writable or dirty PTE of the folio makes
#   it ineligible (can_migrc_fail). migrate_pages_batch() (MR_DEMOTION and MR_NUMA_MISPLACED only,
#   small folios only, unless paused) defers a folio whose every mapping went to the read-only
#   batch and needed a flush (can_migrc_test): its CPUs go to the batch's pending_ubc, the folio is
#   copied and remapped, and its source is kept (migrc_keep_folio: a reference held, counted in the
#   zone's migrc_pending_nr) -- no shootdown for it. At the end of the batch pending_ubc joins the
#   global migrc_ubc (migrc_add_pending_ubc) before the batch's own flush, and the kept sources
#   join the global list after it (migrc_add_pending_folios).
# - Release. Held sources are freed only after a flush of every CPU in migrc_ubc; nothing on the
#   free, munmap or exit paths looks at them, and there is no limit on how many are held. (Read in
#   v7 3/8 and 7/8, whose code v8 carries unchanged, and v8 8/8; #32.) The paths:
#   1. migrc_flush_end(), in every try_to_unmap_flush() whose batch needed a flush (kswapd's and
#      direct reclaim's shrink and demotion batches, any migrate_pages_batch(), from whatever CPU
#      runs them): the CPUs flushed leave migrc_ubc (arch_tlbbatch_done); when none is left every
#      held source is freed, with no flush of its own.
#   2. migrc_flush_free_folios(), from the calling CPU: migrc_ubc is folded into current->tlb_ubc
#      and flushed with it (try_to_unmap_flush: no flush at all if migrc_ubc is empty), then every
#      held source is freed. Called by do_wp_page() for every write-protect fault on a folio, by
#      get_page_from_freelist() when a zone with held sources fails its watermark check, and by
#      __alloc_pages_slowpath()'s migrc pause (8/8: once, after the retry's get_page_from_freelist
#      fails, just before `if (!can_direct_reclaim) goto nopage`) -- the path an allocation takes
#      when its check passed on held sources but rmqueue() found the free lists short
#      (mmzone.alloc_nowait_ok for a promotion, which then fails; mmzone.take_pages for the rest).
#   What a release flushes is arch_tlbbatch_flush() of the CPUs gathered: a full flush with no
#   generation (flush_tlb_func above), so the sender counts nr_tlb_local_flush_all only when it is
#   in the mask and behind its mm's generation, each other non-lazy CPU a receipt, and one
#   nr_tlb_remote_flush if there is any other CPU. Flushes that are not unmap batches
#   (flush_tlb_mm_range: the NUMA scanner's, munmap's) bring CPUs up to date but do not remove them
#   from migrc_ubc (v4 dropped that optimisation).
# - The watermark checks count held sources as free (__zone_watermark_ok, zone_watermark_fast):
#   mmzone.zone_free_pages().
# Simplified: the held sources are per-node counts (with the buddy their frames wait on per-node
# lists, buddy.hold_folio_frames; they are freed all at once); migrc_flushing and migrc_lock (concurrent
# unmappers giving up while a flush is in progress) do not arise in a model that runs one CPU's
# work at a time; the pause lasts one allocation here, so it only flushes and frees.

@jit_inline
def migrc_enabled(p):
    return p[P.MIGRC] != MIGRC_OFF


@jit_inline
def migrc_can_defer(s, p, head, mm, nr, sender):
    """can_migrc_test() for a folio migrate_pages_batch() is about to unmap (the caller is a
    demotion or a NUMA-misplaced migration): migrc on, a small folio, mapped by an accessible PTE
    (mm from folio_tlb_mm) that is read-only and clean, whose flush would be deferred (otherwise
    ptep_clear_flush flushes it at once and the read-only batch stays empty)."""
    if not migrc_enabled(p) or nr != 1 or mm == NO_MM:
        return False
    if (s.pages.flags2[head] & F2_PTE_WRITE) or (s.pages.flags[head] & PG_DIRTY):
        return False
    return should_defer_flush(s, mm, sender)


@jit_inline
def migrc_defer(s, mm, now):
    """The deferred folio's CPUs join the batch's pending_ubc (fold_ubc(&pending_ubc, tlb_ubc_ro)); its
    PTE went into the read-only batch through set_tlb_ubc_flush_pending (a generation, and
    mm->tlb_flush_batched as for any batched PTE: the series keeps that part)."""
    set_tlb_ubc_flush_pending(s, mm, 1, now)
    pend = s.tlb_ubc[MIGRC_PENDING_UBC]
    mask = s.mm[mm].cpumask
    for w in range(MM_CPUMASK_WORDS):
        pend[w] |= mask[w]


@jit_inline
def try_to_migrate_tlb(s, p, batch, mm, head, nr, sender, deferred, now):
    """The TLB side of try_to_migrate() at `now` for a folio that migrated: its CPUs go to MIGRC's read-only
    batch when migrc_can_defer() said so before the move (`deferred`), else tlbbatch_add() (6.4's
    TTU_BATCH_FLUSH). With migrate_batch_flush=0 (before 6.4) each PTE is flushed now
    (ptep_clear_flush). Returns the cost of flushes sent now (the batch's comes at its end)."""
    if deferred:
        migrc_defer(s, mm, now)
    elif p[P.MIGRATE_BATCH_FLUSH] != 0:
        tlbbatch_add(s, p, batch, mm, head, nr, sender, now)
    elif mm != NO_MM:
        return ptep_clear_flush(s, p, mm, sender, head, nr)
    return 0.0


@jit
def migrc_batch_flush(s, batch, sender):
    """The end of migrate_pages_batch()'s unmap phase under MIGRC: pending_ubc joins migrc_ubc
    (migrc_add_pending_ubc, before the flush), the normal batch is flushed (try_to_unmap_flush),
    then the sources this batch kept join the held ones (migrc_add_pending_folios). Without
    deferred folios this is try_to_unmap_flush(). Returns the number of other CPUs flushed."""
    fold_ubc(s.tlb_ubc[MIGRC_UBC], s.tlb_ubc[MIGRC_PENDING_UBC])
    others = try_to_unmap_flush(s, batch, sender)
    for nid in range(s.pgdat.shape[0]):
        s.pgdat[nid].migrc_pending_nr += s.pgdat[nid].migrc_batch_nr
        s.pgdat[nid].migrc_batch_nr = 0
    if buddy_on(s):
        held_batch_done(s)
    return others


@jit_inline
def migrc_release(s):
    """Free every held source folio (migrc_release_folio: folio_put_small_nopcp, to the buddy)."""
    for nid in range(s.pgdat.shape[0]):
        nr = s.pgdat[nid].migrc_pending_nr
        if nr:
            if buddy_on(s):
                release_held(s, nid)
            else:
                s.pgdat[nid].free += nr
            s.counters[nid, Vm.PGFREE] += nr
            s.pgdat[nid].migrc_pending_nr = 0


@jit_inline
def migrc_flush_end(s, flushed):
    """migrc_flush_end(): the flush of `flushed` covers those CPUs of migrc_ubc
    (arch_tlbbatch_done); once none is left, the held sources are freed."""
    ubc = s.tlb_ubc[MIGRC_UBC]
    left = False
    for w in range(MM_CPUMASK_WORDS):
        ubc[w] &= ~flushed[w]
        if ubc[w]:
            left = True
    if not left:
        migrc_release(s)


@jit_inline
def migrc_pending(s):
    """Source folios held, on every node."""
    n = 0
    for nid in range(s.pgdat.shape[0]):
        n += s.pgdat[nid].migrc_pending_nr
    return n


@jit
def migrc_flush_free_folios(s, sender):
    """migrc_flush_free_folios(): migrc_ubc folded into the caller's batch, flushed now
    (try_to_unmap_flush), and every held source freed. Returns the number of other CPUs flushed."""
    if migrc_pending(s) == 0 and batch_empty(s.tlb_ubc[MIGRC_UBC]):
        return 0
    batch = s.tlb_ubc[TLB_UBC]
    fold_ubc(batch, s.tlb_ubc[MIGRC_UBC])
    others = try_to_unmap_flush(s, batch, sender)
    migrc_release(s)
    return others
