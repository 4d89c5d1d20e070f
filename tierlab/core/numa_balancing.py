"""NUMA balancing in memory-tiering mode: the promotion decision.

Models kernel/sched/fair.c should_numa_migrate_memory() (tiering branch) with its helpers
pgdat_free_space_enough(), numa_hint_fault_latency(), numa_promotion_rate_limit() and
numa_promotion_adjust_threshold(); and the scanner task_tick_numa() / task_numa_work() /
change_prot_numa() (mm/mprotect.c change_pte_range() skip rules). The hint fault that consults the
decision (do_numa_page, numa_migrate_check) is in memory.py, the migration in migrate.py; the
page-cache promotion path (pagecache_promotion.py) reaches the same should_numa_migrate_memory().

Scanner simplifications: VMAs are the region slots an mm maps (read()-only page cache has no
VMA); the scan period is fixed at task_scan_start() for the mm's RSS at the task's first tick --
which is what mode 2 does, since slow-tier faults never reach update_task_scan_period() -- and the
2-tick node_stamp push of the task that wins a scan is left out; mode 1's scan-rate adaptation, NUMA groups, per-VMA PID
filtering and the cpupid two-stage filter are not modelled (tierlab has no mode-1 workload yet).

Time is the kernel's jiffies_to_msecs(): milliseconds of the faulting task's virtual clock, kept to
32 bits; folio access times are masked to `access_time_bits` (LAST_CPUPID_SHIFT, 21 with
NR_CPUS=8192), so latencies wrap as the kernel's do.

Scale (docs/scaling.md). A run at --scale F models the full-size machine with every size F times
smaller; a page is then re-accessed F times sooner, so the run is the full-size one with time
compressed F-fold too. The kernel's clock here runs F times faster than the simulated one
(now_ms: ms of full-size time), so hot_threshold_ms, scan_period_*_ms, the 1-s rate-limit window
and the access-time wrap keep their full-size meaning with full ms resolution; the scan period
computed in full-size ms becomes simulated ns divided by F; byte quantities of full-size memory
are divided by F (scan_size_mb, the 1 GiB floor of pgdat_free_space_enough, the rate limit's
pages per kernel second). F = 1 is the kernel exactly.

Simplifications: one zone per node; the cmpxchg races between CPUs opening a rate-limit or
threshold window cannot happen in a serial simulation.
"""
from __future__ import annotations

import numpy as np
from ._jit import jit, jit_inline

from .mm import get_mm_rss
from .mmzone import jiffies_ms
from .params import NUMA_BALANCING_MEMORY_TIERING, NUMA_BALANCING_NORMAL, P
from .state import (
    F2_ANON, F2_MAPPED, F2_PRESENT, F2_PTE_WRITE, PG_DIRTY, MPOL_F_MOF, PG_PROTNONE, REGION_FILE, WMARK_PROMO, region_of,
)
from .vmstat import Vm

MAX_SCAN_WINDOW_MB = 2560

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
def numa_hint_fault_latency(s, p, head, ms):
    """Time since the folio's access time was last stamped; re-stamps it with now (xchg)."""
    mask = (np.int64(1) << np.int64(p[P.ACCESS_TIME_BITS])) - 1
    last = np.int64(s.pages.stamp[head]) & mask
    s.pages.stamp[head] = np.uint32(ms & mask)
    return (ms - last) & mask


