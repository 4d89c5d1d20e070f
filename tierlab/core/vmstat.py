"""vmstat counters, with the kernel's own names (include/linux/vm_event_item.h, mm/vmstat.c).

Counters live in one int64 array `counters[node, item]`: every event is charged to a node (the node of
the folio it concerns, or for faults the node of the faulting CPU), so per-node
`/sys/devices/system/node/nodeN/vmstat` and global `/proc/vmstat` both come out of the same array.
Item indices are module-level ints, which numba freezes as compile-time constants.

Counters tierlab invents are at the end, with names the kernel could have chosen and a unit suffix.
"""

VMSTAT_NAMES = (
    # faults
    "pgfault",
    "pgmajfault",
    # classic LRU (mm/swap.c, mm/vmscan.c)
    "pgactivate",
    "pgdeactivate",
    "pgrefill",
    "pgrotated",
    "pgscan_kswapd",
    "pgscan_direct",
    "pgsteal_kswapd",
    "pgsteal_direct",
    "pgscan_anon",
    "pgscan_file",
    "pgsteal_anon",
    "pgsteal_file",
    "pgdemote_kswapd",
    "pgdemote_direct",
    "pgpgin",
    "pgpgout",
    "pswpin",
    "pswpout",
    "allocstall",
    "pageoutrun",
    "kswapd_low_wmark_hit_quickly",
    "kswapd_high_wmark_hit_quickly",
    "pgalloc",
    "pgfree",
    # workingset (mm/workingset.c)
    "workingset_refault_anon",
    "workingset_refault_file",
    "workingset_activate_anon",
    "workingset_activate_file",
    "workingset_restore_anon",
    "workingset_restore_file",
    # migration (mm/migrate.c)
    "pgmigrate_success",
    "pgmigrate_fail",
    # NUMA balancing / tiering (kernel/sched/fair.c, mm/memory.c)
    "numa_pte_updates",
    "numa_hint_faults",
    "numa_hint_faults_local",
    "numa_pages_migrated",
    "pgpromote_success",
    "pgpromote_candidate",
    "pgpromote_candidate_nrl",
    # page-cache promotion RFC (Gregory Price, v3)
    "numa_hint_page_cache",
    "numa_hint_page_cache_local",
    # tierlab's own
    "promote_deferred_pages",      # candidates put back because the per-task cap (promo_count) was hit
    "promote_putback_pages",       # isolated candidates put back to the LRU because migration failed
    "oom_kill",
)

for _i, _n in enumerate(VMSTAT_NAMES):
    globals()[_n.upper()] = _i
NR_VMSTAT_ITEMS = len(VMSTAT_NAMES)

# Gauges sampled at the end of a run (not events).
NODE_GAUGE_NAMES = (
    "nr_free_pages",
    "nr_inactive_anon",
    "nr_active_anon",
    "nr_inactive_file",
    "nr_active_file",
    "nr_isolated",
)
