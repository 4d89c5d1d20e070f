"""Faults and accesses through page tables (mm/memory.c).

- fault_in(): handle_mm_fault() for a page that is not present: do_anonymous_page() (a read of
  untouched anon memory maps the shared zero page; a write allocates and zeroes a folio of the
  region's order, or of the order the anon_folio_orders policy picks: alloc_anon_folio()),
  do_swap_page() (swap-in, major fault), and for file pages a page-cache miss (filemap.py and
  readahead.py: a window read from the device; a fault through mmap counts as a major fault).
  The folio itself comes from page_alloc.folio_alloc_add().
- pte_access(): the present-PTE part of a load/store: a first touch of a present folio installs
  the PTE (minor fault), a PROT_NONE PTE takes a NUMA hint fault, the access sets the accessed bit
  (PG_young here) and a store the dirty bit, and the cache line is charged -- or the whole 4 KiB
  page with ops.OP_PAGE, for a store as for a load: a memcpy() destination page (rep movsb writes
  whole lines without a read-for-ownership, so it is charged and booked as the 4 KiB streaming
  copy).
- do_numa_page(): the hint fault, counting it and asking NUMA balancing (numa_balancing.py
  numa_migrate_check, should_numa_migrate_memory) whether to migrate the folio (migrate.py).
- do_wp_page(): a store to a present read-only PTE (the write-protect fault).

PTE state, per folio (its head; a folio is mapped once, by the mm of its region): present (F2_MAPPED with
F2_PRESENT; F2_MAPPED alone is the shared zero page), writable (F2_PTE_WRITE), dirty (PG_DIRTY),
young (PG_YOUNG), PROT_NONE (PG_PROTNONE). As v6.7 sets them (mm/memory.c, mm/mprotect.c,
mm/migrate.c); anon VMAs are private and writable, mmap'd files shared and writable, unless the
region is read-only (`Region.prot` = r: no VM_WRITE, and a store is a SIGSEGV, access_error()):
- do_anonymous_page(): a read fault maps the zero page read-only and clean; a write fault maps a
  new folio writable and dirty. A store to the zero page is a write-protect fault that copies it
  (wp_page_copy: a new zeroed folio, writable and dirty; one more pgfault).
- do_swap_page(): writable and dirty on a write fault (the page is exclusive), read-only and clean
  on a read fault (6.11 also maps an exclusive page writable on a read fault; not modelled).
- a file page through mmap (do_read_fault / do_shared_fault): read-only and clean on a read fault,
  writable and dirty on a write fault (page_mkwrite dirties the folio).
- do_wp_page() on a folio mapped once: an exclusive anon folio is reused (wp_page_reuse) and a
  shared file folio made writable (wp_page_shared, page_mkwrite): writable and dirty, one pgfault.
- change_prot_numa() (numa_balancing.py): PROT_NONE drops the write bit (pte_modify with PAGE_NONE,
  6.2+: no saved-write bit), keeps dirty and young.
- do_numa_page(): when the folio stays, the PTE is restored present and young and made writable
  if can_change_pte_writable() allows it -- always for an exclusive anon folio, for a shared file
  folio only when the PTE is dirty. When the folio migrates, the new PTE is rebuilt from the
  migration entry of the PROT_NONE PTE (remove_migration_pte): present, read-only, dirty and young
  as they were; the access that retries then takes a write-protect fault if it is a store.
- migration (migrate.py move_isolated_folio, remove_migration_pte of 6.2+): writable and young
  carried over, dirty too where migration entries keep it (the `migration_entry_ad` knob,
  swap_migration_ad_supported), PROT_NONE not (the new PTE comes from the VMA's protection).
- reclaim unmaps (try_to_unmap): no PTE.

Simplifications: a folio's PTEs are one state per folio (on the head); PTE dirty and folio dirty
are one bit (PG_DIRTY), so a mapped file folio dirtied through write() reads as a dirty PTE, and
folio_mkclean() (write-back cleaning the PTEs) does not happen; the zero page is not a folio (it
never enters an LRU); faults never fail except on OOM.
"""
from __future__ import annotations

import numpy as np
from ._jit import jit, jit_inline