@jit
def numa_promotion_rate_limit(s, nid, rate_limit, nr, ms):
    """Count candidates on the destination node; True (throttle) once this 1 s window has seen
    rate_limit pages. Throttled candidates are still counted, as in the kernel."""
    s.counters[nid, Vm.PGPROMOTE_CANDIDATE] += nr
    nr_cand = s.counters[nid, Vm.PGPROMOTE_CANDIDATE]
    if ms - s.pgdat[nid].nbp_rl_start > 1000:
        s.pgdat[nid].nbp_rl_start = ms
        s.pgdat[nid].nbp_rl_nr_cand = nr_cand
    return nr_cand - s.pgdat[nid].nbp_rl_nr_cand >= rate_limit


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
def should_numa_migrate_memory(s, p, head, dst, nr, ms):
    """Tiering branch of should_numa_migrate_memory() for a folio on a slow-tier node, destination
    `dst` (the faulting CPU's node): free-space shortcut, else hot-threshold latency test, else the
    per-node promotion rate limit."""
    if s.pgdat[dst].managed == 0:
        return False
    if pgdat_free_space_enough(s, p, dst):
        s.pgdat[dst].nbp_threshold = 0
        s.counters[dst, Vm.PGPROMOTE_CANDIDATE_NRL] += nr
        return True
    def_th = np.int64(p[P.HOT_THRESHOLD_MS])
    rate_limit = rate_limit_pages(p)
    numa_promotion_adjust_threshold(s, p, dst, rate_limit, def_th, ms)
    th = s.pgdat[dst].nbp_threshold
    if th == 0:
        th = def_th
    latency = numa_hint_fault_latency(s, p, head, ms)
    if latency >= th:
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
def task_scan_min_ms(p, rss):
    """task_scan_min() for an mm of `rss` pages: scan_period_min split over task_nr_scan_windows()
    (one window per scan_size_mb of RSS, rounded up; an empty mm counts as one window), floored at
    the MAX_SCAN_WINDOW rate (1000 / (2560 / scan_size) ms: 100 ms at 256 MB per pass). Integer
    milliseconds, as the kernel computes them."""
    scan_size = np.int64(p[P.SCAN_SIZE_MB])
    windows = MAX_SCAN_WINDOW_MB // scan_size if scan_size < MAX_SCAN_WINDOW_MB else np.int64(1)
    floor = 1000 // windows
    nr_scan_pages = max(np.int64(1), scaled_pages(p, scan_size << 8))   # full-size MB at the run's scale
    if rss <= 0:
        rss = nr_scan_pages
    nr_windows = (rss + nr_scan_pages - 1) // nr_scan_pages
    return max(floor, np.int64(p[P.SCAN_PERIOD_MIN_MS]) // nr_windows)


TICK_NSEC = 4_000_000   # 1 s / HZ with HZ = 250, the kernel/Kconfig.hz default


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


@jit
def task_scan_start_ns(s, p, mm):
    """task_scan_start() (no numa_group: task_scan_min) for the mm's RSS now (get_mm_rss: its
    MM_ANONPAGES + MM_FILEPAGES counters): the kernel's integer ms, as simulated ns (divided by
    the scale, docs/scaling.md)."""
    return np.int64(task_scan_min_ms(p, get_mm_rss(s, mm)) * 1_000_000 / p[P.SCALE])


@jit
def change_prot_numa(s, start, end, stamp, skip_toptier, tiering):
    """change_prot_numa() over pages [start, end) of one VMA (change_pte_range() with
    MM_CP_PROT_NUMA): make each present, mapped PTE PROT_NONE unless it already is, its folio is on
    the top tier in tiering-only mode, or it is a dirty file folio (async migration would fail).
    Slow-tier folios get their access time stamped (folio_xchg_access_time). Returns the number of
    PTEs updated (numa_pte_updates)."""
    flags, flags2, node, pgdat = s.pages.flags, s.pages.flags2, s.pages.node, s.pgdat
    updated = 0
    for x in range(start, end):
        xu = np.uint64(x)      # unsigned: no negative-index wraparound in the walk
        f2 = flags2[xu]
        if not (f2 & F2_PRESENT) or not (f2 & F2_MAPPED):
            continue
        nid = np.uint8(node[xu])
        if skip_toptier and pgdat[nid].tier == 0:
            continue
        f = flags[xu]
        if f & PG_PROTNONE:
            continue
        if (f & PG_DIRTY) and not (f2 & F2_ANON):
            continue
        if tiering and pgdat[nid].tier != 0:
            s.pages.stamp[xu] = stamp
        flags[xu] = f | PG_PROTNONE
        flags2[xu] = f2 & ~F2_PTE_WRITE        # pte_modify(PAGE_NONE): no write bit (memory.py)
        s.counters[nid, Vm.NUMA_PTE_UPDATES] += 1
        updated += 1
    return updated


@jit
def task_numa_work(s, p, mm, now):
    """One scan pass of task_numa_work() over mm `mm`: from its cursor (numa_scan_offset), over the
    mm's VMAs that can be scanned, change_prot_numa() in ranges of `scan_size_mb` (the range end
    aligned up to a 2 MiB huge page, cut at the VMA's end). A range that updated any PTE uses up its
    length of the scan_size_mb budget; every range uses up its length of the 8x larger virtual
    budget (so areas with nothing to mark, e.g. top-tier memory in tiering-only mode, are walked
    through faster). The pass ends when either budget is gone, or at the last VMA, which resets the
    cursor to the start (reset_ptenuma_scan: numa_scan_seq + 1). Returns the cost in ns: every PTE
    of the walked ranges, plus each update.

    VMAs are the region slots the mm maps, [start, end); read()-only page cache has none, and a VMA
    whose policy lacks MPOL_F_MOF is skipped (vma_policy_mof: the VMA's policy, else the task
    policy; only the default policy and a bind with MPOL_F_NUMA_BALANCING carry MOF).
    Huge-page alignment is taken from the region's start, as for a mapping placed THP-aligned."""
    mode = np.int64(p[P.NUMA_BALANCING])
    pages = max(np.int64(1), scaled_pages(p, np.int64(p[P.SCAN_SIZE_MB]) << 8))
    virtpages = pages * 8
    stamp = np.uint32(now_ms(p, now) & ((np.int64(1) << np.int64(p[P.ACCESS_TIME_BITS])) - 1))
    skip_toptier = not (mode & NUMA_BALANCING_NORMAL)
    tiering = (mode & NUMA_BALANCING_MEMORY_TIERING) != 0
    nr_pages = s.pages.node.shape[0]
    nr_regions = s.regions.kind.shape[0]
    x = s.mm[mm].numa_scan_offset
    if x >= nr_pages:
        x = 0                   # find_vma() found nothing past the cursor: start over
    r = region_of(s, x)
    walked = 0
    updated = 0
    done = False
    while not done and r < nr_regions:
        vstart = s.regions.start[r]
        vend = s.regions.end[r]
        if (s.regions.mm[r] != mm or s.regions.kind[r] == REGION_FILE
                or not (s.regions.pol_flags[r] & MPOL_F_MOF)):
            r += 1
            x = s.regions.start[r]
            continue
        x = max(x, vstart)
        while x < vend:
            end = min(vstart + ((x - vstart + pages + 511) & ~np.int64(511)), vend)
            n = change_prot_numa(s, x, end, stamp, skip_toptier, tiering)
            updated += n
            walked += end - x
            if n > 0:
                pages -= end - x
            virtpages -= end - x
            x = end
            if pages <= 0 or virtpages <= 0:
                done = True
                break
        r += 1
    if not done:
        x = 0                   # walked past the last VMA: reset_ptenuma_scan()
        s.mm[mm].numa_scan_seq += 1
    s.mm[mm].numa_scan_offset = x
    return walked * p[P.NUMA_SCAN_PTE_NS] + updated * p[P.NUMA_SCAN_UPDATE_NS]


@jit
def task_tick_numa(s, p, task, runtime, now):
    """task_tick_numa(), driven by the task's runtime: once it has run a scan period past its
    node_stamp, the period is recomputed if this is the task's first tick (node_stamp still 0:
    task_scan_start() for the mm's RSS *now*, after scan_delay of runtime, when the footprint is
    resident), node_stamp moves on by the old period, and the scan work runs at the return to user
    (here: right away) if the mm's numa_next_scan has come; task_numa_work() then sets the next
    scan one (new) period ahead. Threads other than a process's first start with a staggered
    node_stamp (init_numa_balancing) and so keep the scan_delay period. Returns the scan's cost."""
    t = s.task[task]
    period = t.numa_scan_period
    if runtime < t.numa_scan_stamp + period:
        return 0.0
    mm = t.mm
    if t.numa_scan_stamp == 0:
        t.numa_scan_period = task_scan_start_ns(s, p, mm)
    t.numa_scan_stamp += period
    cost = 0.0
    if now >= s.mm[mm].numa_next_scan:
        if t.numa_scan_period == 0:
            # task_numa_work(): a task still at a zero period (scan_delay 0, a staggered thread)
            # takes task_scan_start() there
            t.numa_scan_period = task_scan_start_ns(s, p, mm)
        s.mm[mm].numa_next_scan = now + t.numa_scan_period
        cost = task_numa_work(s, p, mm, now)
    return cost


@jit_inline
def numa_migrate_check(s, p, head, cpu_nid, nr, now, page_cache, allowed):
    """numa_migrate_check() + mpol_misplaced() for a folio reached by a hint fault or (page_cache:
    the RFC's vmf == NULL case) by folio_mark_accessed: count the event (numa_hint_faults[_local] or
    numa_hint_page_cache[_local]); with MPOL_F_MORON (the default policy, or a bind with
    MPOL_F_NUMA_BALANCING) the target is the CPU's node when should_numa_migrate_memory() agrees and
    the folio lives elsewhere; `allowed` False (mpol_misplaced: a MORON bind whose mask lacks the
    CPU's node) stops before the decision. Returns it, or -1. Only
    the tiering branch is modelled: tiering off, or a top-tier folio, gives -1. (The kernel keeps it
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
    if not should_numa_migrate_memory(s, p, head, cpu_nid, nr, now_ms(p, now)) or cpu_nid == nid:
        return -1
    return cpu_nid
