"""NUMA balancing in memory-tiering mode: the promotion decision.

Models kernel/sched/fair.c should_numa_migrate_memory() (tiering branch) with its helpers
pgdat_free_space_enough(), numa_hint_fault_latency(), numa_promotion_rate_limit() and
numa_promotion_adjust_threshold(); mm/migrate.c migrate_balanced_pgdat(),
migrate_misplaced_folio_prepare() and migrate_misplaced_folio(); the scanner task_tick_numa() /
task_numa_work() / change_prot_numa() (mm/mprotect.c change_pte_range() skip rules); and the hint
fault do_numa_page() / numa_migrate_check() (mm/memory.c). The page-cache promotion path
(pagecache_promotion.py) calls the same should_numa_migrate_memory().

Scanner simplifications: all tasks share one mm; VMAs are the workload's anon and mmap'd file
regions (read()-only page cache has no VMA); the scan period is fixed at task_scan_start() for the
RSS seen at the first scan -- which is what mode 2 does, since slow-tier faults never reach
update_task_scan_period() -- and mode 1's scan-rate adaptation, NUMA groups, per-VMA PID
filtering and the cpupid two-stage filter are not modelled (tierlab has no mode-1 workload yet).

Time is the kernel's jiffies_to_msecs(): milliseconds of the faulting task's virtual clock, kept to
32 bits; folio access times are masked to `access_time_bits` (LAST_CPUPID_SHIFT, 21 with
NR_CPUS=8192), so latencies wrap as the kernel's do.

Simplifications: one zone per node; the cmpxchg races between CPUs opening a rate-limit or
threshold window cannot happen in a serial simulation.
"""
from __future__ import annotations

import numpy as np
from ._jit import jit, jit_inline

from .lru import lruvec_add_folio, lruvec_del_folio
from .migrate import move_isolated_folio
from .page_alloc import wakeup_kswapd, zone_watermark_ok
from .params import (
    P_ACCESS_TIME_BITS, P_FAULT_NS, P_HOT_THRESHOLD_MS, P_NUMA_BALANCING, P_NUMA_MIGRATE_CHECK_NS,
    P_NUMA_SCAN_PTE_NS, P_NUMA_SCAN_UPDATE_NS, P_PROMOTE_RATE_LIMIT_MBPS, P_SCAN_PERIOD_MAX_MS,
    P_SCAN_PERIOD_MIN_MS, P_SCAN_SIZE_MB,
)
from .state import (
    F2_ANON, F2_MAPPED, F2_PRESENT, MISC_NUMA_NEXT_SCAN, MISC_NUMA_SCAN_OFFSET, NBP_RL_NR_CAND,
    NBP_RL_START, NBP_TH_NR_CAND, NBP_TH_START, NBP_THRESHOLD, PG_DIRTY, PG_ISOLATED, PG_LRU,
    MPOL_DEFAULT, PG_PROTNONE, PG_YOUNG, REGION_FILE, WMARK_HIGH, WMARK_MIN, WMARK_PROMO,
    folio_nr_pages, region_of,
)
from .vmstat import (
    NUMA_HINT_FAULTS, NUMA_HINT_FAULTS_LOCAL, NUMA_HINT_PAGE_CACHE, NUMA_HINT_PAGE_CACHE_LOCAL, NUMA_PAGES_MIGRATED, NUMA_PTE_UPDATES,
    PGMIGRATE_FAIL, PGPROMOTE_CANDIDATE, PGPROMOTE_CANDIDATE_NRL, PGPROMOTE_SUCCESS,
)

NUMA_BALANCING_NORMAL = 1
NUMA_BALANCING_MEMORY_TIERING = 2
MAX_SCAN_WINDOW_MB = 2560

NUMA_MIGRATION_ADJUST_STEPS = 16