from .cost import line_load_ns, line_store_ns, seq_page_ns
from .filemap import filemap_read_miss
from .lru import folio_add_lru
from .mglru import lru_gen_enabled, vma_has_recency
from .migrate import migrate_misplaced_folio, migrate_misplaced_folio_prepare
from .mm import force_sig_segv, map_file_folio, vma_covers
from .numa_balancing import numa_migrate_check, task_numa_fault, vma_set_access_pid_bit
from .ops import (
    ACCESS_DONE, ACCESS_HINT_FAULT, ACCESS_NOT_MAPPED, ACCESS_SEGV, ACCESS_WP_FAULT, OP_KIND_MASK, OP_LOAD,
    OP_PAGE, OP_STORE, OP_STREAM, OP_WRITE,
)
from .huge_memory import anon_fault_order, anon_orders_policy, count_mthp_stat, next_order
from .page_alloc import (
    GFP_KERNEL, GFP_TRANSHUGE_LIGHT, alloc_slowpath_min, filemap_add_folio, folio_alloc_add,
    folio_order_for, get_page_from_freelist, policy_nodes, start_direct_reclaim,
)
from .params import P
from .profile import K, charge
from .state import (
    NO_MM, WMARK_MIN, folio_head, F2_ANON, F2_MAPPED, F2_PRESENT, F2_PTE_WRITE, MPOL_BIND, F2_SWAPPED, PG_ACTIVE, PG_DIRTY,
    PG_PROTNONE, PG_YOUNG, REGION_ANON, folio_nr_pages, region_of,
)
from .tlb import (
    TLB_UBC, current_cpu, flush_irqs_ns, migrc_batch_flush, migrc_flush_free_folios, shootdown_ns,
)
from .tlb_hw import tlb_access, tlb_model_on, translation_tag
from .vmstat import MthpStat, Vm

HPAGE_PMD_NR = 512      # a folio this large is PMD-mapped (a THP): its hint fault is do_huge_pmd_numa_page()


@jit
def alloc_anon_folio(s, p, r, cpu, page, clock, scratch, cands):
    """alloc_anon_folio(): the folio of a write fault on unpopulated anonymous memory under a
    seed-001 policy (huge_memory.py): the order as `anon_folio_orders` chooses it, allocated
    GFP_TRANSHUGE_LIGHT, falling back on failure, counted per size. A swap-in takes this path too,
    at order 0, where the kernel's do_swap_page() allocates its own page. Out of line: faults
    only. Returns what page_alloc.folio_alloc_add() returns."""
    cpu_nid = s.cpu[cpu].node
    order, orders = (np.int64(0), np.int64(1))
    if not (s.pages.flags2[page] & F2_SWAPPED):
        order, orders = anon_fault_order(s, p, r, page)
    cost = 0.0
    while order > 0:
        nid, head, nr, nr_swapped, c = folio_alloc_add(s, p, r, cpu, page, order, clock, scratch, cands,
                                                       GFP_TRANSHUGE_LIGHT)
        cost += c
        if nid >= 0:
            count_mthp_stat(s, cpu_nid, order, MthpStat.ANON_FAULT_ALLOC, Vm.THP_FAULT_ALLOC)
            s.regions.fault_orders[r, order] += 1
            return nid, head, nr, nr_swapped, cost
        count_mthp_stat(s, cpu_nid, order, MthpStat.ANON_FAULT_FALLBACK, Vm.THP_FAULT_FALLBACK)
        order = next_order(orders, order)
    nid, head, nr, nr_swapped, c = folio_alloc_add(s, p, r, cpu, page, 0, clock, scratch, cands, GFP_KERNEL)
    if nid >= 0:
        s.regions.fault_orders[r, 0] += 1
    return nid, head, nr, nr_swapped, cost + c


