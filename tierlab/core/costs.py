"""The time-model constants: what each piece of kernel work costs, with the source of every number.

cost.py charges them (and documents the memory-access model); params.py puts them in the parameter
vector after the knobs. Reproductions fit only baseline figures (e.g. the per-page copy cost of a
machine) and mark those `calibrated`; nothing here is fitted to a treatment column.
"""

FREE_FOLIO_NS = 118.4     # free_folio_ns (Hildenbrand 2024-01-29 munmap timings, see COSTS)
# Dave Chinner's kswapd call graph (2021-04-13, see reclaim_scan_ns below), % of all samples, the lock's
# spin left out: the work each reclaimed 4 KiB page-cache folio costs kswapd
KSWAPD_PROFILE_PCT = {"isolate_putback": 0.69, "shrink_page_list_checks": 0.89, "remove_mapping_own": 1.01,
                      "delete_from_page_cache": 1.56, "unlock_native": 0.09, "free": 0.82}
NS_PER_PCT = FREE_FOLIO_NS / KSWAPD_PROFILE_PCT["free"]      # 144.4 ns per 1 % of that profile


def _pct_ns(*parts: str) -> float:
    """The profile's parts in ns per reclaimed page, to the whole ns."""
    return float(round(sum(KSWAPD_PROFILE_PCT[k] for k in parts) * NS_PER_PCT))


