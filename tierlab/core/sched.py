"""CPUs as a resource: per-CPU CFS runqueues shared by the CPU's tasks and the kswapds placed on it.

Models kernel/sched/fair.c as of v5.x-6.5 (CFS, before EEVDF), for entities of equal weight (every
task and kswapd is nice 0, weight NICE_0_LOAD, so vruntime advances by the runtime itself):

- update_curr(): the running entity's runtime and vruntime grow by what it ran (`sched_account`);
  update_min_vruntime(): the runqueue's min_vruntime follows the smallest vruntime on it and never
  goes back;
- pick_next_entity(): the smallest vruntime runs; equal vruntimes run in the order they were
  enqueued (the rbtree puts an equal key right of the keys already there; put_prev_entity()
  re-inserts the entity that ran, so it goes behind its equals);
- sched_slice(): the period -- sched_latency, or nr_running * min_granularity beyond
  sched_nr_latency = latency / min_granularity entities -- split equally; check_preempt_tick()
  switches once curr has run its slice and another entity is waiting;
- place_entity(): a waking entity's vruntime is raised to at least min_vruntime - latency / 2
  (GENTLE_FAIR_SLEEPERS); a task entering the runqueue for the first time (a process started
  within the run) to min_vruntime plus one slice (START_DEBIT);
- check_preempt_wakeup() / wakeup_preempt_entity(): a woken kswapd preempts curr when curr's
  vruntime exceeds its own by more than wakeup_granularity, so a kswapd that slept (sleeper
  credit latency / 2) preempts the task at once;
- update_sysctl(): latency, min_granularity and wakeup_granularity are the knobs' values times
  1 + ilog2(min(online CPUs, 8)) (sched_tunable_scaling = log, the default), times min(CPUs, 8)
  (linear), or as set (none).

Placement (mm/vmscan.c kswapd()): kswapd binds itself to cpumask_of_node(its node) when that mask
is not empty; a CPU-less node's (CXL) kswapd stays unbound and may run on any CPU. The scheduler's
wake-up placement (select_idle_sibling) puts a waking kthread on an idle CPU of its allowed set when
there is one, so `place_kswapds` gives kswapd a CPU no task runs on while its mask has one left
(a CPU-less node's kswapd: from the nearest node with CPUs first); otherwise it shares the least
loaded CPU of its mask (fewest tasks and kswapds placed so far; the highest-numbered on a tie, as
tasks fill CPUs from the first). A kswapd alone on its CPU runs on that CPU's clock exactly as the
old model's kswapd ran on its own clock.

Simplifications:
- no migration: no load balancing and no wake-up placement after set-up; a task stays on the CPU
  config.check_processes placed it on (within its process's CPU set), kswapd on the CPU
  `place_kswapds` picked;
- a task sleeps only for a read (engine.io_sleep: a page-cache miss of a synchronous read(), a
  major fault, a swap-in): off the runqueue until the read completes, then woken with
  place_entity's sleeper credit (sched_wake_task); it never blocks on a lock, which it spins on;
- check_preempt_tick()'s second test (curr ahead of the leftmost by more than a slice) and its
  min_granularity floor, buddies (next/last/skip), group scheduling and PELT are not modelled.
  EEVDF (6.6+) replaced the pick and the wake-up preemption with eligibility and virtual
  deadlines; between equal-weight entities that stay runnable it shares a CPU the same way;
- a task leaves the runqueue only when it exits or its input has ended (the workload's stream, or a
  phase's runtime); a task that runs out of buffered input stays on it, and the run loop stops
  where it ran out and asks the caller for more (engine.run, STATUS_NEED_INPUT), so how the input
  is cut into chunks never reaches the schedule.

Processes: a task enters its CPU's runqueue at its `start` (the CPU, idle, jumps to it) and leaves
it at exit (`dead`); `sched_wake_task` (runnable from a given time), `sched_exit_task` (do_exit) and
`sched_dequeue_task` are the entry points for code that starts or ends tasks.

Entities are numbered: task t is t, node n's kswapd is T + n (T tasks). A CPU's tasks are a list
through `cpu.first_task` / `task.next_on_cpu`, so runqueue scans are over its own tasks only; the
run loop re-evaluates a runqueue (`sched_resched`) only when something changed (`sched_need_pick`).
"""
from __future__ import annotations

