"""Parsing of sizes and durations as users write them ("4GiB", "128GB", "1.5G", "500ms")."""
from __future__ import annotations

import math
import re

from .errors import ConfigError

PAGE_SIZE = 4096
PAGE_SHIFT = 12

_SIZE_UNITS = {
    "": 1, "b": 1,
    "k": 1 << 10, "kb": 1000, "kib": 1 << 10,
    "m": 1 << 20, "mb": 1000**2, "mib": 1 << 20,
    "g": 1 << 30, "gb": 1000**3, "gib": 1 << 30,
    "t": 1 << 40, "tb": 1000**4, "tib": 1 << 40,
    "p": 4096, "page": 4096, "pages": 4096,
}
_SIZE_RE = re.compile(r"^\s*([0-9]+(?:\.[0-9]*)?(?:[eE][0-9]+)?)\s*([A-Za-z]*)\s*$")

MAX_SIZE = 1 << 60   # 1 EiB: far beyond any machine; keeps page counts in int64

_TIME_UNITS = {"ns": 1, "us": 1_000, "ms": 1_000_000, "s": 1_000_000_000, "min": 60_000_000_000}


def parse_size(value, key: str = "size") -> int:
    """Bytes from an int or a string such as '4GiB', '128GB', '2G', '512K', '100pages'.

    Binary suffixes (KiB, MiB, GiB, TiB and the bare K, M, G, T) are powers of 1024; KB, MB, GB, TB
    are powers of 1000, as in `dd` and the seed mails. Raises ConfigError naming `key`.
    """
    if isinstance(value, bool):
        raise ConfigError(f"{key}: expected a size such as 4GiB or 4096, got {value!r}")
    if isinstance(value, (int, float)):
        n = float(value)
    else:
        m = _SIZE_RE.match(str(value))
        if not m or m.group(2).lower() not in _SIZE_UNITS:
            raise ConfigError(
                f"{key}: cannot parse size {value!r}; accepted: a number with an optional unit "
                f"B, K/KiB, M/MiB, G/GiB, T/TiB (powers of 1024), KB/MB/GB/TB (powers of 1000), pages"
            )
        n = float(m.group(1)) * _SIZE_UNITS[m.group(2).lower()]
    if not 0 <= n <= MAX_SIZE:   # also refuses nan and inf
        raise ConfigError(f"{key}: size {value!r} is out of range; accepted: 0 .. {format_bytes(MAX_SIZE)}")
    return value if isinstance(value, int) else int(n)


def parse_scale(value, key: str = "scale") -> float:
    """The `scale` divisor: a finite number > 0 (nan, inf, 0, negatives and non-numbers refused)."""
    x = _as_float(value)
    if not (x > 0 and math.isfinite(x)):
        raise ConfigError(f"{key}: {value!r} is not accepted; accepted: a finite number > 0 (e.g. 64)")
    return x


def _as_float(value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return math.nan
    try:
        return float(value)
    except (ValueError, OverflowError):
        return math.nan


def parse_int(value, key: str, lo: int, hi: int) -> int:
    """An integer in [lo, hi]: an int, or a number or string with an integral value ('1e6');
    1.5, nan, inf, booleans and values out of range are refused (never cut)."""
    if isinstance(value, int) and not isinstance(value, bool):
        x = value
    else:
        f = _as_float(value)
        x = int(f) if math.isfinite(f) and f.is_integer() else None
    if x is None or not lo <= x <= hi:
        raise ConfigError(f"{key}: {value!r} is not accepted; accepted: an integer in {lo} .. {hi}")
    return x


def parse_number(value, key: str, lo: float, hi: float, accepted: str | None = None) -> float:
    """A finite number in [lo, hi] (nan, inf, booleans and non-numbers refused)."""
    x = _as_float(value)
    if not (lo <= x <= hi and math.isfinite(x)):
        raise ConfigError(f"{key}: {value!r} is not accepted; accepted: {accepted or f'a number in {lo:g} .. {hi:g}'}")
    return x


def parse_duration_ns(value, key: str = "duration") -> int:
    """Nanoseconds from a number (taken as ns) or a string such as '500ms', '2s', '10us'."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return int(value)
    m = re.match(r"^\s*([0-9]+(?:\.[0-9]*)?)\s*([a-z]*)\s*$", str(value))
    if not m or m.group(2) not in _TIME_UNITS:
        raise ConfigError(f"{key}: cannot parse duration {value!r}; accepted units: ns, us, ms, s, min")
    return int(float(m.group(1)) * _TIME_UNITS[m.group(2)])


def format_bytes(n: int) -> str:
    for unit, size in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.4g} {unit}"
    return f"{n} B"
