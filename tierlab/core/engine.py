"""The simulation loop: tasks and kswapds on CPUs interleaved in virtual time, and the one access
path that drives every mechanism.

Scheduling. Each CPU has a clock (ns) and a CFS runqueue (sched.py) shared by the tasks placed on
it and the kswapds placed on it (a kswapd gets a CPU of its own when its node's cpumask has one no
task uses); a task is runnable from its `start` time (a process started within the run) until it
exits (`dead`). The loop repeatedly picks the CPU that is next to do something -- its clock when an
entity is runnable, or when an idle CPU's next entity becomes runnable (a kswapd's wake-up, a
task's start) -- with a scan over CPUs (O(CPUs + nodes)), and runs its current entity: a task for
a quantum (until its clock passes the next CPU's clock plus `quantum_ns`, its CFS slice ends, a
kswapd wakes, or its CPU's runqueue changes), a kswapd for one reclaim batch. The CPU's runqueue
is re-evaluated (`sched_resched`) only when something changed. Time-series samples are taken when
the smallest clock crosses a sample boundary. Everything is serial and driven by virtual time only,
so a run is bit-identical whatever the host does.

Input. Each task's ops not yet run are in a buffer (CSR layout: offsets[T+1], each task's position
in task_pos; the op encoding is in ops.py) that the caller tops up (feed.py). A task that runs out
within its quantum stops there and `run` returns STATUS_NEED_INPUT, keeping the quantum in
`sys.resume_*`; called again, it goes on with that quantum first. A task waiting for input stays
on its runqueue, so no other entity runs on meanwhile, and the results do not depend on how the
caller cut the input (tests/test_time_rules.py). How far apart the entities may run, and what
relies on it, is time_rules.py: the loop obeys it (quantum_limit) and measures it at every sample
(note_clock_spread, note_step). A step is one access, a bounded piece of a control op (a system
call that moves, drops or unmaps many pages goes on in the task's next step: task.ctrl_next), or
one reclaim batch: a fault whose allocation would enter direct reclaim
(memory.fault_stalls) runs its reclaim first, one batch per step (page_alloc.direct_reclaim_step),
the quantum possibly ending between two, and is then retried with its allocation going on at MIN;
so a long direct reclaim interleaves with kswapd and the other tasks as in the kernel, where it ran
as one access (2.3 ms in the anon-swap golden). An access that waits for a read (a page-cache miss
of a synchronous read(), a major fault, a swap-in, or a page of a readahead window still being
read) ends its step there: the task sleeps (io_sleep: off its runqueue, its CPU idle, hence lazy
for TLB flushes) and takes the access again when the read completes, so nothing it does after the
wait is booked ahead of the others.

Accesses. Every access goes through `access_present()`, written once: for a present
folio it does what the kernel does on the hit (a read()/write(): filemap.filemap_access, a
load/store: memory.pte_access) and charges its cost. In its fast case it stops *before any side
effect* at anything that needs an out-of-line step (a fault, a hint fault, a page-cache promotion
candidate: ops.ACCESS_*); the run loop then takes that access from the start -- the fault
(`access_fault()`: memory.fault_in) and `access_present()` again in its general case, which makes
the out-of-line calls itself. So the fast and the general case cannot differ: they are the same code. A mechanism
that adds work on the access path adds it in filemap.py or memory.py, once. Control ops (mmap,
munmap, brk, exit: ops.OP_CTRL) stop the fast case like a MARK and go to task_ctrl (mm.py).

File I/O. The end of a read()/write() call (an op with SYSCALL_END) is fileio.syscall_end() in
both cases: the call's exit, its completion under the task's I/O engine, its latency histogram.
Before the general case takes a read() it notes the call's remaining pages (readahead's req_count)
when the page misses or is the task's PG_readahead mark, and at the mark starts the async
readahead (readahead.page_cache_async_ra) before the access waits for its own window. A task
whose clock has reached its `stop_at` (a phase's runtime) issues nothing more: the rest of its
input is dropped and its input has ended (task.input_end).
"""
from __future__ import annotations

import numpy as np
from ._jit import jit, jit_entry, jit_inline