@jit_inline
def fault_in(s, p, task, cpu, page, op, clock, scratch, cands):
    """Bring a non-present page in (anon zero-fill or zero page, swap-in, page-cache miss), and
    count it in its mm's RSS (the zero page is not counted). Returns (cost, ok); ok is False on OOM
    and on a SIGSEGV (no VMA of the task's mm maps the page: `sys.segv_*` say which)."""
    pg = s.pages
    r = region_of(s, page)
    anon = s.regions.kind[r] == REGION_ANON
    kind = op & OP_KIND_MASK
    cpu_nid = s.cpu[cpu].node
    if not vma_covers(s, task, r, page, kind <= OP_STORE, kind == OP_STORE):
        force_sig_segv(s, task, page)
        return 0.0, False
    mm = s.regions.mm[r]
    f2 = pg.flags2[page]
    if anon and kind == OP_LOAD and not (f2 & F2_SWAPPED):
        if f2 & F2_MAPPED:
            return 0.0, True     # already mapped to the zero page: a plain load
        # read fault on untouched anonymous memory maps the shared zero page
        pg.flags2[page] = f2 | F2_MAPPED
        s.counters[cpu_nid, Vm.PGFAULT] += 1
        return p[P.FAULT_NS], True
    # lru_gen_enter_fault(): a fault through page tables of a VMA with recency (not a read()/write()
    # miss, no VM_SEQ_READ stream or random advice); folio_add_lru and the refault read it
    recency = kind <= OP_STORE and not (op & OP_STREAM) and vma_has_recency(s, r)
    s.cpu[cpu].in_lru_fault = 1 if recency else 0
    if not anon and kind != OP_WRITE:
        # a page-cache miss that reads: readahead adds the folios, the device reads them
        cost, ok = filemap_read_miss(s, p, task, cpu, r, page, op, clock, scratch, cands)
        s.cpu[cpu].in_lru_fault = 0
        return cost, ok
    if anon and anon_orders_policy(p):
        nid, head, nr, nr_swapped, cost = alloc_anon_folio(s, p, r, cpu, page, clock, scratch, cands)
    else:
        order = folio_order_for(s, r, page)
        nid, head, nr, nr_swapped, cost = folio_alloc_add(s, p, r, cpu, page, order, clock, scratch, cands,
                                                          GFP_KERNEL)
    if nid < 0:
        s.cpu[cpu].in_lru_fault = 0
        return cost, False
    t = clock + np.int64(cost)      # the fault's own work starts: its locks are taken within it
    if anon:
        s.counters[cpu_nid, Vm.PGFAULT] += 1
        cost += charge(s, K.HANDLE_MM_FAULT, p[P.FAULT_NS])
        if 1 < nr < HPAGE_PMD_NR:
            # set_ptes() maps every page of a PTE-mapped folio; a THP takes one PMD
            cost += charge(s, K.HANDLE_MM_FAULT, p[P.SET_PTE_NS] * (nr - 1))
        s.mm[mm].rss_anon += nr
        if nr_swapped > 0:
            s.sys[0].nr_swap_used -= nr_swapped
            s.mm[mm].swapents -= nr_swapped
            s.counters[cpu_nid, Vm.PGMAJFAULT] += 1
            s.counters[nid, Vm.PSWPIN] += nr_swapped
        cost += charge(s, K.CLEAR_PAGE_ERMS, p[P.ZERO_PAGE_NS] * (nr - nr_swapped))
        # writable on a write fault (a new folio, a copy of the zero page, an exclusive swap-in)
        pg.flags2[head] |= F2_MAPPED | (F2_PTE_WRITE if kind == OP_STORE else np.uint8(0))
        cost += folio_add_lru(s, p, cpu, head, t)
        if nr_swapped > 0 and p[P.SWAP_IN_4K_NS] > 0.0:
            # do_swap_page sleeps on the folio (folio_lock_or_retry) until swap_read_folio's read
            # completes: the task sleeps (engine.io_sleep) and takes its access when it wakes
            s.task[task].io_ready = clock + np.int64(cost + p[P.SWAP_IN_4K_NS] * nr_swapped)
    else:
        # a buffered write of a whole page that is not cached: added without a read
        cost += filemap_add_folio(s, p, cpu, head, t)
    s.cpu[cpu].in_lru_fault = 0          # lru_gen_exit_fault()
    return cost, True


@jit
def fault_stalls(s, p, task, cpu, page, op, clock, cands):
    """Whether the access to `page` faults and its allocation would enter direct reclaim: the
    allocation fault_in makes with reclaim allowed (GFP_KERNEL: the folio of the page's region
    order, or order 0 under an anon fault-order policy, whose large orders never reclaim) fails at
    MIN on every node of its zonelist. Then, as __alloc_pages_slowpath() does, every kswapd of the
    zonelist is woken and the task's direct reclaim starts (task.dr_*): the engine runs it a reclaim
    batch per step, so no other entity waits behind a long reclaim, and retries the access after it
    (page_alloc.alloc_folio goes on at MIN). Pure when it returns False: the fault then runs as
    before. A stall later in the same access (a readahead window's further folios, a copy on
    write) reclaims inline."""
    if s.task[task].dr_after != 0:
        return False                        # the access is the retry: its allocation goes on at MIN
    head = folio_head(s, page)
    if s.pages.flags2[head] & F2_PRESENT:
        return False
    r = region_of(s, page)
    kind = op & OP_KIND_MASK
    anon = s.regions.kind[r] == REGION_ANON
    if not vma_covers(s, task, r, page, kind <= OP_STORE, kind == OP_STORE):
        return False
    if anon and kind == OP_LOAD and not (s.pages.flags2[page] & F2_SWAPPED):
        return False                        # the zero page
    nr = np.int64(1) if anon and anon_orders_policy(p) else np.int64(1) << folio_order_for(s, r, page)
    n = policy_nodes(s, r, s.cpu[cpu].node, page - s.regions.start[r], cands)
    if get_page_from_freelist(s, cands, n, nr, WMARK_MIN) >= 0:
        return False
    if alloc_slowpath_min(s, p, cands, n, nr, clock) >= 0:
        return False
    start_direct_reclaim(s, task)
    s.task[task].dr_region = r
    s.task[task].dr_index = page - s.regions.start[r]
    s.task[task].dr_nr = nr
    return True


