"""NUMA balancing in memory-tiering mode: the promotion decision.

Models kernel/sched/fair.c should_numa_migrate_memory() (tiering branch) with its helpers
pgdat_free_space_enough(), numa_hint_fault_latency(), numa_promotion_rate_limit() and
numa_promotion_adjust_threshold(); the scanner task_tick_numa() / task_numa_work() /
change_prot_numa() (mm/mprotect.c change_pte_range() skip rules); and the scan-rate feedback
task_numa_fault() / task_numa_placement() / update_task_scan_period(). The hint fault that consults the
decision (do_numa_page, numa_migrate_check) is in memory.py, the migration in migrate.py; the
page-cache promotion path (pagecache_promotion.py) reaches the same should_numa_migrate_memory().

The scanner runs on the scheduler tick, as the kernel's does: task_tick_numa() is evaluated only at
ticks (HZ = 250: every TICK_NSEC = 4 ms of the kernel's clock, on the jiffies grid of virtual time,
for the task running on the CPU then), with the task's runtime at that tick (sum_exec_runtime);
mm->numa_next_scan is in jiffies and the next scan is msecs_to_jiffies(period) ahead (rounded up to
whole ticks); the work runs at the return to user after the access the tick fell in (placed in
the tick at the access's full-size length: return_to_user); the task
that ran a scan has its node_stamp pushed 2 ticks on, and by 32 times the scan's own runtime as
sum_exec_runtime sees it (the ticks that fall within the scan). The run loop keeps the time of the
next tick at which task_tick_numa would act (`next_numa_tick`) and compares the clock with it, so
the access path pays one compare.

The scan period starts at task_scan_start() for the mm's RSS at the task's first tick and then
moves as the kernel moves it: a promoted folio's fault is recorded by task_numa_fault() (the
promotion's target is a top-tier node; only faults left on the slow tier return early), and the
task's placement, once per pass, runs update_task_scan_period(). Every recorded fault in mode 2 is
remote and private, and the kernel's "nothing recorded" test is local + shared == 0, so each
placement doubles the period, capped at task_scan_max() for the RSS then, and moves the mm's next
scan that far out.

Scanner simplifications: VMAs are the region slots an mm maps (read()-only page cache has no
VMA); mode 1's faults on top-tier folios (which need the cpupid to tell private from shared), NUMA
groups, task placement across nodes and the cpupid two-stage filter are not modelled (tierlab has
no mode-1 workload yet). The per-VMA filters of v6.12 are (task_numa_work, vma_is_accessed: the new-VMA
scan_delay, the PID windows set by hint faults, seq_completed, the forced scan of one skipped VMA);
a thread's PID is PID_BASE + its task index, hashed into the 64-bit windows as the kernel hashes it. sum_exec_runtime is taken to move at ticks only (a
task alone on its CPU: the model's quantum boundaries are not the kernel's context switches).

Time is the kernel's jiffies_to_msecs(): milliseconds of the faulting task's virtual clock, kept to
32 bits; folio access times are masked to `access_time_bits` (LAST_CPUPID_SHIFT, 21 with
NR_CPUS=8192), so latencies wrap as the kernel's do.

Scale (docs/scaling.md). A run at --scale F models the full-size machine with every size F times
smaller; a page is then re-accessed F times sooner, so the run is the full-size one with time
compressed F-fold too. The kernel's clock here runs F times faster than the simulated one
(now_ms: ms of full-size time), so hot_threshold_ms, scan_period_*_ms, the 1-s rate-limit window
and the access-time wrap keep their full-size meaning with full ms resolution; the scan period
computed in full-size ms becomes simulated ns divided by F, and so does the tick (jiffies_at: a
tick every TICK_NSEC / F of virtual time); byte quantities of full-size memory
are divided by F (scan_size_mb, the 1 GiB floor of pgdat_free_space_enough, the rate limit's
pages per kernel second). F = 1 is the kernel exactly.

Simplifications: one zone per node; the cmpxchg races between CPUs opening a rate-limit or
threshold window cannot happen in a serial simulation.

The fault-count RFC (Bharata B Rao, "[RFC PATCH 0/2] Hot page promotion optimization for large
address space", March 2024; seed 002), as two knobs:
- `hint_fault_latency` = fault_count (patch 1). Every do_numa_page() adds one to the mm's
  `hint_faults` first thing (memory.py; do_huge_pmd_numa_page() does not, so PMD-mapped folios
  are not counted). The scanner stamps a slow-tier folio with the count of the mm it scans,
  folio_xchg_fault_count(): the folio's access-time field keeps count >> PAGE_FAULT_COUNT_BUCKETS
  (16: buckets of 65,536 faults), cut to the field's width, and gives back the stored value << 16 in
  32-bit arithmetic. The fault's latency is the faulting task's mm count now minus the exchanged
  stamp, mod 2**32 (unsigned int), and the folio is hot when it is below `fault_count_threshold`
  (1,000,000). numa_promotion_adjust_threshold() is not called (the RFC removes it); the
  free-space shortcut and the rate limit stay. Under --scale F the count is read in full-size
  faults (the mm's count times F, docs/scaling.md), as the kernel's clock is.
- `scan_restamp_protnone` (patch 2, either metric): change_pte_range() tests "already PROT_NONE"
  after the other skips and the stamping instead of first, so a slow-tier folio whose hint fault
  is still pending gets a fresh stamp on every pass. Its PTE is not modified: change_pte_range()
  counts a PTE only after ptep_modify_prot_commit(), so a restamped PTE is neither in
  numa_pte_updates nor in task_numa_work()'s scan_size budget (a range of only restamps uses up
  the virtual budget alone), as the kernel's code has it.
- The count is zeroed in init_numa_balancing(), which sched_fork() runs for every new task before
  copy_mm(): p->mm is then still the creating task's mm, so in the kernel any fork or thread
  creation by a task of the mm restarts its count (and dup_mm()'s copy gives a new process 0).
  Here every thread of a process is created at its start and no modelled process forks another,
  so the rule gives each mm a count of 0 at its start (state.allocate) and nothing later.
- Instrumentation as the RFC's cover letter reports it (no kernel counter exists):
  numa_should_migrate_calls counts the decision's calls (where the model calls it: the tiering
  branch), numa_latency_rejects the folios it turned down for latency >= threshold, and
  `hintlog` keeps a sample of (time, latency, threshold) per test (hint_latency_log).
"""
from __future__ import annotations

