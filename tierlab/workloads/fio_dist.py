"""fio's non-uniform `random_distribution`s: which block each I/O of a job reads.

As fio does it (lib/zipf.c, lib/gauss.c, hash.h; io_u.c's get_next_rand_offset takes the block
straight from the generator, so these never consult the random map):

- zipf:theta (default 1.1; theta 1.0 refused, as fio does): a rank from Gray et al.'s quick
  zipf generator -- a uniform u scaled by zeta(n, theta) picks rank 1 or 2 directly, else
  1 + n * (eta * u - eta + 1) ** (1 / (1 - theta)), with zeta summed over at most the first 10 M
  ranks (ZIPF_MAX_GEN);
- pareto:h (default 0.2; 0 < h < 1): rank (n - 1) * u ** (log h / log(1 - h));
- normal:dev (default 0; 0 <= dev < 100): the mean of 12 uniform draws over [0, n] (central limit),
  plus, with dev > 0, a uniform deviation of width ceil(n * dev / 100) (at most n / 2), halved
  until it stays below n.

Each rank is then spread over the file by fio's multiplicative hash (times the 64-bit golden-ratio
prime, modulo 2^64), offset by a per-job random `rand_off` (zipf, pareto) and taken modulo the
number of blocks: the hot blocks are scattered, and different ranks can land on one block, as in
fio. What differs: the uniform draws come from numpy's generator seeded by (seed, job), not fio's
Tausworthe generator, so the same distribution but not fio's exact sequence; fio's `center` (the
third field, zipf:theta:center) and the zoned distributions are not modelled and are refused.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from ..errors import ConfigError
from ..units import parse_number

GR_PRIME_64 = np.uint64(0x9E37FFFFFFFC0001)   # fio's hash.h: 2^63 + 2^61 - 2^57 + 2^54 - 2^51 - 2^18 + 1
FRAND32_MAX = float((1 << 32) - 1)
ZIPF_MAX_GEN = 10_000_000
GAUSS_ITERS = 12
DEFAULTS = {"zipf": 1.1, "pareto": 0.2, "normal": 0.0}     # fio's FIO_DEF_ZIPF, FIO_DEF_PARETO, no deviation
ACCEPTED = "random, zipf[:theta] (theta != 1), pareto[:h] (0 < h < 1), normal[:dev] (0 <= dev < 100)"


def parse(v, key: str = "random_distribution") -> tuple[str, float]:
    """fio's `random_distribution` value: (name, its parameter)."""
    text = str(v).strip().lower()
    name, _, arg = text.partition(":")
    if name not in ("random",) + tuple(DEFAULTS):
        raise ConfigError(f"{key}: {v!r} is not accepted; accepted: {ACCEPTED} (zoned and zoned_abs are not "
                          "modelled)")
    if name == "random":
        if arg:
            raise ConfigError(f"{key}: {v!r} is not accepted; accepted: random takes no parameter")
        return "random", 0.0
    if ":" in arg:
        raise ConfigError(f"{key}: {v!r} is not accepted: a distribution center (the third field) is not "
                          f"modelled; accepted: {ACCEPTED}")
    val = parse_number(arg, key, -1e9, 1e9, ACCEPTED) if arg else DEFAULTS[name]
    ok = {"zipf": val > 0.0 and val != 1.0, "pareto": 0.0 < val < 1.0, "normal": 0.0 <= val < 100.0}[name]
    if not ok:
        raise ConfigError(f"{key}: {v!r} is out of range; accepted: {ACCEPTED}")
    return name, float(val)


def _hash(x: np.ndarray) -> np.ndarray:
    """fio's __hash_u64 (= __hash_long on 64-bit): times the golden-ratio prime, modulo 2^64."""
    with np.errstate(over="ignore"):
        return x.astype(np.uint64) * GR_PRIME_64