from ._prefetch import prefetch_item
from .buddy import free_pages_from_order
from .cost import line_load_ns, mem_fast_ok
from .fileio import syscall_end
from .filemap import filemap_access
from .memory import fault_in, fault_stalls, pte_access
from .drop_caches import drop_caches_ctrl
from .mempolicy import page_movement_ctrl
from .mm import cpumask_set_cpu, do_ctrl
from .page_alloc import direct_reclaim_resume
from .numa_balancing import init_numa_balancing, jiffies_at, next_numa_tick, task_tick_numa
from .ops import (
    ACCESS_DONE, ACCESS_MEM_BIN, ACCESS_NOT_PRESENT, ACCESS_SEGV, CTRL_DROP_CACHES, CTRL_EXIT, CTRL_KIND_MASK,
    CTRL_MBIND, CTRL_MIGRATE_PAGES, CTRL_MOVE_PAGES, CTRL_SET_MEMPOLICY, OP_CPU, OP_CTRL, OP_KIND_MASK,
    OP_MARK, OP_READ, OP_STOP, OP_SYSCALL_END,
)
from .readahead import call_goes_on, call_pages_left, page_cache_async_ra, page_present
from .pagecache_promotion import task_numa_promotion_work
from .params import P
from .profile import K, charge
from .reclaim import kswapd_step
from .sched import (
    INF, cpu_ready_at, kswapd_dequeue, sched_account, sched_dequeue_task, sched_init_chunk,
    sched_need_pick, sched_resched, sched_wake_task,
)
from .state import (
    F2_PRESENT, LRU_ACTIVE_ANON, LRU_ACTIVE_FILE, LRU_INACTIVE_ANON, LRU_INACTIVE_FILE, ORDER_MASK,
    DR_NONE, STATUS_DONE, STATUS_EVENT, STATUS_PHASE, STATUS_MARKS_FULL, STATUS_NEED_INPUT, STATUS_OOM, STATUS_SAMPLES_FULL, STATUS_SEGV, folio_head,
)
from .time_rules import note_clock_spread, note_step, phase_due, quantum_limit
from .vmstat import FREE_PAGES_64K_ORDER, NR_NODE_GAUGES, NR_VMSTAT_ITEMS

RA_REQ_MAX = 4096      # pages of a read() readahead looks at (more than any window limit)
PREFETCH_AHEAD = 8     # ops ahead whose page an access prefetches


@jit_inline
def prefetch_ahead(s, pages, pos, end):
    """Start loading the bytes of the page of the op PREFETCH_AHEAD ahead of `pos` that the access
    path reads first (order, flags2, node, flags: four arrays, four lines): a random page's bytes
    are cache misses, and the access path's chain of dependent steps keeps the CPU from reaching
    them early on its own. A hint only (no value changes); an op whose word is not a page (CPU
    work, a control op's argument) may prefetch lines for nothing."""
    ahead = pos + PREFETCH_AHEAD
    if ahead < end:
        page = np.uint64(pages[np.uint64(ahead)])
        if page < np.uint64(s.pages.order.shape[0]):
            prefetch_item(s.pages.order, page)
            prefetch_item(s.pages.flags2, page)
            prefetch_item(s.pages.node, page)
            prefetch_item(s.pages.flags, page)


@jit_inline
def access_present(s, p, task, cpu_nid, page, op, now, cost, fast):
    """One access by `task` to `page`, charged at time `now` on top of `cost`. Returns (cost,
    ACCESS_*). ACCESS_NOT_PRESENT (always) and, in the fast case, every other reason than
    ACCESS_DONE are returned before any side effect."""
    pg = s.pages
    o = np.int64(pg.order[np.uint64(page)] & ORDER_MASK)
    nr = np.int64(1) << o
    head = page & ~(nr - 1)
    hu = np.uint64(head)       # unsigned: numba wraps negative signed indices (a shift, an and, an add)
    if not (pg.flags2[hu] & F2_PRESENT):
        return cost, ACCESS_NOT_PRESENT
    if fast and not mem_fast_ok(s, np.uint64(pg.node[hu]), now):
        return cost, ACCESS_MEM_BIN
    if (op & OP_KIND_MASK) >= OP_READ:
        return filemap_access(s, p, task, cpu_nid, page, head, hu, nr, op, now, cost, fast)
    return pte_access(s, p, task, cpu_nid, page, head, hu, nr, op, now, cost, fast)


