"""The time rules: how far apart in virtual time the entities (tasks, kswapds, the timers that run in
them) may run, and everything that relies on that bound. The run loop (engine.run) obeys them; every
bound that depends on them is derived here.

1. The pick. The CPU next to do something runs next (sched.cpu_ready_at: its clock when an entity
   is on its runqueue, else the time its next entity becomes runnable). Call H the smallest such
   time: the entity that runs is at H. A task waiting for input stays on its runqueue (engine.run
   returns STATUS_NEED_INPUT and goes on where it stopped), so H never passes it.
2. The quantum. A task runs until its clock passes the runner-up CPU's time plus `quantum_ns`, or
   reaches the next sample, a run-script event, the end of its CFS slice, its CPU's next runqueue
   event or its stop (quantum_limit); a kswapd runs one reclaim batch.
3. The step. The last step of a quantum may end past its limit, by at most MAX_STEP_NS: a step is
   one access (a fault that would enter direct reclaim reclaims a batch per step first:
   memory.fault_stalls; an access that waits for a read ends its step, the task sleeps:
   engine.io_sleep), one reclaim batch, or a bounded piece of a control op -- a system call that
   moves, drops or unmaps many pages goes a migration batch, a folio batch or a page table per
   call (task.ctrl_next) and on in the task's next step.
4. The lead. So no live entity's clock is more than max_lead_ns = quantum + MAX_STEP_NS past H.
   The run measures it: at every sample the spread of the live clocks (note_clock_spread) and the
   longest step past a limit (note_step); tests/test_time_rules.py holds every golden run within
   both, and runs each with the input cut into chunks of 2^12 and 2^22 accesses per task, bit for
   bit.
5. What relies on the lead. Every capacity calendar's ring spans at least 4x it (locks: the
   quantum's upper end QUANTUM_MAX_NS makes it so; bandwidth and devices are far wider), and a
   booking beyond a ring is an error (api.Simulation._check_horizons); the hint-fault latency of a
   page another entity stamped up to a lead ahead is not a wrap (numa_balancing.stamp_lead_ms).
6. Phases. A phase that waits for every task starts when the last task is through (engine.run
   returns STATUS_PHASE before kswapd or a timer runs on), at that task's end and no earlier than
   any CPU's clock (phase_start).

What the bound does not cover: MAX_STEP_NS holds with the default costs (a migration batch of 512
pages ~460 us, a reclaim batch that swaps out 32 pages ~330 us); costs set far above their
defaults or a NUMA scan of a huge scan_size_mb make longer steps, which the API warns about
(TimeRulesWarning) when they outran a lock's ring. A lone task's quantum has no runner-up and no
limit, so its steps are not measured.
"""
from __future__ import annotations

import numpy as np
from ._jit import jit, jit_inline

from .params import P
from .sched import INF, no_task_has_work, sched_next_event
from .state import LOCK_BIN_NS, LOCK_BINS

# The longest step one entity takes past its quantum's limit (rule 3), with the default costs
MAX_STEP_NS = np.int64(500_000)
# The largest quantum_ns: a lock calendar's ring (2.1 ms) is then at least 4x the lead (rule 5)
QUANTUM_MAX_NS = np.int64(LOCK_BIN_NS * LOCK_BINS // 4) - MAX_STEP_NS


@jit_inline
def max_lead_ns(p):
    """How far any live entity's clock may be past H, the smallest next-run time (rule 4)."""
    return np.int64(p[P.QUANTUM_NS]) + MAX_STEP_NS


@jit
def quantum_limit(s, p, c, t, clock, second_t):
    """Rule 2: where task t's quantum on CPU c from `clock` ends: a quantum past the runner-up CPU's time
    (`second_t`; INF: none, then past the next sample), at the next sample or run-script event, at
    the end of its CFS slice, at its CPU's next runqueue event, at its stop."""
    limit = second_t if second_t < INF else s.sys[0].next_sample
    limit = max(limit, clock) + np.int64(p[P.QUANTUM_NS])
    if s.sys[0].next_sample < limit and s.sys[0].next_sample > clock:
        limit = s.sys[0].next_sample
    if s.sys[0].event_at < limit and s.sys[0].event_at > clock:
        limit = s.sys[0].event_at               # a run-script event is due there (STATUS_EVENT)
    if s.cpu[c].nr_running > 1:
        # check_preempt_tick: the slice ends (the runtime used so far is runtime - slice_start)
        limit = min(limit, clock + s.cpu[c].slice_ns - (s.task[t].runtime - s.cpu[c].slice_start))
    limit = min(limit, sched_next_event(s, c, clock))
    if s.task[t].stop_at < limit:
        limit = max(s.task[t].stop_at, clock)
    return limit


@jit
def note_clock_spread(s, now):
    """Rule 4's measure, at a sample: how far the most advanced live entity (a CPU with an
    entity on its runqueue, an awake kswapd) is past `now`, the smallest time at which anything
    is next to run; the largest so far is kept in sys.max_clock_spread."""
    hi = now
    for c in range(s.cpu.shape[0]):
        if s.cpu[c].nr_running > 0 and s.cpu[c].clock > hi:
            hi = s.cpu[c].clock
    for n in range(s.pgdat.shape[0]):
        if s.pgdat[n].kswapd_awake and s.pgdat[n].kswapd_clock > hi:
            hi = s.pgdat[n].kswapd_clock
    if hi - now > s.sys[0].max_clock_spread:
        s.sys[0].max_clock_spread = hi - now


@jit_inline
def note_step(s, limit, end):
    """Rule 4's other measure: a step that ended at `end`, past its quantum's `limit` (a kswapd
    batch: past its start); the longest so far is kept in sys.max_step_ns."""
    if end - limit > s.sys[0].max_step_ns:
        s.sys[0].max_step_ns = end - limit


@jit_inline
def phase_due(s, task_pos, offsets):
    """Rule 6's test: the next phase is held (sys.phase_held) and no task has input left, so the run
    stops now (engine STATUS_PHASE), before kswapd or a timer runs on past the tasks."""
    return s.sys[0].phase_held and no_task_has_work(s, task_pos, offsets)


def phase_start(s) -> int:
    """Rule 6: the time a phase that waited for every task starts, when the last task got through
    the previous one (engine.run stopped there: STATUS_PHASE) and no earlier than any CPU's clock (a
    new run() starts at the latest time reached). A CPU behind it idles until then, a CPU a kswapd
    took ahead keeps its clock; every task's end is that time."""
    t0 = int(max(s.cpu["clock"].min(), s.task["end"].max()))
    s.cpu["clock"] = np.maximum(s.cpu["clock"], t0)
    s.task["end"] = t0
    return t0