import math

import numpy as np
from ._jit import jit, jit_inline

from .mm import get_mm_rss
from .mmzone import jiffies_ms
from .params import NUMA_BALANCING_MEMORY_TIERING, NUMA_BALANCING_NORMAL, P
from .time_rules import max_lead_ns
from .state import (
    F2_ANON, F2_MAPPED, F2_PRESENT, F2_PTE_WRITE, PG_DIRTY, MPOL_F_MOF, PG_PROTNONE, REGION_FILE, REGION_FILE_MAPPED,
    VM_WRITE, WMARK_PROMO, folio_nr_pages, region_of,
)
from .tlb import flush_tlb_batched_pending, flush_tlb_mm_range
from .vmstat import Vm

MAX_SCAN_WINDOW_MB = 2560

# vma_is_accessed's PID filter (kernel/sched/fair.c)
VMA_PID_RESET_FACTOR = 4       # VMA_PID_RESET_PERIOD = 4 * sysctl_numa_balancing_scan_delay
PID_BASE = 1000                # tierlab's thread ids: task t is pid PID_BASE + t
GOLDEN_RATIO_32 = 0x61C88647   # include/linux/hash.h hash_32()

# enum HintFaultLatency (the hint_fault_latency knob)
HINT_LATENCY_TIME = 0          # mainline: ms from the scan (or the previous hint fault) to this one
HINT_LATENCY_FAULT_COUNT = 1   # RFC patch 1: hint faults of the mm in between

PAGE_FAULT_COUNT_BUCKETS = 16  # RFC patch 1: the stamp keeps the count in buckets of 2**16 faults

NUMA_MIGRATION_ADJUST_STEPS = 16


@jit_inline
def now_ms(p, clock_ns):
    """jiffies_to_msecs(jiffies): the task's virtual time in ms (times the scale: full-size ms),
    truncated to 32 bits."""
    return jiffies_ms(p, clock_ns) & 0xFFFFFFFF


@jit_inline
def scaled_pages(p, pages):
    """A page count of full-size memory at the run's scale."""
    return np.int64(pages / p[P.SCALE])


@jit_inline
def rate_limit_pages(p):
    """promote_rate_limit_MBps converted to 4 KiB pages per (kernel) second (MB << (20 - PAGE_SHIFT)),
    divided by the scale."""
    return scaled_pages(p, np.int64(p[P.PROMOTE_RATE_LIMIT_MBPS]) << 8)


@jit_inline
def pgdat_free_space_enough(s, p, nid):
    """Free pages above WMARK_PROMO + max(1 GiB / scale, node/16): promote without any hotness test."""
    enough = max(scaled_pages(p, 262144), s.pgdat[nid].managed >> 4)
    return s.pgdat[nid].free > s.pgdat[nid].wmark[WMARK_PROMO] + enough


@jit_inline
def access_time_mask(p):
    """LAST_CPUPID_MASK: the folio field the access time (or the RFC's fault count) lives in."""
    return (np.int64(1) << np.int64(p[P.ACCESS_TIME_BITS])) - 1


@jit_inline
def numa_hint_fault_latency(s, p, head, ms):
    """Time since the folio's access time was last stamped; re-stamps it with now (xchg). The
    kernel's jiffies are one clock, so a stamp is never later than now; here another thread may
    stamp at a clock up to the lead the run loop allows ahead of this one (engine.run: a quantum
    past the runner-up and one step), so a stamp within that lead ahead of now is a latency of 0, not a
    difference wrapped to nearly the field's range (which would class the hottest folio cold).
    Beyond it the difference wraps as the kernel's does."""
    mask = access_time_mask(p)
    last = np.int64(s.pages.stamp[head]) & mask
    s.pages.stamp[head] = np.uint32(ms & mask)
    if ((last - ms) & mask) <= stamp_lead_ms(p):
        return np.int64(0)
    return (ms - last) & mask


@jit_inline
def stamp_lead_ms(p):
    """The most (kernel) ms another entity's clock can be ahead of a running task's (the time
    rules' lead: time_rules.max_lead_ns), and a jiffy for the stamps' rounding."""
    return jiffies_ms(p, max_lead_ns(p)) + MSEC_PER_JIFFY


@jit_inline
def mm_fault_count(s, p, mm):
    """atomic_read(&mm->hint_faults) as the 32-bit atomic_t it is, in full-size faults (the count
    times the scale, docs/scaling.md)."""
    c = s.mm[mm].hint_faults
    if p[P.SCALE] != 1.0:
        c = np.int64(c * p[P.SCALE])
    return c & 0xFFFFFFFF


@jit_inline
def fault_count_stamp(p, count):
    """What folio_xchg_fault_count() stores for `count`: count >> PAGE_FAULT_COUNT_BUCKETS, cut to
    the field (folio_xchg_last_cpupid masks with LAST_CPUPID_MASK)."""
    return np.uint32((count >> PAGE_FAULT_COUNT_BUCKETS) & access_time_mask(p))


@jit_inline
def numa_hint_fault_count_latency(s, p, head, count):
    """RFC patch 1's numa_hint_fault_latency(folio, count): count - folio_xchg_fault_count(folio,
    count), the exchanged stamp read back as stored << 16 in a 32-bit int; the difference as the
    caller's unsigned int. Hint faults of the mm since the folio was stamped, to 65,536."""
    last = ((np.int64(s.pages.stamp[head]) & access_time_mask(p)) << PAGE_FAULT_COUNT_BUCKETS) & 0xFFFFFFFF
    s.pages.stamp[head] = fault_count_stamp(p, count)
    return (count - last) & 0xFFFFFFFF


