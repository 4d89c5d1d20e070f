"""The model alone on `promote-xsbench`'s machine, MIGRC on and off on the same configuration
(docs/oracle.md, "MIGRC on tierlab's kernel"). The suite's model column takes each node's capacity
from the guest's MemFree before the workload, which differs by a few hundred kB between boots, so
its plain and MIGRC columns are not the same machine; this runs both on one, for a few node-0
capacities around the guest's, with migration_entry_ad 1 (the model's default, and what the
-cpu max guest has) and 0 (an L1TF-affected CPU; seed 004's fit).

    PYTHONPATH=. python experiments/oracle_migrc_model.py [NODE0_KB ...]
"""
from __future__ import annotations

import dataclasses
import sys

from tierlab import api
from tierlab.machine import Machine
from tierlab.oracle import guest, suite

ROWS = ("nr_tlb_remote_flush", "nr_tlb_remote_flush_received", "nr_tlb_local_flush_all", "nr_tlb_local_flush_one",
        "numa_pages_migrated", "pgmigrate_success", "pgpromote_success", "pgdemote_kswapd")
NODE1_KB = 2003 * 1024            # the guest's node-1 MemFree in the suite runs (2002-2003 MiB)


def run(node0_kb: int, migrc: int, ad: int) -> dict:
    e = next(x for x in suite.ENTRIES if x.name == "promote-xsbench")
    m = guest.guest_machine(Machine.load(e.machine).scaled(e.scale), e.cpus)
    caps = (node0_kb * 1024, NODE1_KB * 1024)
    m = dataclasses.replace(m, nodes=tuple(dataclasses.replace(nd, capacity_bytes=c) for nd, c in zip(m.nodes, caps)))
    knobs = dict(e.knobs, min_free_kbytes=6052, migrc=migrc, migration_entry_ad=ad)
    res = api.build({"machine": m.to_dict(), "workload": e.workload, "params": e.params, "knobs": knobs,
                     "scale": e.scale, "seed": 0}).run().result()
    return {c: int(res.counters[c]) for c in ROWS}


def main(argv: list[str]) -> int:
    import warnings
    warnings.simplefilter("ignore")
    node0 = [int(a) for a in argv] or [225_000, 226_000]
    print("| node 0 kB | migration_entry_ad | " + " | ".join(ROWS) + " |")
    print("|---" * (len(ROWS) + 2) + "|")
    for kb in node0:
        for ad in (1, 0):
            off, on = run(kb, 0, ad), run(kb, 1, ad)
            print(f"| {kb:,} | {ad} | " + " | ".join(
                f"{off[c]:,} -> {on[c]:,} ({100.0 * (on[c] / off[c] - 1):+.1f} %)" if off[c] else f"{off[c]} -> {on[c]}"
                for c in ROWS) + " |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