# name: (default, unit, what it models and where the number comes from)
COSTS = {
    "syscall_ns": (150.0, "ns", "read()/write() entry and exit with speculation mitigations; getppid()-style "
                   "round trips measure 70-250 ns on 2020s x86 servers (lmbench lat_syscall)."),
    "fma_ns": (0.0, "ns", "folio_mark_accessed() itself; folded into the calibrated per-page copy cost seq_ns."),
    "fma_hook_check_ns": (1.0, "ns", "the RFC v3 inline checks added to folio_mark_accessed() (PG_isolated test, "
                          "sysfs switch, numa_balancing bit): a few predictable branches on hot cache lines."),
    "promotion_candidate_ns": (4.0, "ns", "an out-of-line call to promotion_candidate() that returns at the "
                               "node_is_toptier() test: call/return plus a node-mask lookup."),
    "numa_migrate_check_ns": (60.0, "ns", "numa_migrate_check()+mpol_misplaced()+should_numa_migrate_memory(): "
                              "policy lookup, atomic xchg of the access time, two atomics for the rate limit."),
    "task_work_ns": (100.0, "ns", "task_work_run() at return to user when a promotion list is queued."),
    "numa_scan_pte_ns": (5.0, "ns", "change_pte_range() walking one present PTE that it leaves alone. The split "
                         "with numa_scan_update_ns is assumed; their level is bounded by a measurement: "
                         "with the default 256 MB, the synchronous scan stalled pmbench's accesses for 0.5-4 ms, "
                         "most 1-2 ms, stalls that vanished with the scan made asynchronous (2-socket 256 GB "
                         "machine; the latency table of Huang Ying's 'autonuma: Support to scan page table "
                         "asynchronously', kernel.googlesource.com vishal/tiering, tag tiering-0.62). Here a "
                         "call costs 2.0 ms when every PTE of a 256 MB window is updated and 2.6 ms when a 2 GB "
                         "window is walked with nothing to update; a walk cost above ~7.6 ns would put the "
                         "latter beyond the measured 4 ms."),
    "numa_scan_update_ns": (25.0, "ns", "making one PTE PROT_NONE and stamping the folio's access time, "
                            "plus its share of the range's TLB flush (bounded with numa_scan_pte_ns: 15-30 ns "
                            "per PTE of a fully updated 256 MB window for the measured 1-2 ms)."),
    "migrate_batch_ns": (1500.0, "ns", "one migrate_pages() call: batch set-up and putback, the 4 us of a call "
                         "with one batched TLB shootdown less the shootdown (tlb_shootdown_ns), which is "
                         "charged only when a flush is sent."),
    "migrate_folio_ns": (700.0, "ns", "per-folio migration work besides the copy: isolate/lock, rmap walk "
                         "and migration entries, allocate the destination, remap, LRU putback. "
                         "move_pages() of 4 KiB pages in 512-folio batches between the two nodes of a "
                         "Zen 3 EPYC, kernel 6.16: 3.73 GB/s (~1.1 us per page), folio_copy() ~35 % of "
                         "it (S. Garg, 'Accelerate page migration with batch copying and hardware "
                         "offload', RFC v3, lkml 2025-09-23, 20250923174752.35701-1-shivankg@amd.com): "
                         "~0.7 us per page without the copy."),
    "migrate_noncontig_ns": (0.0, "ns", "reserved: extra cost of a destination page not adjacent to the previous one."),
    "fault_ns": (700.0, "ns", "a minor page fault: exception entry/exit, VMA lookup, PTE install "
                 "(will-it-scale page_fault1 ~ 1.2-1.5 M faults/s per thread, zeroing excluded)."),
    # fork() of 1 GiB on a Xeon Silver 4210R (David Hildenbrand, "[PATCH v2 00/15] mm/memory: optimize
    # fork() with PTE-mapped THP", 2024-01-25): 4 KiB folios 53.5 ns per PTE, batched 64 KiB+ folios
    # 37.5 ns per PTE (rmap dup and refcount once per folio). A batched PTE is read, write-protected
    # and written to the child; a fault's PTE is read (pte_range_none) and written: about half.
    "set_pte_ns": (19.0, "ns", "each PTE beyond the first that a fault maps for a PTE-mapped large folio: "
                   "pte_range_none()'s check and set_ptes()'s write (the rmap, the RSS counter and the LRU "
                   "add are per folio, in fault_ns). Inferred from the fork() timings above: half of "
                   "37.5 ns per batched PTE."),
    "zero_page_ns": (250.0, "ns", "clearing a 4 KiB page (clear_page with rep stosb at ~16 GB/s)."),
    "pagecache_insert_ns": (400.0, "ns", "adding a new folio to the page cache on a miss: allocation, xarray "
                            "insert, lru_add, readahead bookkeeping."),
    "swap_out_4k_ns": (10000.0, "ns", "writing a 4 KiB anon page to swap on NVMe, amortised in reclaim."),
    "swap_in_4k_ns": (80000.0, "ns", "a synchronous 4 KiB swap-in from NVMe (major fault)."),
    # The two reclaim costs per 4 KiB page-cache folio come from one kswapd profile and one timing:
    # (1) Dave Chinner's perf call graph of kswapd under 4 KiB buffered random reads at 1.6 GB/s
    #     ("Re: [PATCH v2 00/16] Multigenerational LRU Framework", linux-kernel 2021-04-13, quoted in
    #     Yu Zhao's reply of 2021-04-14, CAOUHufa5id9mmjud-UQd4agLCtmDypdNDStkxgoQxsUoh8Qcsg@mail.gmail.com;
    #     a KVM guest: pv spinlocks), in % of all samples: kswapd 20.06, shrink_inactive_list 19.91,
    #     shrink_page_list 19.22, __remove_mapping 17.51 of which the xa_lock's spin 14.16, the
    #     unlock 0.78 (0.69 of it the paravirt unlock), __delete_from_page_cache 1.56; free_unref_page_list
    #     0.82. Only ratios are taken from it: the work besides the lock's spin is isolation and putback
    #     (shrink_inactive_list less shrink_page_list) 0.69, shrink_page_list's own per-folio checks
    #     0.89, __remove_mapping's own 1.01, the page-cache deletion 1.56, the unlock's native part
    #     0.09, the free 0.82.
    # (2) the absolute scale: the free of one 4 KiB folio through free_unref_folios costs 118.4 ns
    #     (free_folio_ns below, D. Hildenbrand's munmap timings, 2024-01-29), so 1 % of (1) is
    #     118.4 / 0.82 = 144.4 ns per reclaimed page.
    # Cross-check: the same mail's top shows the four kswapds at 146.3 % of a CPU in all for 1.6 GB/s;
    # if every read missed (a file much larger than memory, as Yu Zhao supposed), that is 3.75 us of
    # kswapd per page, 26.1 % of it outside the spin: 0.98 us, against 0.75 us from (1)+(2).
    "reclaim_scan_ns": (_pct_ns("isolate_putback", "shrink_page_list_checks"), "ns", "isolating one folio from an inactive list and putting back what stays "
                        "(isolate_lru_folios / move_folios_to_lru, 0.69 %) and shrink_folio_list's own checks "
                        "of it (trylock, folio_check_references -> folio_referenced, which returns at once "
                        "for an unmapped page-cache folio, 0.89 %): 1.58 % x 144.4 ns (Chinner 2021-04-13 "
                        "kswapd profile scaled by the 118.4-ns free, see above). Deactivating a folio "
                        "(shrink_active_list) is charged the same: the same isolation, reference check and "
                        "list move, no source of its own. An rmap walk of a mapped folio costs more; not "
                        "measured here."),
    "reclaim_free_ns": (_pct_ns("remove_mapping_own", "delete_from_page_cache", "unlock_native", "free"), "ns", "dropping one clean reclaimed folio: __remove_mapping's own work (the "
                        "refcount freeze, the shadow entry, 1.01 %), the page-cache deletion "
                        "(__filemap_remove_folio / xas_store, 1.56 %), the unlock (0.09 %) and the free "
                        "(free_unref_folios, 0.82 %): 3.48 % x 144.4 ns (same sources). The xa_lock's hold "
                        "is inside it (xa_lock_ns); waiting for the lock is charged by locks.py."),
    "stream_break_ns": (-1.0, "ns", "extra cost when a streamed page is not physically adjacent to the "
                        "previous one: the streaming prefetchers lose the stream and the first lines "
                        "are a demand miss. -1 means 'one idle cache-line latency of the node'."),
    "vma_op_ns": (1000.0, "ns", "the VMA work of one mmap()/munmap()/brk() call besides the syscall entry: "
                  "find the gap or the VMA, split/merge, maple-tree update, vm_area_struct alloc/free. "
                  "Assumed: will-it-scale mmap1 (mmap + munmap of 128 MiB without touching it) runs at "
                  "the order of 10^6 pairs per second per thread on 2020s x86 servers."),
    # zap costs: three unknowns from three munmap timings of 1 GiB on a Xeon Silver 4210R (David
    # Hildenbrand, "[PATCH v1 0/9] mm/memory: optimize unmap/zap with PTE-mapped THP", 2024-01-29):
    # 4 KiB folios 222 ns per page (pte + rmap + free), 64 KiB folios 111 ns per page before the series
    # (rmap per PTE, free per folio) and 70 ns after it (rmap and free per folio)
    "zap_pte_ns": (59.9, "ns", "zap_pte_range() clearing one present PTE: ptep_get_and_clear_full, the RSS "
                   "counter, the mmu_gather entry (Hildenbrand 2024-01-29 munmap timings, see above)."),
    "zap_rmap_ns": (43.7, "ns", "one rmap removal of a zap (folio_remove_rmap_pte(s) and the reference "
                    "drop): per PTE, or per folio when the zap is batched per folio (zap_present_folio_ptes, "
                    "6.9+; seed 001's v1 'batch zap'). Same source."),
    "free_folio_ns": (FREE_FOLIO_NS, "ns", "releasing one gathered folio to the allocator (free_pages_and_swap_cache "
                      "-> folios_put -> free_unref_folios). Same source."),
    "tlb_flush_ns": (500.0, "ns", "one tlb_flush_mmu(): the local flush of the range or the whole TLB and its "
                     "refill misses. Assumed."),
    "tlb_shootdown_ns": (2500.0, "ns", "a flush sent to other CPUs (flush_tlb_multi), to the sender: the IPIs go "
                         "out together (x2APIC cluster mode; a KVM guest's PV send-IPI hypercall) and the "
                         "sender waits for the last acknowledgement: a 2-4 us round trip, the same in "
                         "migration batches (arch_tlbbatch_flush) and munmap (tlb_flush_mmu). Assumed "
                         "from those figures."),
    "tlb_ipi_ns": (200.0, "ns", "the sender's part per target CPU of a shootdown (its call_single_data queued, "
                   "the cpumask walk, the ack it polls). Assumed."),
    "tlb_flush_recv_ns": (1000.0, "ns", "a flush IPI on a target CPU, charged to the task running there: interrupt "
                          "entry and exit (two CR3 switches under PTI), flush_tlb_func's flush. Assumed ~1 us "
                          "in a guest with posted interrupts."),
    "tlb_walk_ns": (40.0, "ns", "one page walk after an STLB miss (tlb_hw.py, with the TLB model on): the "
                    "walker's loads of the paging structures, most of them from the paging-structure "
                    "caches and the data caches. Assumed: a native 4-level walk is ~20-40 cycles when "
                    "the upper levels are cached; under EPT a guest walk is two-dimensional (up to 24 "
                    "references) and ~2-3x dearer (Bhargava et al., ASPLOS 2008), so ~120 cycles at "
                    "3 GHz."),
    "lru_lock_ns": (60.0, "ns", "hold of lruvec->lru_lock per acquisition besides the folios moved (locks.py): "
                    "the lock word's cache line coming from the last holder's core (~50-100 ns between "
                    "cores of a server part) plus the irq-disable and the lruvec lookup. Assumed; part of "
                    "the callers' own costs, so only waiting for it adds time."),
    "lru_lock_folio_ns": (20.0, "ns", "hold of lruvec->lru_lock per folio moved under it (lruvec_add_folio / "
                          "lruvec_del_folio: the folio's and its neighbours' list links, the LRU size and "
                          "memcg statistics, a few hot cache lines). Assumed; part of the callers' costs."),
    "xa_lock_ns": (150.0, "ns", "hold of a mapping's i_pages xa_lock for one page-cache store (__filemap_add_folio: "
                   "xas_store, nrpages and NR_FILE_PAGES; __remove_mapping: the shadow-entry store and the "
                   "same counters): an xarray walk of 2-3 nodes and a few counter updates. Assumed; part "
                   "of pagecache_insert_ns and reclaim_free_ns."),
    "pagecache_lookup_ns": (0.0, "ns", "the page-cache lookup of one page of a read() (filemap_get_read_batch -> "
                            "xas_load: an xarray walk of 3-5 levels, cache-cold in a large file's tree), and the "
                            "failed lookup before a miss's readahead. 0 by default: folded into the calibrated "
                            "per-page copy cost seq_ns; seed 003's reproduction sets it (SEED003_COSTS)."),
    "activate_ns": (0.0, "ns", "folio_activate() besides the lock: queueing the folio in the per-CPU lru_activate "
                    "batch and, at the drain, lruvec_del_folio/lruvec_add_folio and the statistics "
                    "(__activate_page / folio_activate_fn). 0 by default: folded into seq_ns as fma_ns is; "
                    "seed 003's reproduction sets it."),
    "page_alloc_ns": (0.0, "ns", "get_page_from_freelist() for one new page-cache folio: the per-CPU list, "
                      "refilled from the buddy lists under zone->lock. 0 by default: folded into "
                      "pagecache_insert_ns and fault_ns; seed 003's reproduction sets it."),
    "bio_ns": (0.0, "ns", "the CPU work of one read request besides readahead's own: bio allocation, "
               "submit_bio -> blk-mq -> the NVMe driver's doorbell, the completion interrupt and "
               "bio_endio/folio unlock. 0 by default (not charged before seed 003's reproduction set it)."),
    "lru_gen_sort_ns": (20.0, "ns", "sort_folio() keeping one folio on the LRU (a protected or already promoted folio "
                        "moved to another generation's list) and inc_min_seq() moving one folio: a list_move "
                        "and a few flag updates under lru_lock. Assumed, as lru_lock_folio_ns."),
    "lru_gen_walk_pte_ns": (5.0, "ns", "the MGLRU page-table walk or look-around reading one present PTE it leaves "
                            "alone (walk_pte_range, lru_gen_look_around). Assumed, as numa_scan_pte_ns."),
    "lru_gen_walk_young_ns": (20.0, "ns", "clearing one young PTE and moving its folio's generation "
                              "(ptep_test_and_clear_young + folio_update_gen's cmpxchg). Assumed."),
    "util_window_ns": (262144.0, "ns", "span of simulated time before an access over which its node's delivered "
                       "bandwidth is averaged for the loaded-latency curve (cost.py); a model setting, "
                       "16384 .. 4194304 ns."),
}