@jit_inline
def scan_stamp(s, p, mm, now):
    """What change_prot_numa() stamps a slow-tier folio of mm `mm` with at `now`: the kernel's ms
    (folio_xchg_access_time), or with hint_fault_latency=fault_count the mm's hint-fault count
    (folio_xchg_fault_count)."""
    if np.int64(p[P.HINT_FAULT_LATENCY]) == HINT_LATENCY_FAULT_COUNT:
        return fault_count_stamp(p, mm_fault_count(s, p, mm))
    return np.uint32(now_ms(p, now) & access_time_mask(p))


@jit
def hint_latency_log(s, now, latency, th, metric, head):
    """Log (now, latency, threshold, metric, the folio's head page) of one latency test, for every
    `hintlog_stride`-th test: the
    tests logged are numbers 0, stride, 2*stride, ... When the log is full, every other row is
    dropped and the stride doubles, so the log always covers the whole run in at most
    HINT_LOG_ROWS rows (state.py), deterministically."""
    g = s.sys[0]
    if g.hintlog_skip > 0:
        g.hintlog_skip -= 1
        return
    log = s.hintlog
    n = g.nr_hintlog
    if n == log.shape[0]:
        n >>= 1
        for i in range(n):
            for k in range(log.shape[1]):
                log[i, k] = log[2 * i, k]
        g.hintlog_stride *= 2
    log[n, 0] = now
    log[n, 1] = latency
    log[n, 2] = th
    log[n, 3] = metric
    log[n, 4] = head
    g.nr_hintlog = n + 1
    g.hintlog_skip = g.hintlog_stride - 1


@jit
def numa_promotion_rate_limit(s, nid, rate_limit, nr, ms):
    """Count candidates on the destination node; True (throttle) once this 1 s window has seen
    rate_limit pages. Throttled candidates are still counted, as in the kernel."""
    s.counters[nid, Vm.PGPROMOTE_CANDIDATE] += nr
    nr_cand = s.counters[nid, Vm.PGPROMOTE_CANDIDATE]
    if ms - s.pgdat[nid].nbp_rl_start > 1000:
        s.pgdat[nid].nbp_rl_start = ms
        s.pgdat[nid].nbp_rl_nr_cand = nr_cand
    if nr_cand - s.pgdat[nid].nbp_rl_nr_cand >= rate_limit:
        s.counters[nid, Vm.PROMOTE_RATE_LIMITED_PAGES] += nr
        return True
    return False


@jit
def numa_promotion_adjust_threshold(s, p, nid, rate_limit, ref_th, ms):
    """Every scan_period_max_ms, step the hot threshold by ref_th*2/16 toward the candidate rate the
    rate limit allows: stricter above 110 % of it, looser below 90 %, within [unit, 2*ref_th]."""
    period = np.int64(p[P.SCAN_PERIOD_MAX_MS])
    if ms - s.pgdat[nid].nbp_th_start <= period:
        return
    s.pgdat[nid].nbp_th_start = ms
    ref_cand = rate_limit * period // 1000
    nr_cand = s.counters[nid, Vm.PGPROMOTE_CANDIDATE]
    diff_cand = nr_cand - s.pgdat[nid].nbp_th_nr_cand
    unit_th = ref_th * 2 // NUMA_MIGRATION_ADJUST_STEPS
    th = s.pgdat[nid].nbp_threshold
    if th == 0:
        th = ref_th
    if diff_cand > ref_cand * 11 // 10:
        th = max(th - unit_th, unit_th)
    elif diff_cand < ref_cand * 9 // 10:
        th = min(th + unit_th, ref_th * 2)
    s.pgdat[nid].nbp_th_nr_cand = nr_cand
    s.pgdat[nid].nbp_threshold = th


@jit_inline
def should_numa_migrate_memory(s, p, head, dst, nr, now, mm):
    """Tiering branch of should_numa_migrate_memory() for a folio on a slow-tier node, destination
    `dst` (the faulting CPU's node), asked by a task of mm `mm` at `now`: free-space shortcut, else
    the latency test (hint_fault_latency: ms against the adjusted hot threshold, or the RFC's hint
    faults of the mm against fault_count_threshold), else the per-node promotion rate limit."""
    if s.pgdat[dst].managed == 0:
        return False
    if pgdat_free_space_enough(s, p, dst):
        s.pgdat[dst].nbp_threshold = 0
        s.counters[dst, Vm.PGPROMOTE_CANDIDATE_NRL] += nr
        return True
    ms = now_ms(p, now)
    rate_limit = rate_limit_pages(p)
    metric = np.int64(p[P.HINT_FAULT_LATENCY])
    if metric == HINT_LATENCY_FAULT_COUNT:
        th = np.int64(p[P.FAULT_COUNT_THRESHOLD])
        latency = numa_hint_fault_count_latency(s, p, head, mm_fault_count(s, p, mm))
    else:
        def_th = np.int64(p[P.HOT_THRESHOLD_MS])
        numa_promotion_adjust_threshold(s, p, dst, rate_limit, def_th, ms)
        th = s.pgdat[dst].nbp_threshold
        if th == 0:
            th = def_th
        latency = numa_hint_fault_latency(s, p, head, ms)
    hint_latency_log(s, now, latency, th, metric, head)
    if latency >= th:
        s.counters[dst, Vm.NUMA_LATENCY_REJECTS] += 1
        return False
    return not numa_promotion_rate_limit(s, dst, rate_limit, nr, ms)


def reset_promotion_state(pgdat: np.ndarray, counters_candidate: np.ndarray, now_ms_value: int) -> None:
    """What writing the tiering bit to numa_balancing does: threshold 0, windows start now."""
    pgdat["nbp_threshold"] = 0
    pgdat["nbp_rl_start"] = now_ms_value
    pgdat["nbp_th_start"] = now_ms_value
    pgdat["nbp_rl_nr_cand"] = counters_candidate
    pgdat["nbp_th_nr_cand"] = counters_candidate


