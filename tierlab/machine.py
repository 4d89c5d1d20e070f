"""Machines: NUMA nodes with capacity, tier, CPUs and access costs, loaded from TOML presets.

A preset is a TOML file (see tierlab/machines/*.toml and docs/machines.md); `Machine.load(name or
path)` reads one. Tiers follow mm/memory-tiers.c: a node's tier is its abstract distance >> 7
(MEMTIER_CHUNK_BITS); the top tier is the fastest tier that has a node with CPUs, and every node at
or above it is top tier (node_is_toptier()). Demotion targets are the nodes of the next lower tier
that has nodes, at the smallest SLIT distance (establish_demotion_targets()).
"""
from __future__ import annotations

import dataclasses
import math
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from .errors import ConfigError
from .units import PAGE_SIZE, parse_int, parse_number, parse_scale, parse_size

PRESET_DIR = Path(__file__).parent / "machines"
MEMTIER_CHUNK_BITS = 7

_NODE_KEYS = {
    "name": "node name",
    "capacity": "memory size, e.g. '768GB' or '1GiB'",
    "cpus": "CPUs on the node (0 for a CPU-less CXL node)",
    "adistance": "memory-tier abstract distance (DRAM 576, dax/kmem CXL default 2880)",
    "seq_4k_ns": "ns to copy a 4 KiB page from this node into a local buffer, one stream, unloaded",
    "rand_line_ns": "ns idle latency of a random cache-line read",
    "write_line_ns": "ns cost of a random cache-line store",
    "bandwidth_GBps": "peak read bandwidth of the node, GB/s",
}
_MACHINE_KEYS = {"name", "description", "source", "loaded_latency_c", "distance", "nodes", "sources", "devices", "tlb"}
_TLB_KEYS = {
    "dtlb_entries": "first-level data TLB entries for 4 KiB pages, per CPU",
    "dtlb_ways": "its associativity (entries / ways must be a power of two)",
    "itlb_entries": "first-level instruction TLB entries for 4 KiB pages, per CPU",
    "itlb_ways": "its associativity",
    "stlb_entries": "second-level (shared instruction and data) TLB entries, per CPU",
    "stlb_ways": "its associativity",
    "pti": "page-table isolation on (true/false): a flush also flushes the user address space's PCID",
}
_DEVICE_KEYS = {
    "name": "device name",
    "read_latency_us": "unloaded latency of a 4 KiB random read (queue depth 1), us",
    "write_latency_us": "unloaded latency of a 4 KiB write, us",
    "read_bandwidth_GBps": "peak sequential read bandwidth, GB/s",
    "write_bandwidth_GBps": "peak sequential write bandwidth, GB/s",
    "read_iops": "peak 4 KiB random read IOPS (at high queue depth)",
    "write_iops": "peak 4 KiB random write IOPS",
    "queue_depth": "requests the device serves at once",
    "max_sectors_kb": "largest request (queue/max_sectors_kb): bios are split at it; also bdi io_pages",
}


