"""The workload interface: regions of memory, processes and their threads, and a stream of access chunks.

A workload declares its memory as regions (a file's page cache or an anonymous mapping, each with a
memory policy) and yields chunks of accesses. A chunk is CSR-shaped per task: `offsets[T+1]`,
`pages[n]` (int64, global page ids = region base + page index), `ops[n]` (uint8, see
tierlab.core.ops OP_*). Generators are vectorised numpy; nothing is a Python object per access.

Processes. `processes()` says which tasks (threads) share an mm, which regions each maps when it
starts (its VMAs: anon memory and mmap'd files; read()-only files need no VMA and may be read by
any process), when it starts, where it may run (a CPU set or cpunodebind) and its task memory
policy (set_mempolicy; a region's own policy, as mbind, wins). Tasks are numbered process by
process, in declaration order. The default is today's behaviour: one process, all tasks, every
region mapped from time 0.

A region not mapped by any process at its start is a free *slot*: a CTRL_MMAP op of a task maps it
into that task's process, CTRL_MUNMAP unmaps it (its anon pages are freed, the slot can be mapped
again by anyone: page ids are recycled, so a workload of many short-lived processes keeps its state
bounded), CTRL_BRK moves the end of a mapped slot, CTRL_EXIT ends a task (its process's memory is
torn down with its last task). The workload picks the slots (its generator must know the page ids
its accesses use); `control_op(kind, slot, npages)` builds one op. Workloads that emit control ops
set `control_ops = True`, and each chunk's control ops are then checked before it runs.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, ClassVar, Iterator

import numpy as np

from ..errors import ConfigError
from ..units import PAGE_SIZE, parse_int, parse_number, parse_scale, parse_size

CHUNK_ACCESSES = 1 << 22   # accesses per chunk: ~40 MB of arrays, amortises the call into numba

POLICIES = ("default", "bind", "preferred", "interleave")
ADVICE = ("normal", "random", "sequential")
PROT = ("rw", "r")         # a VMA's protection: PROT_READ | PROT_WRITE, or PROT_READ only
POLICY_FLAGS = ("numa_balancing",)   # MPOL_F_NUMA_BALANCING, with bind only (sanitize_mpol_flags)
POLICY_ACCEPTED = ("default, bind:N[,M..], bind|numa_balancing:N[,M..], preferred:N, interleave:N,M[,..]")


def split_policy(policy: str, key: str = "policy") -> tuple[str, tuple[str, ...]]:
    """'bind|numa_balancing' -> ('bind', ('numa_balancing',)); refuses unknown modes and flags, and
    MPOL_F_NUMA_BALANCING with anything but bind (the kernel's EINVAL)."""
    mode, *flags = str(policy).split("|")
    if mode not in POLICIES or any(f not in POLICY_FLAGS for f in flags):
        raise ConfigError(f"{key}: {policy!r} is not a memory policy; accepted: {POLICY_ACCEPTED}")
    if flags and mode != "bind":
        raise ConfigError(f"{key}: {policy!r}: the numa_balancing flag (MPOL_F_NUMA_BALANCING) goes with "
                          f"bind only; accepted: {POLICY_ACCEPTED}")
    return mode, tuple(flags)


@dataclass(frozen=True)
class Region:
    name: str
    kind: str                 # "anon" or "file"
    pages: int
    policy: str = "default"   # default (no VMA policy: the task's, else local), bind, preferred, interleave;
                              # "bind|numa_balancing" adds MPOL_F_NUMA_BALANCING (NUMA-scanned, MORON)
    nodes: tuple[int, ...] = ()
    order: int = 0            # folio order used on faults
    mapped: bool = False      # file regions: also mapped with mmap (a VMA the NUMA scanner walks)
    advice: str = "normal"    # file regions: posix_fadvise advice of the tasks' open file (readahead):
                              # normal, random (FMODE_RANDOM), sequential (twice the readahead window)
    prot: str = "rw"          # the VMA's protection: rw, or r (PROT_READ: a store is a SIGSEGV, and the
                              # NUMA scanner skips a read-only file mapping)

    def __post_init__(self):
        if self.kind not in ("anon", "file"):
            raise ConfigError(f"region {self.name}: kind must be anon or file, got {self.kind!r}")
        mode, _ = split_policy(self.policy, f"region {self.name}: policy")
        if mode != "default" and not self.nodes:
            raise ConfigError(f"region {self.name}: policy {self.policy} needs nodes")
        if self.advice not in ADVICE:
            raise ConfigError(f"region {self.name}: advice must be one of {', '.join(ADVICE)}, got {self.advice!r}")
        if self.prot not in PROT:
            raise ConfigError(f"region {self.name}: prot must be one of {', '.join(PROT)}, got {self.prot!r}")

    @property
    def is_file(self) -> bool:
        """A read()-only file: page cache without a VMA (no process maps it)."""
        return self.kind == "file" and not self.mapped


@dataclass(frozen=True)
class Process:
    """A process: `threads` tasks sharing one mm. `vmas`: names of the regions it maps at its start
    (anon or mmap'd file; a read()-only file named here may also be loaded from by the process, the
    way the one-mm model always allowed, and the NUMA scanner still skips it); `files`: the
    read()-only files it reads (any process may read() any file; listed for the record and checked
    to exist). `start_ms`: virtual time it starts. Placement: `cpus` (machine
    CPU ids, numactl --physcpubind) or `cpunodebind` (nodes, numactl --cpunodebind); threads go to
    the allowed CPU with the fewest tasks so far, lowest id first. `policy`/`policy_nodes`: its task
    memory policy (numactl --membind/--preferred/--interleave; 'bind|numa_balancing' is numactl
    --balancing --membind), used by its VMAs that have no policy of their own. `text_pages`: the
    pages of hot code its threads run (the iTLB's stream with the TLB model on, tlb_hw.py; 0: none).
    `after`: the name of an earlier process whose exit starts this one (its last thread's exit and
    the teardown of its memory: a parent that waits for one child and forks the next, as make's
    job server does); start_ms is then not used."""
    name: str
    threads: int = 1
    vmas: tuple[str, ...] = ()
    files: tuple[str, ...] = ()
    start_ms: float = 0.0
    cpus: tuple[int, ...] = ()
    cpunodebind: tuple[int, ...] = ()
    policy: str = "default"
    policy_nodes: tuple[int, ...] = ()
    text_pages: int = 0
    after: str = ""


def control_op(kind: str, slot: int = 0, npages: int = 0) -> tuple[int, int]:
    """(page, op) of a control op: kind is mmap, munmap, brk, exit or fadvise (tierlab.core.ops CTRL_*);
    mmap maps region slot `slot` over its first npages (0: all), brk sets its mapped length
    (fadvise: use `fadvise_op`)."""
    from ..core.ops import CTRL_NAMES, OP_CTRL, ctrl_arg
    if kind not in CTRL_NAMES:
        raise ConfigError(f"control op {kind!r}; accepted: {', '.join(CTRL_NAMES)}")
    return ctrl_arg(slot, npages), OP_CTRL | CTRL_NAMES[kind]


def fadvise_op(slot: int, advice: str) -> tuple[int, int]:
    """(page, op) of posix_fadvise(fd, 0, 0, advice) on the file of region slot `slot` (core/fadvise.py):
    advice is normal, random or sequential."""
    from ..core.state import FADV_CODES
    if advice not in FADV_CODES:
        raise ConfigError(f"fadvise advice {advice!r}; accepted: {', '.join(FADV_CODES)}")
    return control_op("fadvise", slot, FADV_CODES[advice])


def move_pages_op(slot: int, node: int, npages: int = 0) -> tuple[int, int]:
    """(page, op) of move_pages(2) by the issuing task: the first npages pages (0: all) of region slot
    `slot` to `node` (core/migrate.py do_pages_move; outcomes in Simulation.move_pages_status)."""
    from ..core.ops import CTRL_MOVE_PAGES, OP_CTRL, move_pages_arg
    return move_pages_arg(slot, node, npages), OP_CTRL | CTRL_MOVE_PAGES


def migrate_pages_op(from_nodes, node: int) -> tuple[int, int]:
    """(page, op) of migrate_pages(2) of the issuing task's process (what `migratepages PID from to`
    does): its mapped pages on `from_nodes` to `node` (core/mempolicy.py do_migrate_pages)."""
    from ..core.mempolicy import migrate_arg
    from ..core.ops import CTRL_MIGRATE_PAGES, OP_CTRL
    return migrate_arg(from_nodes, node), OP_CTRL | CTRL_MIGRATE_PAGES


def _policy(policy: str, nodes, key: str) -> tuple[int, bool]:
    """(MPOL_* code, MPOL_F_NUMA_BALANCING given) of a policy string with its nodes, checked as a
    Region's or a Process's is (config.policy_code)."""
    from ..config import policy_code
    from ..core.state import MPOL_F_NUMA_BALANCING
    mode, pol_flags, _ = policy_code(policy, tuple(nodes), key)
    return mode, bool(pol_flags & MPOL_F_NUMA_BALANCING)


def mbind_op(slot: int, policy: str, nodes=(), move: bool = False) -> tuple[int, int]:
    """(page, op) of mbind(2) of region slot `slot`: policy as a Region takes it (default, bind,
    preferred, interleave; "bind|numa_balancing"), with MPOL_MF_MOVE when `move` (the mapped pages
    outside the new nodes move to where the policy places them; core/mempolicy.py do_mbind)."""
    from ..core.mempolicy import mbind_arg
    from ..core.ops import CTRL_MBIND, OP_CTRL
    mode, numab = _policy(policy, nodes, "mbind policy")
    return mbind_arg(slot, mode, nodes, move, numab), OP_CTRL | CTRL_MBIND


def set_mempolicy_op(policy: str, nodes=()) -> tuple[int, int]:
    """(page, op) of set_mempolicy(2) by the issuing task: its process's policy (as a Process takes
    it), followed by its VMAs without a policy of their own (core/mempolicy.py do_set_mempolicy)."""
    from ..core.mempolicy import set_mempolicy_arg
    from ..core.ops import CTRL_SET_MEMPOLICY, OP_CTRL
    mode, numab = _policy(policy, nodes, "set_mempolicy policy")
    return set_mempolicy_arg(mode, nodes, numab), OP_CTRL | CTRL_SET_MEMPOLICY


def drop_caches_op(what: int = 1) -> tuple[int, int]:
    """(page, op) of `echo WHAT > /proc/sys/vm/drop_caches` by the issuing task (core/drop_caches.py):
    1 the page cache (clean, unmapped folios), 2 slab (nothing to drop here), 3 both."""
    from ..core.ops import CTRL_DROP_CACHES, OP_CTRL
    if what not in (1, 2, 3):
        raise ConfigError(f"drop_caches: {what!r}; accepted: 1, 2, 3")
    return int(what), OP_CTRL | CTRL_DROP_CACHES


@dataclass
class Chunk:
    offsets: np.ndarray   # int64[T+1]
    pages: np.ndarray     # int64[n]
    ops: np.ndarray       # uint8[n]
    # a phase starts with this chunk: every task starts it at the same time (the latest clock: a
    # task that got there first waits) and the read()/write() latency histograms start empty (the
    # statistics of what came before, e.g. fio's pre_read, are dropped)
    start_phase: bool = False
    # with start_phase: every task stops issuing accesses runtime_ns after the phase start (the rest
    # of this and later chunks is skipped). None: no limit.
    runtime_ns: int | None = None
    # with start_phase: per task, how long after the phase start it starts (fio's startdelay; None:
    # all at once); its statistics start ramp_ns after its own start (fio's ramp_time: calls that
    # complete earlier are not in its latency histogram) and its runtime counts from there
    start_offsets_ns: np.ndarray | None = None
    ramp_ns: int = 0
    # per task, its stream (of this phase) ends with this chunk's part: no more input comes for it
    # before the next phase (None: the stream ends for every task together, when the generator does)
    ended: np.ndarray | None = None


@dataclass
class Progress:
    """What the simulation sends into a workload's chunk generator when it asks for the next chunk
    (`progress = yield chunk`; a task that ran out of input asks, so the earlier chunks may be
    partly run): the workload can decide what to generate next, e.g. keep going until every
    task's runtime is over (fio's time_based)."""
    task_clock_ns: np.ndarray   # each task's clock when it last ran
    stopped: np.ndarray         # bool per task: its runtime is over (Chunk.runtime_ns), or it has exited
    phase_start_ns: int         # when the last phase started (Chunk.start_phase; 0 before any)
    buffered: np.ndarray | None = None   # ops each task has been given and not run yet


@dataclass(frozen=True)
class Param:
    default: object
    parse: Callable
    help: str
    scaled: bool = False   # divided by --scale
    scaled_min: int = PAGE_SIZE    # the least a scaled value becomes (a page for sizes, 1 ns for times)


def size_param(default: str, help: str, scaled: bool = True) -> Param:
    return Param(default, parse_size, help, scaled)


INT_PARAM_MAX = 1 << 62
MAX_TASKS = 4096            # tasks of one workload (each has its own per-task state)


def int_param(default: int, help: str, lo: int = 0, scaled: bool = False, hi: int = INT_PARAM_MAX) -> Param:
    def parse(v, key="value"):
        return parse_int(v, key, lo, hi)
    return Param(default, parse, help, scaled)


def float_param(default: float, help: str, lo: float = 0.0, hi: float = float("inf")) -> Param:
    def parse(v, key="value"):
        return parse_number(v, key, lo, hi)
    return Param(default, parse, help)


def choice_param(default: str, choices: tuple[str, ...], help: str) -> Param:
    def parse(v, key="value"):
        if str(v) not in choices:
            raise ConfigError(f"{key}: {v!r} is not accepted; accepted: {', '.join(choices)}")
        return str(v)
    return Param(default, parse, help)


def nodes_param(default: str, help: str) -> Param:
    """A node list such as '0' or '0,1' ('' for none: no restriction)."""
    def parse(v, key="value"):
        s = str(v).strip()
        if not s:
            return ()
        try:
            return tuple(int(x) for x in s.split(","))
        except ValueError:
            raise ConfigError(f"{key}: {v!r} is not a node list; accepted: N[,M..] or empty") from None
    return Param(default, parse, help)


def policy_param(default: str, help: str) -> Param:
    """A memory policy: 'default', 'bind:1', 'preferred:0', 'interleave:0,1'."""
    def parse(v, key="value"):
        s = str(v)
        name, _, nodes = s.partition(":")
        mode, _ = split_policy(name, key)
        if (mode != "default" and not nodes) or (mode == "default" and nodes):
            raise ConfigError(f"{key}: {v!r} is not a memory policy; accepted: {POLICY_ACCEPTED}")
        try:
            ids = tuple(int(x) for x in nodes.split(",")) if nodes else ()
        except ValueError:
            raise ConfigError(f"{key}: bad node list in {v!r}") from None
        return (name, ids)
    return Param(default, parse, help)


class Workload:
    """Base class. Subclasses set `name`, `description`, `params` and implement regions()/chunks()."""

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    params: ClassVar[dict[str, Param]] = {}
    access_params: ClassVar[tuple[str, ...]] = ()   # the params that set nr_accesses() (named in refusals)
    control_ops: ClassVar[bool] = False             # True: chunks hold control ops (checked per chunk)
    # ops per chunk the generator aims at: memory only, the results do not depend on it (feed.py);
    # a test sets it per instance to show that
    chunk_accesses: int = CHUNK_ACCESSES

    def __init__(self, scale: float = 1.0, **values):
        scale = parse_scale(scale)
        unknown = set(values) - set(self.params)
        if unknown:
            k = sorted(unknown)[0]
            raise ConfigError(f"workload {self.name}: unknown param {k!r}; accepted: {', '.join(self.params)}")
        self.values = {}
        self.raw = dict(values)
        for k, spec in self.params.items():
            v = spec.parse(values.get(k, spec.default), key=k) if _takes_key(spec.parse) else spec.parse(values.get(k, spec.default))
            if spec.scaled and scale != 1 and v is not None:
                v = max(spec.scaled_min, int(v / scale))
            self.values[k] = v
        self.scale = scale
        self.validate()

    def __getattr__(self, name):
        values = self.__dict__.get("values", {})
        if name in values:
            return values[name]
        raise AttributeError(name)

    def validate(self) -> None:
        """Cross-parameter checks (raise ConfigError)."""

    # --- to implement -----------------------------------------------------------------------
    @property
    def nr_tasks(self) -> int:
        return 1

    def regions(self) -> list[Region]:
        raise NotImplementedError

    def processes(self) -> list[Process]:
        """The processes and their threads (tasks, numbered in this order). Default: one process of
        nr_tasks threads mapping every region from time 0 (the one-mm model)."""
        regions = self.regions()
        return [Process("main", threads=self.nr_tasks, vmas=tuple(r.name for r in regions),
                        files=tuple(r.name for r in regions if r.is_file))]

    def chunks(self, seed: int) -> Iterator[Chunk]:
        """Yield the access chunks. A chunk's arrays may be reused for the next chunk (file-read
        refills one buffer): consume each chunk before asking for the next. A generator receives a
        Progress from `yield` once its chunk has run (Simulation.run sends it)."""
        raise NotImplementedError

    def nr_accesses(self) -> int | None:
        """Accesses the workload's chunks will hold (for progress bars), if known up front."""
        return None

    def nr_marks(self) -> int:
        """MARK ops per task (cycle boundaries), to size the marks array."""
        return 0

    def task_iodepth(self) -> list[int] | None:
        """Each task's I/O engine for its read()/write() calls: 0 synchronous (pread), n >= 1 up to
        n calls in flight (io_uring); None: all synchronous (core/fileio.py)."""
        return None

    def summary(self, result, phase_start_ns: int) -> dict:
        """The workload's own report of a Result (e.g. fio's JSON output), JSON-able; {}: none.
        phase_start_ns: when the last phase started (Chunk.start_phase)."""
        return {}

    def describe(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.values.items())


def _takes_key(fn) -> bool:
    import inspect
    try:
        return "key" in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def region_bases(regions: list[Region]) -> list[int]:
    bases, acc = [], 0
    for r in regions:
        bases.append(acc)
        acc += r.pages
    return bases


class OpStream:
    """One task's stream of ops, made in blocks by `make()` ((pages, ops), or None at its end) and
    taken in pieces of any size: what a task issues does not depend on how a chunk cuts it."""

    def __init__(self, make: Callable[[], tuple[np.ndarray, np.ndarray] | None]):
        self.make = make
        self.pages = np.zeros(0, np.int64)
        self.ops = np.zeros(0, np.uint8)
        self.ended = False

    def take(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        """The next n ops (fewer at the stream's end)."""
        pages, ops, have = [self.pages], [self.ops], self.pages.shape[0]
        while have < n and not self.ended:
            block = self.make()
            if block is None:
                self.ended = True
                break
            pages.append(block[0])
            ops.append(block[1])
            have += block[0].shape[0]
        if len(pages) > 1:
            self.pages, self.ops = np.concatenate(pages), np.concatenate(ops)
        pages, ops = self.pages[:n], self.ops[:n]
        self.pages, self.ops = self.pages[n:], self.ops[n:]
        return pages, ops


def one_block(pages: np.ndarray | None = None, ops: np.ndarray | None = None):
    """An OpStream's `make` that gives (pages, ops) once and then ends (at once without pages)."""
    blocks = iter([] if pages is None or not pages.shape[0] else [(pages, ops)])
    return lambda: next(blocks, None)


NO_OPS = (np.zeros(0, np.int64), np.zeros(0, np.uint8))


def low_water(progress: Progress | None, per_task: int, nr_tasks: int) -> np.ndarray:
    """The tasks a chunk generator gives their next per_task ops: those with fewer than per_task
    ops buffered (Progress.buffered), every task for the first chunk. Given only below the mark, no
    task holds more than 2 x per_task however unevenly the tasks run (feed.TaskInput's memory)."""
    if progress is None or progress.buffered is None:
        return np.ones(nr_tasks, bool)
    return progress.buffered < per_task


def stream_chunks(streams: list[OpStream], per_task: int, **first) -> Iterator[Chunk]:
    """Chunks of per-task streams until every stream has ended; `first` (start_phase, runtime_ns)
    goes to the first chunk. A chunk holds the next per_task ops of each task below the low-water
    mark (fewer than per_task ops buffered: Progress.buffered; every task in the first chunk) and
    none for the others, so however unevenly the tasks run none is given more than 2 x per_task
    ahead, and says whose streams have ended (Chunk.ended), so a task that ran out of its own
    stream leaves its runqueue without the others' being read ahead for it."""
    progress = None
    while True:
        want = low_water(progress, per_task, len(streams))
        parts = [s.take(per_task) if w else NO_OPS for s, w in zip(streams, want)]
        ended = np.array([s.ended and not s.pages.shape[0] for s in streams])
        if ended.all() and not any(p.shape[0] for p, _ in parts):
            return
        offsets = np.zeros(len(parts) + 1, np.int64)
        np.cumsum([p.shape[0] for p, _ in parts], out=offsets[1:])
        progress = yield Chunk(offsets, np.concatenate([p for p, _ in parts]),
                               np.concatenate([o for _, o in parts]), ended=ended, **first)
        first = {}


def single_task_chunk(pages: np.ndarray, ops: np.ndarray) -> Chunk:
    return Chunk(np.array([0, pages.shape[0]], dtype=np.int64), pages, ops)
