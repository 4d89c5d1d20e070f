"""tierlab: a simulator of Linux memory tiering (DRAM + CXL) built on the kernel's own mechanisms,
knobs and vmstat counters.

    from tierlab import Machine, Kernel, simulate, make_workload
    res = simulate(Machine.load("qemu-2node"), Kernel(numa_balancing=2, demotion_enabled=1),
                   make_workload("random-read", {"file_size": "4GiB"}), seed=7)
    res.counters["pgdemote_kswapd"]
"""
from .api import Result, Simulation, build, run_config, simulate
from .errors import CapacityError, ConfigError, TierlabError, TraceError
from .kernel import KNOBS, Kernel
from .machine import Machine
from .trace import cachesim, lru_mrc
from .workloads import WORKLOADS, make_workload

__version__ = "0.1.0"

__all__ = [
    "CapacityError", "ConfigError", "KNOBS", "Kernel", "Machine", "Result", "Simulation", "TierlabError",
    "TraceError", "WORKLOADS", "build", "cachesim", "lru_mrc", "make_workload", "run_config", "simulate",
]
