"""The workload interface: regions of memory, tasks, and a stream of access chunks.

A workload declares its memory as regions (a file's page cache or an anonymous mapping, each with a
memory policy) and yields chunks of accesses. A chunk is CSR-shaped per task: `offsets[T+1]`,
`pages[n]` (int64, global page ids = region base + page index), `ops[n]` (uint8, see
tierlab.core.ops OP_*). Generators are vectorised numpy; nothing is a Python object per access.
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


@dataclass(frozen=True)
class Region:
    name: str
    kind: str                 # "anon" or "file"
    pages: int
    policy: str = "default"   # default (local), bind, preferred, interleave
    nodes: tuple[int, ...] = ()
    order: int = 0            # folio order used on faults
    mapped: bool = False      # file regions: also mapped with mmap (a VMA the NUMA scanner walks)
    advice: str = "normal"    # file regions: posix_fadvise advice of the tasks' open file (readahead):
                              # normal, random (FMODE_RANDOM), sequential (twice the readahead window)

    def __post_init__(self):
        if self.kind not in ("anon", "file"):
            raise ConfigError(f"region {self.name}: kind must be anon or file, got {self.kind!r}")
        if self.policy not in POLICIES:
            raise ConfigError(f"region {self.name}: policy must be one of {', '.join(POLICIES)}")
        if self.policy != "default" and not self.nodes:
            raise ConfigError(f"region {self.name}: policy {self.policy} needs nodes")
        if self.advice not in ADVICE:
            raise ConfigError(f"region {self.name}: advice must be one of {', '.join(ADVICE)}, got {self.advice!r}")


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


@dataclass
class Progress:
    """What the simulation sends back into a workload's chunk generator after running a chunk
    (`progress = yield chunk`): the workload can decide what to generate next, e.g. keep going
    until every task's runtime is over (fio's time_based)."""
    task_clock_ns: np.ndarray   # each task's clock when it last ran
    stopped: np.ndarray         # bool per task: its runtime is over (Chunk.runtime_ns)
    phase_start_ns: int         # when the last phase started (Chunk.start_phase; 0 before any)


@dataclass(frozen=True)
class Param:
    default: object
    parse: Callable
    help: str
    scaled: bool = False   # divided by --scale


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


def policy_param(default: str, help: str) -> Param:
    """A memory policy: 'default', 'bind:1', 'preferred:0', 'interleave:0,1'."""
    def parse(v, key="value"):
        s = str(v)
        name, _, nodes = s.partition(":")
        if name not in POLICIES or (name != "default" and not nodes) or (name == "default" and nodes):
            raise ConfigError(f"{key}: {v!r} is not a memory policy; accepted: default, bind:N[,M..], "
                              f"preferred:N, interleave:N,M[,..]")
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
            if spec.scaled and scale != 1:
                v = max(PAGE_SIZE, int(v / scale))
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


def single_task_chunk(pages: np.ndarray, ops: np.ndarray) -> Chunk:
    return Chunk(np.array([0, pages.shape[0]], dtype=np.int64), pages, ops)
