"""Wall-clock comparison of tierlab's exact LRU with libCacheSim's LRU on one zipf trace, for direct
ids and for sparse (hash-remapped) ids. The measurement itself is `tierlab.bench.compare_with_libcachesim`
(also what `python -m tierlab bench` reports); see its docstring for what each side times.

Run: ``python -m benchmarks.libcachesim_compare``.
"""
from __future__ import annotations

from tierlab.bench import compare_with_libcachesim

if __name__ == "__main__":
    for sparse in (False, True):
        for key, value in compare_with_libcachesim(sparse_ids=sparse, repeats=3).items():
            print(f"{key:24s} {value}")
        print()