@jit_inline
def task_nr_scan_windows(p, rss):
    """task_nr_scan_windows() for an mm of `rss` pages: one window per scan_size_mb of RSS, rounded
    up; an empty mm counts as one window."""
    nr_scan_pages = max(np.int64(1), scaled_pages(p, np.int64(p[P.SCAN_SIZE_MB]) << 8))   # full-size MB at the run's scale
    if rss <= 0:
        rss = nr_scan_pages
    return (rss + nr_scan_pages - 1) // nr_scan_pages


@jit_inline
def task_scan_min_ms(p, rss):
    """task_scan_min() for an mm of `rss` pages: scan_period_min split over task_nr_scan_windows(),
    floored at the MAX_SCAN_WINDOW rate (1000 / (2560 / scan_size) ms: 100 ms at 256 MB per pass).
    Integer milliseconds, as the kernel computes them."""
    scan_size = np.int64(p[P.SCAN_SIZE_MB])
    windows = MAX_SCAN_WINDOW_MB // scan_size if scan_size < MAX_SCAN_WINDOW_MB else np.int64(1)
    floor = 1000 // windows
    return max(floor, np.int64(p[P.SCAN_PERIOD_MIN_MS]) // task_nr_scan_windows(p, rss))


@jit_inline
def task_scan_max_ms(p, rss):
    """task_scan_max() (no numa_group): scan_period_max split over task_nr_scan_windows(), never
    below task_scan_min(). 100 ms for a 192 GiB RSS (60000 / 768 windows is below the floor)."""
    smax = np.int64(p[P.SCAN_PERIOD_MAX_MS]) // task_nr_scan_windows(p, rss)
    return max(task_scan_min_ms(p, rss), smax)


HZ = 250                        # the kernel/Kconfig.hz default
TICK_NSEC = 1_000_000_000 // HZ
MSEC_PER_JIFFY = 1000 // HZ


@jit_inline
def msecs_to_jiffies(ms):
    """msecs_to_jiffies() for HZ dividing 1000: rounded up to whole jiffies."""
    return (ms + MSEC_PER_JIFFY - 1) // MSEC_PER_JIFFY


@jit_inline
def init_numa_balancing(s, p, mm, now):
    """init_numa_balancing() for the first task of an mm that starts at `now`: its first scan no
    earlier than scan_delay later (mm_first_scan_jiffies, for the mms that start at a set time)."""
    s.mm[mm].numa_next_scan = jiffies_at(p, now) + msecs_to_jiffies(np.int64(p[P.SCAN_DELAY_MS]))


@jit_inline
def jiffies_at(p, clock_ns):
    """jiffies at virtual time `clock_ns`: ticks of the kernel's clock (F times faster at --scale F)
    since time 0."""
    if p[P.SCALE] == 1.0:
        return clock_ns // TICK_NSEC
    return np.int64(np.floor(clock_ns * p[P.SCALE] / TICK_NSEC))


@jit_inline
def jiffy_start(p, j):
    """The virtual time (ns) of tick `j`: the first ns at which jiffies reads j."""
    if p[P.SCALE] == 1.0:
        return j * TICK_NSEC
    return np.int64(np.ceil(j * TICK_NSEC / p[P.SCALE]))


@jit_inline
def kernel_ms_ns(p, ms):
    """A duration of the kernel's ms (a scan period) as virtual ns: divided by the scale."""
    return np.int64(ms * 1_000_000 / p[P.SCALE])


def thread_node_stamps(kernel, threads_per_process, scale: float = 1.0) -> list[int]:
    """init_numa_balancing()'s node_stamp for each task, process by process: 0 for a process's first
    thread; its k-th later thread (created by the first, with k users of the mm so far) is staggered
    by min(task_scan_max(current), current->numa_scan_period * k ms) + 2 ticks. The kernel compares
    task_scan_max()'s milliseconds with nanoseconds there (as unsigned ints), so the ms figure wins
    as a count of ns; this follows it. At clone time the mm has no RSS yet (one scan window), and
    the first thread's period is still scan_delay. A nonzero node_stamp means the thread never
    recomputes its period at its first tick (task_tick_numa), so it keeps scan_delay. Kernel ns,
    divided by the run's scale (docs/scaling.md)."""
    scan_size = int(kernel.scan_size_mb)
    windows = MAX_SCAN_WINDOW_MB // scan_size if scan_size < MAX_SCAN_WINDOW_MB else 1
    smin = max(1000 // windows, int(kernel.scan_period_min_ms))     # task_scan_min, one window
    smax = max(smin, int(kernel.scan_period_max_ms))                # task_scan_max, one window
    delay_ms = int(kernel.scan_delay_ms)
    out = []
    for n in threads_per_process:
        out.append(0)
        for k in range(1, n):
            a = smax & 0xFFFFFFFF
            b = (delay_ms * k * 1_000_000) & 0xFFFFFFFF
            out.append(int((min(a, b) + 2 * TICK_NSEC) / scale))
    return out


def mm_first_scan_jiffies(kernel, mm_start_ns, scale: float = 1.0) -> list[int]:
    """init_numa_balancing() for an mm's first task: mm->numa_next_scan = jiffies at its start +
    msecs_to_jiffies(scan_delay), per mm (its start in virtual ns; jiffies of the kernel's clock,
    F times faster at --scale F)."""
    delay = (int(kernel.scan_delay_ms) + MSEC_PER_JIFFY - 1) // MSEC_PER_JIFFY
    return [int(math.floor(int(t) * scale / TICK_NSEC)) + delay for t in mm_start_ns]


@jit
def task_scan_start_ms(s, p, mm):
    """task_scan_start() (no numa_group: task_scan_min) for the mm's RSS now (get_mm_rss: its
    MM_ANONPAGES + MM_FILEPAGES counters), in the kernel's integer ms."""
    return task_scan_min_ms(p, get_mm_rss(s, mm))


@jit
def change_prot_numa(s, mm, sender, start, end, stamp, skip_toptier, tiering, restamp):
    """change_prot_numa() over pages [start, end) of one VMA (change_pte_range() with
    MM_CP_PROT_NUMA): make each present, mapped PTE PROT_NONE unless it already is, its folio is on
    the top tier in tiering-only mode, or it is a dirty file folio (async migration would fail).
    Slow-tier folios get `stamp` (folio_xchg_access_time, or the RFC's folio_xchg_fault_count);
    with `restamp` (RFC patch 2) one whose PTE is already PROT_NONE is stamped too and then left
    alone. A large folio's state is on its head page: its PTEs inside the range are counted (the tail
    PTEs of a folio whose head lies before `start` are not walked: simplified). tlb_finish_mmu()
    then flushes the mm's TLBs over the span of the updated PTEs, from the scanning task's CPU
    `sender` (tlb.py). Returns the number of PTEs updated (numa_pte_updates)."""
    flags, flags2, node, pgdat = s.pages.flags, s.pages.flags2, s.pages.node, s.pgdat
    updated = 0
    first = end
    last = start
    for x in range(start, end):
        xu = np.uint64(x)      # unsigned: no negative-index wraparound in the walk
        f2 = flags2[xu]
        if not (f2 & F2_PRESENT) or not (f2 & F2_MAPPED):
            continue
        nid = np.uint8(node[xu])
        if skip_toptier and pgdat[nid].tier == 0:
            continue
        f = flags[xu]
        if (f & PG_PROTNONE) and not restamp:
            continue
        if (f & PG_DIRTY) and not (f2 & F2_ANON):
            continue
        if tiering and pgdat[nid].tier != 0:
            s.pages.stamp[xu] = stamp
        if f & PG_PROTNONE:
            continue               # patch 2: stamped, the PTE left as it is (no update, no flush)
        flags[xu] = f | PG_PROTNONE
        flags2[xu] = f2 & ~F2_PTE_WRITE        # pte_modify(PAGE_NONE): no write bit (memory.py)
        # a large folio's PTEs all change (a PMD-mapped one counts HPAGE_PMD_NR, as
        # change_pmd_range adds): its state lives on the head, the count is per PTE in range
        nr = min(folio_nr_pages(s, xu), np.int64(end - x))
        s.counters[nid, Vm.NUMA_PTE_UPDATES] += nr
        if updated == 0:
            first = x
        updated += nr
        last = x + nr - 1
    if updated > 0:
        flush_tlb_mm_range(s, mm, sender, first, last - first + 1)
    return updated


@jit_inline
def task_pid_bit(task):
    """hash_32(current->pid, ilog2(BITS_PER_LONG)): the task's bit in a VMA's pids_active words.
    tierlab's thread ids are PID_BASE + task; which tasks share a bit follows from them."""
    h = (np.uint64(PID_BASE + task) * np.uint64(GOLDEN_RATIO_32)) & np.uint64(0xFFFFFFFF)
    return h >> np.uint64(32 - 6)


@jit_inline
def vma_set_access_pid_bit(s, r, task):
    """vma_set_access_pid_bit(): a hint fault in the VMA of slot r records the faulting task in the
    current window (pids_active[1]), once the scanner has given the VMA its numab_state."""
    nb = s.regions.numab[r]
    if nb.allocated:
        nb.pids_active[1] |= np.uint64(1) << task_pid_bit(task)


@jit_inline
def vma_is_accessed(s, mm, r, task):
    """vma_is_accessed() as of v6.11+: scan the VMA during the first two passes since the scanner
    first saw it; when the scanning task's PID bit is in either window; when the mm's cursor is
    already inside it (a scan that has started is completed); or when more passes than the
    process has threads went by since it was last scanned to its end (the starvation fix)."""
    nb = s.regions.numab[r]
    seq = s.mm[mm].numa_scan_seq
    if seq - nb.start_scan_seq < 2:
        return True
    if ((nb.pids_active[0] | nb.pids_active[1]) >> task_pid_bit(task)) & np.uint64(1):
        return True
    if s.mm[mm].numa_scan_offset > s.regions.start[r]:
        return True
    return seq > nb.prev_scan_seq + s.mm[mm].users


@jit_inline
def vma_numa_scannable(s, mm, r):
    """task_numa_work()'s fixed skips: a slot of another mm, read()-only page cache (no VMA), a
    policy without MPOL_F_MOF (vma_policy_mof), a read-only file mapping (shared_ro)."""
    return not (s.regions.mm[r] != mm or s.regions.kind[r] == REGION_FILE
                or not (s.regions.pol_flags[r] & MPOL_F_MOF)
                or (s.regions.kind[r] == REGION_FILE_MAPPED and not (s.regions.vm_flags[r] & VM_WRITE)))


@jit_inline
def next_vma(s, mm, x):
    """vma_next() from address x: the first slot of the mm with a VMA (not read()-only page cache)
    that ends after x, or R."""
    R = s.regions.kind.shape[0]
    r = region_of(s, x) if x < s.pages.node.shape[0] else R
    while r < R and (s.regions.mm[r] != mm or s.regions.kind[r] == REGION_FILE or s.regions.end[r] <= x):
        r += 1
    return r


@jit_inline
def reset_ptenuma_scan(s, mm):
    s.mm[mm].numa_scan_seq += 1
    s.mm[mm].numa_scan_offset = 0


@jit
def task_numa_work(s, p, task, now):
    """One scan pass of task_numa_work() by `task` over its mm: from the cursor (numa_scan_offset),
    over the mm's VMAs that can be scanned, change_prot_numa() in ranges of `scan_size_mb` (the range
    end aligned up to a 2 MiB huge page, cut at the VMA's end). A range that updated any PTE uses up
    its length of the scan_size_mb budget; every range uses up its length of the 8x larger virtual
    budget (so areas with nothing to mark, e.g. top-tier memory in tiering-only mode, are walked
    through faster). Returns the cost in ns: every PTE of the walked ranges, plus each update.

    Which VMAs a pass visits, as v6.12 decides it (vma_numab_state, VMA_NUMAB_DTYPE):
    - the fixed skips (vma_numa_scannable); then the VMA's numab_state is made on its first visit
      (start_scan_seq and prev_scan_seq from the mm's pass, next_scan = now + scan_delay, the first
      PID-window rotation 4 x scan_delay after that);
    - after the mm's first pass, a VMA younger than its next_scan is skipped (scan_delay);
    - pids_active rotates (the current window becomes the previous one) every 4 x scan_delay;
    - a VMA already scanned to its end in this pass is skipped and the cursor moved past it
      (seq_completed);
    - a VMA vma_is_accessed() turns down is skipped (pid_inactive). If the pass reaches the last VMA
      having skipped one for that reason, it starts again from the cursor with the PID test off and
      scans one VMA to its end (vma_pids_forced).
    The pass ends when either budget is gone (cursor = where it stopped; the VMA is not marked
    complete even if the range reached its end), after the forced VMA (cursor = its end), or past
    the last VMA (reset_ptenuma_scan: cursor 0, numa_scan_seq + 1).

    VMAs are the region slots the mm maps, [start, end); read()-only page cache has none, and a VMA
    whose policy lacks MPOL_F_MOF is skipped (vma_policy_mof: the VMA's policy, else the task
    policy; only the default policy and a bind with MPOL_F_NUMA_BALANCING carry MOF), as is a
    read-only file mapping (vm_file with VM_READ and no VM_WRITE: shared libraries, fio's mmap
    reads; the kernel expects such pages to be replicated in caches). Every VMA a region declares
    is readable, so vma_is_accessible() never skips one.
    Huge-page alignment is taken from the region's start, as for a mapping placed THP-aligned."""
    mm = s.task[task].mm
    sender = s.task[task].cpu
    mode = np.int64(p[P.NUMA_BALANCING])
    pages = max(np.int64(1), scaled_pages(p, np.int64(p[P.SCAN_SIZE_MB]) << 8))
    virtpages = pages * 8
    stamp = scan_stamp(s, p, mm, now)
    restamp = p[P.SCAN_RESTAMP_PROTNONE] != 0
    skip_toptier = not (mode & NUMA_BALANCING_NORMAL)
    tiering = (mode & NUMA_BALANCING_MEMORY_TIERING) != 0
    nr_regions = s.regions.kind.shape[0]
    j = jiffies_at(p, now)
    delay = msecs_to_jiffies(np.int64(p[P.SCAN_DELAY_MS]))
    reset_period = msecs_to_jiffies(VMA_PID_RESET_FACTOR * np.int64(p[P.SCAN_DELAY_MS]))
    walked = 0
    updated = 0
    ranges = 0
    ranges_updated = 0
    flush_cost = 0.0
    pids_skipped = False
    pids_forced = False
    while True:                                   # retry_pids
        x = s.mm[mm].numa_scan_offset
        r = next_vma(s, mm, x)
        if r >= nr_regions:                       # nothing past the cursor: start over
            reset_ptenuma_scan(s, mm)
            x = np.int64(0)
            r = next_vma(s, mm, x)
        out = False
        while r < nr_regions:
            if not vma_numa_scannable(s, mm, r):
                r += 1
                continue
            nb = s.regions.numab[r]
            seq = s.mm[mm].numa_scan_seq
            if not nb.allocated:
                nb.allocated = 1
                nb.start_scan_seq = seq
                nb.next_scan = j + delay
                nb.pids_active_reset = nb.next_scan + reset_period
                nb.prev_scan_seq = seq - 1
            if seq != 0 and j < nb.next_scan:
                r += 1
                continue
            if seq != 0 and j > nb.pids_active_reset:
                nb.pids_active_reset += reset_period
                nb.pids_active[0] = nb.pids_active[1]
                nb.pids_active[1] = 0
            if nb.prev_scan_seq == seq:
                s.mm[mm].numa_scan_offset = s.regions.end[r]
                r += 1
                continue
            if not pids_forced and not vma_is_accessed(s, mm, r, task):
                pids_skipped = True
                r += 1
                continue
            vstart = s.regions.start[r]
            vend = s.regions.end[r]
            x = max(x, vstart)
            while x < vend:
                end = min(vstart + ((x - vstart + pages + 511) & ~np.int64(511)), vend)
                # change_pte_range() enters the range's page tables with flush_tlb_batched_pending()
                flush_cost += flush_tlb_batched_pending(s, p, mm, sender)
                n = change_prot_numa(s, mm, sender, x, end, stamp, skip_toptier, tiering, restamp)
                updated += n
                walked += end - x
                ranges += 1
                if n > 0:
                    pages -= end - x
                    ranges_updated += 1
                virtpages -= end - x
                x = end
                if pages <= 0 or virtpages <= 0:
                    out = True
                    break
            if out:
                break
            nb.prev_scan_seq = seq
            if pids_forced:
                break                             # one forced VMA per pass
            r += 1
        if r >= nr_regions and not pids_forced and pids_skipped:
            pids_forced = True
            continue
        break
    if r < nr_regions:
        s.mm[mm].numa_scan_offset = x
    else:
        reset_ptenuma_scan(s, mm)
    cost = walked * p[P.NUMA_SCAN_PTE_NS] + updated * p[P.NUMA_SCAN_UPDATE_NS] + flush_cost
    if walked > 0:
        nid = s.cpu[sender].node
        s.counters[nid, Vm.NUMA_SCAN_CALLS] += 1
        s.counters[nid, Vm.NUMA_SCAN_WALKED_PAGES] += walked
        s.counters[nid, Vm.NUMA_SCAN_RANGES] += ranges
        s.counters[nid, Vm.NUMA_SCAN_RANGES_UPDATED] += ranges_updated
        open_scan_window(s, mm, sender, now, cost, walked)
    return cost


@jit_inline
def open_scan_window(s, mm, sender, now, cost, walked):
    """change_prot_numa()'s mmu_gathers hold mm->tlb_flush_pending raised while the walk runs, taken
    as [now, now + cost): a PROT_NONE PTE of the mm is then pte_accessible()
    (tlb.mm_tlb_flush_pending), and a PTE batched meanwhile is met at the walk's next page table
    (tlb.scanner_meets_batch), the walk's page tables (one per 512 pages walked) evenly spaced."""
    mmr = s.mm[mm]
    mmr.flush_pending_start = now
    mmr.flush_pending_end = now + np.int64(cost)
    mmr.flush_pending_cpu = sender
    mmr.flush_pending_pmd_ns = max(np.int64(1), np.int64(cost) // ((walked + 511) // 512))
    mmr.flush_pending_poll = -1


@jit_inline
def return_to_user(p, tick, now):
    """The virtual time at which the work a tick queued runs, placed for the kernel's clock: the
    tick (virtual ns) plus what was left of the access the tick fell in (`now` - `tick`), that
    remainder taken at its full-size length against the tick. An access's own latency is not
    divided by the scale (a fault, a migration batch cost the same ns at any --scale) while the tick
    is, so at --scale F a 50 us fault would otherwise end F x 50 us into the tick: at F = 64 most
    of a 4 ms tick, where at full size it ends 1 % in (docs/scaling.md)."""
    return tick + np.int64((now - tick) / p[P.SCALE])


@jit
def task_numa_work_tick(s, p, task, tick, now):
    """task_numa_work() as queued by task_tick_numa at virtual time `tick`, run at the return to
    user at `now` (taken at return_to_user's point in the tick): nothing before the mm's
    numa_next_scan (jiffies); a task still at a zero period (scan_delay 0, a staggered thread)
    takes task_scan_start(); the next scan is msecs_to_jiffies(period) ahead; the task's node_stamp
    moves 2 ticks on (so that another thread of the mm wins the next time); then the scan pass. Its
    own runtime, as sum_exec_runtime sees it (ticks that fall within it), pushes node_stamp 32
    times as far (the 3 % cap on scan overhead). Returns the cost."""
    t = s.task[task]
    mm = t.mm
    kt = return_to_user(p, tick, now)
    j = jiffies_at(p, kt)
    if j < s.mm[mm].numa_next_scan:
        return 0.0
    if t.numa_scan_period == 0:
        t.numa_scan_period = task_scan_start_ms(s, p, mm)
    s.mm[mm].numa_next_scan = j + msecs_to_jiffies(t.numa_scan_period)
    t.numa_scan_stamp += np.int64(2 * TICK_NSEC / p[P.SCALE])
    cost = task_numa_work(s, p, task, now)
    # sum_exec_runtime moves only at ticks: the scan's own runtime is the ticks within it
    j_end = jiffies_at(p, kt + np.int64(cost))
    if j_end > j:
        t.numa_scan_stamp += 32 * (jiffy_start(p, j_end) - jiffy_start(p, j))
    return cost


@jit
def task_tick_numa(s, p, task, runtime, j, now):
    """task_tick_numa() at scheduler tick `j` (jiffies), at which the task has run `runtime` ns:
    once its runtime is past node_stamp + the scan period, the period is recomputed if this is the
    task's first time (node_stamp still 0: task_scan_start() for the mm's RSS *now*, after
    scan_delay of runtime, when the footprint is resident), node_stamp moves on by the old period,
    and if the tick's jiffies have reached the mm's numa_next_scan the scan work is queued; it runs
    at the return to user (`now`, after the access the tick fell in). Threads other than a
    process's first start with a staggered node_stamp (init_numa_balancing) and so keep the
    scan_delay period. Returns the scan's cost."""
    t = s.task[task]
    if t.exiting:
        return 0.0                  # PF_EXITING: the tick leaves an exiting task alone
    period = kernel_ms_ns(p, t.numa_scan_period)
    if runtime <= t.numa_scan_stamp + period:
        return 0.0
    if t.numa_scan_stamp == 0:
        t.numa_scan_period = task_scan_start_ms(s, p, t.mm)
    t.numa_scan_stamp += period
    if j < s.mm[t.mm].numa_next_scan:
        return 0.0
    return task_numa_work_tick(s, p, task, jiffy_start(p, j), now)


@jit_inline
def next_numa_tick(s, p, task, start, clock):
    """The virtual time of the first scheduler tick after `clock` at which task_tick_numa would act
    for the task: its runtime (runtime at `start`, the quantum's start, plus the clock since) past
    node_stamp + the scan period. Ticks are the jiffies grid of the kernel's clock."""
    t = s.task[task]
    x = start + t.numa_scan_stamp + kernel_ms_ns(p, t.numa_scan_period) - t.runtime
    return jiffy_start(p, jiffies_at(p, max(x, clock)) + 1)


@jit_inline
def numa_migrate_check(s, p, head, cpu_nid, nr, now, page_cache, allowed, mm):
    """numa_migrate_check() + mpol_misplaced() for a folio reached by a hint fault or (page_cache:
    the RFC's vmf == NULL case) by folio_mark_accessed: count the event (numa_hint_faults[_local] or
    numa_hint_page_cache[_local]); with MPOL_F_MORON (the default policy, or a bind with
    MPOL_F_NUMA_BALANCING) the target is the CPU's node when should_numa_migrate_memory() agrees and
    the folio lives elsewhere; `allowed` False (mpol_misplaced: a MORON bind whose mask lacks the
    CPU's node) stops before the decision; `mm` is the asking task's (current->mm: whose hint-fault
    count the RFC's decision reads). Returns it, or -1. Only the tiering branch is modelled:
    tiering off, or a top-tier folio, gives -1 (and is not counted in numa_should_migrate_calls). (The kernel keeps it
    in mm/memory.c; it lives here beside the decision it asks, which hint faults (memory.py) and
    page-cache promotion both reach.)"""
    nid = s.pages.node[head]
    if page_cache:
        s.counters[cpu_nid, Vm.NUMA_HINT_PAGE_CACHE] += 1
        if nid == cpu_nid:
            s.counters[cpu_nid, Vm.NUMA_HINT_PAGE_CACHE_LOCAL] += 1
    else:
        s.counters[cpu_nid, Vm.NUMA_HINT_FAULTS] += 1
        if nid == cpu_nid:
            s.counters[cpu_nid, Vm.NUMA_HINT_FAULTS_LOCAL] += 1
    if not allowed or not (np.int64(p[P.NUMA_BALANCING]) & NUMA_BALANCING_MEMORY_TIERING) or s.pgdat[nid].tier == 0:
        return -1
    s.counters[cpu_nid, Vm.NUMA_SHOULD_MIGRATE_CALLS] += 1
    if not should_numa_migrate_memory(s, p, head, cpu_nid, nr, now, mm) or cpu_nid == nid:
        return -1
    return cpu_nid


NUMA_PERIOD_SLOTS = 10          # update_task_scan_period(): the period moves in tenths
NUMA_PERIOD_THRESHOLD = 7       # a fault share of 7/10 or more slows the scan


@jit
def update_task_scan_period(s, p, task, shared, private, j):
    """update_task_scan_period() at a task's placement, from the faults it recorded since the last
    one. The kernel tests local + shared == 0 (or a failed migration) to mean "no faults recorded":
    then the period doubles, capped at numa_scan_period_max, and the mm's next scan moves that far
    from now. A promoted fault is remote and private (task_numa_fault), so in mode 2 this branch is
    the one every placement takes: the period doubles a pass up to task_scan_max(). Otherwise the
    period moves by tenths of itself (rounded up): slower by max(1, ratio - 7) tenths when 7/10 or
    more of the faults were private (ps_ratio) or else local (lr_ratio), faster by
    7 - max(lr, ps) tenths otherwise, clamped to [task_scan_min, task_scan_max] for the mm's RSS
    now, and the locality counts start again. (No failed migration is ever recorded here: only
    promoted faults are, see task_numa_fault.)"""
    t = s.task[task]
    local = t.numa_faults_local
    remote = t.numa_faults_remote
    if local + shared == 0:
        t.numa_scan_period = min(t.numa_scan_period_max, t.numa_scan_period << 1)
        s.mm[t.mm].numa_next_scan = j + msecs_to_jiffies(t.numa_scan_period)
        return
    period_slot = (t.numa_scan_period + NUMA_PERIOD_SLOTS - 1) // NUMA_PERIOD_SLOTS
    lr_ratio = local * NUMA_PERIOD_SLOTS // (local + remote)
    ps_ratio = private * NUMA_PERIOD_SLOTS // max(np.int64(1), private + shared)
    if ps_ratio >= NUMA_PERIOD_THRESHOLD:
        diff = max(np.int64(1), ps_ratio - NUMA_PERIOD_THRESHOLD) * period_slot
    elif lr_ratio >= NUMA_PERIOD_THRESHOLD:
        diff = max(np.int64(1), lr_ratio - NUMA_PERIOD_THRESHOLD) * period_slot
    else:
        diff = -(NUMA_PERIOD_THRESHOLD - max(lr_ratio, ps_ratio)) * period_slot
    rss = get_mm_rss(s, t.mm)
    t.numa_scan_period = min(max(t.numa_scan_period + diff, task_scan_min_ms(p, rss)), task_scan_max_ms(p, rss))
    t.numa_faults_local = 0
    t.numa_faults_remote = 0


@jit
def task_numa_placement(s, p, task, j):
    """task_numa_placement(), once per pass of the mm's scanner (the task's numa_scan_seq behind the
    mm's): the scan period's ceiling becomes task_scan_max() for the RSS now, the faults buffered
    since the last placement become the private/shared split, the preferred node is set once the
    task has any recorded fault (sched_setnuma: the node its faults were on, which here is always
    its own: see task_numa_fault), and update_task_scan_period() runs. NUMA groups, the per-node
    decayed fault statistics beyond that, and moving the task (task_numa_migrate) are not modelled:
    tierlab's tasks stay on their CPUs."""
    t = s.task[task]
    seq = s.mm[t.mm].numa_scan_seq
    if t.numa_scan_seq == seq:
        return
    t.numa_scan_seq = seq
    t.numa_scan_period_max = task_scan_max_ms(p, get_mm_rss(s, t.mm))
    shared = t.numa_faults_shared
    private = t.numa_faults_private
    t.numa_faults_shared = 0
    t.numa_faults_private = 0
    if private + shared > 0 and t.numa_preferred_nid < 0:
        t.numa_preferred_nid = s.cpu[t.cpu].node
    update_task_scan_period(s, p, task, shared, private, j)


@jit
def task_numa_fault(s, p, task, nr, local, priv, now):
    """task_numa_fault() for a fault on a top-tier folio, which is where a promoted folio lands
    (do_numa_page passes the target node after a successful migrate_misplaced_folio); the kernel
    returns early for a fault left on the slow tier in tiering mode, so in mode 2 the promotions
    are the only faults the task's statistics ever see. Once jiffies are past numa_migrate_retry the
    placement runs (task_numa_placement: at most once per scan pass) and numa_migrate_preferred()
    sets the next retry, min(1 s, the scan period / 16) on, when the task has a preferred node;
    then the fault's `nr` pages count as private or shared and as local or remote.

    A promoted fault is remote (TNF_FAULT_LOCAL is set only for a folio already on the faulting
    CPU's node) and private (a slow-tier folio's cpupid field holds its access time, so
    last_cpupid is the unset value, which counts as a first, private access). With local + shared
    = 0, each placement doubles the period up to task_scan_max() (update_task_scan_period): the
    scan period of mode 2 is not fixed at task_scan_start() but grows while promotions happen. The
    oracle's Linux 6.12 guest does the same: traced, 1000 -> 2000 -> 4000 -> 8000 ms, every
    placement doubling (docs/oracle.md, "The NUMA scan period in tiering mode"). The faults of mode 1/3 on top-tier folios, which would need cpupid tracking, are not
    recorded (tierlab models only the tiering branch). Costs nothing in simulated time."""
    t = s.task[task]
    j = jiffies_at(p, now)
    if j > t.numa_migrate_retry:
        task_numa_placement(s, p, task, j)
        if t.numa_preferred_nid >= 0:
            t.numa_migrate_retry = j + min(np.int64(HZ), msecs_to_jiffies(t.numa_scan_period) // 16)
    if priv:
        t.numa_faults_private += nr
    else:
        t.numa_faults_shared += nr
    if local:
        t.numa_faults_local += nr
    else:
        t.numa_faults_remote += nr
