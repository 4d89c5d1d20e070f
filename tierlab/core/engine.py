"""The simulation loop: tasks on CPUs interleaved in virtual time, kswapd on its own clock, and
the access path (faults, folio_mark_accessed, PTE young bits) that drives every mechanism.

Scheduling. Each CPU has a clock (ns); a task runs on one CPU (tasks beyond the CPU count share
CPUs round-robin). The loop repeatedly picks the entity with the smallest clock -- a CPU with work
left, or an awake kswapd -- and runs it: a CPU runs its next task for a quantum (until its clock
passes the next entity's clock plus `quantum_ns`, or a kswapd wakes), kswapd runs one reclaim
batch. Time-series samples are taken when the smallest clock crosses a sample boundary. Everything
is serial and driven by virtual time only, so a run is bit-identical whatever the host does.

Accesses. A chunk holds, per task, a run of (page, op) pairs (CSR layout: offsets[T+1]). An op is
a kind in bits 0-1 -- LOAD/STORE through page tables, READ/WRITE through read()/write() of the page
cache -- and flags: STREAM (sequential: readahead-friendly), PAGE (a load copies the whole
4 KiB page rather than one cache line), SYSCALL_END (the system call returns
after this page: task work runs), MARK (record the task's clock, e.g. at the end of a cycle).

Models mm/memory.c handle_mm_fault() (anonymous zero-fill and zero-page read faults, swap-in,
file faults), mm/filemap.c filemap_read() (page-cache lookup, readahead on a miss,
folio_mark_accessed per page copied), and the allocation slow path of mm/page_alloc.c
(__alloc_pages_slowpath: wake kswapd, retry at MIN, direct reclaim, OOM).
"""
from __future__ import annotations

import numpy as np
from ._jit import jit, jit_inline

from .cost import line_load_ns, line_store_ns, seq_page_ns
from .lru import folio_add_lru, folio_mark_accessed, lru_add_drain_cpu, workingset_refault
from .page_alloc import (
    get_page_from_freelist, policy_nodes, take_pages, tiering_mode, wakeup_kswapd,
)
from .numa_balancing import do_numa_page, task_tick_numa
from .pagecache_promotion import promotion_candidate, task_numa_promotion_work
from .params import (
    P_FAULT_NS, P_FMA_HOOK_CHECK_NS, P_FMA_NS, P_IO_RAND_4K_NS, P_IO_SEQ_4K_NS,
    P_LOADED_LATENCY_C, P_PAGECACHE_INSERT_NS, P_PAGECACHE_PROMOTION_CAP, P_PAGECACHE_PROMOTION_ENABLED,
    P_PROMOTE_RATE_LIMIT_MBPS, P_PROMOTION_CANDIDATE_NS, P_QUANTUM_NS, P_UTIL_WINDOW_NS, P_SAMPLE_INTERVAL_NS,
    P_HIT_PATH, P_NUMA_BALANCING, P_STREAM_BREAK_NS, P_SWAP_IN_4K_NS, P_SYSCALL_NS, P_ZERO_PAGE_NS,
)
from .reclaim import direct_reclaim, kswapd_step
from .state import (
    F2_ANON, F2_CONTIG, F2_MAPPED, F2_PRESENT, F2_SHADOW, F2_SWAPPED, LRU_ACTIVE_ANON,
    LRU_ACTIVE_FILE, LRU_INACTIVE_ANON, LRU_INACTIVE_FILE, MISC_NEXT_SAMPLE, MISC_NOW,
    MISC_NR_SAMPLES, MISC_SWAP_USED, MISC_WAKEUPS, ORDER_MASK, PG_DIRTY, PG_ISOLATED,
    F2_BATCHED, PG_ACTIVE, PG_LRU, PG_PROTNONE, PG_REFERENCED, PG_WORKINGSET, PG_YOUNG, REGION_ANON, STAMP_NONE, STATUS_DONE,
    STATUS_MARKS_FULL, STATUS_OOM, STATUS_SAMPLES_FULL, WMARK_LOW, WMARK_MIN, folio_head,
    region_of,
)
from .vmstat import (
    PGACTIVATE, ALLOCSTALL, NR_VMSTAT_ITEMS, OOM_KILL, PGFAULT, PGMAJFAULT, PGPGIN, PROMOTE_DEFERRED_PAGES, PSWPIN,
)