@jit_inline
def mpol_allows_node(s, head, nid):
    """mpol_misplaced()'s MPOL_BIND case with MPOL_F_MORON (a bind given MPOL_F_NUMA_BALANCING):
    the folio may move toward the faulting CPU's node only when that node is in the bind mask. The
    default policy (local) allows any node."""
    r = region_of(s, head)
    if s.regions.policy[r] != MPOL_BIND:
        return True
    for k in range(s.regions.nodes.shape[1]):
        if s.regions.nodes[r, k] == nid:
            return True
    return False


@jit_inline
def numa_restore_pte(s, head):
    """do_numa_page()'s out_map: the PTE present and young again, writable when
    can_change_pte_writable() allows it (an exclusive anon folio; a shared file folio whose PTE is
    dirty)."""
    f = s.pages.flags[head]
    s.pages.flags[head] = (f & ~PG_PROTNONE) | PG_YOUNG
    if (s.pages.flags2[head] & F2_ANON) or (f & PG_DIRTY):
        s.pages.flags2[head] |= F2_PTE_WRITE


@jit
def do_numa_page(s, p, task, head, cpu_nid, now):
    """A hint fault on a PROT_NONE folio: count it (pgfault: handle_mm_fault() counts every fault;
    the faulting task's PID bit goes into the VMA's pids_active, vma_set_access_pid_bit();
    the mm's hint_faults first thing, as the fault-count RFC does -- a PMD-mapped folio's fault is
    do_huge_pmd_numa_page(), which the RFC leaves uncounted), in tiering mode promote a slow-tier
    folio the decision accepts (migrate_misplaced_folio_prepare + migrate_misplaced_folio: the new
    PTE is read-only, see the module docstring; the fault then goes into the task's statistics,
    task_numa_fault, which move its scan period), else restore the PTE. The migration's unmap
    flushes nothing, as the old PTE is PROT_NONE (commit 4d4b6d66db), unless another CPU's NUMA
    scan of the mm has its mmu_gather open (pte_accessible: tlb.folio_tlb_mm): then it goes into
    migrate_pages_batch()'s TLB batch (or MIGRC's read-only one, migrc_can_defer) and the batch is
    flushed at the end of the unmap (try_to_unmap_flush). Returns the cost."""
    nr = folio_nr_pages(s, head)
    r = region_of(s, head)
    mm = s.regions.mm[r]                           # vma->vm_mm, the faulting task's mm
    if nr < HPAGE_PMD_NR:
        s.mm[mm].hint_faults += 1
    vma_set_access_pid_bit(s, r, task)
    s.counters[cpu_nid, Vm.PGFAULT] += 1
    cost = p[P.FAULT_NS] + p[P.NUMA_MIGRATE_CHECK_NS]
    dst = numa_migrate_check(s, p, head, cpu_nid, nr, now, False, mpol_allows_node(s, head, cpu_nid), mm)
    if dst < 0 or not migrate_misplaced_folio_prepare(s, p, head, dst, nr, now):
        numa_restore_pte(s, head)
        return cost
    if lru_gen_enabled(p):
        s.pages.flags[head] |= PG_ACTIVE    # folio_add_lru in a fault: the new (or put back) folio is young
    sender = current_cpu(s)
    batch = s.tlb_ubc[TLB_UBC]
    ok, c, tlb_mm = migrate_misplaced_folio(s, p, head, dst, nr, batch, sender, now)
    if ok and tlb_mm != NO_MM:      # NO_MM unless a scan of the mm is flushing (PROT_NONE PTE)
        c += shootdown_ns(s, p, migrc_batch_flush(s, batch, sender))
    if ok:
        # the promoted folio is on the target, a top-tier node: the fault is recorded (remote:
        # the folio was elsewhere at the fault; private: a slow-tier folio has no last cpupid)
        task_numa_fault(s, p, task, nr, False, True, now)
    else:
        numa_restore_pte(s, head)
    return cost + c


