"""The access stream's op encoding, and what the access path reports back.

A chunk holds, per task, a run of (page, op) pairs. An op is a kind in bits 0-1 -- LOAD/STORE
through page tables, READ/WRITE through read()/write() of the page cache -- and flags: STREAM
(a load of a sequential stream through mmap: madvise(MADV_SEQUENTIAL), so a fault reads a
readahead window; read() calls need no flag, readahead.py tells streams from their positions),
SYSCALL_END (the system call returns after this page: task work
runs), MARK (record the task's clock, e.g. at the end of a cycle), PAGE (a load or a store copies the
whole 4 KiB page rather than one cache line: a memcpy() source or destination).

Control ops (bit 128, OP_CTRL) are not accesses: the low bits name a system call or event of the
issuing task (CTRL_*) and the op's `page` slot carries its argument. The run loop leaves its fast
case at them as at a MARK (one mask test, no cost on the access path) and hands them to mm.py:
- CTRL_MMAP: arg = ctrl_arg(slot, npages) maps region slot `slot` into the task's mm over its first
  npages (0: the whole slot): mmap_region();
- CTRL_MUNMAP: arg = slot: unmap the whole VMA (do_munmap: zap its pages, free the slot);
- CTRL_BRK: arg = ctrl_arg(slot, npages): move the VMA's end to npages (grow, or shrink: zap the
  tail), as brk() moves a heap;
- CTRL_EXIT: the task exits (do_exit); its mm's memory is torn down with its last task (exit_mmap).
- CTRL_MOVE_PAGES: arg = move_pages_arg(slot, node, npages): move_pages(2) of the slot's first
  npages pages (0: all) to node (migrate.do_pages_move; outcomes per page in task.move_status);
- CTRL_MIGRATE_PAGES: arg = mempolicy.migrate_arg(from_nodes, node): migrate_pages(2) of the task's
  own process (mempolicy.do_migrate_pages);
- CTRL_MBIND: arg = mempolicy.mbind_arg(slot, mode, nodes, move, numa_balancing): mbind(2) of the
  slot's VMA, with MPOL_MF_MOVE when `move` (mempolicy.do_mbind);
- CTRL_SET_MEMPOLICY: arg = mempolicy.set_mempolicy_arg(mode, nodes, numa_balancing): the task's
  process's policy (mempolicy.do_set_mempolicy);
- CTRL_DROP_CACHES: arg = 1, 2 or 3 as written to /proc/sys/vm/drop_caches (drop_caches.py);
- CTRL_CPU: arg = ns of the task's own CPU work that touches no simulated memory (a server's
  request parsing, its system calls' fixed part): the task's clock advances by arg. It is the one
  control op the fast case takes in place (engine.fast_run: no stop, so a workload may put one
  between every few accesses); the general case charges the same in mm.do_ctrl.
"""
import numpy as np

from ._jit import jit_inline

OP_LOAD = 0
OP_STORE = 1
OP_READ = 2
OP_WRITE = 3
OP_KIND_MASK = 3
OP_STREAM = 4        # a load of a sequential stream through mmap (VM_SEQ_READ)
OP_SYSCALL_END = 8
OP_MARK = 16
OP_PAGE = 32         # a load/store through page tables of the whole 4 KiB page (not one line)
OP_CTRL = 128        # a control op (below), not an access
OP_STOP = OP_MARK | OP_CTRL   # ops the fast case leaves to the run loop

CTRL_KIND_MASK = 127
CTRL_MMAP = 1
CTRL_MUNMAP = 2
CTRL_BRK = 3
CTRL_EXIT = 4
CTRL_CPU = 5
CTRL_FADVISE = 6     # posix_fadvise() on the region's file: arg = (FADV_* << 32) | slot
CTRL_MOVE_PAGES = 7
CTRL_MIGRATE_PAGES = 8
CTRL_MBIND = 9
CTRL_SET_MEMPOLICY = 10
CTRL_DROP_CACHES = 11
CTRL_NAMES = {"mmap": CTRL_MMAP, "munmap": CTRL_MUNMAP, "brk": CTRL_BRK, "exit": CTRL_EXIT, "cpu": CTRL_CPU,
              "fadvise": CTRL_FADVISE, "move_pages": CTRL_MOVE_PAGES, "migrate_pages": CTRL_MIGRATE_PAGES,
              "mbind": CTRL_MBIND, "set_mempolicy": CTRL_SET_MEMPOLICY, "drop_caches": CTRL_DROP_CACHES}
OP_CPU = OP_CTRL | CTRL_CPU   # the op byte of CPU work (its `page` slot holds the ns)
CTRL_ARG_SHIFT = 32  # arg = (npages << 32) | slot


def ctrl_arg(slot: int, npages: int = 0) -> int:
    """The `page` slot of a CTRL_MMAP / CTRL_BRK op: region slot and a length in pages (CTRL_FADVISE:
    the advice code in place of the length)."""
    return (int(npages) << CTRL_ARG_SHIFT) | int(slot)


MOVE_NODE_SHIFT = 24  # CTRL_MOVE_PAGES: the node rides in the slot field's upper bits


def move_pages_arg(slot: int, node: int, npages: int = 0) -> int:
    """The `page` slot of a CTRL_MOVE_PAGES op: the slot's first npages pages (0: all) to node."""
    return ctrl_arg(int(slot) | int(node) << MOVE_NODE_SHIFT, npages)


@jit_inline
def ctrl_unpack(arg):
    """(slot, npages) of a control op's `page` slot: ctrl_arg's inverse. The engine's mm.do_ctrl,
    the API's checks and the oracle's op file all decode with it."""
    return arg & ((np.int64(1) << CTRL_ARG_SHIFT) - 1), arg >> CTRL_ARG_SHIFT

# What engine.access_present() could not finish on its own (the fast case stops *before* any side
# effect and the general case, engine.access_fault() then access_present(), takes the access from the start). A mechanism
# that needs an out-of-line step on the access path adds its reason here.
ACCESS_DONE = 0
ACCESS_NOT_PRESENT = 1         # page fault: the folio is not in memory (or not yet mapped)
ACCESS_HINT_FAULT = 2          # a PROT_NONE PTE: NUMA hint fault (do_numa_page)
ACCESS_PROMOTION_CANDIDATE = 3  # folio_mark_accessed's page-cache promotion hook needs promotion_candidate()
ACCESS_NOT_MAPPED = 4          # a present page-cache folio the task's mm has no PTE for: a minor fault
ACCESS_SEGV = 5                # (general case) no VMA of the task's mm maps the page: SIGSEGV
ACCESS_WP_FAULT = 6            # a store to a present, read-only PTE: write-protect fault (do_wp_page)
ACCESS_READAHEAD = 7           # the folio the task's readahead marked PG_readahead: page_cache_async_ra()
                               # (the run loop's general case starts it before taking the access)
ACCESS_MEM_BIN = 8             # the folio's node needs its next bandwidth bin (cost.mem_ns_slow)
ACCESS_IO_WAIT = 9             # a synchronous read of a page still being read: the task sleeps until
                               # task.io_ready (engine.io_sleep), then takes the access again