# op encoding
OP_LOAD = 0
OP_STORE = 1
OP_READ = 2
OP_WRITE = 3
OP_KIND_MASK = 3
OP_STREAM = 4        # part of a sequential stream: readahead serves its misses
OP_SYSCALL_END = 8
OP_MARK = 16
OP_PAGE = 32         # a load through page tables that reads the whole 4 KiB page (not one line)

NODE_SAMPLE_COLS = 6   # per node in a sample row: free, 4 LRU sizes, isolated
INF = np.int64(1) << np.int64(62)


@jit_inline
def alloc_folio(s, p, region, cpu, page, nr, clock, scratch, cands):
    """Pick the node for a new folio as __alloc_pages() would. Returns (node or -1 on OOM, cost)."""
    cpu_nid = s.cpu_node[cpu]
    n = policy_nodes(s, region, cpu_nid, page - s.region_start[region], cands)
    nid = get_page_from_freelist(s, cands, n, nr, WMARK_LOW)
    if nid >= 0:
        return nid, 0.0
    # slow path: wake every kswapd of the zonelist, retry at MIN, then reclaim directly
    for i in range(n):
        wakeup_kswapd(s, p, cands[i], clock)
    nid = get_page_from_freelist(s, cands, n, nr, WMARK_MIN)
    cost = 0.0
    retries = 0
    while nid < 0 and retries < 16:           # MAX_RECLAIM_RETRIES
        if retries == 0:
            lru_add_drain_cpu(s, cpu)
        s.counters[cpu_nid, ALLOCSTALL] += 1
        got, c = direct_reclaim(s, p, cands, n, clock + np.int64(cost), scratch)
        cost += c
        nid = get_page_from_freelist(s, cands, n, nr, WMARK_MIN)
        if got == 0:
            break                               # a full scan freed nothing: out of memory
        retries += 1
    if nid < 0:
        s.counters[cpu_nid, OOM_KILL] += 1
    return nid, cost


@jit_inline
def folio_order_for(s, r, page):
    """The region's folio order, lowered until the naturally aligned folio around `page` lies inside
    the region and none of its pages is present or mapped (thp_vma_suitable_order() and the
    all-PTEs-none test of alloc_anon_folio(); page-cache folios stop at EOF). Order 1 is skipped for
    anon memory, as the kernel does."""
    order = np.int64(s.region_order[r])
    lo = s.region_start[r]
    hi = s.region_start[r + 1]
    anon = s.region_kind[r] == REGION_ANON
    while order > 0:
        if not (anon and order == 1):
            nr = np.int64(1) << order
            head = page & ~(nr - 1)
            ok = head >= lo and head + nr <= hi
            if ok:
                for i in range(nr):
                    if s.flags2[head + i] & (F2_PRESENT | F2_MAPPED):
                        ok = False
                        break
            if ok:
                return order
        order -= 1
    return np.int64(0)


@jit_inline
def fault_in(s, p, task, cpu, page, op, clock, scratch, cands):
    """Bring a non-present page in (anon zero-fill or zero page, swap-in, page-cache miss).
    Returns (cost, ok); ok is False only on OOM."""
    r = region_of(s, page)
    anon = s.region_kind[r] == REGION_ANON
    kind = op & OP_KIND_MASK
    cpu_nid = s.cpu_node[cpu]
    f2 = s.flags2[page]
    mapped_access = kind <= OP_STORE
    if anon and kind == OP_LOAD and not (f2 & F2_SWAPPED):
        if f2 & F2_MAPPED:
            return 0.0, True     # already mapped to the zero page: a plain load
        # read fault on untouched anonymous memory maps the shared zero page
        s.flags2[page] = f2 | F2_MAPPED
        s.counters[cpu_nid, PGFAULT] += 1
        return p[P_FAULT_NS], True
    order = folio_order_for(s, r, page)
    head = page & ~((np.int64(1) << order) - 1)
    nr = np.int64(1) << order
    # the faulting page's shadow entry (or swap entry) decides refault activation
    evict_nid = s.node[page]
    refault = (s.flags2[page] & (F2_SHADOW | F2_SWAPPED)) != 0
    shadow_age = s.stamp[page]
    shadow_ws = s.flags[page] & PG_WORKINGSET
    nid, cost = alloc_folio(s, p, r, cpu, head, nr, clock, scratch, cands)
    if nid < 0:
        return cost, False
    nr_swapped = 0
    for i in range(nr):
        s.order[head + i] = (s.order[head + i] & ~ORDER_MASK) | order
        if s.flags2[head + i] & F2_SWAPPED:
            nr_swapped += 1
        if i > 0:
            s.flags2[head + i] = F2_ANON if anon else np.uint8(0)
            s.flags[head + i] = 0
    take_pages(s, nid, head, nr)
    contig = s.flags2[head] & F2_CONTIG
    s.flags2[head] = F2_PRESENT | contig | (F2_ANON if anon else 0)
    s.flags[head] = shadow_ws if refault else np.uint8(0)
    if refault:
        s.stamp[head] = shadow_age
        workingset_refault(s, p, head, nid, evict_nid)
    s.stamp[head] = STAMP_NONE
    if anon:
        s.counters[cpu_nid, PGFAULT] += 1
        cost += p[P_FAULT_NS]
        if nr_swapped > 0:
            s.misc[MISC_SWAP_USED] -= nr_swapped
            s.counters[cpu_nid, PGMAJFAULT] += 1
            s.counters[nid, PSWPIN] += nr_swapped
            cost += p[P_SWAP_IN_4K_NS] * nr_swapped
        cost += p[P_ZERO_PAGE_NS] * (nr - nr_swapped)
        s.flags2[head] |= F2_MAPPED
    else:
        io = p[P_IO_SEQ_4K_NS] if (op & OP_STREAM) else p[P_IO_RAND_4K_NS]
        cost += p[P_PAGECACHE_INSERT_NS] + io * nr
        s.counters[nid, PGPGIN] += 4 * nr
        if mapped_access:
            s.counters[cpu_nid, PGFAULT] += 1
            s.counters[cpu_nid, PGMAJFAULT] += 1
            cost += p[P_FAULT_NS]
            s.flags2[head] |= F2_MAPPED
    folio_add_lru(s, p, cpu, head)
    return cost, True


