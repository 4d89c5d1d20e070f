"""The real kernel as the oracle: run a tierlab workload in a Linux 6.12 guest (QEMU, a lower-tier
memory node from HMAT) and in the model, on the same machine and knobs, and compare vmstat counters.

    from tierlab.oracle import run_oracle
    run = run_oracle("random-read", {"target": "anon", "file_size": "384MiB", "policy": "bind:0"},
                     {"demotion_enabled": 1}, machine="qemu-2node", scale=4)
    run.table()          # counter, guest, model, ratio

Modules: build (kernel package, programs, initramfs, disk image; cached), guest (the QEMU machine
from a preset, the run script, booting), programs (workload -> C program), console (the transcript
-> GuestResult), compare (one run, side by side), suite (the per-mechanism comparison and
docs/oracle.md), cli (`tierlab oracle`). See docs/oracle.md.
"""
from .build import Unavailable
from .console import GuestResult, parse_console
from .compare import OracleRun, run_oracle, side_by_side

__all__ = ["GuestResult", "OracleRun", "Unavailable", "parse_console", "run_oracle", "side_by_side"]
