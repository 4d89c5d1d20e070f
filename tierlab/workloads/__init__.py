"""Built-in workloads, by name. Each is a Workload subclass; see base.py for the interface."""
from __future__ import annotations

from ..errors import ConfigError
from .anon_browser import AnonBrowser
from .anon_build import AnonBuild
from .anon_pressure import AnonPressure
from .base import Chunk, Process, Region, Workload
from .file_read import FileRead
from .fio import Fio
from .hot_chunks import HotChunks
from .memtier import Memtier
from .random_read import RandomRead
from .trace import TraceWorkload
from .xsbench import XSBench

WORKLOADS: dict[str, type[Workload]] = {w.name: w for w in (FileRead, Fio, RandomRead, AnonPressure,
                                                              HotChunks, TraceWorkload, Memtier, AnonBuild,
                                                              AnonBrowser, XSBench)}


def register(cls: type[Workload]) -> type[Workload]:
    WORKLOADS[cls.name] = cls
    return cls


def make_workload(name: str, params: dict | None = None, scale: float = 1.0) -> Workload:
    cls = WORKLOADS.get(name)
    if cls is None:
        raise ConfigError(f"unknown workload {name!r}; accepted: {', '.join(sorted(WORKLOADS))}")
    return cls(scale=scale, **(params or {}))


__all__ = ["Chunk", "Process", "Region", "Workload", "WORKLOADS", "make_workload", "register"]