@jit_inline
def access(s, p, task, cpu, page, op, clock, scratch, cands):
    """One access by `task`. Returns (cost in ns, ok)."""
    cost = 0.0
    head = folio_head(s, page)
    if not (s.flags2[head] & F2_PRESENT):
        c, ok = fault_in(s, p, task, cpu, page, op, clock, scratch, cands)
        if not ok:
            return c, False
        cost += c
        head = folio_head(s, page)
        if not (s.flags2[head] & F2_PRESENT):
            # zero page: a cache-line read from the local node
            return cost + line_load_ns(s, p, s.cpu_node[cpu], clock), True
    kind = op & OP_KIND_MASK
    nid = s.node[head]
    now = clock + np.int64(cost)
    if kind >= OP_READ:
        # filemap_read()/write(): folio_mark_accessed and a 4 KiB copy. A read() that starts in
        # the folio the previous read() ended in does not mark it again (pos_same_folio()).
        cost += p[P_FMA_NS]
        same = s.task_call_start[task] != 0 and folio_head(s, s.task_last_page[task]) == head
        s.task_call_start[task] = 1 if (op & OP_SYSCALL_END) else 0
        if not same and folio_mark_accessed(s, head):
            if tiering_mode(p) and not (s.flags[head] & PG_ISOLATED):
                cost += p[P_FMA_HOOK_CHECK_NS]
                if p[P_PAGECACHE_PROMOTION_ENABLED] != 0:
                    if s.tier[nid] == 0:
                        # promotion_candidate() returns at its node_is_toptier() test; checked
                        # here so the hot path makes no call
                        cost += p[P_PROMOTION_CANDIDATE_NS]
                    else:
                        cost += promotion_candidate(s, p, task, s.cpu_node[cpu], head, now)
                        nid = s.node[head]
        cost += seq_page_ns(s, p, nid, now)
        if not (page == s.task_last_page[task] + 1 and (s.flags2[head] & F2_CONTIG)):
            sb = p[P_STREAM_BREAK_NS]
            cost += s.line_ns[nid] if sb < 0 else sb
        s.task_last_page[task] = page
        if kind == OP_WRITE:
            s.flags[head] |= PG_DIRTY
        return cost, True
    # LOAD / STORE through page tables
    f2 = s.flags2[head]
    if not (f2 & F2_MAPPED):
        s.flags2[head] = f2 | F2_MAPPED
        s.counters[s.cpu_node[cpu], PGFAULT] += 1
        cost += p[P_FAULT_NS]
    if s.flags[head] & PG_PROTNONE:
        cost += do_numa_page(s, p, head, s.cpu_node[cpu], now)
        nid = s.node[head]
    s.flags[head] |= PG_YOUNG
    if kind == OP_STORE:
        s.flags[head] |= PG_DIRTY
        cost += line_store_ns(s, p, nid, now)
    elif op & OP_PAGE:
        cost += seq_page_ns(s, p, nid, now)
    else:
        cost += line_load_ns(s, p, nid, now)
    return cost, True


