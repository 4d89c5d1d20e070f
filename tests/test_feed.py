"""feed.TaskInput: each task's rest, then its part of the next chunk, whatever buffer holds them."""
import numpy as np

from tierlab.feed import TaskInput


def _chunk(parts):
    """CSR (offsets, pages, ops) of per-task lists of page ids; op = page % 7."""
    offsets = np.cumsum([0] + [len(p) for p in parts]).astype(np.int64)
    pages = np.array([x for p in parts for x in p], np.int64)
    return offsets, pages, (pages % 7).astype(np.uint8)


def _held(inp):
    return [inp.pages[inp.pos[t]:inp.offsets[t + 1]].tolist() for t in range(inp.pos.shape[0])]


def test_rests_then_chunks_through_reused_buffers_and_an_insert():
    inp = TaskInput(3)
    want = [[], [], []]
    rng = np.random.default_rng(1)
    nxt = 0
    for step in range(12):
        parts = []
        for t in range(3):
            k = int(rng.integers(0, 50))
            parts.append(list(range(nxt, nxt + k)))
            nxt += k
        offsets, pages, ops = _chunk(parts)
        take = np.array([True, step % 3 != 1, True])
        inp.append(offsets, pages, ops, take)
        pages[:] = -1                                   # the workload may reuse its arrays
        for t in range(3):
            if take[t]:
                want[t] += parts[t]
        assert _held(inp) == want
        assert (inp.ops == inp.pages % 7).all()
        # each task runs part of its input
        for t in range(3):
            ran = int(rng.integers(0, len(want[t]) + 1))
            inp.pos[t] += ran
            want[t] = want[t][ran:]
        if step == 5:                                   # a system call put first for task 1
            inp.insert(1, np.array([10**6], np.int64), np.array([10**6 % 7], np.uint8))
            want[1] = [10**6] + want[1]
            assert _held(inp) == want
    # the input alternates between two buffers: appends allocate only to grow them
    assert sum(b[0].shape[0] > 0 for b in inp._bufs) == 2
