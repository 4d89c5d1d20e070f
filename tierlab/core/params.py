"""Index constants for the float64 parameter vector every kernel takes.

One flat vector holds the kernel knobs (from `tierlab.kernel.Kernel`), the time-model costs (from
`tierlab.core.cost.COSTS`) and a few engine settings. The API layer fills it; core kernels read
`p[HOT_THRESHOLD_MS]` and so on. Module-level ints are compile-time constants to numba, so an index
costs nothing. Names are the kernel's where the kernel has one.
"""

PARAM_NAMES = (
    # --- kernel knobs -------------------------------------------------------------------------
    "numa_balancing",                 # /proc/sys/kernel/numa_balancing bitmask: 1 NORMAL, 2 MEMORY_TIERING
    "demotion_enabled",               # /sys/kernel/mm/numa/demotion_enabled
    "watermark_scale_factor",         # /proc/sys/vm/watermark_scale_factor (1/10000 of the node)
    "min_free_kbytes",                # /proc/sys/vm/min_free_kbytes
    "swappiness",                     # /proc/sys/vm/swappiness
    "swap_pages",                     # swap space in pages (0: no swap device)
    "hot_threshold_ms",               # debugfs numa_balancing/hot_threshold_ms
    "promote_rate_limit_MBps",        # /proc/sys/kernel/numa_balancing_promote_rate_limit_MBps
    "scan_period_max_ms",             # debugfs numa_balancing/scan_period_max_ms (threshold-adjust period)
    "scan_period_min_ms",             # debugfs numa_balancing/scan_period_min_ms
    "scan_delay_ms",                  # debugfs numa_balancing/scan_delay_ms
    "scan_size_mb",                   # debugfs numa_balancing/scan_size_mb
    "pagecache_promotion_enabled",    # /sys/kernel/mm/numa/pagecache_promotion_enabled (RFC)
    "pagecache_promotion_cap",        # enum PromoCap: 0 RATE_LIMIT (v3 per-task cap), 1 UNLIMITED (v1/v2)
    "pagecache_promotion_order",      # enum PromoListOrder: 0 ADD_TAIL (v3), 1 ADD (earlier)
    "lru_batch_size",                 # PAGEVEC_SIZE of the per-CPU lru_add batch (15 before 6.8, 31 after)
    "access_time_bits",               # width of the folio access-time field (LAST_CPUPID_SHIFT)
    # --- time model (see cost.py for the meaning and sources) ------------------------------------
    "syscall_ns",
    "fma_ns",
    "fma_hook_check_ns",
    "promotion_candidate_ns",
    "numa_migrate_check_ns",
    "task_work_ns",
    "numa_scan_pte_ns",
    "numa_scan_update_ns",
    "migrate_batch_ns",
    "migrate_folio_ns",
    "migrate_noncontig_ns",
    "fault_ns",
    "zero_page_ns",
    "pagecache_insert_ns",
    "io_seq_4k_ns",
    "io_rand_4k_ns",
    "swap_out_4k_ns",
    "swap_in_4k_ns",
    "reclaim_scan_ns",
    "reclaim_free_ns",
    "stream_break_ns",
    "loaded_latency_c",
    "util_window_ns",
    # --- engine ---------------------------------------------------------------------------------
    "quantum_ns",                     # scheduler quantum: a task runs this much virtual time before the next is picked
    "sample_interval_ns",             # time-series sampling period (simulated time)
    "seed",
    "hit_path",                       # 1: present-folio accesses take engine.hit_path; 0: every access takes the
                                      # general path (same results: the tests compare the two)
)

for _i, _n in enumerate(PARAM_NAMES):
    globals()["P_" + _n.upper()] = _i
NR_PARAMS = len(PARAM_NAMES)