@jit
def hit_path(pages, ops, pos, end, clock, limit, scan_at, task, node, flags, flags2, order, tier,
             seq_ns, line_ns, write_ns, load_factor, win_start, win_bytes, bw_bytes_ns,
             task_last_page, task_call_start, promo_count, counters, prev, nxt, lru_size,
             nonresident_age, p):
    """The common case of `access`, on a few arrays instead of the whole SimState: accesses to
    present folios that need no out-of-line call (a read() of a folio: marking it referenced,
    activating it, or, when already referenced and active, with the promotion hook returning at its top-tier or
    per-task-cap test; a load/store through a present PTE that is not PROT_NONE). Stops *before*
    any other access, a MARK, the quantum's limit or the next NUMA scan tick, and right *after* a
    system call that left a promotion list to migrate. Same semantics and costs as `access` (it
    is that function's fast path); returns (pos, clock, task_work_pending)."""
    tiering = (np.int64(p[P_NUMA_BALANCING]) & 2) != 0
    promo = p[P_PAGECACHE_PROMOTION_ENABLED] != 0
    nr_pages = node.shape[0]
    capped = np.int64(p[P_PAGECACHE_PROMOTION_CAP]) == 0
    cap = np.int64(p[P_PROMOTE_RATE_LIMIT_MBPS])
    window = p[P_UTIL_WINDOW_NS]
    llc = p[P_LOADED_LATENCY_C]
    sb = p[P_STREAM_BREAK_NS]
    fma_ns = p[P_FMA_NS]
    hook_ns = p[P_FMA_HOOK_CHECK_NS]
    cand_ns = p[P_PROMOTION_CANDIDATE_NS]
    syscall_ns = np.int64(p[P_SYSCALL_NS])
    window_i = np.int64(np.ceil(window))   # clock is integral: el >= window <=> el >= ceil(window)
    last = task_last_page[task]
    call_start = task_call_start[task]
    pending = False
    # Indices are cast to unsigned: numba wraps negative signed indices (a shift, an and and an add
    # per access), and none of these can be negative. Measured 10 -> 6 ns per access.
    while pos < end and clock < limit and clock < scan_at:
        page = pages[np.uint64(pos)]
        op = ops[np.uint64(pos)]
        if op & OP_MARK:
            break
        o = np.int64(order[np.uint64(page)] & ORDER_MASK)
        head = page & ~((np.int64(1) << o) - 1)
        hu = np.uint64(head)
        f2 = flags2[hu]
        if not (f2 & F2_PRESENT):
            break
        f = flags[hu]
        nid = np.uint8(node[hu])
        kind = op & OP_KIND_MASK
        cost = 0.0
        if kind >= OP_READ:
            same = call_start != 0 and (last & ~((np.int64(1) << o) - 1)) == head
            cost = fma_ns
            deferred = False
            if not same:
                if not (f & PG_REFERENCED):
                    f |= PG_REFERENCED
                elif not (f & PG_ACTIVE):
                    # folio_mark_accessed(): activate (folio_activate, or PG_active while batched)
                    nr = np.int64(1) << o
                    if f & PG_LRU:
                        lru = 3 if not (f2 & F2_ANON) else 1
                        x_prev = prev[head]
                        x_next = nxt[head]
                        nxt[x_prev] = x_next
                        prev[x_next] = x_prev
                        lru_size[nid, lru - 1] -= nr
                        sent = nr_pages + nid * 4 + lru
                        first = nxt[sent]
                        nxt[head] = first
                        prev[head] = sent
                        prev[first] = head
                        nxt[sent] = head
                        lru_size[nid, lru] += nr
                        counters[nid, PGACTIVATE] += nr
                        f |= PG_ACTIVE
                    elif f2 & F2_BATCHED:
                        f |= PG_ACTIVE
                    f &= ~PG_REFERENCED
                    nonresident_age[nid] += nr
                elif tiering and not (f & PG_ISOLATED):
                    cost += hook_ns
                    if promo:
                        if tier[nid] != 0:
                            if not (capped and promo_count[task] >= cap):
                                break           # a real promotion candidate: slow path
                            deferred = True
                        cost += cand_ns
            if deferred:
                counters[nid, PROMOTE_DEFERRED_PAGES] += np.int64(1) << o
            if kind == OP_WRITE:
                f |= PG_DIRTY
            flags[hu] = f
            call_start = 1 if (op & OP_SYSCALL_END) else 0
            nbytes = 4096.0
            mem_ns = seq_ns[nid]
            extra = 0.0
            if not (page == last + 1 and (f2 & F2_CONTIG)):
                extra = line_ns[nid] if sb < 0 else sb
            last = page
        else:
            if not (f2 & F2_MAPPED) or (f & PG_PROTNONE):
                break
            f |= PG_YOUNG
            if kind == OP_STORE:
                f |= PG_DIRTY
                nbytes = 128.0
                mem_ns = write_ns[nid]
            elif op & OP_PAGE:
                nbytes = 4096.0
                mem_ns = seq_ns[nid]
            else:
                nbytes = 64.0
                mem_ns = line_ns[nid]
            extra = 0.0
            flags[hu] = f
        # bandwidth accounting (cost.note_bytes), charged at the access's start time: a window
        # that ends here sets the load factor this access already pays, as in seq_page_ns()
        el = clock - win_start[nid]
        if el >= window_i:
            elapsed = np.float64(el)
            u = win_bytes[nid] / (bw_bytes_ns[nid] * elapsed)
            if u > 0.99:
                u = 0.99
            load_factor[nid] = 1.0 + llc * u / (1.0 - u)
            win_start[nid] = clock
            win_bytes[nid] = 0.0
        win_bytes[nid] += nbytes
        cost += mem_ns * load_factor[nid]
        cost += extra
        clock += np.int64(cost)
        pos += 1
        if op & OP_SYSCALL_END:
            clock += syscall_ns
            if promo_count[task] > 0:
                pending = True
                break
    task_last_page[task] = last
    task_call_start[task] = call_start
    return pos, clock, pending