@dataclass(frozen=True)
class Device:
    """A block device (tierlab/core/blkdev.py); files live on the machine's first device."""
    name: str
    read_latency_us: float
    write_latency_us: float
    read_bandwidth_GBps: float
    write_bandwidth_GBps: float
    read_iops: float
    write_iops: float
    queue_depth: int
    max_sectors_kb: int

    @classmethod
    def from_dict(cls, d: dict, where: str) -> "Device":
        _check_table(d, _DEVICE_KEYS, where)
        dev = cls(name=str(d["name"]),
                  **{k: _number(d, k, where, float, 0) for k in ("read_latency_us", "write_latency_us")},
                  **{k: _number(d, k, where, float, 0, strict=True)
                     for k in ("read_bandwidth_GBps", "write_bandwidth_GBps", "read_iops", "write_iops")},
                  queue_depth=_number(d, "queue_depth", where, int, 1),
                  max_sectors_kb=_number(d, "max_sectors_kb", where, int, 4))
        if dev.max_sectors_kb % 4:
            raise ConfigError(f"{where}.max_sectors_kb: {dev.max_sectors_kb} is not accepted; accepted: a multiple "
                              "of 4 (whole pages)")
        return dev

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def engine_figures(self) -> dict:
        """The figures blkdev.py works with (per ns, ns, pages)."""
        return {"read_lat_ns": self.read_latency_us * 1e3, "write_lat_ns": self.write_latency_us * 1e3,
                "read_bw": self.read_bandwidth_GBps, "write_bw": self.write_bandwidth_GBps,  # GB/s == bytes/ns
                "read_iops": self.read_iops / 1e9, "write_iops": self.write_iops / 1e9,
                "queue_depth": self.queue_depth, "max_sectors_pages": self.max_sectors_kb // 4}


@dataclass(frozen=True)
class Tlb:
    """The TLBs of each CPU (tierlab/core/tlb_hw.py, used with the TLB model on)."""
    dtlb_entries: int
    dtlb_ways: int
    itlb_entries: int
    itlb_ways: int
    stlb_entries: int
    stlb_ways: int
    pti: bool

    @classmethod
    def from_dict(cls, d: dict, where: str) -> "Tlb":
        _check_table(d, _TLB_KEYS, where)
        if not isinstance(d["pti"], bool):
            raise ConfigError(f"{where}.pti: {d['pti']!r} is not accepted; accepted: true or false")
        t = cls(**{k: _number(d, k, where, int, 1) for k in _TLB_KEYS if k != "pti"}, pti=d["pti"])
        for lvl in ("dtlb", "itlb", "stlb"):
            e, w = getattr(t, f"{lvl}_entries"), getattr(t, f"{lvl}_ways")
            sets = e // w
            if e % w or sets & (sets - 1):
                raise ConfigError(f"{where}.{lvl}_entries: {e} entries of {w} ways is not accepted; accepted: "
                                  f"entries a multiple of ways with a power-of-two number of sets")
        return t

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def geometry(self) -> tuple:
        """(sets, ways) of the dTLB, iTLB and STLB (state.tlbs_array)."""
        return tuple((e // w, w) for e, w in ((self.dtlb_entries, self.dtlb_ways),
                                              (self.itlb_entries, self.itlb_ways),
                                              (self.stlb_entries, self.stlb_ways)))


# The TLBs a machine gets when its file names none: an Intel Skylake(-SP) core's 4 KiB-page TLBs
# (Intel 64 and IA-32 Architectures Optimization Reference Manual, 248966-045, Table 2-15: ITLB 128
# entries 8-way, DTLB 64 entries 4-way, STLB 1536 entries 12-way shared by 4 KiB and 2 MiB pages),
# with page-table isolation on (Skylake is exposed to Meltdown, so PTI is the kernel's default).
DEFAULT_TLB = Tlb(dtlb_entries=64, dtlb_ways=4, itlb_entries=128, itlb_ways=8, stlb_entries=1536, stlb_ways=12,
                  pti=True)


# The device a machine gets when its file names none: the figures of the presets' NVMe SSD (see
# docs/machines.md and the [[devices]] table of tierlab/machines/*.toml for their sources).
DEFAULT_DEVICE = Device(name="nvme0", read_latency_us=85.0, write_latency_us=20.0, read_bandwidth_GBps=6.5,
                        write_bandwidth_GBps=3.5, read_iops=900_000.0, write_iops=200_000.0, queue_depth=128,
                        max_sectors_kb=128)


@dataclass(frozen=True)
class Node:
    name: str
    capacity_bytes: int
    cpus: int
    adistance: int
    seq_4k_ns: float
    rand_line_ns: float
    write_line_ns: float
    bandwidth_GBps: float

    @property
    def capacity_pages(self) -> int:
        return self.capacity_bytes // PAGE_SIZE

    @property
    def memtier(self) -> int:
        return self.adistance >> MEMTIER_CHUNK_BITS


@dataclass(frozen=True)
class Machine:
    name: str
    nodes: tuple[Node, ...]
    distance: tuple[tuple[int, ...], ...]
    loaded_latency_c: float = 0.1
    devices: tuple[Device, ...] = (DEFAULT_DEVICE,)
    tlb: Tlb = DEFAULT_TLB
    description: str = ""
    source: str = ""
    sources: dict = field(default_factory=dict, compare=False)
    path: str = ""

    # ---- construction -----------------------------------------------------------------------
    @classmethod
    def load(cls, name_or_path: str) -> "Machine":
        """A preset by name (`list machines`) or a TOML file path."""
        p = Path(name_or_path)
        if p.suffix == ".toml" or p.exists():
            if not p.exists():
                raise ConfigError(f"machine: file {name_or_path!r} does not exist")
            return cls.from_toml(p)
        preset = PRESET_DIR / f"{name_or_path}.toml"
        if not preset.exists():
            raise ConfigError(f"machine: unknown machine {name_or_path!r}; accepted: {', '.join(presets())} "
                              f"or a path to a .toml file")
        return cls.from_toml(preset)

    @classmethod
    def from_toml(cls, path: Path | str) -> "Machine":
        path = Path(path)
        try:
            data = tomllib.loads(path.read_text())
        except tomllib.TOMLDecodeError as e:
            raise ConfigError(f"{path}: not valid TOML: {e}") from None
        return cls.from_dict(data, where=str(path))

    @classmethod
    def from_dict(cls, data: dict, where: str = "machine") -> "Machine":
        if not isinstance(data, dict):
            raise ConfigError(f"{where}: expected a table (name, nodes, distance, ...), got {data!r}")
        unknown = set(data) - _MACHINE_KEYS
        if unknown:
            raise ConfigError(f"{where}: unknown key {sorted(unknown)[0]!r}; accepted: {', '.join(sorted(_MACHINE_KEYS))}")
        raw_nodes = data.get("nodes")
        if not raw_nodes or not isinstance(raw_nodes, list) or not all(isinstance(r, dict) for r in raw_nodes):
            raise ConfigError(f"{where}: needs at least one [[nodes]] table")
        nodes = []
        for i, rn in enumerate(raw_nodes):
            _check_keys(rn, _NODE_KEYS, f"{where}: nodes[{i}]")
            node = Node(
                name=str(rn["name"]),
                capacity_bytes=parse_size(rn["capacity"], f"{where}: nodes[{i}].capacity"),
                cpus=_number(rn, "cpus", f"{where}: nodes[{i}]", int, 0),
                adistance=_number(rn, "adistance", f"{where}: nodes[{i}]", int, 0),
                **{k: _number(rn, k, f"{where}: nodes[{i}]", float, 0, strict=True)
                   for k in ("seq_4k_ns", "rand_line_ns", "write_line_ns", "bandwidth_GBps")},
            )
            if node.capacity_bytes < PAGE_SIZE:
                raise ConfigError(f"{where}: nodes[{i}].capacity: must be >= 4KiB")
            nodes.append(node)
        n = len(nodes)
        dist = data.get("distance") or [[10 if i == j else 20 for j in range(n)] for i in range(n)]
        if len(dist) != n or any(len(row) != n for row in dist):
            raise ConfigError(f"{where}: distance must be a {n}x{n} matrix (one row per node)")
        if not any(nd.cpus > 0 for nd in nodes):
            raise ConfigError(f"{where}: at least one node needs cpus > 0")
        c = _number(data, "loaded_latency_c", where, float, 0, default=0.1)
        raw_devs = data.get("devices", [])
        if not isinstance(raw_devs, list):
            raise ConfigError(f"{where}: devices must be a list of [[devices]] tables")
        devices = tuple(Device.from_dict(d, f"{where}: devices[{i}]") for i, d in enumerate(raw_devs))
        return cls(name=str(data.get("name", Path(where).stem)), nodes=tuple(nodes),
                   distance=tuple(tuple(int(x) for x in row) for row in dist), loaded_latency_c=c,
                   devices=devices or (DEFAULT_DEVICE,),
                   tlb=Tlb.from_dict(data["tlb"], f"{where}: tlb") if "tlb" in data else DEFAULT_TLB,
                   description=str(data.get("description", "")), source=str(data.get("source", "")),
                   sources=dict(data.get("sources", {})), path=where)

    # ---- derived --------------------------------------------------------------------------
    def scaled(self, factor: float) -> "Machine":
        """Every capacity divided by `factor` (run a seed experiment small)."""
        factor = parse_scale(factor)
        if factor == 1:
            return self
        nodes = tuple(dataclasses.replace(nd, capacity_bytes=max(PAGE_SIZE * 64, int(nd.capacity_bytes / factor)))
                      for nd in self.nodes)
        return dataclasses.replace(self, nodes=nodes)

    def with_costs(self, **per_node: list[float]) -> "Machine":
        """A copy with some per-node cost fields replaced, e.g. seq_4k_ns=[226.0, 290.6]."""
        nodes = list(self.nodes)
        for key, values in per_node.items():
            for i, v in enumerate(values):
                if v is not None:
                    nodes[i] = dataclasses.replace(nodes[i], **{key: float(v)})
        return dataclasses.replace(self, nodes=tuple(nodes))

    def to_dict(self) -> dict:
        """The machine as run, as a dict `Machine.from_dict` accepts: every capacity (bytes, after
        `scaled`) and cost (after `with_costs`); `name` and `description` are labels only."""
        return {"name": self.name, "description": self.description,
                "loaded_latency_c": self.loaded_latency_c,
                "distance": [list(row) for row in self.distance],
                "nodes": [{"name": nd.name, "capacity": nd.capacity_bytes, "cpus": nd.cpus,
                           "adistance": nd.adistance, "seq_4k_ns": nd.seq_4k_ns,
                           "rand_line_ns": nd.rand_line_ns, "write_line_ns": nd.write_line_ns,
                           "bandwidth_GBps": nd.bandwidth_GBps} for nd in self.nodes],
                "devices": [d.to_dict() for d in self.devices], "tlb": self.tlb.to_dict()}

    @property
    def nr_nodes(self) -> int:
        return len(self.nodes)

    @property
    def nr_cpus(self) -> int:
        return sum(nd.cpus for nd in self.nodes)

    def top_tier_mask(self) -> list[bool]:
        tiers_with_cpus = [nd.memtier for nd in self.nodes if nd.cpus > 0]
        top = min(tiers_with_cpus)
        return [nd.memtier <= top for nd in self.nodes]

    def tier_index(self) -> list[int]:
        """0 for top-tier nodes, then 1, 2, ... for each lower tier that has nodes."""
        top = self.top_tier_mask()
        lower = sorted({nd.memtier for nd, t in zip(self.nodes, top) if not t})
        return [0 if t else 1 + lower.index(nd.memtier) for nd, t in zip(self.nodes, top)]

    def zonelists(self) -> list[list[int]]:
        """Each node's fallback order: by SLIT distance, ties by node id (build_zonelists)."""
        n = self.nr_nodes
        return [sorted(range(n), key=lambda j: (self.distance[i][j], j)) for i in range(n)]

    def demotion_targets(self) -> list[list[int]]:
        """Preferred demotion targets: nodes of the next lower tier with nodes, at minimum distance."""
        tiers = self.tier_index()
        out = []
        for i in range(self.nr_nodes):
            lower = sorted({t for t in tiers if t > tiers[i]})
            if not lower:
                out.append([])
                continue
            cand = [j for j in range(self.nr_nodes) if tiers[j] == lower[0]]
            dmin = min(self.distance[i][j] for j in cand)
            out.append([j for j in cand if self.distance[i][j] == dmin])
        return out

    def cpu_nodes(self) -> list[int]:
        return [i for i, nd in enumerate(self.nodes) for _ in range(nd.cpus)]

    def describe(self) -> str:
        rows = [f"{self.name}: {self.description}"]
        top = self.top_tier_mask()
        for i, nd in enumerate(self.nodes):
            rows.append(f"  node{i} {nd.name:8s} {nd.capacity_bytes / 2**30:9.2f} GiB  cpus={nd.cpus:<4d} "
                        f"tier={'top' if top[i] else 'lower'} seq_4k={nd.seq_4k_ns}ns line={nd.rand_line_ns}ns "
                        f"bw={nd.bandwidth_GBps}GB/s")
        for d in self.devices:
            rows.append(f"  {d.name}: read {d.read_bandwidth_GBps} GB/s, {d.read_iops:.0f} IOPS, "
                        f"{d.read_latency_us} us; write {d.write_bandwidth_GBps} GB/s, {d.write_iops:.0f} IOPS; "
                        f"queue depth {d.queue_depth}, max_sectors_kb {d.max_sectors_kb}")
        return "\n".join(rows)


def _check_table(d, keys: dict, where: str) -> None:
    """Refuse anything but a table with exactly `keys` (name -> meaning)."""
    if not isinstance(d, dict):
        raise ConfigError(f"{where}: expected a table with keys {', '.join(keys)}, got {d!r}")
    _check_keys(d, keys, where)


def _check_keys(d: dict, keys: dict, where: str) -> None:
    """Refuse a table with a key not in `keys` or without one of them (keys: name -> meaning)."""
    bad = set(d) - set(keys)
    if bad:
        raise ConfigError(f"{where}: unknown key {sorted(bad)[0]!r}; accepted: {', '.join(keys)}")
    missing = [k for k in keys if k not in d]
    if missing:
        raise ConfigError(f"{where}: missing {missing[0]!r} ({keys[missing[0]]})")


def _number(d: dict, key: str, where: str, kind, lo, strict: bool = False, default=None):
    """d[key]: an integer >= lo (kind int) or a finite number >= lo (> lo when `strict`)."""
    v = d.get(key, default)
    if kind is int:
        return parse_int(v, f"{where}.{key}", lo, 2**62)
    accepted = f"a finite number {'>' if strict else '>='} {lo}"
    x = parse_number(v, f"{where}.{key}", lo, math.inf, accepted)
    if strict and x <= lo:
        raise ConfigError(f"{where}.{key}: {v!r} is not accepted; accepted: {accepted}")
    return x


def presets() -> list[str]:
    return sorted(p.stem for p in PRESET_DIR.glob("*.toml"))
