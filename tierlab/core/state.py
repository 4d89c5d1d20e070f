"""Simulation state, grouped by the kernel object each value belongs to, and the intrusive lists.

`SimState` is a NamedTuple of parts; an out-of-line kernel call copies these few parts, not one
array per field. Per-page state stays a structure of arrays (16 bytes per page: a 128 GiB file is
33.5 M pages); everything per node, CPU, task or mm is one record array whose fields have the
kernel's names (`s.pgdat[nid].free`, `s.cpu[c].clock`, `s.task[t].promo_count`); no value lives in
a column addressed by a number. `allocate()` is the one place that builds a state; its dtypes are
below.

    pages     struct folio / struct page analogues, per simulated 4 KiB page (ids are dense over the
              regions a workload declares, so state grows with the workload, not the machine):
        node    int8    node the page lives on (or last lived on, when not present)
        flags   uint8   PG_referenced, PG_active, PG_workingset, PG_lru, PG_dirty, young, protnone,
                        isolated
        flags2  uint8   present, anon, mapped, shadow, swapped, contig, in an lru_add batch, PTE
                        writable (memory.py: the PTE state)
        order   int8    folio order, low nibble (heads and tails alike; folios are naturally aligned,
                        so the head of page p is p & ~(2**order - 1)); the high nibble is MGLRU's part
                        of folio->flags on the head (mglru.py): bits 4-5 the generation (seq %
                        MAX_NR_GENS, valid while PG_lru with lru_gen on: the kernel's LRU_GEN_MASK keeps
                        gen + 1, 0 off the LRU, which PG_lru says here), bits 6-7 the refs counter
                        (LRU_REFS_MASK, LRU_REFS_WIDTH = 2); zero on every folio with lru_gen off
        prev    int32   intrusive list links, as folio->lru: an LRU list while on the LRU, the task's
        next    int32   promotion list while isolated for promotion
        stamp   uint32  NUMA hint stamp (access time in ms, or fault count) while present; the
                        shadow entry's eviction age (workingset.c) while evicted
    regions   the workload's VMA slots and files: pages [start[r], start[r+1]); a slot is mapped into
              mm[r] (-1: unmapped, or a read()-only file) over [start[r], end[r]) (mm.py)
    pgdat     struct pglist_data + its one zone, per node (PGDAT_DTYPE)
    lruvec    struct lruvec, one per node (the root memcg) (LRUVEC_DTYPE), with its lrugen (struct
              lru_gen_folio: seqs, pages per generation, the PID controller's statistics; mglru.py)
    mem       the node's memory as a device for the time model, cost.py (MEM_DTYPE)
    membw     the node's memory bandwidth: a capacity calendar per node (resource.py, MEM_BW_BINS bins
              of MEM_BW_BIN_NS), booked by cost.py
    locks     the calendars of lruvec->lru_lock (one per node) and of each file's i_pages xa_lock
              (one per region), locks.py
    zonelist  int8[N, N] fallback order by distance, -1 padded
    demote_target int8[N, N] preferred demotion targets, -1 padded
    cpu       per CPU (CPU_DTYPE): its clock, CFS runqueue and lru_add batch (per-CPU TLBs go beside it)
    task      per task (TASK_DTYPE), with the mm it belongs to, its start time, exit state and CFS entity
    mm        per mm (MM_DTYPE): users, RSS counters, the NUMA scanner's cursor and next-scan time,
              hint-fault count, the task policy (set_mempolicy), the cpumask of CPUs that ran it
    blkdev    per block device (BLKDEV_DTYPE): its figures and /proc/diskstats; files live on device 0
    devcal    the devices' capacity calendars (resource.py), NR_DEV_CALS per device (blkdev.py)
    sys       the kernel's globals, one record (SYS_DTYPE): time reached, swap in use, sampling
    marks     int64[T, M] task clock at MARK ops
    counters  int64[N, NR_VMSTAT_ITEMS] vmstat events per node (vmstat.py)
    samples   int64[S, ncols] time-series rows (engine.take_sample)
    hintlog   int64[HINT_LOG_ROWS, 5] a sample of should_numa_migrate_memory()'s latency tests:
              (simulated ns, latency, threshold, HINT_LATENCY_* metric, the folio's head page), every
              `hintlog_stride`-th test, the stride doubling
              whenever the log fills (numa_balancing.hint_latency_log)
    prof      float64[T + N, NR_KSYMS] simulated time per entity (tasks, then kswapds) and kernel
              function (profile.py)
    tlb_ubc, tlbs  the pending TLB flush batches (tlb.py) and the CPUs' TLBs (tlb_hw.py)
    buddy     physical frames: free lists per order, per-CPU lists, each present page's frame
              (buddy.py; empty arrays unless the run's page allocator is the buddy)
    mthp      int64[PMD order + 1, NR_MTHP_STATS] per-size THP stats (huge_memory.py, vmstat.MthpStat)

List heads are sentinel slots appended after the pages in `prev`/`next`, so unlinking never needs
to know which list a folio is on (the kernel's list_head does the same). Lists: NR_LRU_LISTS per
node (kernel order: inactive anon, active anon, inactive file, active file; head = newest, tail =
oldest), then one promotion list per task, then MGLRU's lrugen->folios[gen][type] per node
(MAX_NR_GENS x ANON_AND_FILE, lru_gen_sentinel).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
from ._abi import register as register_simstate
from ._jit import jit, jit_entry, jit_inline
from .profile import NR_KSYMS
from .resource import CAL_BINS, calendar_array
from .sched import KSWAPD_VRUNTIME_BOOT, cpu_task_lists

# flags (folio->flags analogues)
PG_REFERENCED = np.uint8(1)
PG_ACTIVE = np.uint8(2)
PG_WORKINGSET = np.uint8(4)
PG_LRU = np.uint8(8)
PG_DIRTY = np.uint8(16)
PG_YOUNG = np.uint8(32)      # aggregated accessed bit of the PTEs mapping the folio
PG_PROTNONE = np.uint8(64)   # mapped PROT_NONE by the NUMA scanner (hint fault pending)
PG_ISOLATED = np.uint8(128)  # isolated from the LRU (for migration / on a promotion list)

# flags2 (tierlab's bookkeeping)
F2_PRESENT = np.uint8(1)
F2_ANON = np.uint8(2)
F2_MAPPED = np.uint8(4)      # mapped by page tables (anon, mmap'd file, or the zero page for anon)
F2_SHADOW = np.uint8(8)      # evicted file page with a workingset shadow entry in `stamp`
F2_SWAPPED = np.uint8(16)    # anon page in swap, shadow in `stamp`
F2_CONTIG = np.uint8(32)     # physically follows page-1 on the same node (allocated right after it)
F2_BATCHED = np.uint8(64)    # waiting in a per-CPU lru_add batch (not yet PG_lru)
F2_PTE_WRITE = np.uint8(128)  # the PTE mapping the folio is writable (pte_write); memory.py

ORDER_MASK = np.int8(15)

# classic LRU lists (enum lru_list order)
LRU_INACTIVE_ANON = 0
LRU_ACTIVE_ANON = 1
LRU_INACTIVE_FILE = 2
LRU_ACTIVE_FILE = 3
NR_LRU_LISTS = 4

# multi-gen LRU (include/linux/mmzone.h; mglru.py)
MIN_NR_GENS = 2
MAX_NR_GENS = 4
MAX_NR_TIERS = 4
ANON_AND_FILE = 2
LRU_GEN_ANON = 0
LRU_GEN_FILE = 1

# memory policies (enum mempolicy mode)
MPOL_DEFAULT = 0
MPOL_PREFERRED = 1
MPOL_BIND = 2
MPOL_INTERLEAVE = 3
MPOL_CODES = {"default": MPOL_DEFAULT, "preferred": MPOL_PREFERRED, "bind": MPOL_BIND,
              "interleave": MPOL_INTERLEAVE}
# mempolicy flags as the kernel keeps them in pol->flags (include/uapi/linux/mempolicy.h): a policy
# given with MPOL_F_NUMA_BALANCING (only bind accepts it, sanitize_mpol_flags) gets MOF | MORON, as
# the default policy has: NUMA-scanned (vma_policy_mof) and migrated toward the faulting CPU's node
# when that node is in the mask (mpol_misplaced)
MPOL_F_MOF = 1 << 3
MPOL_F_MORON = 1 << 4
MPOL_F_NUMA_BALANCING = 1 << 13
MAX_POLICY_NODES = 64         # a task policy's nodemask is one uint64 word (MAX_NUMNODES here)

# region kinds
REGION_ANON = 0
REGION_FILE = 1         # page cache reached through read()/write() only: no VMA, never NUMA-scanned
REGION_FILE_MAPPED = 2  # a file mapped with mmap (a VMA the NUMA scanner walks)

# watermarks (enum zone_watermarks, one zone per node): pgdat[nid].wmark[WMARK_LOW]
WMARK_MIN = 0
WMARK_LOW = 1
WMARK_HIGH = 2
WMARK_PROMO = 3
NR_WMARK = 4

LRU_BATCH_MAX = 31
STAMP_NONE = np.uint32(0xFFFFFFFF)  # access-time field reset to all ones at allocation ("no cpupid")
NO_PAGE = -2                        # "no previous page" in task.last_page and pgdat.last_alloc

# run status codes
STATUS_DONE = 0
STATUS_SAMPLES_FULL = 1
HINT_LOG_ROWS = 4096    # rows of the latency-test log (numa_balancing.hint_latency_log), an even number
STATUS_MARKS_FULL = 2
STATUS_OOM = 3
STATUS_SEGV = 4    # an access to a page no VMA of the task's mm maps (sys.segv_task/segv_page say which)
STATUS_NEED_INPUT = 5   # the task in sys.need_input ran out of input within its quantum (engine.run)
STATUS_EVENT = 6        # a run-script event is due: the earliest clock reached sys.event_at, or a task
                        # recorded the mark task.event_mark (tierlab/events.py)
STATUS_PHASE = 7        # sys.phase_held and the last task has run its input: the next phase starts now,
                        # before kswapd or a timer runs on (engine.run)

NO_MM = -1         # regions.mm of an unmapped slot or a read()-only file
MM_CPUMASK_WORDS = 64   # mm_cpumask: one bit per CPU slot of `cpu`, NR_CPUS = 4096

IODEPTH_MAX = 256       # calls in flight per task (fio iodepth) the asynchronous engine supports
NR_CLAT_BUCKETS = 29 * 64   # fio's FIO_IO_U_PLAT_GROUP_NR x FIO_IO_U_PLAT_VAL (fileio.py)
NO_STOP = np.int64(1) << np.int64(62)   # task.stop_at when the task runs until its stream ends
NO_START = np.int64(1) << np.int64(62)  # task.start of a task that waits for another process's exit (mm.start_after)

# file access advice (posix_fadvise / madvise) per region: FMODE_RANDOM, VM_SEQ_READ (readahead.py)
FADV_NORMAL = 0
FADV_RANDOM = 1
FADV_SEQUENTIAL = 2
FADV_CODES = {"normal": FADV_NORMAL, "random": FADV_RANDOM, "sequential": FADV_SEQUENTIAL}

# a VMA's vm_flags (include/linux/mm.h), the protection bits only: PROT_READ and PROT_WRITE
VM_READ = 0x1
VM_WRITE = 0x2
VM_FLAGS_OF_PROT = {"r": VM_READ, "rw": VM_READ | VM_WRITE}
# not a vm_flags bit: vma->detached (per-VMA locks), a munmap'd VMA whose pages are still being zapped;
# a fault in it finds no VMA
VMA_DETACHED = 0x4

PAGE_STATE_BYTES = 16   # node, flags, flags2, order (1 each), prev, next, stamp (4 each)

PGDAT_DTYPE = np.dtype([
    ("managed", np.int64),           # zone_managed_pages
    ("free", np.int64),              # NR_FREE_PAGES
    ("wmark", np.int64, (NR_WMARK,)),
    ("nr_isolated", np.int64),       # NR_ISOLATED_ANON + NR_ISOLATED_FILE
    ("migrc_pending_nr", np.int64),  # MIGRC: source folios held until a TLB flush covers them (tlb.py)
    ("migrc_batch_nr", np.int64),    # MIGRC: sources the migrate_pages_batch() in progress keeps
    ("tier", np.int64),              # memory tier rank, 0 = top tier (node_is_toptier)
    ("nr_cpus", np.int64),
    ("last_alloc", np.int64),        # last page allocated here (physical contiguity, take_pages)
    ("kswapd_awake", np.int64),
    ("kswapd_clock", np.int64),      # virtual time from which kswapd is runnable (its wake-up), then the
                                     # end of its last reclaim batch, ns
    ("kswapd_cpu", np.int64),        # the CPU kswapd runs on (sched.py)
    ("kswapd_on_rq", np.int64),      # 1 while kswapd is enqueued on its CPU's runqueue
    ("kswapd_vruntime", np.int64),   # kswapd's se.vruntime, ns
    ("kswapd_seq", np.int64),        # its place among equal vruntimes (enqueue order)
    ("kswapd_runtime", np.int64),    # ns of CPU time kswapd consumed (se.sum_exec_runtime)
    ("kswapd_failures", np.int64),
    ("kswapd_scanned", np.int64),    # pages scanned since kswapd last made progress
    # CONFIG_NUMA_BALANCING promotion state (names as in struct pglist_data)
    ("nbp_rl_start", np.int64),      # rate-limit window start, ms
    ("nbp_rl_nr_cand", np.int64),    # pgpromote_candidate at the window start
    ("nbp_threshold", np.int64),     # hot threshold, ms (0: use the default)
    ("nbp_th_start", np.int64),      # threshold-adjust window start, ms
    ("nbp_th_nr_cand", np.int64),    # pgpromote_candidate at the adjust window start
], align=True)

LRUVEC_DTYPE = np.dtype([
    ("lru_size", np.int64, (NR_LRU_LISTS,)),  # pages per classic LRU list
    ("nonresident_age", np.int64),   # shadows keep its low 32 bits (workingset.c)
    ("refaults", np.int64, (2,)),    # workingset_activate_{anon,file} at the end of the last reclaim run
                                     # (snapshot_refaults: balance_pgdat, do_try_to_free_pages)
    ("scan_acc", np.float64),        # get_scan_count SCAN_FRACT anon/file split accumulator
    ("deact_acc", np.float64, (2,)), # {anon,file}: active pages owed to the scan (fraction carried)
    # struct lru_gen_folio (include/linux/mmzone.h), mglru.py; NR_HIST_GENS = 1 (no
    # CONFIG_LRU_GEN_STATS): the current refaulted/evicted/protected have no history dimension
    ("lru_gen_enabled", np.int64),   # lrugen->enabled: this lruvec's folios are on lrugen lists
    ("max_seq", np.int64),           # the youngest generation (shared by both types)
    ("min_seq", np.int64, (ANON_AND_FILE,)),    # the oldest generation per type
    ("timestamps", np.int64, (MAX_NR_GENS,)),   # kernel ms (jiffies) when each generation was made
    ("nr_pages", np.int64, (MAX_NR_GENS, ANON_AND_FILE)),   # pages per generation and type
    ("avg_refaulted", np.int64, (ANON_AND_FILE, MAX_NR_TIERS)),  # the PID controller's I term
    ("avg_total", np.int64, (ANON_AND_FILE, MAX_NR_TIERS)),
    ("refaulted", np.int64, (ANON_AND_FILE, MAX_NR_TIERS)),      # its P term, this generation
    ("evicted", np.int64, (ANON_AND_FILE, MAX_NR_TIERS)),
    ("protected", np.int64, (ANON_AND_FILE, MAX_NR_TIERS - 1)),  # tiers 1..3 (protected[tier - 1])
    ("tier_idx", np.int64, (ANON_AND_FILE,)),   # tierlab: the controller's last get_tier_idx() per type
], align=True)

MEM_DTYPE = np.dtype([
    ("seq_ns", np.float64),          # 4 KiB streaming copy, unloaded
    ("line_ns", np.float64),         # random cache-line load, unloaded
    ("write_ns", np.float64),        # random cache-line store, unloaded
    ("bw_bytes_ns", np.float64),     # peak bandwidth, bytes per ns
    ("load_factor", np.float64),     # loaded-latency multiplier (cost.py), valid for bin `lf_bin`
    ("lf_bin", np.int64),            # the node's current membw bin (-1: none yet)
    ("bw_room", np.float64),         # bytes bin lf_bin can still take (cost.mem_ns)
    ("bw_room0", np.float64),        # bw_room when last written back to membw (cost.mem_bw_flush)
], align=True)

MEM_BW_BIN_NS = 16384                # the bandwidth calendars: bin width and ring size (cost.py says why)
MEM_BW_BINS = CAL_BINS
LOCK_BIN_NS = 256                    # the lock calendars (locks.py says why)
LOCK_BINS = CAL_BINS

CPU_DTYPE = np.dtype([
    ("node", np.int64),
    ("clock", np.int64),             # ns
    # the CPU's CFS runqueue (sched.py): struct cfs_rq and rq->curr
    ("curr", np.int64),              # running entity: a task id, T + nid for a kswapd, -1 idle
    ("nr_running", np.int64),        # entities enqueued (curr included)
    ("min_vruntime", np.int64),
    ("seq", np.int64),               # enqueue counter: equal vruntimes run in enqueue order
    ("slice_start", np.int64),       # curr's runtime when it was picked (prev_sum_exec_runtime)
    ("slice_ns", np.int64),          # curr's ideal runtime, sched_slice()
    ("next_start", np.int64),        # earliest start of this CPU's tasks waiting to become runnable
    ("need_resched", np.int64),      # 1: re-evaluate the runqueue before running curr again
    ("in_lru_fault", np.int64),      # current->in_lru_fault: a fault of a VMA with recency is running
                                     # here (lru_gen_enter_fault; folio_add_lru makes its folios active)
    ("first_task", np.int64),        # the CPU's tasks as a list (task.next_on_cpu), -1 terminated
    ("flush_irqs", np.int64),        # flush IPIs received its task has not paid for yet (tlb.flush_irqs_ns)
    # x86 cpu_tlbstate (tlb.py): the user mm whose translations the CPU holds (NO_MM: none yet), its
    # TLB generation of that mm, and whether it ran a kernel thread since (lazy: catches up on return)
    ("loaded_mm", np.int64),
    ("tlb_gen", np.int64),
    ("tlb_lazy", np.int64),
    ("lru_batch_len", np.int64),
    ("lru_batch", np.int64, (LRU_BATCH_MAX,)),   # the per-CPU lru_add folio batch
], align=True)

NR_MP_STATUS = 6     # move_pages(2) outcomes counted per task (migrate.py MP_*)
DR_NONE = 0          # task.dr_state (page_alloc.direct_reclaim_step)
DR_ROUND = 1
DR_RECLAIM = 2
DR_AFTER_NONE = 0    # task.dr_after: no stalled allocation pending
DR_AFTER_ALLOC = 1   # the reclaim succeeded: the retried fault allocates at MIN (page_alloc.alloc_folio)
DR_AFTER_OOM = 2     # it failed: the retried fault's allocation fails (OOM)

TASK_DTYPE = np.dtype([
    ("cpu", np.int64),
    ("mm", np.int64),
    ("runtime", np.int64),           # ns of CPU time consumed (se.sum_exec_runtime)
    ("end", np.int64),               # CPU clock when the task last ran
    ("clock_frac", np.float64),      # the fraction of a ns its accesses' costs left over (engine.advance)
    ("last_page", np.int64),         # previous page read()/written (stream continuity, pos_same_folio)
    ("call_start", np.int64),        # 1 when the task's next access starts a new system call
                                     # (2: it started and sleeps for its read, engine.io_sleep)
    ("promo_count", np.int64),       # pages on the promotion list (current->promo_count)
    ("numa_scan_stamp", np.int64),   # curr->node_stamp: runtime ns the scan period counts from
    ("numa_scan_period", np.int64),  # ms of the kernel's clock (p->numa_scan_period); scan_delay until the first tick
    # task_numa_fault()'s statistics (numa_balancing.py): the mm's pass at the last placement, the
    # period's ceiling then, faults since (numa_faults_locality, the MEMBUF private/shared split),
    # the next placement's earliest jiffy and the preferred node (-1: none)
    ("numa_scan_seq", np.int64),
    ("numa_scan_period_max", np.int64),
    ("numa_faults_local", np.int64),
    ("numa_faults_remote", np.int64),
    ("numa_faults_private", np.int64),
    ("numa_faults_shared", np.int64),
    ("numa_migrate_retry", np.int64),
    ("numa_preferred_nid", np.int64),
    ("nr_marks", np.int64),
    ("vruntime", np.int64),          # se.vruntime, ns (sched.py)
    ("on_rq", np.int64),             # 1 while enqueued on its CPU's runqueue
    ("rq_seq", np.int64),            # its place among equal vruntimes (enqueue order)
    ("next_on_cpu", np.int64),       # the next task on the same CPU (cpu.first_task), -1 at the end
    ("start", np.int64),             # ns: not runnable before this virtual time (a process started within the run)
    ("dead", np.int64),              # 1 once the task has exited (do_exit)
    # file_ra_state of the task's open file (readahead.py): the last window, the one before it (their
    # reads may still be in flight), and prev_pos
    ("ra_file", np.int64),           # region the state belongs to (-1: none yet; reset on another file)
    ("ra_start", np.int64),          # ra->start, a page id
    ("ra_size", np.int64),           # ra->size, pages
    ("ra_async_size", np.int64),     # ra->async_size, pages
    ("ra_mark", np.int64),           # the page marked PG_readahead (start + size - async_size), -1: none
    ("ra_done", np.int64),           # completion time of the window's reads, ns
    ("ra_prev_start", np.int64),     # the window before [ra_prev_start, ra_prev_end) and its completion
    ("ra_prev_end", np.int64),
    ("ra_prev_done", np.int64),
    ("prev_pos", np.int64),          # ra->prev_pos >> PAGE_SHIFT: the page after the previous read() (-1)
    ("ra_req", np.int64),            # pages left in the current read() (set by the run loop at a miss)
    # the I/O engine of the task's read()/write() calls (fileio.py)
    ("iodepth", np.int64),           # 0: synchronous (pread: waits for its I/O); n: up to n calls in flight
    ("nr_inflight", np.int64),
    ("inflight", np.int64, (IODEPTH_MAX,)),   # completion times of the calls in flight
    ("call_clock", np.int64),        # clock at which the current call started
    ("call_ready", np.int64),        # completion of the current call's reads (asynchronous engine)
    ("stop_at", np.int64),           # clock at which the task stops issuing accesses (fio runtime)
    ("input_end", np.int64),         # 1: no more input comes for the task before the next phase (its stream ended)
    ("clat_hist", np.int64, (2, NR_CLAT_BUCKETS)),  # call completion latencies, read/write (fio's buckets)
    ("stats_from", np.int64),        # calls completing earlier are not in clat_hist (fio's ramp_time)
    ("io_ready", np.int64),          # the read a synchronous access waits for completes then (0: none):
                                     # the task sleeps until it (engine.io_sleep)
    ("io_folio", np.int64),          # the folio it sleeps for, which reclaim keeps until the access is
                                     # taken again (-1: none; reclaim.folio_held_for_read)
    ("text_next", np.int64),         # the mm's text page the task fetches next (tlb_hw.py)
    ("move_status", np.int64, (NR_MP_STATUS,)),  # move_pages(2) pages by outcome (migrate.py MP_*)
    # a system call that moves, drops or unmaps many pages goes a bounded piece per step (a migration
    # batch, a folio batch, a page table) and the engine runs it again until it is done
    ("ctrl_next", np.int64),         # 1 + the page the call under way goes on from (0: none under way)
    ("ctrl_end", np.int64),          # the end of the range it works on, where its op does not say (brk)
    ("exiting", np.int64),           # PF_EXITING: the task's exit tears its mm down (mm.do_exit)
    # its mmu_gather (mm/mmu_gather.c) while an unmap is under way: pages gathered since the last
    # tlb_flush_mmu and the range of the PTEs cleared since (tlb->start, tlb->end; end 0: none)
    ("tlb_gathered", np.int64),
    ("tlb_start", np.int64),
    ("tlb_end", np.int64),
    ("event_mark", np.int64),        # a run-script event is due when nr_marks reaches this (0: none)
    # the task's direct reclaim in progress (page_alloc.direct_reclaim_step: __alloc_pages_slowpath's
    # reclaim rounds, resumable one reclaim batch at a time)
    ("dr_state", np.int64),          # DR_NONE, DR_ROUND (a round starts next), DR_RECLAIM (in a round)
    ("dr_retries", np.int64),        # rounds done (MAX_RECLAIM_RETRIES at most)
    ("dr_drained", np.int64),        # the buddy's per-CPU lists were drained (once)
    ("dr_i", np.int64),              # the zonelist node the round has reached
    ("dr_scanned", np.int64),        # pages scanned on it, and its budget (twice its LRU)
    ("dr_budget", np.int64),
    ("dr_total", np.int64),          # pages reclaimed in this round (SWAP_CLUSTER_MAX ends it)
    ("dr_now", np.int64),            # the round's start time, and its work so far (ns)
    ("dr_cost", np.float64),
    ("dr_region", np.int64),         # the stalled fault's allocation (memory.fault_stalls): its region,
    ("dr_index", np.int64),          # the page's index in it (the policy's zonelist) and its pages
    ("dr_nr", np.int64),
    ("dr_after", np.int64),          # DR_AFTER_*: how the fault's allocation goes on when it is retried
], align=True)

# struct vma_numab_state (include/linux/mm_types.h): per region slot, NUMA balancing's view of its VMA
# (numa_balancing.task_numa_work, vma_is_accessed, vma_set_access_pid_bit)
VMA_NUMAB_DTYPE = np.dtype([
    ("allocated", np.int64),          # vma->numab_state exists: task_numa_work made it on the VMA's first visit
    ("start_scan_seq", np.int64),     # mm->numa_scan_seq then
    ("prev_scan_seq", np.int64),      # the pass (numa_scan_seq) in which the VMA was last scanned to its end
    ("next_scan", np.int64),          # jiffies: a new VMA is not scanned before (scan_delay after its first visit)
    ("pids_active_reset", np.int64),  # jiffies of the next rotation of pids_active
    ("pids_active", np.uint64, (2,)),  # hashed PIDs that took a hint fault in the VMA: [previous window, this one]
], align=True)

MM_DTYPE = np.dtype([
    ("numa_next_scan", np.int64),    # mm->numa_next_scan, jiffies (numa_balancing.jiffies_at)
    ("numa_scan_offset", np.int64),  # mm->numa_scan_offset, a page id
    ("numa_scan_seq", np.int64),     # mm->numa_scan_seq: completed passes over the address space
    ("hint_faults", np.int64),       # mm->hint_faults of the fault-count RFC: do_numa_page() calls in this mm
    ("users", np.int64),             # mm->mm_users: live tasks; exit_mmap when the last one exits
    ("rss_anon", np.int64),          # MM_ANONPAGES: anon pages mapped (the zero page is not counted)
    ("rss_file", np.int64),          # MM_FILEPAGES: page-cache pages mapped by the mm's PTEs
    ("swapents", np.int64),          # MM_SWAPENTS: the mm's anon pages out in swap
    ("policy", np.int64),            # task mempolicy (set_mempolicy) mode, MPOL_*, for VMAs without one
    ("policy_flags", np.int64),      # its pol->flags (MPOL_F_MOF | MPOL_F_MORON with MPOL_F_NUMA_BALANCING)
    ("policy_nodes", np.uint64),     # its nodemask, bit n = node n
    ("cpumask", np.uint64, (MM_CPUMASK_WORDS,)),  # mm_cpumask(): CPU slots that ran the mm's threads
    ("tlb_gen", np.int64),           # mm->context.tlb_gen: bumped by every flush request (inc_mm_tlb_gen)
    ("flush_pending_start", np.int64),  # mm->tlb_flush_pending raised over [start, end) of virtual time:
    ("flush_pending_end", np.int64),    # the NUMA scanner's open page-table update (tlb.mm_tlb_flush_pending)
    ("flush_pending_cpu", np.int64),    # the CPU of that scanner walk,
    ("flush_pending_pmd_ns", np.int64), # the time it spends per page table it enters,
    ("flush_pending_poll", np.int64),   # and the last of them at which it flushed for a batch (tlb.py)
    ("tlb_flush_batched", np.int64),    # mm->tlb_flush_batched: PTEs put in unmap batches (pending) and
    ("tlb_flush_batched_done", np.int64),  # the count flush_tlb_batched_pending() last flushed for
    ("text_pages", np.int64),        # pages of hot code its threads fetch (tlb_hw.py's iTLB stream; 0: none)
    ("start_after", np.int64),       # the mm whose teardown starts this one's tasks (a parent's wait and
                                     # fork, e.g. make's job server); -1: none (they start at task.start)
], align=True)

BLKDEV_DTYPE = np.dtype([
    # the device's figures (machine file; blkdev.py)
    ("read_lat_ns", np.float64),     # unloaded latency of a 4 KiB read
    ("write_lat_ns", np.float64),
    ("read_bw", np.float64),         # peak read bandwidth, bytes per ns
    ("write_bw", np.float64),
    ("read_iops", np.float64),       # peak 4 KiB random reads per ns
    ("write_iops", np.float64),
    ("queue_depth", np.int64),       # requests the device serves at once
    ("max_sectors_pages", np.int64), # queue/max_sectors_kb in pages: a bio is split into requests of at most this
    # /proc/diskstats
    ("rd_ios", np.int64),
    ("rd_sectors", np.int64),
    ("rd_ticks_ns", np.int64),       # sum of the reads' service times (submission to completion)
    ("wr_ios", np.int64),
    ("wr_sectors", np.int64),
    ("wr_ticks_ns", np.int64),
    ("last_done_ns", np.int64),      # the latest completion of any request so far
], align=True)

SYS_DTYPE = np.dtype([
    ("now", np.int64),               # latest virtual time reached by any CPU
    ("nr_io_folios", np.int64),      # tasks sleeping for a read with its folio held (task.io_folio)
    ("ra_add_start", np.int64),      # pages [ra_add_start, ra_add_end) are being added, locked, by the
    ("ra_add_end", np.int64),        # readahead in progress (readahead.ra_read; reclaim keeps them)
    ("wakeups", np.int64),           # kswapd wake-ups so far (a running quantum stops at a wake-up)
    ("nr_swap_used", np.int64),      # swap entries in use (total swap minus nr_swap_pages)
    ("nr_samples", np.int64),        # rows filled in `samples`
    ("next_sample", np.int64),       # virtual time of the next sample row
    ("rng", np.uint64),              # xorshift state
    ("segv_task", np.int64),         # STATUS_SEGV: the task and page of the access no VMA maps
    ("segv_page", np.int64),
    ("nr_hintlog", np.int64),        # rows filled in `hintlog`
    ("hintlog_stride", np.int64),    # one latency test in this many is logged
    ("hintlog_skip", np.int64),      # tests to pass over before the next logged one
    ("current", np.int64),           # the entity running (task t, node n's kswapd T + n): profile.charge
    ("oom_min_ttl_node", np.int64),  # STATUS_OOM from kswapd: min_ttl_ms protected this node's working set (-1)
    ("need_input", np.int64),        # STATUS_NEED_INPUT: the task that ran out of input (-1)
    ("resume_cpu", np.int64),        # the CPU whose quantum stopped for input (-1: none), and the
    ("resume_limit", np.int64),      # quantum's limit, next NUMA tick and kswapd wake-up count
    ("resume_scan_at", np.int64),
    ("resume_wakeups", np.int64),
    ("max_clock_spread", np.int64),  # ns: the most any live entity was ahead of the next to run, at a sample
    ("max_step_ns", np.int64),       # ns: the longest step past a quantum's limit (its last access) or kswapd batch
    ("event_at", np.int64),          # ns: the next run-script event on the clock (NO_STOP: none)
    ("phase_held", np.int64),        # 1: the next phase waits for every task to run its input (feed.ChunkFeed)
], align=True)


class Pages(NamedTuple):
    node: np.ndarray
    flags: np.ndarray
    flags2: np.ndarray
    order: np.ndarray
    prev: np.ndarray      # with the list sentinels appended
    next: np.ndarray
    stamp: np.ndarray


class Regions(NamedTuple):
    start: np.ndarray     # int64[R+1]: slot r holds pages [start[r], start[r+1])
    kind: np.ndarray      # int8[R]
    policy: np.ndarray    # int8[R] the effective policy (the VMA's, else the mapping mm's task policy)
    nodes: np.ndarray     # int8[R, N] allowed nodes in policy order, -1 padded
    order: np.ndarray     # int8[R] folio order used when faulting pages of the region
    mm: np.ndarray        # int64[R] the mm that maps the slot (may load the file), or NO_MM
    end: np.ndarray       # int64[R] end of the mapped part: the VMA is [start[r], end[r]) (brk moves it)
    pol_flags: np.ndarray  # int64[R] the effective policy's flags (MPOL_F_MOF, MPOL_F_MORON)
    vma_policy: np.ndarray  # int8[R] 1: the slot has a VMA policy of its own (mbind); 0: the mm's applies
    advice: np.ndarray    # int8[R] FADV_*: the file's access advice (readahead.py)
    vm_flags: np.ndarray  # int8[R] the slot's VMA protection: VM_READ, VM_WRITE
    numab: np.ndarray     # VMA_NUMAB_DTYPE[R] the slot's vma->numab_state (numa_balancing.py), a recarray
    fault_orders: np.ndarray  # int64[R, 10] anon folios faulted in per order under a seed-001 policy (memory.py)


class Tlbs(NamedTuple):
    """The CPUs' TLBs (tlb_hw.py): per level (DTLB, ITLB, STLB) its (sets, ways), and per CPU slot,
    level and way an entry; all empty (geo zero) when the TLB model is off."""
    geo: np.ndarray         # int64[3, 2]: sets, ways
    tag: np.ndarray         # int64[C, 3, E]: page id (text pages negative), -1 empty
    set_gen: np.ndarray     # int64[C, 3, S]: per set, the CPU's generation when its entries were filled
    stamp: np.ndarray       # int64[C, 3, E]: the CPU's tick at the last use (LRU)
    node: np.ndarray        # int8[C, 3, E]: node of the frame the entry translates to
    wr: np.ndarray          # int8[C, 3, E]: the entry allows stores
    cpu_gen: np.ndarray     # int64[C]: a whole flush bumps it
    cpu_tick: np.ndarray    # int64[C]: translations so far
    need_flush: np.ndarray  # int8[C]: a shootdown skipped the CPU while lazy


def tlbs_array(nr_cpus: int, geometry=None) -> Tlbs:
    """TLB arrays for nr_cpus CPU slots; geometry: ((sets, ways) of DTLB, ITLB, STLB), or None."""
    geo = np.zeros((3, 2), np.int64) if geometry is None else np.asarray(geometry, np.int64).reshape(3, 2)
    e = int((geo[:, 0] * geo[:, 1]).max())
    shape = (nr_cpus, 3, e)
    return Tlbs(geo=geo, tag=np.full(shape, -1, np.int64), set_gen=np.zeros((nr_cpus, 3, int(geo[:, 0].max())), np.int64),
                stamp=np.zeros(shape, np.int64), node=np.zeros(shape, np.int8), wr=np.zeros(shape, np.int8),
                cpu_gen=np.zeros(nr_cpus, np.int64), cpu_tick=np.zeros(nr_cpus, np.int64),
                need_flush=np.zeros(nr_cpus, np.int8))


class SimState(NamedTuple):
    pages: Pages
    regions: Regions
    pgdat: np.ndarray
    lruvec: np.ndarray
    mem: np.ndarray
    membw: np.ndarray
    locks: np.ndarray
    zonelist: np.ndarray
    demote_target: np.ndarray
    cpu: np.ndarray
    task: np.ndarray
    mm: np.ndarray
    blkdev: np.ndarray
    devcal: np.ndarray
    sys: np.ndarray
    marks: np.ndarray
    counters: np.ndarray
    samples: np.ndarray
    hintlog: np.ndarray
    prof: np.ndarray      # float64[T + N, NR_KSYMS]: ns per entity and kernel function (profile.py)
    tlb_ubc: np.ndarray   # uint64[NR_TLB_UBC, MM_CPUMASK_WORDS]: the CPUs of the pending TLB batches (tlb.py)
    tlbs: Tlbs            # the CPUs' TLBs (tlb_hw.py)
    buddy: tuple          # buddy.Buddy: physical frames, free lists, per-CPU lists (buddy.py; empty when off)
    mthp: np.ndarray      # int64[PMD order + 1, NR_MTHP_STATS]: per-size THP stats (huge_memory.py)


register_simstate(SimState)     # kernels take it by reference (_abi.py)


def nr_sentinels(nr_nodes: int, nr_tasks: int) -> int:
    return nr_nodes * NR_LRU_LISTS + nr_tasks + nr_nodes * MAX_NR_GENS * ANON_AND_FILE


def page_state_bytes(nr_pages: int) -> int:
    """Bytes of per-page state (the 16-byte budget) for `nr_pages` simulated pages."""
    return nr_pages * PAGE_STATE_BYTES


def allocate(*, region_pages, region_kind, region_policy, region_nodes, region_order, managed, wmark,
             tier, node_cpus, zonelists, demotion_targets, mem, cpu_nodes, task_cpu, kswapd_cpu, nr_marks,
             nr_counters, sample_cols, sample_rows, first_sample_ns, scan_delay_ms, seed,
             region_mm=None, region_mapped=None, region_pol_flags=None, region_vma_policy=None,
             task_mm=None, task_start=None, task_node_stamp=None, mm_start=None, mm_next_scan=None, mm_policy=None,
             region_advice=None, region_vm_flags=None, devices=(), task_iodepth=None,
             dev_bin_ns=1 << 16, tlb_geometry=None, mm_text_pages=None, mm_start_after=None, buddy=False) -> SimState:
    """A fresh state: every page absent, every list empty, every node's memory free.

    region_*: per region slot (pages, REGION_* kind, MPOL_* effective policy, allowed nodes, folio
    order, the mm mapping it (NO_MM: unmapped or a read()-only file), pages mapped from its start,
    the policy's flags, whether the policy is the VMA's own);
    managed/wmark/tier/node_cpus: per node; zonelists/demotion_targets: per node, lists of nodes;
    mem: per node dicts of MEM_DTYPE's unloaded figures; cpu_nodes: the node of each simulated CPU
    (those that run tasks, then those only a kswapd runs on: sched.place_kswapds); task_cpu /
    task_mm / task_start / task_node_stamp: per task its CPU, mm, start time (ns) and initial
    node_stamp (init_numa_balancing's stagger of a process's later threads); kswapd_cpu: the CPU
    of each node's kswapd; mm_start / mm_next_scan / mm_policy: per mm its start time, its first
    numa_next_scan (jiffies: numa_balancing.mm_first_scan_jiffies) and task policy (mode, flags,
    nodemask); mm_start_after: per mm, the mm whose teardown starts it (-1: none; its tasks' start
    is then NO_START); scan_delay_ms: every task's first numa_scan_period. Without the optional arguments: one mm that maps every region, all tasks in
    it from time 0 (the old layout).
    task_iodepth: each task's I/O engine (0 synchronous); region_advice: per region FADV_*;
    region_vm_flags: per region its VMA's VM_READ | VM_WRITE (default both);
    devices: per block device a dict of BLKDEV_DTYPE's figures, with capacity calendars of
    `dev_bin_ns` bins (blkdev.py); tlb_geometry: (sets, ways) of the dTLB, iTLB and STLB of every
    CPU (tlb_hw.py; None: no TLB model); mm_text_pages: per mm its hot code's pages (iTLB);
    buddy: physical frames from a buddy allocator (buddy.py) instead of per-node counts."""
    R = len(region_pages)
    N = len(managed)
    C = len(cpu_nodes)
    T = len(task_cpu)
    P = int(sum(region_pages))
    prev = np.full(P + nr_sentinels(N, T), -1, dtype=np.int32)
    nxt = np.full(P + nr_sentinels(N, T), -1, dtype=np.int32)
    init_lists(prev, nxt, P)
    pages = Pages(node=np.full(P, -1, np.int8), flags=np.zeros(P, np.uint8), flags2=np.zeros(P, np.uint8),
                  order=np.zeros(P, np.int8), prev=prev, next=nxt, stamp=np.full(P, STAMP_NONE, np.uint32))
    start = np.zeros(R + 1, np.int64)
    start[1:] = np.cumsum(np.asarray(region_pages, np.int64))
    nodes = np.full((R, N), -1, np.int8)
    for i, ns in enumerate(region_nodes):
        nodes[i, :len(ns)] = ns
    kind = np.asarray(region_kind, np.int8)
    policy = np.asarray(region_policy, np.int8)
    if region_mm is None:
        region_mm = np.zeros(R, np.int64)
    mapped = np.asarray(region_pages if region_mapped is None else region_mapped, np.int64)
    from .buddy import HPAGE_PMD_ORDER      # (buddy.py imports this module)
    regions = Regions(start=start, kind=kind, policy=policy, nodes=nodes,
                      order=np.asarray(region_order, np.int8), mm=np.asarray(region_mm, np.int64),
                      end=start[:-1] + mapped,
                      pol_flags=(np.asarray(region_pol_flags, np.int64) if region_pol_flags is not None
                                 else np.where(policy == MPOL_DEFAULT, MPOL_F_MOF | MPOL_F_MORON, 0).astype(np.int64)),
                      vma_policy=(np.asarray(region_vma_policy, np.int8) if region_vma_policy is not None
                                  else (policy != MPOL_DEFAULT).astype(np.int8)),
                      advice=np.asarray(region_advice if region_advice is not None else [FADV_NORMAL] * R, np.int8),
                      vm_flags=np.asarray(region_vm_flags if region_vm_flags is not None
                                          else [VM_READ | VM_WRITE] * R, np.int8),
                      numab=np.zeros(R, VMA_NUMAB_DTYPE).view(np.recarray),
                      fault_orders=np.zeros((R, HPAGE_PMD_ORDER + 1), np.int64))
    pgdat = np.zeros(N, PGDAT_DTYPE)
    pgdat["managed"] = managed
    pgdat["free"] = managed
    pgdat["wmark"] = wmark
    pgdat["tier"] = tier
    pgdat["nr_cpus"] = node_cpus
    pgdat["last_alloc"] = NO_PAGE
    pgdat["kswapd_cpu"] = kswapd_cpu
    pgdat["kswapd_vruntime"] = KSWAPD_VRUNTIME_BOOT
    lruvec = np.zeros(N, LRUVEC_DTYPE)
    lruvec["max_seq"] = MIN_NR_GENS + 1       # lru_gen_init_lruvec(): generations 0..3, min_seq 0
    lruvec["tier_idx"] = MAX_NR_TIERS - 1
    memarr = np.zeros(N, MEM_DTYPE)
    for k in ("seq_ns", "line_ns", "write_ns", "bw_bytes_ns"):
        memarr[k] = [m[k] for m in mem]
    memarr["load_factor"] = 1.0
    memarr["lf_bin"] = -1
    zl = np.full((N, N), -1, np.int8)
    for i, order in enumerate(zonelists):
        zl[i, :len(order)] = order
    dt = np.full((N, max(1, N)), -1, np.int8)
    for i, tg in enumerate(demotion_targets):
        dt[i, :len(tg)] = tg
    cpu = np.zeros(C, CPU_DTYPE)
    cpu["node"] = cpu_nodes
    cpu["curr"] = -1
    cpu["loaded_mm"] = NO_MM
    task = np.zeros(T, TASK_DTYPE)
    task["cpu"] = task_cpu
    task["mm"] = 0 if task_mm is None else task_mm
    task["start"] = 0 if task_start is None else task_start
    task["numa_scan_stamp"] = 0 if task_node_stamp is None else task_node_stamp
    task["numa_scan_period"] = scan_delay_ms     # init_numa_balancing: p->numa_scan_period = scan_delay
    task["numa_preferred_nid"] = -1
    cpu["first_task"], task["next_on_cpu"] = cpu_task_lists(task_cpu, C)
    task["last_page"] = NO_PAGE
    task["call_start"] = 1
    task["io_folio"] = -1
    task["ra_file"] = -1
    task["ra_mark"] = -1
    task["prev_pos"] = -1
    task["stop_at"] = NO_STOP
    if task_iodepth is not None:
        task["iodepth"] = task_iodepth
    from .blkdev import blkdev_array
    from .buddy import buddy_arrays
    from .vmstat import NR_MTHP_STATS
    blkdev, devcal = blkdev_array(devices, dev_bin_ns)
    M = 1 if mm_start is None else len(mm_start)
    mm = np.zeros(M, MM_DTYPE)
    # init_numa_balancing() for an mm's first task: the first scan no earlier than scan_delay after it
    from .numa_balancing import MSEC_PER_JIFFY
    first_scan = -(-scan_delay_ms // MSEC_PER_JIFFY)            # msecs_to_jiffies(scan_delay) after time 0
    mm["numa_next_scan"] = first_scan if mm_next_scan is None else np.asarray(mm_next_scan, np.int64)
    mm["users"] = np.bincount(task["mm"], minlength=M)[:M]
    mm["policy_flags"] = MPOL_F_MOF | MPOL_F_MORON      # default_policy: local, MOF | MORON
    if mm_text_pages is not None:
        mm["text_pages"] = mm_text_pages
    mm["start_after"] = -1 if mm_start_after is None else mm_start_after
    for i, pol in enumerate(mm_policy or ()):
        mm[i]["policy"], mm[i]["policy_flags"], mm[i]["policy_nodes"] = pol
    sysrec = np.zeros(1, SYS_DTYPE)
    sysrec["next_sample"] = first_sample_ns
    sysrec["segv_task"] = -1
    sysrec["hintlog_stride"] = 1
    sysrec["oom_min_ttl_node"] = -1
    sysrec["need_input"] = -1
    sysrec["resume_cpu"] = -1
    sysrec["event_at"] = NO_STOP
    sysrec["rng"] = ((seed * 0x9E3779B97F4A7C15) | 1) & 0xFFFFFFFFFFFFFFFF
    # record arrays viewed as np.recarray: `s.pgdat[nid].free` then reads and writes the same way in
    # numba and in plain Python (NUMBA_DISABLE_JIT=1, the tests' no-JIT tier)
    rec = lambda a: a.view(np.recarray)  # noqa: E731
    return SimState(pages=pages, regions=regions, pgdat=rec(pgdat), lruvec=rec(lruvec),
                    mem=rec(memarr), membw=calendar_array(memarr["bw_bytes_ns"], MEM_BW_BIN_NS, MEM_BW_BINS),
                    locks=calendar_array(np.ones(N + R), LOCK_BIN_NS, LOCK_BINS), zonelist=zl, demote_target=dt,
                    cpu=rec(cpu), task=rec(task), mm=rec(mm), blkdev=rec(blkdev), devcal=devcal, sys=rec(sysrec),
                    marks=np.zeros((T, max(1, nr_marks)), np.int64),
                    counters=np.zeros((N, nr_counters), np.int64),
                    samples=np.zeros((sample_rows, sample_cols), np.int64),
                    hintlog=np.zeros((HINT_LOG_ROWS, 5), np.int64),
                    prof=np.zeros((T + N, NR_KSYMS), np.float64),
                    tlb_ubc=np.zeros((3, MM_CPUMASK_WORDS), np.uint64),
                    tlbs=tlbs_array(C, tlb_geometry),
                    buddy=buddy_arrays(managed, np.asarray(wmark)[:, WMARK_LOW], node_cpus, C, P, buddy),
                    mthp=np.zeros((HPAGE_PMD_ORDER + 1, NR_MTHP_STATS), np.int64))


def copy_state(s: SimState) -> SimState:
    """A deep copy (Simulation.fork): every array copied, so the copy has the same numba type."""
    return SimState(*(type(part)(*(a.copy() for a in part)) if isinstance(part, tuple) else part.copy()
                      for part in s))


def state_arrays(s: SimState):
    """(name, array) for every array of the state, parts flattened as 'pages.flags'."""
    for name, part in zip(s._fields, s):
        if isinstance(part, tuple):
            for sub, a in zip(part._fields, part):
                yield f"{name}.{sub}", a
        else:
            yield name, part



@jit_inline
def lru_sentinel(s, nid, lru):
    # nid is often an int8 read from pages.node: widen it (numba would; plain NumPy 2 would overflow)
    return s.pages.node.shape[0] + np.int64(nid) * NR_LRU_LISTS + lru


@jit
def promo_sentinel(s, task):
    return s.pages.node.shape[0] + s.lruvec.shape[0] * NR_LRU_LISTS + task


@jit_inline
def lru_gen_sentinel(s, nid, gen, type):
    """The head of lrugen->folios[gen][type] of node nid (one zone per node)."""
    base = s.pages.node.shape[0] + s.lruvec.shape[0] * NR_LRU_LISTS + s.task.shape[0]
    return base + (np.int64(nid) * MAX_NR_GENS + gen) * ANON_AND_FILE + type


@jit_entry
def init_lists(prev, nxt, first_sentinel):
    for i in range(first_sentinel, prev.shape[0]):
        prev[i] = i
        nxt[i] = i


@jit_inline
def links_insert(prev, nxt, x, p, n):
    """Link x between the adjacent entries p and n of a list threaded through prev/nxt (the
    kernel's __list_add)."""
    nxt[x] = n
    prev[x] = p
    prev[n] = x
    nxt[p] = x


@jit_inline
def links_add(prev, nxt, head, x):
    """Insert x right after `head` (kernel list_add)."""
    links_insert(prev, nxt, x, head, nxt[head])


@jit_inline
def links_add_tail(prev, nxt, head, x):
    """Insert x right before `head` (kernel list_add_tail)."""
    links_insert(prev, nxt, x, prev[head], head)


@jit_inline
def links_del(prev, nxt, x):
    p = prev[x]
    n = nxt[x]
    nxt[p] = n
    prev[n] = p
    prev[x] = -1
    nxt[x] = -1


@jit_inline
def list_add(s, head, x):
    """Insert x right after the sentinel (kernel list_add: newest end) of a page list."""
    links_add(s.pages.prev, s.pages.next, head, x)


@jit_inline
def list_add_tail(s, head, x):
    """Insert x right before the sentinel (kernel list_add_tail) of a page list."""
    links_add_tail(s.pages.prev, s.pages.next, head, x)


@jit_inline
def list_del(s, x):
    links_del(s.pages.prev, s.pages.next, x)




@jit_inline
def folio_nr_pages(s, head):
    return np.int64(1) << (s.pages.order[head] & ORDER_MASK)


@jit_inline
def folio_order(s, head):
    return np.int64(s.pages.order[head] & ORDER_MASK)


@jit_inline
def folio_head(s, page):
    o = s.pages.order[page] & ORDER_MASK
    return page & ~((np.int64(1) << o) - 1)


@jit_inline
def folio_lru(s, head):
    """Which classic LRU list a folio belongs on: 2*file + active (folio_lru_list)."""
    lru = 0
    if not (s.pages.flags2[head] & F2_ANON):
        lru += 2
    if s.pages.flags[head] & PG_ACTIVE:
        lru += 1
    return lru


@jit_inline
def rng_next(s):
    """xorshift64*: deterministic per-run randomness inside kernels (e.g. next_demotion_node)."""
    g = s.sys[0]
    x = g.rng
    x ^= x >> np.uint64(12)
    x ^= x << np.uint64(25)
    x ^= x >> np.uint64(27)
    g.rng = x
    return (x * np.uint64(2685821657736338717)) >> np.uint64(11)


@jit_inline
def region_of(s, page):
    """Binary search of the region holding `page` (regions are few; called on faults only)."""
    lo = 0
    hi = s.regions.kind.shape[0] - 1
    while lo < hi:
        mid = (lo + hi + 1) >> 1
        if s.regions.start[mid] <= page:
            lo = mid
        else:
            hi = mid - 1
    return lo
