"""Build a YCSB-style SQLite database and the SQL of a YCSB workload-C run against it (read-only,
zipfian request distribution), for record.sh. Deterministic (seeded).

YCSB's core workload as its CoreWorkload, Utils.fnvhash64 and ScrambledZipfianGenerator describe it
(brianfrankcooper/YCSB, read, not copied): a table `usertable` of records keyed "user" + the FNV-1a
64-bit hash of the record number, 10 fields of 100 bytes; workload C reads whole records, the record
numbers drawn from a zipfian with constant 0.99 and scrambled by the same hash, so the hot records
are scattered over the key space (and so over the B-tree's leaves). One difference: YCSB's
ScrambledZipfianGenerator draws its zipfian over a fixed 10**10 items and folds them onto the
records with the hash modulo the record count; here the zipfian is over the records themselves,
which keeps the law's skew instead of the flatter mixture the folding makes.

    python ycsb_sqlite.py load  DB  [--records N]      # create and fill the database
    python ycsb_sqlite.py run   SQL [--records N] [--ops M]   # write the run's SELECTs to SQL
"""
import argparse
import sqlite3

import numpy as np

FNV_OFFSET = 0xCBF29CE484222325
FNV_PRIME = 0x100000001B3
MASK = (1 << 64) - 1


def fnv64(v: int) -> int:
    """YCSB's Utils.fnvhash64: FNV-1a over the 8 bytes of a long, low byte first (xor, then
    multiply), and the absolute value of the result as a signed 64-bit integer."""
    h = FNV_OFFSET
    for _ in range(8):
        h ^= v & 0xFF
        h = (h * FNV_PRIME) & MASK
        v >>= 8
    return abs(h - (1 << 64) if h >> 63 else h)


def key(i: int) -> str:
    return f"user{fnv64(i)}"


def zipf_numbers(n: int, ops: int, theta: float, rng) -> np.ndarray:
    """Record numbers 0..n-1: ranks drawn with P(rank r) ~ 1 / (r + 1)**theta, then scrambled by
    fnv64 mod n (see the module docstring for how YCSB differs)."""
    w = 1.0 / np.arange(1, n + 1, dtype=np.float64) ** theta
    cdf = np.cumsum(w)
    cdf /= cdf[-1]
    ranks = np.minimum(np.searchsorted(cdf, rng.random(ops)), n - 1)
    return np.array([fnv64(int(r)) % n for r in ranks], dtype=np.int64)


def load(db: str, records: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    con = sqlite3.connect(db)
    con.execute("PRAGMA page_size = 4096")
    con.execute("CREATE TABLE usertable (ycsb_key TEXT PRIMARY KEY, "
                + ", ".join(f"field{f} TEXT" for f in range(10)) + ")")
    alphabet = np.frombuffer(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", np.uint8)
    rows = []
    for i in range(records):
        fields = [alphabet[rng.integers(0, len(alphabet), 100)].tobytes().decode() for _ in range(10)]
        rows.append((key(i), *fields))
        if len(rows) == 5000:
            con.executemany(f"INSERT INTO usertable VALUES ({', '.join('?' * 11)})", rows)
            rows = []
    if rows:
        con.executemany(f"INSERT INTO usertable VALUES ({', '.join('?' * 11)})", rows)
    con.commit()
    con.close()


def run_sql(out: str, records: int, ops: int, theta: float, seed: int) -> None:
    rng = np.random.default_rng(seed + 1)
    nums = zipf_numbers(records, ops, theta, rng)
    with open(out, "w") as f:
        # sqlite's own page cache at its minimum (10 pages) and no mmap: nearly every B-tree page
        # the queries need is a pread() of the file, i.e. a request to the kernel's page cache
        f.write("PRAGMA cache_size = 10;\nPRAGMA mmap_size = 0;\n")
        for n in nums:
            f.write(f"SELECT * FROM usertable WHERE ycsb_key = '{key(int(n))}';\n")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=("load", "run"))
    ap.add_argument("path")
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--ops", type=int, default=100_000)
    ap.add_argument("--theta", type=float, default=0.99)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    if a.what == "load":
        load(a.path, a.records, a.seed)
    else:
        run_sql(a.path, a.records, a.ops, a.theta, a.seed)
