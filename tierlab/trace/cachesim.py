"""A cache-simulator face for traces: exact LRU/FIFO/CLOCK/OPT miss ratios and the LRU miss-ratio curve.

`cachesim` replays a trace's accesses (counts expanded; tasks and ops ignored: one object per page,
all objects of size 1) through the exact reference policies of `tierlab.core.reference`, which match
libCacheSim's LRU, FIFO, Clock and Belady miss for miss when its cache size is given in objects. `lru_mrc`
gives LRU's miss ratio at every size from one pass over the trace: an access hits an LRU cache of C
objects exactly when its stack distance is < C (`analysis.StackDistances`, O(n log n)).

Sizes are objects (pages), or a percentage of the trace's distinct objects ("10%": the integer part
of 10 % of them, at least 1), as libCacheSim's fractional cache sizes.
"""
from __future__ import annotations

import numpy as np

from ..core import reference
from ..errors import ConfigError
from .analysis import PageIds, StackDistances
from .format import CHUNK_RECORDS
from .readers import open_trace

POLICIES = tuple(reference.POLICY_CODES)  # lru, fifo, clock, opt
_SIZE_HELP = ("expected a number of objects >= 1 or a percentage in (0, 100] of the trace's "
              "distinct objects, e.g. 1000 or 10%")


def parse_policies(policies, key: str = "--policy") -> list[str]:
    """Policy names from 'lru,fifo' or a list; ConfigError naming `key` and what is accepted."""
    items = policies.split(",") if isinstance(policies, str) else list(policies)
    out = []
    for p in items:
        name = str(p).strip().lower()
        if name not in POLICIES:
            raise ConfigError(f"{key} {str(p).strip()!r}: unknown policy; accepted: {', '.join(POLICIES)}")
        if name not in out:
            out.append(name)
    if not out:
        raise ConfigError(f"{key}: expected at least one policy of {', '.join(POLICIES)}")
    return out


def parse_sizes(sizes, key: str = "--size") -> list[tuple[str, float]]:
    """('objects', n) or ('percent', p) items from '1000,10%' or a list of ints/strings."""
    items = sizes.split(",") if isinstance(sizes, str) else list(sizes)
    out = []
    for s in items:
        text = str(s).strip()
        try:
            if isinstance(s, (bool, np.bool_)):
                raise ValueError
            if text.endswith("%"):
                v = float(text[:-1])
                if not 0 < v <= 100:
                    raise ValueError
                out.append(("percent", v))
            else:
                if isinstance(s, (float, np.floating)) and not float(s).is_integer():
                    raise ValueError
                v = int(float(text)) if isinstance(s, (float, np.floating)) else int(text)
                if v < 1:
                    raise ValueError
                out.append(("objects", v))
        except (ValueError, OverflowError):
            raise ConfigError(f"{key} {text!r}: {_SIZE_HELP}") from None
    if not out:
        raise ConfigError(f"{key}: {_SIZE_HELP}")
    return out


def _resolve(sizes: list[tuple[str, float]], n_objects: int) -> list[int]:
    return [int(v) if kind == "objects" else max(1, int(n_objects * v / 100)) for kind, v in sizes]


def _dense_requests(trace, fmt) -> tuple[np.ndarray, int]:
    """Every access's dense object id (int32, counts expanded) and the number of objects."""
    src = open_trace(trace, fmt)
    ids = PageIds()
    parts = [np.repeat(ids.map(page).astype(np.int32), count.astype(np.int64))
             for _, page, _, count in src.iter_chunks(CHUNK_RECORDS)]
    return (np.concatenate(parts) if parts else np.zeros(0, np.int32)), ids.n


def cachesim(trace, policies="lru,fifo,clock", sizes="1%,10%", fmt: str | None = None):
    """Miss ratios of exact LRU/FIFO/CLOCK (libCacheSim's, unit-size objects) on a trace.

    trace: a path (any format `trace convert` reads; fmt forces one), a Trace or a TraceFile.
    policies: names or 'lru,fifo'; sizes: objects or percentages of the distinct objects, as a list
    or '1000,10%'. Returns a DataFrame, one row per policy x size: policy, size, requests, misses,
    miss_ratio.
    """
    import pandas as pd

    names, wanted = parse_policies(policies, "policies"), parse_sizes(sizes, "sizes")
    ids, n_objects = _dense_requests(trace, fmt)
    rows = []
    for name in names:
        for size in _resolve(wanted, n_objects):
            c = reference.simulate(ids, size, name)
            rows.append({"policy": name, "size": size, "requests": c.nr_requests,
                         "misses": c.nr_misses,
                         "miss_ratio": c.nr_misses / c.nr_requests if c.nr_requests else 0.0})
    return pd.DataFrame(rows, columns=["policy", "size", "requests", "misses", "miss_ratio"])


def lru_mrc(trace, sizes=None, fmt: str | None = None):
    """LRU miss-ratio curve in one pass (stack distances): a DataFrame with size, requests, misses,
    miss_ratio at `sizes` (as for `cachesim`), or at every size 1..distinct objects if None.
    Memory: one chunk plus O(distinct objects)."""
    import pandas as pd

    wanted = None if sizes is None else parse_sizes(sizes, "sizes")
    src = open_trace(trace, fmt)
    ids, sd, requests = PageIds(), StackDistances(), 0
    for _, page, _, count in src.iter_chunks(CHUNK_RECORDS):
        sd.add(ids.map(page), count, ids.n)
        requests += int(count.sum(dtype=np.uint64))
    size = (np.arange(1, ids.n + 1, dtype=np.int64) if wanted is None
            else np.array(_resolve(wanted, ids.n), np.int64))
    misses = sd.lru_misses(size)
    ratio = misses / requests if requests else np.zeros(len(size))
    return pd.DataFrame({"size": size, "requests": requests, "misses": misses, "miss_ratio": ratio})