@jit_inline
def after_access(s, p, task, cpu, clock, start, numa_on, work_pending):
    """What runs after an access, in this order: the task work of a system call that queued
    promotions (task_numa_promotion_work), then the NUMA scan tick once the task's runtime reaches
    its next scan stamp (task_tick_numa). `start` is the clock at which the task's quantum began.
    Returns the clock after both."""
    if work_pending:
        clock += np.int64(task_numa_promotion_work(s, p, task, s.cpu_node[cpu], clock))
    if numa_on:
        rt = s.task_runtime[task] + (clock - start)
        if rt >= s.numa_scan[task, 0]:
            clock += np.int64(task_tick_numa(s, p, task, rt, clock))
    return clock


@jit
def take_sample(s, t):
    row = s.misc[MISC_NR_SAMPLES]
    out = s.samples[row]
    out[0] = t
    k = 1
    for i in range(NR_VMSTAT_ITEMS):
        tot = 0
        for nid in range(s.counters.shape[0]):
            tot += s.counters[nid, i]
        out[k] = tot
        k += 1
    for nid in range(s.counters.shape[0]):
        out[k] = s.free[nid]
        out[k + 1] = s.lru_size[nid, LRU_INACTIVE_ANON]
        out[k + 2] = s.lru_size[nid, LRU_ACTIVE_ANON]
        out[k + 3] = s.lru_size[nid, LRU_INACTIVE_FILE]
        out[k + 4] = s.lru_size[nid, LRU_ACTIVE_FILE]
        out[k + 5] = s.nr_isolated[nid]
        k += NODE_SAMPLE_COLS
    s.misc[MISC_NR_SAMPLES] = row + 1


