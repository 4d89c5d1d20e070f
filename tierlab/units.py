"""Parsing of sizes and durations as users write them ("4GiB", "128GB", "1.5G", "500ms")."""
from __future__ import annotations

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

_TIME_UNITS = {"ns": 1, "us": 1_000, "ms": 1_000_000, "s": 1_000_000_000, "min": 60_000_000_000}


def parse_size(value, key: str = "size") -> int:
    """Bytes from an int or a string such as '4GiB', '128GB', '2G', '512K', '100pages'.

    Binary suffixes (KiB, MiB, GiB, TiB and the bare K, M, G, T) are powers of 1024; KB, MB, GB, TB
    are powers of 1000, as in `dd` and the seed mails. Raises ConfigError naming `key`.
    """
    if isinstance(value, bool):
        raise ConfigError(f"{key}: expected a size such as 4GiB or 4096, got {value!r}")
    if isinstance(value, (int, float)):
        if value < 0:
            raise ConfigError(f"{key}: size must be >= 0, got {value!r}")
        return int(value)
    m = _SIZE_RE.match(str(value))
    if not m or m.group(2).lower() not in _SIZE_UNITS:
        raise ConfigError(
            f"{key}: cannot parse size {value!r}; accepted: a number with an optional unit "
            f"B, K/KiB, M/MiB, G/GiB, T/TiB (powers of 1024), KB/MB/GB/TB (powers of 1000), pages"
        )
    return int(float(m.group(1)) * _SIZE_UNITS[m.group(2).lower()])


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
