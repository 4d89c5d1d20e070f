"""Turn record.sh's `strace -y -e trace=pread64` log into a tierlab trace (.npz): one read of page
offset // 4096 of the database file per pread64() of it (a pread that spans pages reads each),
consecutive reads of the same page folded into one record with a count. Other files (the shared
libraries the loader reads) are dropped.

    python strace2trace.py pread.strace ycsb_c.npz [--file ycsb.db]
"""
import argparse
import re

import numpy as np

from tierlab.trace import Trace, fold_trace, save_trace

LINE = re.compile(r"pread64\(\d+<(?P<path>[^>]*)>, [^,]*, (?P<n>\d+), (?P<off>\d+)\) = (?P<ret>-?\d+)")


def pages_of(log: str, suffix: str) -> np.ndarray:
    out = []
    with open(log) as f:
        for ln, line in enumerate(f, 1):
            m = LINE.search(line)
            if m is None:
                if "pread64(" in line and "resumed" not in line and "unfinished" not in line:
                    raise SystemExit(f"{log}:{ln}: unparsed pread64 line: {line.strip()}")
                continue
            if not m["path"].endswith(suffix) or int(m["ret"]) <= 0:
                continue
            off, n = int(m["off"]), int(m["ret"])
            out.extend(range(off // 4096, (off + n - 1) // 4096 + 1))
    return np.asarray(out, dtype=np.int64)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("log")
    ap.add_argument("out")
    ap.add_argument("--file", default="ycsb.db")
    a = ap.parse_args()
    pages = pages_of(a.log, a.file)
    n = len(pages)
    t = fold_trace(Trace(np.zeros(n, np.int32), pages, np.zeros(n, np.uint8), np.ones(n, np.uint32), meta={}))
    save_trace(a.out, t.task, t.page, t.op, t.count,
               meta={"source": "SQLite 3.40.1 serving 100,000 YCSB workload-C reads (zipfian 0.99, "
                               "scrambled) of a 100,000-record usertable; strace of its pread64() calls "
                               "(data/traces/sqlite/README.md)",
                     "page_size": 4096, "kind": "file"})
    print(f"{n} page reads, {len(np.unique(pages))} distinct pages, {len(t.page)} records -> {a.out}")