@jit_inline
def access_fault(s, p, task, cpu, page, op, clock, scratch, cands):
    """The general case's first step, for the access `access_present()`'s fast case stopped at: a
    fault brings an absent page in (and may reclaim). Returns (cost in ns, ok, done): ok is False
    only on OOM; done when nothing is left to do (OOM, or a load of the zero page), else the
    caller goes on with access_present()'s general case at clock + cost."""
    cost = 0.0
    head = folio_head(s, page)
    if not (s.pages.flags2[head] & F2_PRESENT):
        c, ok = fault_in(s, p, task, cpu, page, op, clock, scratch, cands)
        if not ok:
            return c, False, True
        cost += c
        head = folio_head(s, page)       # the fault may have made it part of a large folio
        if not (s.pages.flags2[head] & F2_PRESENT):
            # zero page: a cache-line read from the local node
            return cost + line_load_ns(s, p, s.cpu[cpu].node, clock, False), True, True
    return cost, True, False


@jit_inline
def advance(s, task, clock, cost):
    """The clock after an access of `cost` ns: costs are fractional (a streamed 4 KiB page at a
    node's bandwidth), clocks are integer ns, so the task carries the fraction to its next access
    rather than dropping it (a DRAM page of 225.93 ns would otherwise cost 225)."""
    x = cost + s.task[task].clock_frac
    n = np.int64(x)
    s.task[task].clock_frac = x - n
    return clock + n


@jit
def fast_run(s, p, task, cpu_nid, pages, ops, pos, end, clock, limit, scan_at):
    """A run of accesses that `access_present()`'s fast case finishes, in a loop of its own: the
    common case (a re-read of a cached file, loads of resident memory) then runs without the
    general case's code around it, which costs registers and so time even when it is not taken.
    Stops before a MARK or a control op other than CPU work (ops.OP_CPU: the clock advances by its
    ns in place), before an access the fast case cannot finish, once the
    clock reaches the quantum's `limit` or the scan tick (`scan_at`), and right after a system call that left
    promotion work. Returns (pos, clock, task work pending); the caller then does what follows an
    access (after_access)."""
    pending = False
    while pos < end and clock < limit and clock < scan_at:
        op = ops[np.uint64(pos)]
        if op & OP_STOP:
            if op != OP_CPU:
                break
            clock += pages[np.uint64(pos)]       # CPU work: what mm.do_ctrl charges in the general case
            pos += 1
            continue
        prefetch_ahead(s, pages, pos, end)
        cost, why = access_present(s, p, task, cpu_nid, pages[np.uint64(pos)], op, clock, 0.0, True)
        if why != ACCESS_DONE:
            break
        pos += 1
        clock = advance(s, task, clock, cost)
        if op & OP_SYSCALL_END:
            clock = syscall_end(s, p, task, op, clock)
            if s.task[task].promo_count > 0:
                pending = True
                break
    return pos, clock, pending


@jit_inline
def after_access(s, p, task, cpu, clock, start, scan_at, work_pending):
    """What runs after an access, in this order: the task work of a system call that queued
    promotions (task_numa_promotion_work), then the NUMA scan tick once the task's runtime reaches
    its next scan stamp (task_tick_numa; `scan_at` is when that happens, INF with NUMA balancing
    off). `start` is the clock at which the task's quantum began. Returns the clock after both and
    the next `scan_at`."""
    if work_pending:
        clock += np.int64(task_numa_promotion_work(s, p, task, s.cpu[cpu].node, clock))
    if clock >= scan_at:
        # the tick at scan_at fell within the access: task_tick_numa with the runtime and jiffies
        # of that tick, its work at the return to user (now)
        rt = s.task[task].runtime + (scan_at - start)
        clock += np.int64(task_tick_numa(s, p, task, rt, jiffies_at(p, scan_at), clock))
        scan_at = next_numa_tick(s, p, task, start, clock)
    return clock, scan_at


@jit
def io_sleep(s, t, page, clock):
    """Task t waits from `clock` for the read of `page` (task.io_ready): it leaves its runqueue
    (its CPU runs others) and wakes when the read completes (sched_wake_task, with place_entity's
    sleeper credit), as a task sleeping in folio_wait_locked() would, and then takes its access
    again. The folio is held meanwhile (task.io_folio: reclaim keeps it, io_unhold). The wait is in
    the profile's io_wait."""
    ready = s.task[t].io_ready
    s.task[t].io_ready = 0
    if page_present(s, page):
        s.task[t].io_folio = folio_head(s, page)
        s.sys[0].nr_io_folios += 1
    if s.task[t].call_start:
        s.task[t].call_start = 2        # its read() has begun: the wake-up does not restart it
    if ready > clock:
        charge(s, K.IO_WAIT, np.float64(ready - clock))
    sched_dequeue_task(s, t)
    sched_wake_task(s, t, max(ready, clock))