@jit
def run(s, p, offsets, pages, ops, task_pos, scratch, cands):
    """Run every task through its part of the chunk. Resumable: returns a status and keeps the
    per-task positions in `task_pos`; `scratch` (int64[64]) and `cands` (int64[N]) are work buffers.
    STATUS_SAMPLES_FULL asks the caller to drain samples and call
    again. STATUS_OOM stops the run."""
    ntasks = task_pos.shape[0]
    ncpu = s.cpu_clock.shape[0]
    nnodes = s.free.shape[0]
    interval = np.int64(p[P_SAMPLE_INTERVAL_NS])
    numa_on = p[P_NUMA_BALANCING] != 0
    quantum = np.int64(p[P_QUANTUM_NS])
    use_hit_path = p[P_HIT_PATH] != 0
    while True:
        # the entity with the smallest clock, and the runner-up (bounds the quantum)
        best = -1
        best_t = INF
        second_t = INF
        for c in range(ncpu):
            busy = False
            for t in range(ntasks):
                if s.task_cpu[t] == c and task_pos[t] < offsets[t + 1]:
                    busy = True
                    break
            if busy:
                ct = s.cpu_clock[c]
                if ct < best_t:
                    second_t = best_t
                    best_t = ct
                    best = c
                elif ct < second_t:
                    second_t = ct
        for nid in range(nnodes):
            if s.kswapd_awake[nid]:
                kt = s.kswapd_clock[nid]
                if kt < best_t:
                    second_t = best_t
                    best_t = kt
                    best = ncpu + nid
                elif kt < second_t:
                    second_t = kt
        if best < 0:
            return STATUS_DONE
        while s.misc[MISC_NEXT_SAMPLE] <= best_t:
            if s.misc[MISC_NR_SAMPLES] >= s.samples.shape[0]:
                return STATUS_SAMPLES_FULL
            take_sample(s, s.misc[MISC_NEXT_SAMPLE])
            s.misc[MISC_NEXT_SAMPLE] += interval
        if best >= ncpu:
            kswapd_step(s, p, best - ncpu, scratch)
            continue
        c = best
        # round-robin among the CPU's runnable tasks
        t = -1
        for k in range(ntasks):
            cand = (s.cpu_next_task[c] + k) % ntasks
            if s.task_cpu[cand] == c and task_pos[cand] < offsets[cand + 1]:
                t = cand
                break
        s.cpu_next_task[c] = (t + 1) % ntasks
        clock = s.cpu_clock[c]
        start = clock
        limit = second_t if second_t < INF else s.misc[MISC_NEXT_SAMPLE]
        limit = max(limit, start) + quantum
        if s.misc[MISC_NEXT_SAMPLE] < limit and s.misc[MISC_NEXT_SAMPLE] > start:
            limit = s.misc[MISC_NEXT_SAMPLE]
        wakeups = s.misc[MISC_WAKEUPS]
        pos = task_pos[t]
        end = offsets[t + 1]
        status = STATUS_DONE
        slow_run = 0
        backoff = 16
        while pos < end:
            if slow_run > 0 or not use_hit_path:
                # the hit path just stopped at once: runs of faults or promotion candidates are
                # common (a first read of a file faults page after page), so take accesses on the
                # general path before trying it again, twice as many after each futile try
                slow_run -= 1
            else:
                scan_at = INF
                if numa_on:
                    scan_at = clock + (s.numa_scan[t, 0] - (s.task_runtime[t] + (clock - start)))
                before = pos
                pos, clock, pending = hit_path(
                    pages, ops, pos, end, clock, limit, scan_at, t, s.node, s.flags, s.flags2,
                    s.order, s.tier, s.seq_ns, s.line_ns, s.write_ns, s.load_factor, s.win_start,
                    s.win_bytes, s.bw_bytes_ns, s.task_last_page, s.task_call_start, s.promo_count,
                    s.counters, s.prev, s.next, s.lru_size, s.nonresident_age, p)
                if pos != before:
                    # what follows every access on the general path, after the hit path's last one
                    # (it stops at a system call that left promotion work, or once the tick is due)
                    clock = after_access(s, p, t, c, clock, start, numa_on, pending)
                if pos >= end or clock >= limit:
                    break
                if pos == before:
                    slow_run = backoff
                    backoff = min(backoff * 2, 4096)
                else:
                    backoff = 16
            op = ops[pos]
            if (op & OP_MARK) and s.nr_marks[t] >= s.marks.shape[1]:
                status = STATUS_MARKS_FULL          # the caller grows `marks` and resumes here
                break
            cost, ok = access(s, p, t, c, pages[pos], op, clock, scratch, cands)
            pos += 1
            clock += np.int64(cost)
            if not ok:
                status = STATUS_OOM
                break
            pending = False
            if op & OP_SYSCALL_END:
                clock += np.int64(p[P_SYSCALL_NS])
                pending = s.promo_count[t] > 0
            clock = after_access(s, p, t, c, clock, start, numa_on, pending)
            if op & OP_MARK:
                s.marks[t, s.nr_marks[t]] = clock
                s.nr_marks[t] += 1
            if clock >= limit or s.misc[MISC_WAKEUPS] != wakeups:
                break
        task_pos[t] = pos
        s.task_runtime[t] += clock - start
        s.task_end[t] = clock
        s.cpu_clock[c] = clock
        if clock > s.misc[MISC_NOW]:
            s.misc[MISC_NOW] = clock
        if status != STATUS_DONE:
            return status
