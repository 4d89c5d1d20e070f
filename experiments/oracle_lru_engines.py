"""The oracle entry lru-classic-fio's workload in the model alone, with several fio engines: the
engine table of docs/oracle.md's classic-LRU io_uring finding (capacities 176/2001 MiB, the guest's
MemFree; min_free_kbytes 6010, the guest's). In the guest the LRU counts do not depend on the engine.

    PYTHONPATH=. python experiments/oracle_lru_engines.py [psync io_uring-1 io_uring-8 io_uring-128]
"""
import dataclasses, sys, time
from tierlab import api
from tierlab.machine import Machine
from tierlab.oracle import guest as guest_mod

m = guest_mod.guest_machine(Machine.load("qemu-2node").scaled(4), 2)
caps = [176, 2001]
m = dataclasses.replace(m, nodes=[dataclasses.replace(nd, capacity_bytes=c << 20) for nd, c in zip(m.nodes, caps)])
base = {"rw": "randread", "size": "1536MiB", "file_policy": "bind:0", "norandommap": 1, "loops": 6, "log_ios": 65536}
variants = {"psync": {"ioengine": "psync"}, "io_uring-1": {"ioengine": "io_uring", "iodepth": 1},
            "io_uring-8": {"ioengine": "io_uring", "iodepth": 8}, "io_uring-128": {"ioengine": "io_uring", "iodepth": 128}}
names = sys.argv[1:] or list(variants)
cols = ["workingset_refault_file", "workingset_activate_file", "pgactivate", "pgdeactivate", "pageoutrun", "pgscan_kswapd", "pgscan_direct"]
print("| engine | simulated | " + " | ".join(cols) + " |", flush=True)
for n in names:
    t = time.time()
    res = api.build({"machine": m.to_dict(), "workload": "fio", "params": dict(base, **variants[n]),
                     "knobs": {"lru_gen": 0, "min_free_kbytes": 6010}, "scale": 4, "seed": 0}).run().result()
    c = res.counters
    def v(k):
        try:
            return int(c[k])
        except Exception:
            return int(c.loc[k]) if k in c.index else 0
    print(f"| {n} | {res.sim_time_s:.2f} s | " + " | ".join(f"{v(k):,}" for k in cols) + f" |  ({time.time()-t:.0f} s wall)", flush=True)
