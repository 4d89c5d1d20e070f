"""Kernel knobs: sysctls, sysfs and debugfs settings with the kernel's names and defaults.

`Kernel(numa_balancing=2, demotion_enabled=1)` validates every name and value; unknown names and
out-of-range values raise ConfigError naming the knob and what is accepted. `python -m tierlab list
knobs` prints this table.
"""
from __future__ import annotations

from dataclasses import dataclass

from .errors import ConfigError
from .units import parse_size


@dataclass(frozen=True)
class Knob:
    name: str
    default: float | None      # None: computed from the machine (min_free_kbytes)
    unit: str
    lo: float
    hi: float
    where: str
    models: str
    choices: dict | None = None  # enum knobs: name -> value

    def parse(self, value) -> float:
        if self.choices is not None and isinstance(value, str) and not _is_number(value):
            key = value.strip().lower()
            if key not in self.choices:
                raise ConfigError(f"{self.name}: {value!r} is not accepted; accepted: "
                                  f"{', '.join(f'{k} ({v})' for k, v in self.choices.items())}")
            return float(self.choices[key])
        if self.unit == "pages" and isinstance(value, str) and not _is_number(value):
            v = parse_size(value, self.name) // 4096
        elif self.unit == "orders" and isinstance(value, str) and not _is_number(value):
            v = float(_orders_of_sizes(value, self.name))
        else:
            try:
                v = float(value)
            except (TypeError, ValueError):
                raise ConfigError(f"{self.name}: expected a number in [{_fmt(self.lo)}, {_fmt(self.hi)}], "
                                  f"got {value!r}") from None
        if not (self.lo <= v <= self.hi):
            raise ConfigError(f"{self.name}: {value!r} is out of range; accepted: {_fmt(self.lo)} .. {_fmt(self.hi)}"
                              + (f" or one of {', '.join(self.choices)}" if self.choices else ""))
        if self.unit == "orders" and (int(v) != v or int(v) & 3):
            raise ConfigError(f"{self.name}: {value!r} is not accepted; accepted: a bitmask of orders 2..9 "
                              "(bits 0 and 1 clear: anon folios are never order 1, order 0 is always allowed) "
                              "or a list of sizes 16K..2M")
        if self.choices is not None and v not in self.choices.values():
            raise ConfigError(f"{self.name}: {value!r} is not accepted; accepted: "
                              f"{', '.join(f'{k} ({v})' for k, v in self.choices.items())}")
        return v

    def format(self, value: float) -> str:
        """A value as the knob is written: an enum's name, an orders mask as its sizes, else the number."""
        if self.choices is not None:
            names = [k for k, v in self.choices.items() if v == value]
            if names:
                return names[0]
        if self.unit == "orders":
            sizes = [f"{4 << o}K" if o < 8 else f"{(4 << o) >> 10}M" for o in range(2, 10) if int(value) >> o & 1]
            return ",".join(sizes) or "never"
        return f"{value:g}"