import numpy as np
from ._jit import jit, jit_inline

from .params import P

INF = np.int64(1) << np.int64(62)
# kswapd has slept since boot: far behind any runqueue's min_vruntime, so its first wake-up gets the
# full sleeper credit (place_entity's max() then gives min_vruntime - latency/2)
KSWAPD_VRUNTIME_BOOT = -(np.int64(1) << np.int64(60))
SCHED_TUNABLESCALING_NONE = 0
SCHED_TUNABLESCALING_LOG = 1
SCHED_TUNABLESCALING_LINEAR = 2


def place_kswapds(cpu_nodes, cpu_ids, task_cpu, node_cpus, zonelists) -> tuple[list[int], list[int]]:
    """The CPU each node's kswapd runs on (see the module docstring), and the nodes of the CPUs to
    simulate. cpu_nodes: the node of each machine CPU; cpu_ids: the machine CPUs the tasks run on
    (the state's first CPU slots); task_cpu: each task's slot; node_cpus: CPUs per node;
    zonelists: per node, the nodes by distance (for a CPU-less node, the nearest node with CPUs
    comes first). A kswapd that gets a machine CPU no task uses adds that CPU as a slot after
    the tasks' ones. Returns (kswapd slot per node, node of every slot)."""
    sim = [cpu_nodes[c] for c in cpu_ids]
    load = [0] * len(sim)                                   # tasks (then kswapds) per slot
    for c in task_cpu:
        load[c] += 1
    used = set(cpu_ids)
    free = [c for c in range(len(cpu_nodes)) if c not in used]  # machine CPUs no task runs on
    out = []
    for nid in range(len(node_cpus)):
        # cpumask_of_node, or any CPU (nearest node first) for a CPU-less node
        order = [nid] if node_cpus[nid] > 0 else [n for n in zonelists[nid] if node_cpus[n] > 0]
        idle = next((m for n in order for m in free if cpu_nodes[m] == n), None)
        if idle is not None:
            free.remove(idle)
            sim.append(cpu_nodes[idle])
            load.append(1)
            out.append(len(sim) - 1)
            continue
        allowed = [c for c in range(len(cpu_ids)) if node_cpus[nid] == 0 or sim[c] == nid] or list(range(len(cpu_ids)))
        best = min(allowed, key=lambda c: (load[c], -c))
        load[best] += 1
        out.append(best)
    return out, sim


def cpu_task_lists(task_cpu, nr_cpus: int) -> tuple[np.ndarray, np.ndarray]:
    """cpu.first_task and task.next_on_cpu: each CPU's tasks as a list, in task order."""
    first = np.full(nr_cpus, -1, np.int64)
    nxt = np.full(len(task_cpu), -1, np.int64)
    for t in range(len(task_cpu) - 1, -1, -1):
        c = int(task_cpu[t])
        nxt[t] = first[c]
        first[c] = t
    return first, nxt


@jit_inline
def sched_factor(p):
    """update_sysctl()'s factor for the machine's CPU count (get_update_sysctl_factor)."""
    cpus = min(np.int64(p[P.NR_CPUS]), np.int64(8))
    mode = np.int64(p[P.SCHED_TUNABLE_SCALING])
    if mode == SCHED_TUNABLESCALING_NONE:
        return np.int64(1)
    if mode == SCHED_TUNABLESCALING_LINEAR:
        return cpus
    f = np.int64(1)
    while cpus > 1:           # 1 + ilog2(cpus)
        cpus >>= 1
        f += 1
    return f


