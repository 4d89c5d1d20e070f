"""Each task's input for the engine: the ops it has yet to run, topped up from a workload's chunks.

A workload yields chunks (workloads.base.Chunk), each holding the next part of every task's stream.
The engine runs a task until its input runs out within a quantum and then returns asking for more
(engine.run: STATUS_NEED_INPUT, `sys.need_input`), keeping the quantum to go on with. `TaskInput`
holds the ops not yet run in the engine's layout (offsets[T+1], pages, ops, each task's position)
and appends a chunk's parts after each task's own rest, so no task waits for another's input and
how the stream was cut into chunks reaches neither the schedule nor the results: a chunk's size is
a matter of memory only.
"""
from __future__ import annotations

import numpy as np


class TaskInput:
    """Per task, the ops it has not run yet (task t's are ops[pos[t]:offsets[t + 1]])."""

    def __init__(self, ntasks: int):
        self.offsets = np.zeros(ntasks + 1, np.int64)
        self.pages = np.zeros(0, np.int64)
        self.ops = np.zeros(0, np.uint8)
        self.pos = np.zeros(ntasks, np.int64)
        self.added = np.zeros(ntasks, np.int64)     # ops appended so far, per task

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
        new_pages = np.empty(int(new_off[-1]), np.int64)
        new_ops = np.empty(int(new_off[-1]), np.uint8)
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