@jit_inline
def io_unhold(s, t):
    """Task t, back from its read, takes its access: the folio it held is let go."""
    if s.task[t].io_folio >= 0:
        s.task[t].io_folio = -1
        s.sys[0].nr_io_folios -= 1


@jit
def direct_reclaim_slice(s, p, t, c, clock, start, scan_at, scratch, cands):
    """One step of the direct reclaim task t runs for a fault that stalled, on its clock, with what
    follows any step of a task (its NUMA tick). Out of line, so run() holds one more call, not one
    more copy of after_access. Returns (done, clock, scan_at)."""
    done, cost = direct_reclaim_resume(s, p, t, c, clock, scratch, cands)
    clock = advance(s, t, clock, cost)
    clock, scan_at = after_access(s, p, t, c, clock, start, scan_at, False)
    return done, clock, scan_at


@jit
def task_ctrl(s, p, task, cpu, op, arg, clock, scratch, cands):
    """A control op of `task` (ops.CTRL_*, mm.py). At exit the task's queued work runs first
    (exit_task_work: a promotion list is migrated, not dropped), and once its process's mm is torn
    down the processes waiting for that start (start_waiting). Returns (cost, ok); not ok is a
    SIGSEGV (`sys.segv_*`)."""
    cost = 0.0
    exiting = (op & CTRL_KIND_MASK) == CTRL_EXIT
    if exiting and s.task[task].promo_count > 0:
        cost += task_numa_promotion_work(s, p, task, s.cpu[cpu].node, clock)
    kind = op & CTRL_KIND_MASK
    if kind == CTRL_MOVE_PAGES or kind == CTRL_MIGRATE_PAGES or kind == CTRL_MBIND or kind == CTRL_SET_MEMPOLICY:
        c, ok = page_movement_ctrl(s, p, task, op, arg, clock + np.int64(cost), scratch, cands)
    elif kind == CTRL_DROP_CACHES:
        c, ok = drop_caches_ctrl(s, p, task, arg, clock + np.int64(cost)), True
    else:
        c, ok = do_ctrl(s, p, task, op, arg, clock + np.int64(cost))
    cost += c
    if exiting and ok and s.task[task].dead and s.mm[s.task[task].mm].users == 0:   # its mm torn down
        start_waiting(s, p, s.task[task].mm, clock + np.int64(cost))
    return cost, ok


@jit
def start_waiting(s, p, mm, at):
    """The processes whose start waits for `mm`'s exit (mm.start_after: a parent that waits for one
    child and forks the next, as make's job server does) become runnable at `at`, each with its
    mm's NUMA scan starting as for a process started then (init_numa_balancing)."""
    for m in range(s.mm.shape[0]):
        if s.mm[m].start_after == mm:
            init_numa_balancing(s, p, m, at)
            for t in range(s.task.shape[0]):
                if s.task[t].mm == m:
                    sched_wake_task(s, t, at)


@jit_inline
def node_gauges(s, nid, out):
    """The node's gauges in vmstat.NODE_GAUGE_NAMES order, into out[0:NR_NODE_GAUGES]."""
    lru = s.lruvec[nid].lru_size
    out[0] = s.pgdat[nid].free
    out[1] = lru[LRU_INACTIVE_ANON]
    out[2] = lru[LRU_ACTIVE_ANON]
    out[3] = lru[LRU_INACTIVE_FILE]
    out[4] = lru[LRU_ACTIVE_FILE]
    out[5] = s.pgdat[nid].nr_isolated
    out[6] = s.pgdat[nid].migrc_pending_nr
    out[7] = free_pages_from_order(s, nid, FREE_PAGES_64K_ORDER)


def sample_columns(nr_nodes: int) -> int:
    """Columns of a time-series row: time, every vmstat counter, then each node's gauges."""
    return 1 + NR_VMSTAT_ITEMS + nr_nodes * NR_NODE_GAUGES