# Seed 003 (Yu Zhao, "Re: [PATCH v2 00/16] Multigenerational LRU Framework", lkml 2021-04-14,
# CAOUHufa5id9mmjud-UQd4agLCtmDypdNDStkxgoQxsUoh8Qcsg@mail.gmail.com: Jens Axboe's fio/io_uring random 4 KiB
# buffered reads, 200 GB memory, 400 GB file). CALIBRATED to the mainline (classic LRU) column only, by
# tierlab/reproduce/mglru_fio.py fit(), which `reproduce mglru-fio` runs every time (its docstring has the
# method): each reader function's cost per call is its share of the seed's mainline io_uring profile
# (data/mglru_fio_profile.csv) over its calls per I/O at the model's after-fill hit ratio and activations
# per I/O, scaled so that an all-miss I/O costs the seed's before-fill 2.1 GB/s (1950 ns). The values
# below are only where that fit starts (its result at scale 1024 on the commit that wrote them); the
# reproduction's own fit is in its table's attrs['costs']. kswapd's costs are not fitted: reclaim_scan_ns
# and reclaim_free_ns above, from their sources. Used by the seed 003 reproduction and tests/test_fio.py
# only (Simulation(costs=...)); the defaults above are untouched. Every MGLRU figure is predicted.
SEED003_COSTS: dict[str, float] = {
    "syscall_ns": 564.0,            # filemap_read 1.08 % + the profile's unlisted 35.6 %, per I/O
    "fma_ns": 38.9,                 # mark_page_accessed 2.53 %, per I/O
    "pagecache_lookup_ns": 190.9,   # xas_load 13.30 + filemap_get_read_batch 4.18 + xas_start 1.16 %, 2 per miss
    "pagecache_insert_ns": 377.0,   # __add_to_page_cache_locked 12.30 %, per miss
    "zero_page_ns": 227.7,          # clear_page_erms 7.43 %, per miss (init_on_alloc=1)
    "page_alloc_ns": 108.5,         # get_page_from_freelist 3.54 %, per miss
    "bio_ns": 49.3,                 # page_cache_ra_unbounded 1.61 %, per miss
    "activate_ns": 56.9,            # __activate_page 1.07 %, per activation
    "seq_4k_ns": 103.3,             # _copy_to_iter 13.22 % less the 100-ns stream break (the machine's figure)
}