@jit_inline
def do_wp_page(s, p, hu, cpu_nid):
    """A store to a present read-only PTE of a folio mapped once: wp_page_reuse() for the exclusive
    anon folio, wp_page_shared() (page_mkwrite) for a shared file folio -- the PTE becomes writable
    (the store then dirties it). Under MIGRC the fault first gives up every deferred flush
    (migrc_flush_free_folios: the folio may be a held source's copy about to become writable).
    Counts the fault; returns its cost."""
    others = migrc_flush_free_folios(s, current_cpu(s))
    s.pages.flags2[hu] |= F2_PTE_WRITE
    s.counters[cpu_nid, Vm.PGFAULT] += 1
    return p[P.FAULT_NS] + shootdown_ns(s, p, others)


@jit_inline
def pte_write(s, head):
    """The folio's PTE is present and writable."""
    return (s.pages.flags2[head] & (F2_MAPPED | F2_PTE_WRITE)) == (F2_MAPPED | F2_PTE_WRITE)


@jit_inline
def pte_access(s, p, task, cpu_nid, page, head, hu, nr, op, now, cost, fast):
    """A load or store of `page` through a present folio's PTE (the access path's LOAD/STORE case). A first
    touch installs the PTE (a minor fault, mm.map_file_folio: SIGSEGV outside the mm's VMAs;
    writable for a store, read-only for a load); a PROT_NONE PTE takes a hint fault and a store to
    a read-only PTE a write-protect fault -- in the fast case (`fast`) those return
    (ACCESS_NOT_MAPPED, ACCESS_HINT_FAULT, ACCESS_WP_FAULT) before any side effect, for the general
    case to take. Once the faults are done the access pays the flush IPIs its CPU received
    (tlb.flush_irqs_ns) and, with the TLB model on, translates through the CPU's TLBs
    (tlb_hw.tlb_access; a PMD-mapped folio is one entry), each page walk costing tlb_walk_ns.
    Returns (cost, ACCESS_*)."""
    pg = s.pages
    f = pg.flags[hu]
    if f & PG_PROTNONE:
        if fast:
            return cost, ACCESS_HINT_FAULT
    f2 = pg.flags2[hu]
    kind = op & OP_KIND_MASK
    if not (f2 & F2_MAPPED):
        # a PROT_NONE PTE is always mapped, so this never runs before a hint fault
        if fast:
            return cost, ACCESS_NOT_MAPPED
        if not map_file_folio(s, task, head, nr, kind == OP_STORE):
            return cost, ACCESS_SEGV
        pg.flags2[hu] = f2 | F2_MAPPED | (F2_PTE_WRITE if kind == OP_STORE else np.uint8(0))
        s.counters[cpu_nid, Vm.PGFAULT] += 1
        cost += p[P.FAULT_NS]
    elif kind == OP_STORE and not (f2 & F2_PTE_WRITE):
        if fast:
            return cost, ACCESS_WP_FAULT
        if not vma_covers(s, task, region_of(s, head), head, True, True):
            # access_error(): a write fault on a VMA without VM_WRITE (before any hint fault)
            force_sig_segv(s, task, head)
            return cost, ACCESS_SEGV
    nid = np.uint64(pg.node[hu])
    if f & PG_PROTNONE:
        cost += do_numa_page(s, p, task, head, cpu_nid, now)
        nid = np.uint64(pg.node[hu])
        f = pg.flags[hu]
    if kind == OP_STORE and not (pg.flags2[hu] & F2_PTE_WRITE):
        cost += do_wp_page(s, p, hu, cpu_nid)
    cost += flush_irqs_ns(s, p, s.task[task].cpu)
    if tlb_model_on(s):
        cpu = s.task[task].cpu
        walks = tlb_access(s, task, cpu, s.cpu[cpu].node,
                           translation_tag(s, page), np.int64(nid), pte_write(s, head), kind == OP_STORE)
        cost += walks * p[P.TLB_WALK_NS]
    f |= PG_YOUNG
    if kind == OP_STORE:
        pg.flags[hu] = f | PG_DIRTY
        if op & OP_PAGE:
            cost += seq_page_ns(s, p, nid, now, fast)
        else:
            cost += line_store_ns(s, p, nid, now, fast)
    else:
        pg.flags[hu] = f
        if op & OP_PAGE:
            cost += seq_page_ns(s, p, nid, now, fast)
        else:
            cost += line_load_ns(s, p, nid, now, fast)
    return cost, ACCESS_DONE