def _orders_of_sizes(value: str, name: str) -> int:
    """"16K,64K,2M" -> the bitmask of their orders (each a power of two from 16 KiB to 2 MiB). The
    kernel's own spelling (its directories are hugepages-16kB, hugepages-2048kB) is read as KiB,
    and "never" is no size."""
    if value.strip().lower() == "never":
        return 0
    mask = 0
    for part in value.split(","):
        part = part.strip()
        size = parse_size(part[:-2] + "KiB" if part.endswith("kB") else part, name)
        order = (size // 4096).bit_length() - 1
        if size < 16384 or size > 2 << 20 or 4096 << order != size:
            hint = (f" ({part!r} is {size:,} bytes: KB and MB are decimal; write K, KiB or kB)"
                    if size % 1000 == 0 else "")
            raise ConfigError(f"{name}: {part!r} is not accepted; accepted: sizes 16K, 32K, ... 2M "
                              f"(powers of two; 16kB and 2048kB as in hugepages-<size>kB), comma-separated, "
                              f"or never{hint}")
        mask |= 1 << order
    return mask


def _is_number(s: str) -> bool:
    try:
        float(s)
        return True
    except ValueError:
        return False


def _fmt(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


KNOBS: dict[str, Knob] = {k.name: k for k in (
    Knob("numa_balancing", 0, "bitmask", 0, 3, "/proc/sys/kernel/numa_balancing",
         "NUMA balancing mode: bit0 NORMAL, bit1 MEMORY_TIERING (2 = tiering only, 3 = both)"),
    Knob("demotion_enabled", 0, "bool", 0, 1, "/sys/kernel/mm/numa/demotion_enabled",
         "reclaim migrates folios to the next lower tier instead of evicting them"),
    Knob("watermark_scale_factor", 10, "1/10000", 1, 3000, "/proc/sys/vm/watermark_scale_factor",
         "gap between min/low/high/promo watermarks as a fraction of the node"),
    Knob("min_free_kbytes", None, "KiB", 128, 2**40, "/proc/sys/vm/min_free_kbytes",
         "reserve that sets WMARK_MIN; default sqrt(16 * memory KiB) clamped to [128, 262144]"),
    Knob("swappiness", 60, "", 0, 200, "/proc/sys/vm/swappiness",
         "anon vs file reclaim balance (anon share = swappiness / 200)"),
    Knob("swap_size", 0, "pages", 0, 2**40, "swapon",
         "swap space in pages (or a size such as 8GiB); 0 = no swap device"),
    Knob("hot_threshold_ms", 1000, "ms", 1, 2**31, "/sys/kernel/debug/sched/numa_balancing/hot_threshold_ms",
         "hint-fault latency below which a slow-tier folio is hot (tiering mode)"),
    Knob("promote_rate_limit_MBps", 65536, "MB/s", 0, 2**31, "/proc/sys/kernel/numa_balancing_promote_rate_limit_MBps",
         "promotion rate limit per destination node; the page-cache RFC v3 also caps each task's list at this many pages"),
    Knob("scan_period_max_ms", 60000, "ms", 1, 2**31, "/sys/kernel/debug/sched/numa_balancing/scan_period_max_ms",
         "maximum scan period; also the hot-threshold adjustment period"),
    Knob("scan_period_min_ms", 1000, "ms", 1, 2**31, "/sys/kernel/debug/sched/numa_balancing/scan_period_min_ms",
         "minimum NUMA scan period (scaled down by the number of scan windows of the task's RSS)"),
    Knob("scan_delay_ms", 1000, "ms", 0, 2**31, "/sys/kernel/debug/sched/numa_balancing/scan_delay_ms",
         "delay before a new mm's first NUMA scan"),
    Knob("scan_size_mb", 256, "MiB", 1, 2**20, "/sys/kernel/debug/sched/numa_balancing/scan_size_mb",
         "PTEs made PROT_NONE per scan pass (up to 8x as much address space walked)"),
    Knob("pagecache_promotion_enabled", 0, "bool", 0, 1, "/sys/kernel/mm/numa/pagecache_promotion_enabled",
         "RFC (Gregory Price, v3): promote unmapped page cache from folio_mark_accessed"),
    Knob("pagecache_promotion_cap", 0, "enum", 0, 1, "RFC version",
         "rate_limit (v3: per-task list capped at promote_rate_limit_MBps pages per syscall) or unlimited (v1/v2)",
         choices={"rate_limit": 0, "unlimited": 1}),
    Knob("pagecache_promotion_order", 0, "enum", 0, 1, "RFC version",
         "add_tail (v3: promote in access order) or add (earlier: reverse order)",
         choices={"add_tail": 0, "add": 1}),
    Knob("lru_batch_size", 31, "folios", 1, 31, "PAGEVEC_SIZE / folio_batch",
         "per-CPU lru_add batch size (15 before 6.8, 31 after)"),
    Knob("access_time_bits", 21, "bits", 12, 32, "LAST_CPUPID_SHIFT",
         "width of the folio access-time field used for hint-fault latency (21 with NR_CPUS=8192)"),
    Knob("sched_latency_ns", 6_000_000, "ns", 100_000, 1_000_000_000,
         "sysctl kernel.sched_latency_ns (to 5.12; debugfs sched/latency_ns 5.13-6.5; CFS only, gone with EEVDF in 6.6)",
         "CFS period shared by up to latency/min_granularity runnable tasks; the boot value before "
         "the CPU-count factor (sched_tunable_scaling)"),
    Knob("sched_min_granularity_ns", 750_000, "ns", 100_000, 1_000_000_000,
         "sysctl kernel.sched_min_granularity_ns (to 5.12; debugfs sched/min_granularity_ns 5.13-6.5, base_slice_ns in EEVDF)",
         "smallest CFS slice; beyond latency/min_granularity runnable tasks the period grows with them"),
    Knob("sched_wakeup_granularity_ns", 1_000_000, "ns", 0, 1_000_000_000,
         "sysctl kernel.sched_wakeup_granularity_ns (to 5.12; debugfs sched/wakeup_granularity_ns 5.13-6.5; CFS only)",
         "a woken entity (kswapd) preempts the running task when it is this much behind in vruntime"),
    Knob("sched_tunable_scaling", 1, "enum", 0, 2, "sysctl kernel.sched_tunable_scaling (to 5.12; debugfs sched/tunable_scaling from 5.13)",
         "the three sched_*_ns values are multiplied by 1 (none), 1 + ilog2(min(CPUs, 8)) (log) or "
         "min(CPUs, 8) (linear)", choices={"none": 0, "log": 1, "linear": 2}),
    Knob("read_ahead_kb", 128, "KiB", 0, 2**20, "/sys/block/<dev>/queue/read_ahead_kb",
         "maximum readahead window of the device files live on (VM_READAHEAD_PAGES = 128 KiB; 0 = off)"),
    Knob("hint_fault_latency", 0, "enum", 0, 1,
         "RFC version (Bharata B Rao, 'sched/numa: Fault count based NUMA hint fault latency', 2024)",
         "tiering-mode hotness metric: time (mainline: ms from the scan to the hint fault, hot below "
         "hot_threshold_ms) or fault_count (RFC patch 1: the mm's hint faults in between, hot below "
         "fault_count_threshold; no threshold adjustment)", choices={"time": 0, "fault_count": 1}),
    Knob("fault_count_threshold", 1_000_000, "faults", 0, 2**32 - 1,
         "/sys/kernel/debug/sched/numa_balancing/fault_count_threshold (RFC patch 1)",
         "hint_fault_latency=fault_count: a slow-tier folio is hot when fewer hint faults of its mm "
         "than this came between its scan and its hint fault"),
    Knob("scan_restamp_protnone", 0, "bool", 0, 1,
         "RFC patch 2 (Bharata B Rao, 'mm: Update hint fault count for pages that are skipped during scanning', 2024)",
         "the NUMA scanner stamps slow-tier folios whose PTE is already PROT_NONE (and leaves the PTE "
         "alone) instead of skipping them; either latency metric"),
    Knob("init_on_alloc", 0, "bool", 0, 1, "kernel command line init_on_alloc=",
         "1: every page is zeroed when allocated (CONFIG_INIT_ON_ALLOC_DEFAULT_ON, on in Ubuntu and Fedora "
         "kernels): a page-cache folio is cleared before the device fills it (clear_page_erms)"),
    Knob("lru_gen", 0, "enum", 0, 7, "/sys/kernel/mm/lru_gen/enabled",
         "multi-gen LRU (core/mglru.py) instead of the active/inactive lists: n (0, classic LRU), core (0x1: "
         "generations, tiers, eviction; mapped pages aged only by look-around), walk (0x3: aging also walks "
         "the page tables, LRU_GEN_MM_WALK), y (0x7, CONFIG_LRU_GEN_ENABLED's default; 0x4 changes nothing here)",
         choices={"n": 0, "core": 1, "walk": 3, "y": 7}),
    Knob("min_ttl_ms", 0, "ms", 0, 2**31, "/sys/kernel/mm/lru_gen/min_ttl_ms",
         "MGLRU thrash protection: kswapd calls the OOM killer rather than evict a generation younger than this (0 = off)"),
    Knob("pagecache_promotion_lru_gen", 0, "enum", 0, 2, "tierlab proposal (seed 000 with MGLRU)",
         "where page-cache promotion candidates come from under MGLRU, where the RFC's hook is never reached: "
         "off (the RFC as posted), refs (an access that leaves the folio at 4+ accesses through fds, tier >= 2: "
         "the RFC's 4th-access rule), tier (an access to a folio sort_folio would protect: tier above the PID "
         "controller's last tier_idx for file, or saturated refs)",
         choices={"off": 0, "refs": 1, "tier": 2}),
    Knob("migrc", 0, "enum", 0, 1, "MIGRC patch series v8 (Byungchul Park, 2024-02-19; not merged; no sysctl "
         "since v4: a kernel built with it has it on)",
         "'Migration Read Copy' (core/tlb.py): a demotion or NUMA migration of a small folio mapped only by "
         "read-only, clean PTEs skips the TLB shootdown and keeps the source folio until a later flush "
         "covers the CPUs, a write-protect fault or allocation pressure frees it. With migration_entry_ad=1 "
         "(the default) a migrated page keeps its PTE's dirty bit, so memory written before it migrates is "
         "never deferred: a workload that writes all its memory first (xsbench) runs exactly as with migrc "
         "off; clean read-only mappings of a file are deferred either way",
         choices={"off": 0, "on": 1}),
    Knob("migrate_batch_flush", 1, "bool", 0, 1, "6.4+: \"migrate_pages: batch flushing TLB\" (Huang Ying, "
         "2023; migrate_pages_batch); no sysctl",
         "1: migrate_pages() unmaps a batch of folios with TTU_BATCH_FLUSH and flushes their CPUs once at the "
         "end (try_to_unmap_flush: one whole flush per batch); 0: as before 6.4, each folio's PTEs are "
         "flushed as it is unmapped (ptep_clear_flush: a one-page shootdown per PTE), for the ablation. "
         "Demotion and page-cache promotion; MIGRC needs 1"),
    Knob("anon_folio_orders", 0, "enum", 0, 5,
         "seed 001 (variable-order large anon folios v1/v2, Ryan Roberts 2023) and 6.8+ multi-size THP",
         "the order of a new anon folio at a write fault (core/huge_memory.py): region (each region's own "
         "order, the default), baseline-4k (order 0), v1 (arch_wants_pte_order, else the highest lower "
         "order that fits and is unpopulated; on allocation failure the next lower), v2 (the same choice, "
         "failure falls to order 0), v2-simple-order (arch_wants_pte_order or 0), mthp (the highest order "
         "of huge_anon_orders_always that fits and is unpopulated, then each lower one on failure)",
         choices={"region": 0, "baseline-4k": 1, "v1": 2, "v2-simple-order": 3, "v2": 4, "mthp": 5}),
    Knob("arch_wants_pte_order", 4, "order", 2, 9, "seed 001 arch_wants_pte_order() (arm64: contpte, 64 KiB)",
         "the preferred anon folio order of the v1, v2 and v2-simple-order policies (4: 64 KiB); refused "
         "with anon_folio_orders=region, ignored by the others"),
    Knob("huge_anon_orders_always", 1 << 9, "orders", 0, (1 << 10) - 4,
         "sysfs transparent_hugepage/hugepages-<size>kB/enabled = always, one file per size (6.8+)",
         "the anon folio orders the mthp policy may use, as a bitmask of orders 2..9 or a list of sizes "
         "(\"16K,64K,2M\", or 16kB as the sysfs directories spell it, or never); default 2M only (top-level "
         "THP always, the other sizes never). Needs anon_folio_orders=mthp (refused with region, ignored "
         "by v1/v2)"),
    Knob("migration_entry_ad", 1, "bool", 0, 1, "mm/swapfile.c swap_migration_ad_supported (boot-time)",
         "migration entries keep the PTE's young and dirty bits (6.0+), so a migrated folio's new PTE is as "
         "dirty as the old one; the kernel sets it when arch_max_swapfile_size() >= 2^SWP_MIG_TOTAL_BITS, "
         "which x86 CPUs affected by L1TF (the swap-offset limit of the PTE-inversion mitigation) fail: then "
         "the new PTE is clean"),
)}


class Kernel:
    """Kernel settings. Unset knobs take the kernel's default."""

    def __init__(self, **values):
        self._values: dict[str, float] = {}
        for k, v in values.items():
            self.set(k, v)

    def set(self, name: str, value) -> "Kernel":
        knob = KNOBS.get(name)
        if knob is None:
            raise ConfigError(f"unknown knob {name!r}; accepted knobs: {', '.join(KNOBS)}")
        self._values[name] = knob.parse(value)
        return self

    def get(self, name: str, machine_pages: int | None = None) -> float:
        if name not in KNOBS:
            raise ConfigError(f"unknown knob {name!r}; accepted knobs: {', '.join(KNOBS)}")
        if name in self._values:
            return self._values[name]
        if KNOBS[name].default is None:
            from .core.mmzone import default_min_free_kbytes
            return float(default_min_free_kbytes(machine_pages or 0))
        return float(KNOBS[name].default)

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            return self.get(name)
        except ConfigError as e:
            raise AttributeError(str(e)) from None

    def replace(self, **values) -> "Kernel":
        k = Kernel()
        k._values = dict(self._values)
        for n, v in values.items():
            k.set(n, v)
        return k

    def to_dict(self) -> dict:
        return dict(self._values)

    @classmethod
    def from_dict(cls, d: dict) -> "Kernel":
        return cls(**d)

    def __eq__(self, other) -> bool:
        return isinstance(other, Kernel) and self._values == other._values

    def __repr__(self) -> str:
        return f"Kernel({', '.join(f'{k}={KNOBS[k].format(v)}' for k, v in self._values.items())})"

    def check_combination(self) -> None:
        """Refuse a knob that only some anon fault order policy reads, set while `anon_folio_orders`
        is left at `region`, which reads neither: in the kernel the per-size switches are the
        policy, here the policy must be chosen too. (v1/v2 ignore huge_anon_orders_always and mthp
        ignores arch_wants_pte_order: allowed, so one mask can sweep across policies.)"""
        if self.get("migrc") and not self.get("migrate_batch_flush"):
            raise ConfigError("migrc: on needs migrate_batch_flush=1 (MIGRC defers flushes inside "
                              "migrate_pages_batch()'s batched flush); accepted: migrc=off, or migrate_batch_flush=1")
        if self.get("migrc") and self.get("migration_entry_ad"):
            import warnings
            from .errors import LimitedEffectWarning
            warnings.warn("migrc=on with migration_entry_ad=1 (the default): a migrated page keeps its PTE's dirty "
                          "bit, so anonymous memory written before it migrates is never deferred and MIGRC defers "
                          "only clean read-only mappings (mmap'd files); a workload that writes its memory first "
                          "runs as with migrc off. migration_entry_ad=0 is the seed 004 guest's setting",
                          LimitedEffectWarning, stacklevel=2)
        if self.get("anon_folio_orders") != KNOBS["anon_folio_orders"].choices["region"]:
            return
        readers = {"huge_anon_orders_always": ("mthp",), "arch_wants_pte_order": ("v1", "v2", "v2-simple-order")}
        for name, policies in readers.items():
            if name in self._values:
                raise ConfigError(f"{name}: read only by anon_folio_orders={' or '.join(policies)}, and "
                                  f"anon_folio_orders is region (each region's own folio order); accepted: set "
                                  f"anon_folio_orders as well (e.g. --set anon_folio_orders={policies[0]})")
