"""The float64 parameter vector every kernel takes, and its indices.

One flat vector holds the kernel knobs (their kernel names; `tierlab.kernel.KNOBS` describes each:
default, range, sysfs path, and must cover exactly KNOB_NAMES), the time-model costs (the keys of
`costs.COSTS`, with their sources), the machine's loaded-latency constant and a few engine settings.
The order is derived from those tables, never typed twice: `P` is an IntEnum whose members are the
upper-cased names, so a kernel reads `p[P.HOT_THRESHOLD_MS]` (numba freezes enum members as
compile-time constants). `grep -rn hot_threshold_ms` finds the knob; `P.FAULT_NS` is
COSTS["fault_ns"].
"""
from enum import IntEnum

from .costs import COSTS

# The knobs the engine reads, by their kernel names (the vector's first part).
KNOB_NAMES = (
    "numa_balancing",
    "demotion_enabled",
    "watermark_scale_factor",
    "min_free_kbytes",
    "swappiness",
    "swap_size",                      # in pages
    "hot_threshold_ms",
    "promote_rate_limit_MBps",
    "scan_period_max_ms",
    "scan_period_min_ms",
    "scan_delay_ms",
    "scan_size_mb",
    "pagecache_promotion_enabled",
    "pagecache_promotion_cap",        # enum PromoCap (pagecache_promotion.py)
    "pagecache_promotion_order",      # enum PromoListOrder (pagecache_promotion.py)
    "lru_batch_size",
    "access_time_bits",
    "sched_latency_ns",
    "sched_min_granularity_ns",
    "sched_wakeup_granularity_ns",
    "sched_tunable_scaling",          # SCHED_TUNABLESCALING_* (sched.py)
    "read_ahead_kb",
    "hint_fault_latency",             # enum HintFaultLatency (numa_balancing.py): time or fault_count (RFC)
    "fault_count_threshold",          # hint faults (RFC patch 1)
    "scan_restamp_protnone",          # bool (RFC patch 2)
    "init_on_alloc",
    "lru_gen",                        # /sys/kernel/mm/lru_gen/enabled caps (mglru.py LRU_GEN_*)
    "min_ttl_ms",                     # /sys/kernel/mm/lru_gen/min_ttl_ms
    "pagecache_promotion_lru_gen",    # enum LruGenPromo (mglru.py): candidates under MGLRU
    "migrc",                          # MIGRC series (tlb.py): off / on
    "migration_entry_ad",             # bool: swap_migration_ad_supported (migration keeps PTE young/dirty)
    "migrate_batch_flush",            # bool: 6.4's "migrate_pages: batch flushing TLB" (tlb.py)
    "anon_folio_orders",              # enum (huge_memory.py ANON_FOLIO_*): the anon fault order policy
    "arch_wants_pte_order",           # the preferred anon folio order of seed 001's v1/v2
    "huge_anon_orders_always",        # bitmask of orders: hugepages-<size>kB/enabled = always (mthp)
)
# from the machine file: cost.py's loaded-latency curve; the online CPUs (sched.py's tunable scaling)
MACHINE_NAMES = ("loaded_latency_c", "nr_cpus")
ENGINE_NAMES = (
    "quantum_ns",            # how far one CPU's clock may run ahead of the next CPU's before the loop
                             # switches CPUs (virtual-time interleaving, not a scheduling slice)
    "sample_interval_ns",    # time-series sampling period (simulated time)
    "seed",
    "fast_case",             # 1: accesses try access_present()'s fast case first; 0: every access takes the
                             # general case (same results by construction; the tests check it)
    "scale",                 # the run's --scale F: sizes are F times smaller and so, per page, is time; the
                             # kernel's clock and byte floors follow (numa_balancing.py, docs/scaling.md)
)
PARAM_NAMES = KNOB_NAMES + tuple(COSTS) + MACHINE_NAMES + ENGINE_NAMES
P = IntEnum("P", {n.upper(): i for i, n in enumerate(PARAM_NAMES)})
NR_PARAMS = len(PARAM_NAMES)

# /proc/sys/kernel/numa_balancing bits
NUMA_BALANCING_NORMAL = 1
NUMA_BALANCING_MEMORY_TIERING = 2
