"""Simulated CPU time by kernel function: what `perf report --sort comm,sym` shows, from the model.

Every nanosecond of kernel work the time model charges has a kernel function it stands for. Where a
cost is charged (the one place each cost is added), `charge(s, fn, ns)` also adds it to
`s.prof[current, fn]`: `current` is the entity the run loop is running (`s.sys[0].current`: task t
is t, node n's kswapd is T + n, as sched.py numbers them), like the kernel's `current` that perf
attributes a sample to. The Result turns the array into a DataFrame (`Result.profile`: entity,
function, ns, share of the entity's CPU time); what no function claims (user-space work such as
loads and stores, the scheduler's minimum kswapd step, mechanisms not broken down yet) is the
entity's runtime minus the sum, reported as `other`.

Functions (`K`, named as perf names the symbol that does the work):

    do_syscall_64                 a read()/write() call's entry and exit, or an io_uring request's issue
                                  and completion; an mmap/munmap/brk/exit/fadvise call's (syscall_ns)
    xas_load                      the page-cache lookup of a read page (filemap_get_read_batch, xas_load:
                                  pagecache_lookup_ns)
    _copy_to_iter / _copy_from_iter   the 4 KiB copy of a read / write, with its bandwidth wait (cost.py)
    mark_page_accessed            folio_mark_accessed() (fma_ns, the RFC hook's checks)
    __activate_page               folio_activate(): moving a folio to the active list (activate_ns)
    spin(lru_lock), spin(xa_lock) native_queued_spin_lock_slowpath under lruvec->lru_lock / a mapping's
                                  xa_lock: the waits locks.py computes
    __filemap_add_folio           the page-cache insert of a miss (pagecache_insert_ns; perf's
                                  __add_to_page_cache_locked before 5.16)
    clear_page_erms               zeroing a new page (anon zero-fill; page cache with init_on_alloc=1)
    get_page_from_freelist        taking a page from the free lists (page_alloc_ns)
    submit_bio                    the block layer and driver for one request, submission and completion
                                  (bio_ns)
    handle_mm_fault               a page fault's own work (fault_ns; set_pte_ns per further PTE of a
                                  PTE-mapped large folio)
    shrink_active_list            deactivating folios (reclaim_scan_ns each)
    shrink_folio_list             isolating and checking folios of an inactive list (reclaim_scan_ns
                                  each), dropping an anon one (reclaim_free_ns)
    __remove_mapping              dropping a clean file folio from its mapping and freeing it
                                  (reclaim_free_ns)
    swap_writepage                writing an anon folio to swap (swap_out_4k_ns)
    migrate_pages                 demotion and promotion: migrate_pages() batches and folios
    evict_folios                  MGLRU: sort_folio() keeping folios on the LRU (lru_gen_sort_ns each)
    inc_max_seq                   MGLRU aging: inc_min_seq() moving the oldest generation (lru_gen_sort_ns)
    walk_pte_range                MGLRU aging's page-table walk (lru_gen_walk_pte_ns, lru_gen_walk_young_ns)
    lru_gen_look_around           MGLRU's look-around from eviction's rmap walk (same costs)
    native_flush_tlb_multi        sending a TLB shootdown and waiting for the acknowledgements
                                  (tlb_shootdown_ns, tlb_ipi_ns per target: tlb.shootdown_ns)
    flush_tlb_func                a received flush IPI, charged to the task of the CPU it reached
                                  (tlb_flush_recv_ns: tlb.flush_irqs_ns)
    mmap_region                   the VMA work of mmap, munmap and brk (vma_op_ns; do_vmi_munmap and
                                  do_brk_flags are charged here too)
    zap_pte_range                 an unmap's PTE clears and rmap removals (zap_pte_ns, zap_rmap_ns)
    free_pages_and_swap_cache     freeing the folios an unmap gathered (free_folio_ns)
    io_wait                       not CPU work: the task sleeps until its read completes (engine.io_sleep:
                                  off its CPU, not in its runtime); left out of CPU shares

The array is float64[T + N, NR_KSYMS] beside the state; charging is one add on the path that charges
the cost anyway (no per-access Python), and changes no result.
"""
from __future__ import annotations

from enum import IntEnum

from ._jit import jit_inline

KSYMS = (
    "do_syscall_64",
    "xas_load",
    "_copy_to_iter",
    "_copy_from_iter",
    "mark_page_accessed",
    "__activate_page",
    "spin(lru_lock)",
    "spin(xa_lock)",
    "__filemap_add_folio",
    "clear_page_erms",
    "get_page_from_freelist",
    "submit_bio",
    "handle_mm_fault",
    "shrink_active_list",
    "shrink_folio_list",
    "__remove_mapping",
    "swap_writepage",
    "migrate_pages",
    "evict_folios",
    "inc_max_seq",
    "walk_pte_range",
    "lru_gen_look_around",
    "native_flush_tlb_multi",
    "flush_tlb_func",
    "mmap_region",
    "zap_pte_range",
    "free_pages_and_swap_cache",
    "io_wait",
)
K = IntEnum("K", {n.strip("_").replace("(", "_").replace(")", "").upper(): i for i, n in enumerate(KSYMS)})
NR_KSYMS = len(KSYMS)
NOT_CPU = ("io_wait",)        # rows that are time but not CPU work


@jit_inline
def charge(s, fn, ns):
    """Add `ns` of the current entity's time to kernel function `fn` (K); returns ns, so a cost can be
    charged and added in one expression: `cost += charge(s, K.XAS_LOAD, p[P.PAGECACHE_LOOKUP_NS])`."""
    s.prof[s.sys[0].current, fn] += ns
    return ns
