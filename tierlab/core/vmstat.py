"""vmstat counters, with the kernel's own names (include/linux/vm_event_item.h, mm/vmstat.c).

Counters live in one int64 array `counters[node, item]`: every event is charged to a node (the node of
the folio it concerns, or for faults the node of the faulting CPU), so per-node
`/sys/devices/system/node/nodeN/vmstat` and global `/proc/vmstat` both come out of the same array.
`Vm` is the item enum (enum vm_event_item): `s.counters[nid, Vm.PGFAULT] += 1`; numba freezes its
members as compile-time constants. The names (`VMSTAT_NAMES`) are derived from it.

Counters tierlab invents are at the end, with names the kernel could have chosen and a unit suffix.
"""
from enum import IntEnum


class Vm(IntEnum):
    # faults
    PGFAULT = 0
    PGMAJFAULT = 1
    # classic LRU (mm/swap.c, mm/vmscan.c)
    PGACTIVATE = 2
    PGDEACTIVATE = 3
    PGREFILL = 4
    PGROTATED = 5
    PGSCAN_KSWAPD = 6
    PGSCAN_DIRECT = 7
    PGSTEAL_KSWAPD = 8
    PGSTEAL_DIRECT = 9
    PGSCAN_ANON = 10
    PGSCAN_FILE = 11
    PGSTEAL_ANON = 12
    PGSTEAL_FILE = 13
    PGDEMOTE_KSWAPD = 14
    PGDEMOTE_DIRECT = 15
    PGPGIN = 16
    PGPGOUT = 17
    PSWPIN = 18
    PSWPOUT = 19
    ALLOCSTALL = 20
    PAGEOUTRUN = 21
    KSWAPD_LOW_WMARK_HIT_QUICKLY = 22
    KSWAPD_HIGH_WMARK_HIT_QUICKLY = 23
    PGALLOC = 24
    PGFREE = 25
    # workingset (mm/workingset.c)
    WORKINGSET_REFAULT_ANON = 26
    WORKINGSET_REFAULT_FILE = 27
    WORKINGSET_ACTIVATE_ANON = 28
    WORKINGSET_ACTIVATE_FILE = 29
    WORKINGSET_RESTORE_ANON = 30
    WORKINGSET_RESTORE_FILE = 31
    # migration (mm/migrate.c)
    PGMIGRATE_SUCCESS = 32
    PGMIGRATE_FAIL = 33
    # NUMA balancing / tiering (kernel/sched/fair.c, mm/memory.c)
    NUMA_PTE_UPDATES = 34
    NUMA_HINT_FAULTS = 35
    NUMA_HINT_FAULTS_LOCAL = 36
    NUMA_PAGES_MIGRATED = 37
    PGPROMOTE_SUCCESS = 38
    PGPROMOTE_CANDIDATE = 39
    PGPROMOTE_CANDIDATE_NRL = 40
    # page-cache promotion RFC (Gregory Price, v3)
    NUMA_HINT_PAGE_CACHE = 41
    NUMA_HINT_PAGE_CACHE_LOCAL = 42
    # tierlab's own
    PROMOTE_DEFERRED_PAGES = 43      # candidates put back because the per-task cap (promo_count) was hit
    PROMOTE_PUTBACK_PAGES = 44       # isolated candidates put back to the LRU because migration failed
    OOM_KILL = 45
    # the hint-fault latency RFC's instrumentation (seed 002): should_numa_migrate_memory() calls that
    # reach the tiering decision, and those it rejects because the latency >= the threshold
    NUMA_SHOULD_MIGRATE_CALLS = 46
    NUMA_LATENCY_REJECTS = 47
    # TLB flushes (CONFIG_DEBUG_TLBFLUSH; arch/x86/mm/tlb.c counts them, tlb.py models it)
    NR_TLB_REMOTE_FLUSH = 48
    NR_TLB_REMOTE_FLUSH_RECEIVED = 49
    NR_TLB_LOCAL_FLUSH_ALL = 50
    NR_TLB_LOCAL_FLUSH_ONE = 51
    # the CPUs' TLBs (tlb_hw.py, with the TLB model on): page walks as Intel's generic perf events
    # count them (dTLB-load-misses, dTLB-store-misses, iTLB-load-misses), the flushes each CPU executed
    # (whole, and pages invalidated one by one), and the stale-translation checks
    DTLB_LOAD_MISSES = 52
    DTLB_STORE_MISSES = 53
    ITLB_LOAD_MISSES = 54
    TLB_CPU_FLUSH_ALL = 55
    TLB_CPU_FLUSH_ONE = 56
    TLB_STALE_HITS = 57          # hits on a translation to a frame the page has left (MIGRC's held source)
    TLB_STALE_WRITE_HITS = 58    # stores through one: must stay 0
    TLB_STALE_FREED_HITS = 59    # reads through one whose node holds no source any more: must stay 0
    # PMD-sized anon folios (mm/huge_memory.c do_huge_pmd_anonymous_page, split; huge_memory.py)
    THP_FAULT_ALLOC = 60
    THP_FAULT_FALLBACK = 61
    THP_SPLIT_PAGE = 62
    THP_DEFERRED_SPLIT_PAGE = 63
    THP_SWPOUT = 64              # a PMD-sized folio swapped out whole (count_swpout_vm_event)
    THP_SWPOUT_FALLBACK = 65     # one split for want of swap entries first (shrink_folio_list)
    # tierlab's own: where a hint fault's (or a page-cache access's) promotion stops, in pages, on the
    # node it was for -- beside numa_latency_rejects (the threshold) and pgmigrate_fail (no page at
    # WMARK_MIN when migrating)
    PROMOTE_RATE_LIMITED_PAGES = 66      # candidates numa_promotion_rate_limit() throttled
    MISPLACED_NO_ROOM_PAGES = 67         # refused by migrate_balanced_pgdat(): dst would fall below WMARK_HIGH
    MISPLACED_ISOLATE_FAILED_PAGES = 68  # refused by folio_isolate_lru() (in an lru_add batch, or isolated)
    # tierlab's own: the NUMA scanner's walk (task_numa_work), charged to the scanning task's node --
    # calls that walked anything, virtual pages walked, and the ranges among them that updated a PTE
    # (each uses its length of the scan_size_mb budget; the others only of the 8x virtual budget)
    NUMA_SCAN_CALLS = 69
    NUMA_SCAN_WALKED_PAGES = 70
    NUMA_SCAN_RANGES = 71
    NUMA_SCAN_RANGES_UPDATED = 72


