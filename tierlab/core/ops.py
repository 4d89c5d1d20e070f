"""The access stream's op encoding, and what the access path reports back.

A chunk holds, per task, a run of (page, op) pairs. An op is a kind in bits 0-1 -- LOAD/STORE
through page tables, READ/WRITE through read()/write() of the page cache -- and flags: STREAM
(sequential: readahead-friendly), SYSCALL_END (the system call returns after this page: task work
runs), MARK (record the task's clock, e.g. at the end of a cycle), PAGE (a load copies the whole
4 KiB page rather than one cache line).
"""
OP_LOAD = 0
OP_STORE = 1
OP_READ = 2
OP_WRITE = 3
OP_KIND_MASK = 3
OP_STREAM = 4        # part of a sequential stream: readahead serves its misses
OP_SYSCALL_END = 8
OP_MARK = 16
OP_PAGE = 32         # a load through page tables that reads the whole 4 KiB page (not one line)

# What engine.access_present() could not finish on its own (the fast case stops *before* any side
# effect and the general case, engine.access_fault() then access_present(), takes the access from the start). A mechanism
# that needs an out-of-line step on the access path adds its reason here.
ACCESS_DONE = 0
ACCESS_NOT_PRESENT = 1         # page fault: the folio is not in memory (or not yet mapped)
ACCESS_HINT_FAULT = 2          # a PROT_NONE PTE: NUMA hint fault (do_numa_page)
ACCESS_PROMOTION_CANDIDATE = 3  # folio_mark_accessed's page-cache promotion hook needs promotion_candidate()
ACCESS_MEM_BIN = 4             # the folio's node needs its next bandwidth bin (cost.mem_ns_slow)
