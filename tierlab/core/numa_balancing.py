"""NUMA balancing in memory-tiering mode: the promotion decision.

Models kernel/sched/fair.c should_numa_migrate_memory() (tiering branch) with its helpers
pgdat_free_space_enough(), numa_hint_fault_latency(), numa_promotion_rate_limit() and
numa_promotion_adjust_threshold(), and mm/migrate.c migrate_balanced_pgdat() as used by
migrate_misplaced_folio_prepare(). The hint-fault scanner (task_numa_work/change_prot_numa) is a
later issue; it will call `should_numa_migrate_memory` exactly as the page-cache promotion path does.

Time is the kernel's jiffies_to_msecs(): milliseconds of the faulting task's virtual clock, kept to
32 bits; folio access times are masked to `access_time_bits` (LAST_CPUPID_SHIFT, 21 with
NR_CPUS=8192), so latencies wrap as the kernel's do.

Simplifications: one zone per node; the cmpxchg races between CPUs opening a rate-limit or
threshold window cannot happen in a serial simulation.
"""
from __future__ import annotations

import numpy as np
from ._jit import jit

from .params import P_ACCESS_TIME_BITS, P_HOT_THRESHOLD_MS, P_PROMOTE_RATE_LIMIT_MBPS, P_SCAN_PERIOD_MAX_MS
from .state import (
    NBP_RL_NR_CAND, NBP_RL_START, NBP_TH_NR_CAND, NBP_TH_START, NBP_THRESHOLD, WMARK_HIGH,
    WMARK_PROMO,
)
from .vmstat import PGPROMOTE_CANDIDATE, PGPROMOTE_CANDIDATE_NRL

NUMA_MIGRATION_ADJUST_STEPS = 16


@jit
def now_ms(clock_ns):
    """jiffies_to_msecs(jiffies): the task's virtual time in ms, truncated to 32 bits."""
    return np.int64(clock_ns // 1_000_000) & 0xFFFFFFFF


@jit
def rate_limit_pages(p):
    """promote_rate_limit_MBps converted to 4 KiB pages per second (MB << (20 - PAGE_SHIFT))."""
    return np.int64(p[P_PROMOTE_RATE_LIMIT_MBPS]) << 8


@jit
def pgdat_free_space_enough(s, nid):
    """Free pages above WMARK_PROMO + max(1 GiB, node/16): promote without any hotness test."""
    enough = max(np.int64(262144), s.managed[nid] >> 4)
    return s.free[nid] > s.wmark[nid, WMARK_PROMO] + enough


@jit
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


@jit
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


@jit
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