class MthpStat(IntEnum):
    """Per-size THP statistics (enum mthp_stat_item; /sys/kernel/mm/transparent_hugepage/
    hugepages-<size>kB/stats/<name>), in SimState.mthp[order, item]."""
    ANON_FAULT_ALLOC = 0
    ANON_FAULT_FALLBACK = 1
    SPLIT = 2
    SPLIT_FAILED = 3
    SPLIT_DEFERRED = 4
    SWPOUT = 5                   # swapped out whole
    SWPOUT_FALLBACK = 6          # split before swap-out: add_to_swap() had no room for it whole


MTHP_STAT_NAMES = tuple(v.name.lower() for v in MthpStat)
NR_MTHP_STATS = len(MthpStat)


VMSTAT_NAMES = tuple(v.name.lower() for v in Vm)
NR_VMSTAT_ITEMS = len(Vm)

# Gauges: per-node values sampled into the time series and reported in Result.nodes (in this order;
# engine.node_gauges fills them).
NODE_GAUGE_NAMES = (
    "nr_free_pages",
    "nr_inactive_anon",
    "nr_active_anon",
    "nr_inactive_file",
    "nr_active_file",
    "nr_isolated",
    "migrc_pending_nr",     # MIGRC's held source folios (zone->migrc_pending_nr of the series; tlb.py)
    "nr_free_pages_64k",    # free pages in blocks of 64 KiB or more (buddyinfo from order 4; buddy only)
)
FREE_PAGES_64K_ORDER = (64 // 4).bit_length() - 1     # the order of nr_free_pages_64k's blocks
NR_NODE_GAUGES = len(NODE_GAUGE_NAMES)