@jit_inline
def sched_slice(p, nr_running):
    """The ideal runtime of one of nr_running equal-weight entities (__sched_period / nr)."""
    f = sched_factor(p)
    latency = np.int64(p[P.SCHED_LATENCY_NS]) * f
    min_gran = max(np.int64(p[P.SCHED_MIN_GRANULARITY_NS]) * f, np.int64(1))
    n = max(nr_running, np.int64(1))
    period = latency
    if n > max(latency // min_gran, np.int64(1)):
        period = n * min_gran
    return max(period // n, np.int64(1))


@jit_inline
def entity_times(s, e):
    """(runtime, vruntime) of entity e: a task, or T + nid for node nid's kswapd."""
    T = s.task.shape[0]
    if e < T:
        return s.task[e].runtime, s.task[e].vruntime
    return s.pgdat[e - T].kswapd_runtime, s.pgdat[e - T].kswapd_vruntime


@jit_inline
def sched_account(s, e, delta):
    """update_curr(): entity e ran `delta` ns."""
    T = s.task.shape[0]
    if e < T:
        s.task[e].runtime += delta
        s.task[e].vruntime += delta
    else:
        s.pgdat[e - T].kswapd_runtime += delta
        s.pgdat[e - T].kswapd_vruntime += delta


@jit_inline
def task_has_work(s, t, task_pos, offsets):
    """Alive, and with input left or more to come (a task waiting for input stays runnable: the
    run loop asks for its input when it is to run, so it never falls behind)."""
    return s.task[t].dead == 0 and (task_pos[t] < offsets[t + 1] or s.task[t].input_end == 0)


@jit
def no_task_has_work(s, task_pos, offsets):
    """Every task has exited or run all its input (task_has_work for none)."""
    for t in range(s.task.shape[0]):
        if task_has_work(s, t, task_pos, offsets):
            return False
    return True


@jit
def update_min_vruntime(s, c):
    """min_vruntime = max(min_vruntime, the smallest vruntime on the runqueue)."""
    lo = INF
    t = s.cpu[c].first_task
    while t >= 0:
        if s.task[t].on_rq and s.task[t].vruntime < lo:
            lo = s.task[t].vruntime
        t = s.task[t].next_on_cpu
    for n in range(s.pgdat.shape[0]):
        if s.pgdat[n].kswapd_cpu == c and s.pgdat[n].kswapd_on_rq and s.pgdat[n].kswapd_vruntime < lo:
            lo = s.pgdat[n].kswapd_vruntime
    if lo < INF and lo > s.cpu[c].min_vruntime:
        s.cpu[c].min_vruntime = lo


@jit_inline
def place_entity(s, p, c, vruntime, initial):
    """The vruntime an entering entity gets: a wake-up keeps at most latency/2 of sleeper credit;
    a new task starts a slice behind min_vruntime."""
    base = s.cpu[c].min_vruntime
    if initial:
        base += sched_slice(p, s.cpu[c].nr_running + 1)
    else:
        base -= (np.int64(p[P.SCHED_LATENCY_NS]) * sched_factor(p)) >> 1
    return max(vruntime, base)


@jit_inline
def enqueue_seq(s, c):
    q = s.cpu[c].seq
    s.cpu[c].seq = q + 1
    return q


@jit
def sched_dequeue_task(s, t):
    """dequeue_task(): take task t off its CPU's runqueue (its input has ended, or it exits)."""
    if not s.task[t].on_rq:
        return
    c = s.task[t].cpu
    s.task[t].on_rq = 0
    s.cpu[c].nr_running -= 1
    s.cpu[c].need_resched = 1
    if s.cpu[c].curr == t:
        s.cpu[c].curr = -1


@jit
def sched_exit_task(s, t):
    """do_exit(): the task is dead and never runnable again."""
    s.task[t].dead = 1
    sched_dequeue_task(s, t)


@jit
def sched_wake_task(s, t, at):
    """Make task t runnable from virtual time `at` (wake_up_new_task / try_to_wake_up for a task
    that was waiting): it enters its CPU's runqueue when that CPU's clock reaches `at`."""
    c = s.task[t].cpu
    s.task[t].start = at
    if at < s.cpu[c].next_start:
        s.cpu[c].next_start = at
    s.cpu[c].need_resched = 1


@jit
def sched_init_chunk(s, task_pos, offsets):
    """At the start of engine.run(): every CPU's next_start from its tasks that have work but
    are not on the runqueue (they enter at the next pick once their start has come)."""
    for c in range(s.cpu.shape[0]):
        s.cpu[c].next_start = INF
    for t in range(s.task.shape[0]):
        if not s.task[t].on_rq and task_has_work(s, t, task_pos, offsets):
            c = s.task[t].cpu
            if s.task[t].start < s.cpu[c].next_start:
                s.cpu[c].next_start = s.task[t].start


@jit_inline
def kswapd_pending(s, c, clock):
    """A kswapd of CPU c woken (awake) at or before `clock` and not yet enqueued."""
    for n in range(s.pgdat.shape[0]):
        if (s.pgdat[n].kswapd_cpu == c and s.pgdat[n].kswapd_awake and not s.pgdat[n].kswapd_on_rq
                and s.pgdat[n].kswapd_clock <= clock):
            return True
    return False


@jit_inline
def sched_need_pick(s, c, clock):
    """Whether the runqueue must be re-evaluated before curr runs on at `clock`: nothing runs,
    something changed (a dequeue, a wake), a task's start has come, a woken kswapd waits to be
    enqueued, or curr has used its slice with others waiting. The common case (curr alone, or
    within its slice) is a few compares."""
    cpu = s.cpu[c]
    curr = cpu.curr
    if curr < 0 or cpu.need_resched or cpu.next_start <= clock or kswapd_pending(s, c, clock):
        return True
    return cpu.nr_running > 1 and entity_times(s, curr)[0] - cpu.slice_start >= cpu.slice_ns


@jit_inline
def sched_next_event(s, c, clock):
    """The earliest time after `clock` at which CPU c's runqueue changes by itself (a task's start,
    a woken kswapd's wake-up time): a quantum stops there for the wake-up preemption check."""
    at = s.cpu[c].next_start if s.cpu[c].next_start > clock else INF
    for n in range(s.pgdat.shape[0]):
        if (s.pgdat[n].kswapd_cpu == c and s.pgdat[n].kswapd_awake and not s.pgdat[n].kswapd_on_rq
                and clock < s.pgdat[n].kswapd_clock < at):
            at = s.pgdat[n].kswapd_clock
    return at


@jit_inline
def cpu_ready_at(s, c):
    """When CPU c next has something to run: its clock with an entity enqueued or a task whose
    start has come, else the earliest start of its waiting tasks (INF: none). Woken kswapds not
    yet enqueued are added by the caller (a loop over nodes)."""
    cpu = s.cpu[c]
    if cpu.nr_running > 0 or cpu.next_start <= cpu.clock:
        return cpu.clock
    return cpu.next_start


@jit
def sched_resched(s, p, c, clock, task_pos, offsets):
    """Re-evaluate CPU c's runqueue at `clock` and set cpu.curr: enqueue the tasks whose start has
    come and the woken kswapds (place_entity; a kswapd's wake-up may preempt curr), then keep curr
    unless it is gone, preempted or through its slice, else put it back and pick the leftmost.
    Returns curr (-1: nothing to run)."""
    cpu = s.cpu[c]
    update_min_vruntime(s, c)
    curr = cpu.curr
    preempt = False
    if cpu.next_start <= clock:
        nxt = INF
        t = cpu.first_task
        while t >= 0:
            if not s.task[t].on_rq and task_has_work(s, t, task_pos, offsets):
                if s.task[t].start <= clock:
                    initial = s.task[t].start > 0 and s.task[t].runtime == 0
                    s.task[t].vruntime = place_entity(s, p, c, s.task[t].vruntime, initial)
                    s.task[t].on_rq = 1
                    s.task[t].rq_seq = enqueue_seq(s, c)
                    cpu.nr_running += 1
                elif s.task[t].start < nxt:
                    nxt = s.task[t].start
            t = s.task[t].next_on_cpu
        cpu.next_start = nxt
    gran = np.int64(p[P.SCHED_WAKEUP_GRANULARITY_NS]) * sched_factor(p)
    T = s.task.shape[0]
    for n in range(s.pgdat.shape[0]):
        g = s.pgdat[n]
        if g.kswapd_cpu == c and g.kswapd_awake and not g.kswapd_on_rq and g.kswapd_clock <= clock:
            g.kswapd_vruntime = place_entity(s, p, c, g.kswapd_vruntime, False)
            g.kswapd_on_rq = 1
            g.kswapd_seq = enqueue_seq(s, c)
            cpu.nr_running += 1
            if curr >= 0 and entity_times(s, curr)[1] - g.kswapd_vruntime > gran:
                preempt = True              # check_preempt_wakeup
    cpu.need_resched = 0
    cpu.slice_ns = sched_slice(p, cpu.nr_running)     # check_preempt_tick: for today's nr_running
    if curr >= 0 and not preempt and (cpu.nr_running <= 1
                                      or entity_times(s, curr)[0] - cpu.slice_start < cpu.slice_ns):
        return curr
    if curr >= 0:
        # put_prev_entity(): curr goes back into the tree, behind the entities of equal vruntime
        if curr < T:
            s.task[curr].rq_seq = enqueue_seq(s, c)
        else:
            s.pgdat[curr - T].kswapd_seq = enqueue_seq(s, c)
    best = np.int64(-1)
    best_vr = INF
    best_seq = INF
    t = cpu.first_task
    while t >= 0:
        if s.task[t].on_rq:
            vr = s.task[t].vruntime
            if vr < best_vr or (vr == best_vr and s.task[t].rq_seq < best_seq):
                best, best_vr, best_seq = t, vr, s.task[t].rq_seq
        t = s.task[t].next_on_cpu
    for n in range(s.pgdat.shape[0]):
        g = s.pgdat[n]
        if g.kswapd_cpu == c and g.kswapd_on_rq:
            vr = g.kswapd_vruntime
            if vr < best_vr or (vr == best_vr and g.kswapd_seq < best_seq):
                best, best_vr, best_seq = T + n, vr, g.kswapd_seq
    cpu.curr = best
    switch_mm_irqs_off(s, c, best)
    if best >= 0:
        cpu.slice_start = entity_times(s, best)[0]
        update_min_vruntime(s, c)
    return best


@jit_inline
def switch_mm_irqs_off(s, cpu, entity):
    """The TLB side of a context switch to `entity` (a task id, or T + nid for a kswapd): a kernel
    thread leaves the CPU lazy with its user mm loaded (enter_lazy_tlb); a task of another mm, or
    the return from lazy mode behind the mm's generation, flushes the CPU's TLB (need_flush: done
    at its next translation, tlb_hw.py; x86 does not count it in vmstat) and brings it up to the
    mm's generation. The first mm a CPU loads needs no flush. It belongs to tlb.py's TLB
    generations; it lives here, where the switch is, because tlb.py cannot be imported by the
    scheduler (state.py imports this module)."""
    if entity < 0:
        return
    c = s.cpu[cpu]
    if entity >= s.task.shape[0]:
        c.tlb_lazy = 1
        return
    mm = s.task[entity].mm
    if c.loaded_mm != mm or (c.tlb_lazy and c.tlb_gen != s.mm[mm].tlb_gen):
        if c.loaded_mm >= 0:                # not the first mm it loads (state.NO_MM is -1)
            s.tlbs.need_flush[cpu] = 1
        c.loaded_mm = mm
        c.tlb_gen = s.mm[mm].tlb_gen
    c.tlb_lazy = 0


@jit_inline
def kswapd_dequeue(s, nid):
    """kswapd went to sleep (kswapd_try_to_sleep): off its CPU's runqueue."""
    g = s.pgdat[nid]
    if g.kswapd_on_rq:
        c = g.kswapd_cpu
        g.kswapd_on_rq = 0
        s.cpu[c].nr_running -= 1
        s.cpu[c].need_resched = 1
        if s.cpu[c].curr == s.task.shape[0] + nid:
            s.cpu[c].curr = -1
