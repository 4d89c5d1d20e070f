"""Run scripts: events on the simulated clock, at a task's mark or at a phase start.

An event is a string `WHEN:ACTION` (config key `at`, a list; CLI `--at`, repeatable):

    WHEN    10ms | 1.5s | 250us | 0      simulated time (fio's time format, divided by --scale like
                                         every other time of a run, docs/scaling.md)
            mark:T:N                     when task T records its N-th mark (1 = its first)
            phase:N                      at the start of the workload's N-th phase (1 = its first)
    ACTION  set KNOB=VALUE[,KNOB=VALUE]  write knobs (Simulation.set_knobs: the sysctl/sysfs write)
            move_pages REGION NODE [task=T]        move_pages(2) of the region's pages to NODE
            migratepages FROM[,FROM] NODE [task=T] migrate_pages(2) of task T's process
            mbind REGION POLICY [move] [task=T]    mbind(2): POLICY as a Region takes it, e.g.
                                                   default, bind:1, preferred:0, interleave:0,1,
                                                   bind|numa_balancing:0,1; `move`: MPOL_MF_MOVE
            set_mempolicy POLICY [task=T]          set_mempolicy(2) of task T's process
            drop_caches 1|2|3 [task=T]             echo N > /proc/sys/vm/drop_caches
            kill PROCESS                           every thread of the process (a name or number)
                                                   exits at its next op, the rest of its input
                                                   dropped; its memory is torn down (exit_mmap)

REGION is a region's name or slot number. A system call is issued by task T (default 0) as its
next op, so it runs on that task's clock and CPU; a task whose input has ended (its stream done, or
waiting at a phase barrier) runs it and ends again; an exited task cannot issue it (an error). A
time event applies when the earliest clock of the run reaches it (engine.run: STATUS_EVENT), a mark
event right after the mark (the task's quantum ends there), a phase event as the phase starts;
either way every other entity is within the time rules' quantum of it, and the result does not
depend on how the input was cut into chunks. Each event is checked before the run starts and is
listed, with the time it applied, in Result.events and in the time series' `event` column.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .errors import ConfigError

ACTIONS = ("set", "move_pages", "migratepages", "mbind", "set_mempolicy", "drop_caches", "kill")
ACCEPTED = ("WHEN:ACTION with WHEN a time (10ms, 1.5s), mark:TASK:N or phase:N and ACTION one of "
            "set KNOB=VALUE, move_pages REGION NODE, migratepages FROM NODE, mbind REGION POLICY [move], "
            "set_mempolicy POLICY, drop_caches 1|2|3, kill PROCESS (system calls take task=T)")


@dataclass(frozen=True)
class Event:
    text: str
    trigger: str                  # "time", "mark" or "phase"
    at_ns: int = 0                # time: simulated ns (scaled)
    task: int = 0                 # mark: the task whose mark it waits for
    count: int = 0                # mark: its N-th mark; phase: the N-th phase start
    knobs: dict = field(default_factory=dict)   # set
    op: tuple | None = None       # a system call: (page, op) of the control op
    issuer: int = 0               # the task that issues it
    kill: tuple = ()              # kill: the tasks that exit


def _int(v: str, what: str, text: str, lo: int, hi: int) -> int:
    try:
        n = int(v)
    except ValueError:
        n = None
    if n is None or not lo <= n <= hi:
        raise ConfigError(f"at {text!r}: {what} {v!r}; accepted: {lo}..{hi}")
    return n


def parse_event(text, machine, kernel, workload, regions, nr_tasks: int, layout=None) -> Event:
    """One event string, checked against the run's machine, knobs, regions, tasks and processes
    (config.Layout)."""
    from .workloads.base import (
        drop_caches_op, mbind_op, migrate_pages_op, move_pages_op, set_mempolicy_op, split_policy,
    )
    from .workloads.fio import _runtime
    if not isinstance(text, str) or ":" not in text:
        raise ConfigError(f"at {text!r}: expected {ACCEPTED}")
    head, _, rest = text.partition(":")
    head = head.strip()
    if head == "mark":
        t, n, action = (rest.split(":", 2) + ["", ""])[:3]
        trig = dict(trigger="mark", task=_int(t, "task", text, 0, nr_tasks - 1),
                    count=_int(n, "mark number", text, 1, 1 << 40))
    elif head == "phase":
        n, _, action = rest.partition(":")
        trig = dict(trigger="phase", count=_int(n, "phase number", text, 1, 1 << 40))
    else:
        try:
            ns = _runtime(head, f"at {text!r}: time")
        except ConfigError as e:
            raise ConfigError(f"{e}; an event is {ACCEPTED}") from None
        trig = dict(trigger="time", at_ns=int(ns / float(workload.scale)))
        action = rest
    words = action.split()
    if not words or words[0] not in ACTIONS:
        raise ConfigError(f"at {text!r}: action {words[0] if words else ''!r}; accepted: {', '.join(ACTIONS)}")
    verb, args = words[0], words[1:]
    issuer = 0
    if args and args[-1].startswith("task="):
        issuer = _int(args.pop()[5:], "task", text, 0, nr_tasks - 1)

    def region(name: str) -> int:
        for i, r in enumerate(regions):
            if r.name == name or str(i) == name:
                return i
        raise ConfigError(f"at {text!r}: region {name!r}; accepted: "
                          + ", ".join(f"{r.name} ({i})" for i, r in enumerate(regions)))

    def node(v: str) -> int:
        return _int(v, "node", text, 0, machine.nr_nodes - 1)

    if verb == "kill":
        procs = [p.name for p in layout.processes] if layout is not None else []
        if len(args) != 1 or (args[0] not in procs and not (args[0].isdigit() and int(args[0]) < len(procs))):
            raise ConfigError(f"at {text!r}: kill PROCESS; accepted processes: "
                              + ", ".join(f"{n} ({i})" for i, n in enumerate(procs)))
        mm = procs.index(args[0]) if args[0] in procs else int(args[0])
        return Event(text, **trig, kill=tuple(t for t, m in enumerate(layout.task_mm) if m == mm))
    if verb == "set":
        knobs = {}
        for kv in ",".join(args).split(","):
            if "=" not in kv:
                raise ConfigError(f"at {text!r}: set {kv!r}; accepted: KNOB=VALUE[,KNOB=VALUE]")
            k, v = kv.split("=", 1)
            knobs[k.strip()] = v.strip()
        kernel.replace(**knobs).check_combination()     # names and values, before the run
        return Event(text, **trig, knobs=knobs)
    if verb == "move_pages" and len(args) == 2:
        op = move_pages_op(region(args[0]), node(args[1]))
    elif verb == "migratepages" and len(args) == 2:
        op = migrate_pages_op([node(v) for v in args[0].split(",")], node(args[1]))
    elif verb == "mbind" and len(args) in (2, 3) and (len(args) == 2 or args[2] == "move"):
        pol, _, nodes = args[1].partition(":")
        split_policy(pol, f"at {text!r}: policy")
        op = mbind_op(region(args[0]), pol, [node(v) for v in nodes.split(",") if v], len(args) == 3)
    elif verb == "set_mempolicy" and len(args) == 1:
        pol, _, nodes = args[0].partition(":")
        split_policy(pol, f"at {text!r}: policy")
        op = set_mempolicy_op(pol, [node(v) for v in nodes.split(",") if v])
    elif verb == "drop_caches" and len(args) == 1 and args[0] in ("1", "2", "3"):
        op = drop_caches_op(int(args[0]))
    else:
        usage = {"move_pages": "move_pages REGION NODE", "migratepages": "migratepages FROM[,FROM] NODE",
                 "mbind": "mbind REGION POLICY [move]", "set_mempolicy": "set_mempolicy POLICY",
                 "drop_caches": "drop_caches 1|2|3"}[verb]
        raise ConfigError(f"at {text!r}: accepted: {usage} [task=T]")
    return Event(text, **trig, op=op, issuer=issuer)


def parse_events(texts, machine, kernel, workload, regions, nr_tasks: int, layout=None) -> list[Event]:
    if texts is None:
        return []
    if isinstance(texts, str) or not isinstance(texts, (list, tuple)):
        raise ConfigError(f"at: expected a list of events, got {texts!r}; an event is {ACCEPTED}")
    return [parse_event(t, machine, kernel, workload, regions, nr_tasks, layout) for t in texts]