@jit_entry
def take_sample(s, t):
    """Append a time-series row at time `t`: the global counters, then every node's gauges."""
    row = s.sys[0].nr_samples
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
        node_gauges(s, nid, out[k:k + NR_NODE_GAUGES])
        k += NR_NODE_GAUGES
    s.sys[0].nr_samples = row + 1


@jit
def run_kswapd(s, p, c, nid, clock, scratch):
    """Node nid's kswapd runs one reclaim batch (balance_pgdat step) on CPU c from `clock`."""
    if s.pgdat[nid].kswapd_clock < clock:
        s.pgdat[nid].kswapd_clock = clock
    e = s.task.shape[0] + nid
    s.sys[0].current = e
    kswapd_step(s, p, nid, scratch)
    end_t = max(s.pgdat[nid].kswapd_clock, clock)
    note_step(s, clock, end_t)
    sched_account(s, e, end_t - clock)
    s.cpu[c].clock = end_t
    if not s.pgdat[nid].kswapd_awake:
        kswapd_dequeue(s, nid)


@jit_entry
def run(s, p, offsets, pages, ops, task_pos, scratch, cands):
    """Run the tasks through their input in virtual time. Resumable: returns a status and keeps
    each task's position in `task_pos` (task t's input is ops[task_pos[t]:offsets[t + 1]]);
    `scratch` (int64[64]) and `cands` (int64[N]) are work buffers. STATUS_DONE: every task has
    exited or its input has ended (task.input_end) and been taken. STATUS_NEED_INPUT: the task
    `sys.need_input` ran out of input within its quantum (or before a read() call whose end is
    not buffered yet, which readahead must see); the caller appends its next ops, or sets
    input_end, and calls again, and the quantum goes on where it stopped, so the schedule does not
    depend on how the input was cut. STATUS_SAMPLES_FULL asks the caller to drain samples and call
    again; STATUS_MARKS_FULL to grow `marks`; STATUS_OOM and STATUS_SEGV (an access or control op
    outside the task's VMAs) stop the run. A task runs from its `start` time (an idle CPU's clock
    jumps to it) until its input ends or it exits."""
    ntasks = task_pos.shape[0]
    ncpu = s.cpu.shape[0]
    nnodes = s.pgdat.shape[0]
    interval = np.int64(p[P.SAMPLE_INTERVAL_NS])
    numa_on = p[P.NUMA_BALANCING] != 0
    fast_case = p[P.FAST_CASE] != 0
    s.sys[0].need_input = -1
    sched_init_chunk(s, task_pos, offsets)
    while True:
        if s.sys[0].resume_cpu >= 0:
            # the quantum that stopped for input goes on as if it never had
            c = s.sys[0].resume_cpu
            s.sys[0].resume_cpu = -1
            t = s.cpu[c].curr
            clock = s.cpu[c].clock
            limit = s.sys[0].resume_limit
            scan_at = s.sys[0].resume_scan_at
            wakeups = s.sys[0].resume_wakeups
            s.sys[0].current = t
        else:
            # the CPU that is next to do something (its clock, or when an idle CPU's next entity
            # becomes runnable: a task's start, a woken kswapd not yet enqueued), and the runner-up
            # (bounds the quantum): O(CPUs + nodes)
            best = -1
            best_t = INF
            second_t = INF
            for c in range(ncpu):
                ct = cpu_ready_at(s, c)
                if ct < best_t:
                    second_t = best_t
                    best_t = ct
                    best = c
                elif ct < second_t:
                    second_t = ct
            for nid in range(nnodes):
                g = s.pgdat[nid]
                if g.kswapd_awake and not g.kswapd_on_rq:
                    c = g.kswapd_cpu
                    kt = max(s.cpu[c].clock, g.kswapd_clock)
                    if kt < best_t:
                        second_t = best_t
                        best_t = kt
                        best = c
                    elif kt < second_t:
                        second_t = kt
            if best < 0:
                return STATUS_DONE
            while s.sys[0].next_sample <= best_t:
                if s.sys[0].nr_samples >= s.samples.shape[0]:
                    return STATUS_SAMPLES_FULL
                take_sample(s, s.sys[0].next_sample)
                note_clock_spread(s, best_t)
                s.sys[0].next_sample += interval
            if best_t >= s.sys[0].event_at:
                return STATUS_EVENT                 # every live clock has reached the event's time
            c = best
            clock = max(s.cpu[c].clock, best_t)      # an idle CPU's clock jumps to its next entity
            s.cpu[c].clock = clock
            t = s.cpu[c].curr
            if sched_need_pick(s, c, clock):
                t = sched_resched(s, p, c, clock, task_pos, offsets)
                if t < 0:
                    continue
            if t >= ntasks:
                run_kswapd(s, p, c, t - ntasks, clock, scratch)
                if s.sys[0].oom_min_ttl_node >= 0:
                    return STATUS_OOM               # MGLRU's min_ttl_ms called the OOM killer
                continue
            if clock >= s.task[t].stop_at:
                task_pos[t] = offsets[t + 1]        # the task's runtime is over (fio time_based): the rest is not issued
                s.task[t].input_end = 1
                # the task waited for its CPU (a kswapd sharing it ran) past its stop: its clock is the
                # CPU's now, which is what says it stopped (Progress.stopped reads task.end)
                s.task[t].end = max(s.task[t].end, clock)
                sched_dequeue_task(s, t)
                if phase_due(s, task_pos, offsets):
                    return STATUS_PHASE             # the last task is through: the next phase starts now
                continue
            cpumask_set_cpu(s, s.task[t].mm, c)
            s.sys[0].current = t
            limit = quantum_limit(s, p, c, t, clock, second_t)
            if s.task[t].call_start == 1 and s.task[t].call_clock < clock:
                s.task[t].call_clock = clock        # a call starts when its task runs again
            wakeups = s.sys[0].wakeups
            scan_at = next_numa_tick(s, p, t, clock, clock) if numa_on else INF
        start = clock
        cpu_nid = s.cpu[c].node
        pos = task_pos[t]
        end = offsets[t + 1]
        status = STATUS_DONE
        dry = False        # out of input while the quantum goes on
        sleep = False      # waiting for a read (task.io_ready)
        skip = 1 if s.task[t].io_folio >= 0 else 0   # accesses to take here before trying fast_run
                                                     # again (the retake after a read, io_unhold)
        backoff = 16
        while True:
            if s.task[t].dr_state != DR_NONE:
                # the task is in direct reclaim for a fault that stalled (memory.fault_stalls): a
                # reclaim batch per step; the quantum may end between two
                done, clock, scan_at = direct_reclaim_slice(s, p, t, c, clock, start, scan_at, scratch, cands)
                if not done:
                    if clock >= limit:
                        break
                    continue
                # done: the stalled access is taken again at once in the general case (whatever
                # happened to its page meanwhile), its allocation going on at MIN
                skip = max(skip, 1)
            if pos >= end:
                dry = s.task[t].input_end == 0
                break
            if skip > 0:
                skip -= 1
            elif fast_case:
                before = pos
                pos, clock, pending = fast_run(s, p, t, cpu_nid, pages, ops, pos, end, clock, limit, scan_at)
                if pos != before:
                    clock, scan_at = after_access(s, p, t, c, clock, start, scan_at, pending)
                    if clock >= limit:
                        break
                    if pos >= end:
                        dry = s.task[t].input_end == 0
                        break
                    backoff = 16
                else:
                    # runs of faults or promotion candidates are common (a first read of a file
                    # faults page after page): take accesses here before trying fast_run again,
                    # twice as many after each futile try
                    skip = backoff
                    backoff = min(backoff * 2, 4096)
            op = ops[np.uint64(pos)]
            io_unhold(s, t)             # a task back from a read retakes its access right here
            if op & OP_CTRL:
                cost, ok = task_ctrl(s, p, t, c, op, pages[np.uint64(pos)], clock, scratch, cands)
                if s.task[t].ctrl_next == 0:
                    pos += 1                # done; else the call goes on with its next piece
                clock += np.int64(cost)
                if not ok:
                    status = STATUS_SEGV
                    break
                if s.task[t].dead:
                    break
                clock, scan_at = after_access(s, p, t, c, clock, start, scan_at, False)
                if clock >= limit or s.sys[0].wakeups != wakeups:
                    break
                continue
            if (op & OP_MARK) and s.task[t].nr_marks >= s.marks.shape[1]:
                status = STATUS_MARKS_FULL          # the caller grows `marks` and resumes here
                break
            # the general case straight away (fast_run tried the fast case, or the run is in a
            # stretch of faults): the fault, then access_present() in its general case. Side by
            # side, not nested in one more inlined function: numba copies an inlined callee block
            # by block with all its variables, and the extra level cost ~4 s of compile
            page = pages[np.uint64(pos)]
            prefetch_ahead(s, pages, pos, end)
            if not page_present(s, page) and fault_stalls(s, p, t, c, page, op, clock, cands):
                continue                            # its direct reclaim first, a batch per step
            ra = 0.0
            if (op & OP_KIND_MASK) == OP_READ:
                present = page_present(s, page)
                if page == s.task[t].ra_mark or not present:
                    n = call_pages_left(ops, pos, end, RA_REQ_MAX)   # readahead's req_count
                    if call_goes_on(ops, pos, n, end, RA_REQ_MAX) and s.task[t].input_end == 0:
                        dry = True                  # the call's end is not buffered yet
                        break
                    s.task[t].ra_req = n
                if page == s.task[t].ra_mark and present:
                    # the folio the task's readahead marked: the next window is submitted before the
                    # read waits for this one (filemap_get_pages -> page_cache_async_ra)
                    ra = page_cache_async_ra(s, p, t, c, page, s.task[t].ra_req, clock, scratch, cands)
            at = clock
            period = s.task[t].numa_scan_period
            cost, ok, done = access_fault(s, p, t, c, page, op, clock + np.int64(ra), scratch, cands)
            # a retried access that did not allocate (another task faulted the page in meanwhile)
            # leaves nothing pending for the task's next allocation
            s.task[t].dr_after = 0
            cost += ra
            if done:
                s.task[t].io_ready = 0
            elif s.task[t].io_ready == 0:
                cost, why = access_present(s, p, t, cpu_nid, page, op, clock + np.int64(cost), cost, False)
                ok = why != ACCESS_SEGV
            if s.task[t].io_ready != 0:
                # the access waits for its read: the task sleeps until it completes and then takes
                # the access again (a hit); its CPU is free meanwhile
                clock = advance(s, t, clock, cost)
                sleep = True
                break
            pos += 1
            clock = advance(s, t, clock, cost)
            if not ok:
                status = STATUS_SEGV if s.sys[0].segv_task >= 0 else STATUS_OOM
                break
            if s.task[t].numa_scan_period != period:
                # a promotion's placement moved the scan period (task_numa_fault): the tick that
                # acts next moves with it, counted from the access's start
                scan_at = next_numa_tick(s, p, t, start, at)
            pending = False
            if op & OP_SYSCALL_END:
                clock = syscall_end(s, p, t, op, clock)
                pending = s.task[t].promo_count > 0
            clock, scan_at = after_access(s, p, t, c, clock, start, scan_at, pending)
            if op & OP_MARK:
                s.marks[t, s.task[t].nr_marks] = clock
                s.task[t].nr_marks += 1
                if s.task[t].nr_marks == s.task[t].event_mark:
                    status = STATUS_EVENT           # a run-script event follows this mark
                    break
            # the general case can wake kswapd (allocation, reclaim, a promotion's target check)
            if clock >= limit or s.sys[0].wakeups != wakeups:
                break
        if clock >= s.task[t].stop_at:
            pos = end                           # the task's runtime is over: the rest is not issued
            s.task[t].input_end = 1
            dry = False
        task_pos[t] = pos
        note_step(s, limit, clock)
        sched_account(s, t, clock - start)
        s.task[t].end = clock
        s.cpu[c].clock = clock
        gone = s.task[t].dead or (pos >= end and s.task[t].input_end)
        if gone:
            sched_dequeue_task(s, t)        # it exited, or its input is done
        elif sleep:
            io_sleep(s, t, pages[np.uint64(pos)], clock)
        if clock > s.sys[0].now:
            s.sys[0].now = clock
        if status != STATUS_DONE:
            return status
        if gone and phase_due(s, task_pos, offsets):
            return STATUS_PHASE             # the last task is through its input: the next phase starts now
        if dry:
            s.sys[0].resume_cpu = c
            s.sys[0].resume_limit = limit
            s.sys[0].resume_scan_at = scan_at
            s.sys[0].resume_wakeups = wakeups
            s.sys[0].need_input = t
            return STATUS_NEED_INPUT