def _uniform(gen, shape) -> np.ndarray:
    """fio's `__rand() / FRAND32_MAX`: a 32-bit draw over its maximum, in [0, 1]."""
    return gen.integers(0, 1 << 32, shape, dtype=np.uint64).astype(np.float64) / FRAND32_MAX


@lru_cache(maxsize=64)
def zeta(n: int, theta: float) -> float:
    """zeta(n, theta) as zipf_init sums it (over at most ZIPF_MAX_GEN ranks)."""
    return float(np.sum((1.0 / np.arange(1, min(n, ZIPF_MAX_GEN) + 1, dtype=np.float64)) ** theta))


def zipf_ranks(u: np.ndarray, n: int, theta: float) -> np.ndarray:
    """0-based ranks of zipf_next for uniform draws u."""
    zetan = zeta(n, theta)
    zeta2 = 1.0 + 0.5 ** theta
    alpha = 1.0 / (1.0 - theta)
    eta = (1.0 - (2.0 / n) ** (1.0 - theta)) / (1.0 - zeta2 / zetan)
    rz = u * zetan
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        tail = n * np.power(eta * u - eta + 1.0, alpha)
    tail = np.floor(np.nan_to_num(np.clip(tail, 0.0, 2.0 ** 63), nan=0.0, posinf=2.0 ** 63))
    val = np.where(rz < 1.0, 1.0, np.where(rz < 1.0 + 0.5 ** theta, 2.0, 1.0 + tail))
    return val.astype(np.uint64) - np.uint64(1)


def pareto_ranks(u: np.ndarray, n: int, h: float) -> np.ndarray:
    """0-based ranks of pareto_next for uniform draws u."""
    return np.floor((n - 1) * np.power(u, np.log(h) / np.log(1.0 - h))).astype(np.uint64)


def gauss_values(gen, count: int, n: int, dev: float) -> np.ndarray:
    """gauss_next's values before the hash: the rounded-up mean of 12 draws modulo n + 1, plus the
    deviation, halved (towards zero) while the sum would reach n (compared as fio's unsigned
    arithmetic does, so a negative sum counts as too large)."""
    draws = gen.integers(0, 1 << 32, (count, GAUSS_ITERS), dtype=np.uint64) % np.uint64(n + 1)
    s = (draws.sum(axis=1) + np.uint64(GAUSS_ITERS - 1)) // np.uint64(GAUSS_ITERS)
    stddev = 0
    if dev != 0.0:
        stddev = min(int(np.ceil(n * dev / 100.0)), n // 2)
    if stddev:
        r = gen.integers(0, 1 << 32, count, dtype=np.uint64).astype(np.float64)
        d = (stddev * (r / (FRAND32_MAX + 1.0))).astype(np.int64) - stddev // 2
        while True:
            with np.errstate(over="ignore"):
                big = (d.view(np.uint64) + s) >= np.uint64(n)
            if not big.any():
                break
            d[big] = np.trunc(d[big] / 2).astype(np.int64)
        with np.errstate(over="ignore"):
            s = s + d.view(np.uint64)
    return s


class BlockDistribution:
    """One job's generator of blocks under a non-uniform distribution (fio's per-file zipf_state
    or gauss_state)."""

    def __init__(self, name: str, param: float, nblocks: int, gen):
        self.name, self.param, self.n, self.gen = name, param, int(nblocks), gen
        # shared_rand_init: the first draw of the job's generator (zipf, pareto); gauss has none
        self.rand_off = np.uint64(gen.integers(0, 1 << 32)) if name in ("zipf", "pareto") else np.uint64(0)

    def blocks(self, count: int) -> np.ndarray:
        if self.name == "normal":
            v = gauss_values(self.gen, count, self.n, self.param)
        else:
            u = _uniform(self.gen, count)
            v = zipf_ranks(u, self.n, self.param) if self.name == "zipf" else pareto_ranks(u, self.n, self.param)
        with np.errstate(over="ignore"):
            return ((_hash(v) + self.rand_off) % np.uint64(self.n)).astype(np.int64)
