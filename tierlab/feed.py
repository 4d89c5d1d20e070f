"""Each task's input for the engine: the ops it has yet to run, topped up from a workload's chunks.

A workload yields chunks (workloads.base.Chunk), each holding the next part of every task's stream.
The engine runs a task until its input runs out within a quantum and then returns asking for more
(engine.run: STATUS_NEED_INPUT, `sys.need_input`), keeping the quantum to go on with. `TaskInput`
holds the ops not yet run in the engine's layout (offsets[T+1], pages, ops, each task's position)
and appends a chunk's parts after each task's own rest, so no task waits for another's input and
how the stream was cut into chunks reaches neither the schedule nor the results: a chunk's size is
a matter of memory only. `ChunkFeed` asks the workload's generator for chunks when a task needs
input, holds a chunk that starts a phase until every task has run its input, and stops a
generator that never ends its stream.
"""
from __future__ import annotations

import numpy as np

FUTILE_CHUNKS = 100_000    # chunks in a row that give no task able to run any input: a stuck generator


class TaskInput:
    """Per task, the ops it has not run yet (task t's are ops[pos[t]:offsets[t + 1]])."""

    def __init__(self, ntasks: int):
        self.offsets = np.zeros(ntasks + 1, np.int64)
        self.pages = np.zeros(0, np.int64)
        self.ops = np.zeros(0, np.uint8)
        self.pos = np.zeros(ntasks, np.int64)
        self.added = np.zeros(ntasks, np.int64)     # ops appended so far, per task
        self.peak_ops = 0                           # the most ops held at once (memory: 9 bytes each)
        # two (pages, ops) buffers, the input in one and the next append written into the other: a
        # chunk's ~4 M ops are ~36 MB, which a fresh array per chunk would take from the kernel
        # (mmap) and fault in page by page every time
        self._bufs = [(np.zeros(0, np.int64), np.zeros(0, np.uint8)) for _ in range(2)]
        self._in = -1                               # the buffer the input is in (-1: neither)

    def _spare(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        """Room for n ops that the current input does not use: the buffer it is not in, grown by
        half again when too small."""
        k = 1 if self._in == 0 else 0
        pages, ops = self._bufs[k]
        if pages.shape[0] < n:
            cap = max(n, pages.shape[0] * 3 // 2)
            pages, ops = np.empty(cap, np.int64), np.empty(cap, np.uint8)
            self._bufs[k] = (pages, ops)
        self._in = k
        return pages[:n], ops[:n]

    def left(self) -> np.ndarray:
        """Ops each task has not run yet."""
        return self.offsets[1:] - self.pos

    def append(self, offsets: np.ndarray, pages: np.ndarray, ops: np.ndarray, take: np.ndarray) -> None:
        """After each task's rest, its part of a chunk (offsets/pages/ops, CSR per task) where
        take[t]; the parts of the other tasks are dropped. The chunk's arrays are copied (a
        workload may reuse them for its next chunk)."""
        T = self.pos.shape[0]
        add = np.where(take, np.diff(offsets), 0)
        rest = self.left()
        new_off = np.zeros(T + 1, np.int64)
        np.cumsum(rest + add, out=new_off[1:])
        new_pages, new_ops = self._spare(int(new_off[-1]))
        for t in np.flatnonzero(rest + add).tolist():
            a, r = int(new_off[t]), int(rest[t])
            lo = int(self.pos[t])
            new_pages[a:a + r] = self.pages[lo:lo + r]
            new_ops[a:a + r] = self.ops[lo:lo + r]
            if add[t]:
                c0, c1 = int(offsets[t]), int(offsets[t + 1])
                new_pages[a + r:a + r + c1 - c0] = pages[c0:c1]
                new_ops[a + r:a + r + c1 - c0] = ops[c0:c1]
        self.offsets, self.pages, self.ops = new_off, new_pages, new_ops
        self.pos = new_off[:-1].copy()
        self.added += add
        self.peak_ops = max(self.peak_ops, int(new_off[-1]))


    def insert(self, t: int, pages: np.ndarray, ops: np.ndarray, after: int = 0) -> None:
        """Ops task t runs next, before the rest of its input (a run-script event's system call), or
        after its next `after` ops (a system call under way finishes first)."""
        lo, n = int(self.pos[t]) + after, pages.shape[0]
        self.pages = np.concatenate([self.pages[:lo], pages, self.pages[lo:]])
        self.ops = np.concatenate([self.ops[:lo], ops, self.ops[lo:]])
        self._in = -1
        self.offsets[t + 1:] += n
        self.pos[t + 1:] += n


class ChunkFeed:
    """A workload's chunks, taken as the tasks need them, into a TaskInput.

    `task` is the state's task array (its input_end is set here: the stream ended, or a chunk
    that starts a phase waits until every task has run its input); `on_chunk(chunk)` sees each
    chunk first (checks, progress); `start_phase(chunk)` starts the phase the chunk begins (the API's
    Simulation._start_phase); `progress()` is the Progress a generator gets when its next chunk is
    asked for."""

    def __init__(self, chunks, task, name: str, on_chunk, start_phase, progress):
        self.input = TaskInput(task.shape[0])
        self.task = task
        self.name = name
        self.on_chunk, self.start_phase, self.progress = on_chunk, start_phase, progress
        self.it = iter(chunks)
        self.send = getattr(self.it, "send", None)
        self.held = None           # a chunk that starts a phase, until every task has run its input
        self.asked = False
        self.exhausted = False
        self.idle_pulls = 0
        task["input_end"] = task["dead"]

    def pull(self) -> bool:
        """The next chunk's parts, after each task's rest; False when none comes before every task
        has run its input (the stream ended, or the next chunk starts a phase)."""
        if self.exhausted or self.held is not None:
            return False
        try:
            ch = self.send(self.progress()) if self.asked and self.send is not None else next(self.it)
        except StopIteration:
            self.exhausted = True
            self.task["input_end"] = 1
            return False
        self.on_chunk(ch)
        if ch.start_phase and self.asked:
            self.held = ch
            self.task["input_end"] = 1
            return False
        self.asked = True
        if ch.start_phase:
            self.start_phase(ch)
        self._append(ch)
        return True

    def need(self, t: int) -> None:
        """Task t ran out: chunks until it has more input or its input has ended."""
        before, futile = int(self.input.added[t]), 0
        while self.input.added[t] == before and not self.task[t]["input_end"] and self.pull():
            futile = self._futile(futile, f"task {t} ran out of input and")

    def next_phase(self) -> bool:
        """Every task has exited or run all its input: start the held phase, or take more chunks
        while the stream goes on (its generator is to end it, e.g. once every job's runtime is
        over). False when the stream has ended."""
        if self.held is not None:
            ch, self.held = self.held, None
            self.start_phase(ch)
            self._append(ch)
            return True
        if self.exhausted:
            return False
        self.idle_pulls = self._futile(self.idle_pulls, "every task's input has ended and")
        if self.pull() and self.input.left().any():
            self.idle_pulls = 0
        return True

    def _append(self, ch) -> None:
        self.input.append(ch.offsets, ch.pages, ch.ops, self.task["input_end"] == 0)
        if ch.ended is not None:
            self.task["input_end"] |= np.asarray(ch.ended, np.int64)   # those tasks' streams ended
            if self.task["input_end"].all():
                # every stream of the phase has ended: learn now whether a phase is held (the run
                # stops when the last task is through: engine STATUS_PHASE) or the stream is over
                self.pull()

    def _futile(self, n: int, what: str) -> int:
        """One more chunk asked for in vain; past FUTILE_CHUNKS the generator is stuck (it feeds
        tasks that cannot take input, or none at all) and the run stops saying so."""
        if n + 1 > FUTILE_CHUNKS:
            raise RuntimeError(f"workload {self.name}: {what} {FUTILE_CHUNKS} chunks in a row gave it none "
                               "(its chunk generator never ends the stream: a workload bug, please report it)")
        return n + 1