@jit_inline
def now_ms(clock_ns):
    """jiffies_to_msecs(jiffies): the task's virtual time in ms, truncated to 32 bits."""
    return np.int64(clock_ns // 1_000_000) & 0xFFFFFFFF


@jit_inline
def rate_limit_pages(p):
    """promote_rate_limit_MBps converted to 4 KiB pages per second (MB << (20 - PAGE_SHIFT))."""
    return np.int64(p[P_PROMOTE_RATE_LIMIT_MBPS]) << 8


@jit_inline
def pgdat_free_space_enough(s, nid):
    """Free pages above WMARK_PROMO + max(1 GiB, node/16): promote without any hotness test."""
    enough = max(np.int64(262144), s.managed[nid] >> 4)
    return s.free[nid] > s.wmark[nid, WMARK_PROMO] + enough


@jit_inline
def numa_hint_fault_latency(s, p, head, ms):
    """Time since the folio's access time was last stamped; re-stamps it with now (xchg)."""
    mask = (np.int64(1) << np.int64(p[P_ACCESS_TIME_BITS])) - 1
    last = np.int64(s.stamp[head]) & mask
    s.stamp[head] = np.uint32(ms & mask)
    return (ms - last) & mask


@jit
def numa_promotion_rate_limit(s, nid, rate_limit, nr, ms):
    """Count candidates on the destination node; True (throttle) once this 1 s window has seen
    rate_limit pages. Throttled candidates are still counted, as in the kernel."""
    s.counters[nid, PGPROMOTE_CANDIDATE] += nr
    nr_cand = s.counters[nid, PGPROMOTE_CANDIDATE]
    if ms - s.nbp[nid, NBP_RL_START] > 1000:
        s.nbp[nid, NBP_RL_START] = ms
        s.nbp[nid, NBP_RL_NR_CAND] = nr_cand
    return nr_cand - s.nbp[nid, NBP_RL_NR_CAND] >= rate_limit


@jit
def numa_promotion_adjust_threshold(s, p, nid, rate_limit, ref_th, ms):
    """Every scan_period_max_ms, step the hot threshold by ref_th*2/16 toward the candidate rate the
    rate limit allows: stricter above 110 % of it, looser below 90 %, within [unit, 2*ref_th]."""
    period = np.int64(p[P_SCAN_PERIOD_MAX_MS])
    if ms - s.nbp[nid, NBP_TH_START] <= period:
        return
    s.nbp[nid, NBP_TH_START] = ms
    ref_cand = rate_limit * period // 1000
    nr_cand = s.counters[nid, PGPROMOTE_CANDIDATE]
    diff_cand = nr_cand - s.nbp[nid, NBP_TH_NR_CAND]
    unit_th = ref_th * 2 // NUMA_MIGRATION_ADJUST_STEPS
    th = s.nbp[nid, NBP_THRESHOLD]
    if th == 0:
        th = ref_th
    if diff_cand > ref_cand * 11 // 10:
        th = max(th - unit_th, unit_th)
    elif diff_cand < ref_cand * 9 // 10:
        th = min(th + unit_th, ref_th * 2)
    s.nbp[nid, NBP_TH_NR_CAND] = nr_cand
    s.nbp[nid, NBP_THRESHOLD] = th


@jit_inline
def should_numa_migrate_memory(s, p, head, dst, nr, ms):
    """Tiering branch of should_numa_migrate_memory() for a folio on a slow-tier node, destination
    `dst` (the faulting CPU's node): free-space shortcut, else hot-threshold latency test, else the
    per-node promotion rate limit."""
    if s.managed[dst] == 0:
        return False
    if pgdat_free_space_enough(s, dst):
        s.nbp[dst, NBP_THRESHOLD] = 0
        s.counters[dst, PGPROMOTE_CANDIDATE_NRL] += nr
        return True
    def_th = np.int64(p[P_HOT_THRESHOLD_MS])
    rate_limit = rate_limit_pages(p)
    numa_promotion_adjust_threshold(s, p, dst, rate_limit, def_th, ms)
    th = s.nbp[dst, NBP_THRESHOLD]
    if th == 0:
        th = def_th
    latency = numa_hint_fault_latency(s, p, head, ms)
    if latency >= th:
        return False
    return not numa_promotion_rate_limit(s, dst, rate_limit, nr, ms)


@jit_inline
def migrate_balanced_pgdat(s, dst, nr):
    """Room for nr more pages on dst while staying at or above WMARK_HIGH."""
    return s.free[dst] >= s.wmark[dst, WMARK_HIGH] + nr


def reset_promotion_state(nbp: np.ndarray, counters_candidate: np.ndarray, now_ms_value: int) -> None:
    """What writing the tiering bit to numa_balancing does: threshold 0, windows start now."""
    nbp[:, 2] = 0
    nbp[:, 0] = now_ms_value
    nbp[:, 3] = now_ms_value
    nbp[:, 1] = counters_candidate
    nbp[:, 4] = counters_candidate


@jit
def task_scan_start_ns(s, p):
    """task_scan_start() for the current RSS: scan_period_min / windows (one window per
    scan_size_mb of RSS), floored at the MAX_SCAN_WINDOW rate (100 ms at 256 MB per pass). Runs
    once per task (a walk over the pages to count the RSS)."""
    rss = 0   # get_mm_rss(): pages mapped by the mm (anon and mapped file), not page cache
    for x in range(s.node.shape[0]):
        if (s.flags2[x] & F2_PRESENT) and (s.flags2[x] & F2_MAPPED):
            rss += 1
    scan_pages = np.int64(p[P_SCAN_SIZE_MB]) << 8
    windows = max(np.int64(1), (rss + scan_pages - 1) // scan_pages)
    floor_ms = 1000.0 * p[P_SCAN_SIZE_MB] / MAX_SCAN_WINDOW_MB
    return np.int64(max(floor_ms, p[P_SCAN_PERIOD_MIN_MS] / windows) * 1_000_000)


@jit
def change_prot_numa(s, start, end, stamp, skip_toptier, tiering):
    """change_prot_numa() over pages [start, end) of one VMA (change_pte_range() with
    MM_CP_PROT_NUMA): make each present, mapped PTE PROT_NONE unless it already is, its folio is on
    the top tier in tiering-only mode, or it is a dirty file folio (async migration would fail).
    Slow-tier folios get their access time stamped (folio_xchg_access_time). Returns the number of
    PTEs updated (numa_pte_updates)."""
    flags, flags2, node, tier = s.flags, s.flags2, s.node, s.tier
    updated = 0
    for x in range(start, end):
        xu = np.uint64(x)      # unsigned: no negative-index wraparound in the walk
        f2 = flags2[xu]
        if not (f2 & F2_PRESENT) or not (f2 & F2_MAPPED):
            continue
        nid = np.uint8(node[xu])
        if skip_toptier and tier[nid] == 0:
            continue
        f = flags[xu]
        if f & PG_PROTNONE:
            continue
        if (f & PG_DIRTY) and not (f2 & F2_ANON):
            continue
        if tiering and tier[nid] != 0:
            s.stamp[xu] = stamp
        flags[xu] = f | PG_PROTNONE
        s.counters[nid, NUMA_PTE_UPDATES] += 1
        updated += 1
    return updated


@jit
def task_numa_work(s, p, now):
    """One scan pass of task_numa_work(): from the mm's cursor (numa_scan_offset), over the VMAs
    that can be scanned, change_prot_numa() in ranges of `scan_size_mb` (the range end aligned up
    to a 2 MiB huge page, cut at the VMA's end). A range that updated any PTE uses up its length of
    the scan_size_mb budget; every range uses up its length of the 8x larger virtual budget (so
    areas with nothing to mark, e.g. top-tier memory in tiering-only mode, are walked through
    faster). The pass ends when either budget is gone, or at the last VMA, which resets the cursor
    to the start (reset_ptenuma_scan). Returns the cost in ns: every PTE of the walked ranges,
    plus each update.

    VMAs are the workload's regions; read()-only page cache has none, and a VMA whose policy lacks
    MPOL_F_MOF (any explicit mbind policy; only the default policy has MOF|MORON) is skipped
    (vma_policy_mof). Huge-page alignment is taken from the region's start, as for a mapping
    placed THP-aligned."""
    mode = np.int64(p[P_NUMA_BALANCING])
    pages = np.int64(p[P_SCAN_SIZE_MB]) << 8
    virtpages = pages * 8
    stamp = np.uint32(now_ms(now) & ((np.int64(1) << np.int64(p[P_ACCESS_TIME_BITS])) - 1))
    skip_toptier = not (mode & NUMA_BALANCING_NORMAL)
    tiering = (mode & NUMA_BALANCING_MEMORY_TIERING) != 0
    nr_pages = s.node.shape[0]
    nr_regions = s.region_kind.shape[0]
    x = s.misc[MISC_NUMA_SCAN_OFFSET]
    if x >= nr_pages:
        x = 0                   # find_vma() found nothing past the cursor: start over
    r = region_of(s, x)
    walked = 0
    updated = 0
    done = False
    while not done and r < nr_regions:
        vstart = s.region_start[r]
        vend = s.region_start[r + 1]
        if s.region_kind[r] == REGION_FILE or s.region_policy[r] != MPOL_DEFAULT:
            r += 1
            x = vend
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
    s.misc[MISC_NUMA_SCAN_OFFSET] = x
    return walked * p[P_NUMA_SCAN_PTE_NS] + updated * p[P_NUMA_SCAN_UPDATE_NS]


@jit
def task_tick_numa(s, p, task, runtime, now):
    """Runtime-driven trigger: once the task has run a scan period since its last stamp, the scan
    work runs at its return to user (here: right away). Returns the cost of the scan, if any."""
    if s.numa_scan[task, 1] == 0:
        s.numa_scan[task, 1] = task_scan_start_ns(s, p)
        s.numa_scan[task, 0] = s.numa_scan[task, 1]
    if runtime < s.numa_scan[task, 0]:
        return 0.0
    period = s.numa_scan[task, 1]
    s.numa_scan[task, 0] = runtime + period
    cost = 0.0
    if now >= s.misc[MISC_NUMA_NEXT_SCAN]:
        s.misc[MISC_NUMA_NEXT_SCAN] = now + period
        cost = task_numa_work(s, p, now)
    return cost


@jit_inline
def numa_migrate_check(s, p, head, cpu_nid, nr, now, page_cache):
    """numa_migrate_check() + mpol_misplaced() for a folio reached by a hint fault or (page_cache:
    the RFC's vmf == NULL case) by folio_mark_accessed: count the event (numa_hint_faults[_local] or
    numa_hint_page_cache[_local]); with the default policy (MOF|MORON) the target is the CPU's node
    when should_numa_migrate_memory() agrees and the folio lives elsewhere. Returns it, or -1. Only
    the tiering branch is modelled: tiering off, or a top-tier folio, gives -1."""
    nid = s.node[head]
    if page_cache:
        s.counters[cpu_nid, NUMA_HINT_PAGE_CACHE] += 1
        if nid == cpu_nid:
            s.counters[cpu_nid, NUMA_HINT_PAGE_CACHE_LOCAL] += 1
    else:
        s.counters[cpu_nid, NUMA_HINT_FAULTS] += 1
        if nid == cpu_nid:
            s.counters[cpu_nid, NUMA_HINT_FAULTS_LOCAL] += 1
    if not (np.int64(p[P_NUMA_BALANCING]) & NUMA_BALANCING_MEMORY_TIERING) or s.tier[nid] == 0:
        return -1
    if not should_numa_migrate_memory(s, p, head, cpu_nid, nr, now_ms(now)) or cpu_nid == nid:
        return -1
    return cpu_nid


@jit_inline
def migrate_misplaced_folio_prepare(s, p, head, dst, nr, now):
    """Refuse unless dst keeps WMARK_HIGH after taking the folio (then wake its kswapd: in tiering
    mode that is how promotion makes demotion happen), and isolate the folio from its LRU
    (folio_isolate_lru fails for a folio still in an lru_add batch or already isolated)."""
    if not migrate_balanced_pgdat(s, dst, nr):
        wakeup_kswapd(s, p, dst, now)
        return False
    if not (s.flags[head] & PG_LRU) or (s.flags[head] & PG_ISOLATED):
        return False
    lruvec_del_folio(s, head)
    s.flags[head] |= PG_ISOLATED
    s.nr_isolated[s.node[head]] += nr
    return True


@jit
def migrate_misplaced_folio(s, p, head, dst, nr, now):
    """Migrate an isolated folio to dst (alloc_misplaced_dst_folio: no reclaim, so dst must stay
    above WMARK_MIN), or put it back on its LRU. Counts numa_pages_migrated, and pgpromote_success
    for a move from a lower tier into the top tier. Returns (migrated, cost)."""
    src = s.node[head]
    s.nr_isolated[src] -= nr
    if not zone_watermark_ok(s, dst, nr, WMARK_MIN):
        s.flags[head] &= ~PG_ISOLATED
        lruvec_add_folio(s, head)
        s.counters[src, PGMIGRATE_FAIL] += nr
        return False, 0.0
    cost = move_isolated_folio(s, p, head, dst, now)
    s.counters[dst, NUMA_PAGES_MIGRATED] += nr
    if s.tier[dst] == 0 and s.tier[src] != 0:
        s.counters[dst, PGPROMOTE_SUCCESS] += nr
    return True, cost


@jit
def do_numa_page(s, p, head, cpu_nid, now):
    """A hint fault on a PROT_NONE folio: restore the PTE, count it, and in tiering mode promote a
    slow-tier folio the decision accepts (migrate_misplaced_folio_prepare + migrate_misplaced_folio).
    No TLB shootdown is charged: the old PTE was PROT_NONE (commit 4d4b6d66db). Returns the cost."""
    s.flags[head] = (s.flags[head] & ~PG_PROTNONE) | PG_YOUNG
    nr = folio_nr_pages(s, head)
    cost = p[P_FAULT_NS] + p[P_NUMA_MIGRATE_CHECK_NS]
    dst = numa_migrate_check(s, p, head, cpu_nid, nr, now, False)
    if dst < 0 or not migrate_misplaced_folio_prepare(s, p, head, dst, nr, now):
        return cost
    ok, c = migrate_misplaced_folio(s, p, head, dst, nr, now)
    return cost + c
