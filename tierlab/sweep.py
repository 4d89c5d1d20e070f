"""Parameter sweeps: a TOML spec -> many runs -> one Parquet table (docs/sweeps.md).

    python -m tierlab sweep experiments/quickstart.toml --out sweeps/quickstart
    python -m tierlab sweep SPEC --out DIR --executor dask --scheduler tcp://host:8786
    python -m tierlab sweep SPEC --out DIR --dry-run

    from tierlab.sweep import run_sweep
    df = run_sweep("experiments/quickstart.toml", "sweeps/quickstart")   # a pandas DataFrame

A spec names a base run (the config dict `tierlab.api.build` takes), a `[grid]` (cartesian product),
optional `[zip]` groups (lists varied together) and `[repeat]` seeds. `plan(spec)` expands and
validates every run before anything runs; a bad spec raises ConfigError naming the file, the line and
the key, with what is accepted.

Storage in the output directory DIR:

* ``DIR/runs/<key>.json``: one file per finished run, written the moment the run finishes (temporary
  file + fsync + ``os.replace``). ``<key>`` is a hash of the canonical JSON of the run's resolved
  config plus the tierlab version, so a re-run of the sweep (or of another sweep sharing DIR) skips
  every run already stored. Names starting with ``.`` are temporary files; readers ignore them and
  the next sweep in DIR deletes the ones a killed sweep left behind.
* ``DIR/<name>.parquet``: the sweep table, one row per finished run (see `assemble`), rebuilt from
  the run files at the end of every sweep, atomically.
* ``DIR/.lock``: held (flock) while a sweep writes in DIR; a second concurrent sweep is refused.

Runs execute in worker processes (`local`: a process pool; `dask`: a distributed Client) or in the
calling process (`serial`). Workers only compute and return the run's record; the calling process
writes every file, so Dask workers on other hosts need no shared file system.
"""
from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import math
import os
import re
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from .errors import ConfigError, TierlabError

RUN_FORMAT = 1
SPEC_KEYS = {
    "name": "the sweep's name (also the table's file name: DIR/<name>.parquet)",
    "description": "free text",
    "base": "the base run: machine, workload, params, knobs, costs, scale, seed, sample_interval_ms",
    "grid": "keys varied as a cartesian product: \"params.X\", \"knobs.Y\", \"costs.Z\", machine, workload, scale, sample_interval_ms",
    "zip": "lists of equal length varied together ([zip], or several [[zip]] groups)",
    "repeat": "seeds = [..] or count = N",
}
BASE_KEYS = ("machine", "workload", "params", "knobs", "costs", "scale", "seed", "sample_interval_ms")
VARY_TOP = ("machine", "workload", "scale", "sample_interval_ms")
VARY_TABLES = ("params", "knobs", "costs")
REPEAT_KEYS = ("seeds", "count")
EXECUTORS = ("local", "dask", "serial")
BUILD_CHECK_MAX_PAGES = 1 << 20   # runs up to this size are also checked with api.build (state built)

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


def tierlab_version() -> str:
    """The version string that is part of every run key (a new version invalidates stored runs)."""
    try:
        from importlib.metadata import version
        return version("tierlab")
    except Exception:  # not installed (source tree on sys.path)
        return "0+unknown"


# ---------------------------------------------------------------------------------------------
# specs


@dataclass
class Spec:
    """A parsed sweep spec. `grid` and each `zips` group map a varied key to its list of values."""
    name: str
    base: dict
    base_seed: int
    grid: dict[str, list]
    zips: list[dict[str, list]]
    seeds: list[int]
    description: str = ""
    path: str | None = None
    text: str | None = field(default=None, repr=False)
    data: dict = field(default_factory=dict, repr=False)

    @property
    def varied_keys(self) -> list[str]:
        return list(self.grid) + [k for z in self.zips for k in z]

    @property
    def where(self) -> str:
        return self.path or "sweep spec"

    def line_of(self, section: str, key: str | None = None) -> int | None:
        return _find_line(self.text, section, key)

    def error(self, section: str, key: str | None, message: str) -> ConfigError:
        """A ConfigError 'FILE:LINE: message' pointing at `section`.`key` in the spec's text."""
        line = self.line_of(section, key)
        return ConfigError(f"{self.where}{f':{line}' if line else ''}: {message}")

    def to_dict(self) -> dict:
        return dict(self.data)


@dataclass
class Run:
    """One resolved run of a sweep: its key, the config `tierlab.api.run_config` gets, the values
    the spec varied for it (spec spelling) and its seed."""
    index: int
    key: str
    config: dict
    varied: dict
    seed: int

    def label(self) -> str:
        return " ".join([f"{k}={_short(v)}" for k, v in self.varied.items()] + [f"seed={self.seed}"])


def _short(v) -> str:
    return v if isinstance(v, str) else json.dumps(v)


def _norm_key(s: str) -> str:
    parts = [p.strip().strip('"').strip("'").strip() for p in re.split(r"\.(?=(?:[^\"]*\"[^\"]*\")*[^\"]*$)", s)]
    return ".".join(p for p in parts if p)


def _find_line(text: str | None, section: str, key: str | None = None) -> int | None:
    """The 1-based line of `section`.`key` in TOML `text` (tomllib gives no positions): an exact match
    of the dotted path as written (table headers + keys, quoted or bare), else a line in the section
    that mentions the key's last part, else the section's header."""
    if not text:
        return None
    want = _norm_key(section + ("." + key if key else ""))
    leaf = key.split(".")[-1] if key else None
    table = ""
    header_line = None
    in_section: list[int] = []
    anywhere: list[int] = []
    for i, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0] if '"' not in raw and "'" not in raw else raw
        m = re.match(r"^\s*\[\[?\s*([^\]]+?)\s*\]\]?\s*(#.*)?$", line)
        if m:
            table = _norm_key(m.group(1))
            if table == want or (key is None and table.startswith(want + ".")):
                return i
            if header_line is None and (table == _norm_key(section) or table.startswith(_norm_key(section) + ".")):
                header_line = i
            continue
        m = re.match(r"^\s*((?:\"[^\"]*\"|'[^']*'|[A-Za-z0-9_.\- ])+?)\s*=", line)
        if m:
            full = _norm_key((table + "." if table else "") + m.group(1))
            if full == want:
                return i
            if key is None and full.startswith(want + "."):
                return i
        if leaf and re.search(r"(^|[^A-Za-z0-9_])" + re.escape(leaf) + r"([^A-Za-z0-9_]|$)", line):
            (in_section if (table == _norm_key(section) or table.startswith(_norm_key(section) + ".")
                            or _norm_key(m.group(1) if m else "").startswith(_norm_key(section)))
             else anywhere).append(i)
    if in_section:
        return in_section[0]
    if header_line is not None:
        return header_line
    return anywhere[0] if anywhere else None


def _flatten_vary(d: dict) -> dict[str, Any]:
    """{"knobs": {"a": [..]}} (TOML dotted keys or sub-tables) -> {"knobs.a": [..]}."""
    out: dict[str, Any] = {}
    for k, v in d.items():
        if k in VARY_TABLES and isinstance(v, dict):
            for k2, v2 in v.items():
                out[f"{k}.{k2}"] = v2
        else:
            out[k] = v
    return out


def _scalar_ok(v) -> bool:
    return isinstance(v, (str, int, float, bool))


def load_spec(spec, name: str | None = None) -> Spec:
    """Parse a sweep spec: a path to a TOML file, TOML text, a dict (the parsed TOML), or a Spec.
    Checks the spec's structure and key names; `plan` validates every resolved run's values."""
    if isinstance(spec, Spec):
        return spec
    import tomllib

    path = text = None
    if isinstance(spec, dict):
        data = spec
    elif isinstance(spec, (str, os.PathLike)):
        s = os.fspath(spec)
        if isinstance(spec, str) and ("\n" in s or ("=" in s and not os.path.exists(s))):
            text = s
        else:
            path = s
            if not os.path.isfile(path):
                raise ConfigError(f"{path}: no such sweep spec file")
            with open(path, "rb") as f:
                raw = f.read()
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise ConfigError(f"{path}: not UTF-8 text ({e})") from None
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as e:
            raise ConfigError(f"{path or 'sweep spec'}: not valid TOML: {e}") from None
    else:
        raise ConfigError(f"sweep spec: expected a path, TOML text or a dict, got {type(spec).__name__}")

    where = path or "sweep spec"

    def err(section, key, msg):
        line = _find_line(text, section, key)
        return ConfigError(f"{where}{f':{line}' if line else ''}: {msg}")

    for k in data:
        if k not in SPEC_KEYS:
            raise err(k, None, f"unknown key {k!r}; accepted: {', '.join(SPEC_KEYS)}")

    # name
    nm = data.get("name", name or (os.path.splitext(os.path.basename(path))[0] if path else "sweep"))
    if not isinstance(nm, str) or not _NAME_RE.match(nm):
        raise err("name", None, f"name: {nm!r} is not accepted; accepted: letters, digits, '_', '-', '.' "
                                "(it names the table file)")
    desc = data.get("description", "")
    if not isinstance(desc, str):
        raise err("description", None, "description: expected a string")

    # base
    base = data.get("base")
    if base is None:
        raise ConfigError(f"{where}: missing [base] table (machine, workload, params, knobs, scale, seed)")
    if not isinstance(base, dict):
        raise err("base", None, "base: expected a table")
    base = json.loads(json.dumps(base))  # deep copy (TOML values are JSON-able except dates)
    for k, v in base.items():
        if k not in BASE_KEYS:
            raise err("base", k, f"base: unknown key {k!r}; accepted: {', '.join(BASE_KEYS)}")
        if k in VARY_TABLES:
            if not isinstance(v, dict):
                raise err("base", k, f"base.{k}: expected a table of name = value")
            for k2, v2 in v.items():
                if not _scalar_ok(v2):
                    raise err("base", f"{k}.{k2}", f"base.{k}.{k2}: expected a string or number, got {v2!r}")
        elif not _scalar_ok(v):
            raise err("base", k, f"base.{k}: expected a string or number, got {v!r}")
    try:
        base_seed = int(base.pop("seed", 0))
    except (TypeError, ValueError):
        raise err("base", "seed", f"base.seed: expected an integer, got {data['base'].get('seed')!r}") from None

    # grid and zip
    from .kernel import KNOBS

    def check_vary_key(section, key, group_keys):
        if key == "seed":
            raise err(section, key, f"{section}: 'seed' cannot be varied here; use [repeat] seeds = [..] or count = N")
        head, dot, tail = key.partition(".")
        if not dot:
            if key not in VARY_TOP:
                hint = f" (did you mean \"params.{key}\" or \"knobs.{key}\"?)" if key not in BASE_KEYS else ""
                raise err(section, key, f"{section}: unknown key {key!r}{hint}; accepted: "
                                        f"\"params.NAME\", \"knobs.NAME\", \"costs.NAME\", {', '.join(VARY_TOP)}")
        elif head not in VARY_TABLES or not tail or "." in tail:
            raise err(section, key, f"{section}: unknown key {key!r}; accepted: \"params.NAME\", \"knobs.NAME\", "
                                    f"\"costs.NAME\", {', '.join(VARY_TOP)}")
        elif head == "knobs" and tail not in KNOBS:
            raise err(section, key, f"{section}: {key!r}: unknown knob {tail!r}; accepted knobs: {', '.join(KNOBS)}")
        if key in group_keys:
            raise err(section, key, f"{section}: {key!r} is varied twice (in [grid] and [zip], or in two [[zip]] groups)")

    def check_values(section, key, vals):
        if not isinstance(vals, list):
            raise err(section, key, f"{section}: {key!r}: expected a list of values, e.g. {key} = [0, 1]; got {vals!r}")
        if not vals:
            raise err(section, key, f"{section}: {key!r}: empty list; give at least one value")
        seen = []
        for v in vals:
            if not _scalar_ok(v):
                raise err(section, key, f"{section}: {key!r}: values must be strings or numbers, got {v!r}")
            if any(type(v) is type(s) and v == s for s in seen):
                raise err(section, key, f"{section}: {key!r}: value {v!r} appears twice")
            seen.append(v)

    used: set[str] = set()
    grid: dict[str, list] = {}
    if "grid" in data:
        g = data["grid"]
        if not isinstance(g, dict):
            raise err("grid", None, "grid: expected a table of key = [values]")
        g = _flatten_vary(g)
        if not g:
            raise err("grid", None, "grid: empty grid; give at least one key = [values] (e.g. "
                                    "\"knobs.demotion_enabled\" = [0, 1]) or leave out [grid]")
        for k, vals in g.items():
            check_vary_key("grid", k, used)
            check_values("grid", k, vals)
            grid[k] = list(vals)
            used.add(k)
    zips: list[dict[str, list]] = []
    if "zip" in data:
        z = data["zip"]
        groups = [z] if isinstance(z, dict) else z
        if not isinstance(groups, list) or not all(isinstance(x, dict) for x in groups):
            raise err("zip", None, "zip: expected a table [zip] or tables [[zip]] of key = [values]")
        for gi, grp in enumerate(groups):
            grp = _flatten_vary(grp)
            if not grp:
                raise err("zip", None, "zip: empty [zip] table; give key = [values] lists of equal length")
            lens = {}
            for k, vals in grp.items():
                check_vary_key("zip", k, used)
                if not isinstance(vals, list) or not vals:
                    raise err("zip", k, f"zip: {k!r}: expected a non-empty list of values")
                for v in vals:
                    if not _scalar_ok(v):
                        raise err("zip", k, f"zip: {k!r}: values must be strings or numbers, got {v!r}")
                lens[k] = len(vals)
                used.add(k)
            if len(set(lens.values())) > 1:
                k0, n0 = next(iter(lens.items()))
                k1, n1 = next((k, n) for k, n in lens.items() if n != n0)
                raise err("zip", k1, f"zip: lists must have equal lengths: {k0!r} has {n0} values, {k1!r} has {n1}")
            zips.append({k: list(v) for k, v in grp.items()})

    for req in ("machine", "workload"):
        if req not in base and req not in used:
            raise ConfigError(f"{where}: [base] needs {req!r} (or vary it in [grid] / [zip])")

    # repeat
    seeds = [base_seed]
    if "repeat" in data:
        r = data["repeat"]
        if not isinstance(r, dict):
            raise err("repeat", None, "repeat: expected a table with seeds = [..] or count = N")
        for k in r:
            if k not in REPEAT_KEYS:
                raise err("repeat", k, f"repeat: unknown key {k!r}; accepted: seeds = [1, 2, ..] or count = N")
        if "seeds" in r and "count" in r:
            raise err("repeat", "count", "repeat: give seeds = [..] or count = N, not both")
        if "seeds" in r:
            s = r["seeds"]
            if (not isinstance(s, list) or not s or not all(isinstance(x, int) and not isinstance(x, bool) for x in s)):
                raise err("repeat", "seeds", f"repeat: seeds: expected a non-empty list of integers, got {s!r}")
            if len(set(s)) != len(s):
                raise err("repeat", "seeds", f"repeat: seeds: a seed appears twice in {s!r}")
            seeds = list(s)
        elif "count" in r:
            c = r["count"]
            if not isinstance(c, int) or isinstance(c, bool) or c < 1:
                raise err("repeat", "count", f"repeat: count: expected an integer >= 1, got {c!r}")
            seeds = [base_seed + i for i in range(c)]   # derived: base seed, base seed + 1, ...

    return Spec(name=nm, base=base, base_seed=base_seed, grid=grid, zips=zips, seeds=seeds,
                description=desc, path=path, text=text, data=json.loads(json.dumps(data, default=str)))


def expand(spec) -> list[tuple[dict, dict, int]]:
    """(raw config, varied values, seed) for every run, in table order: the grid's product (first
    key slowest), then each zip group's rows, then the seeds (fastest)."""
    spec = load_spec(spec)
    gkeys = list(spec.grid)
    out = []
    for gvals in itertools.product(*(spec.grid[k] for k in gkeys)):
        for zidx in itertools.product(*(range(len(next(iter(z.values())))) for z in spec.zips)):
            varied = dict(zip(gkeys, gvals))
            for z, i in zip(spec.zips, zidx):
                for k, vals in z.items():
                    varied[k] = vals[i]
            for seed in spec.seeds:
                cfg = json.loads(json.dumps(spec.base))
                for k, v in varied.items():
                    head, dot, tail = k.partition(".")
                    if dot:
                        cfg.setdefault(head, {})[tail] = v
                    else:
                        cfg[k] = v
                cfg["seed"] = int(seed)
                out.append((cfg, varied, int(seed)))
    return out


def canonical_json(obj) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)


def run_key(config: dict, version: str | None = None) -> str:
    """The stored-run key: sha256 of the canonical JSON of the resolved config + tierlab version."""
    payload = canonical_json({"config": config, "tierlab": version or tierlab_version(), "format": RUN_FORMAT})
    return hashlib.sha256(payload.encode()).hexdigest()[:24]


class _Validator:
    """Validates resolved run configs with the cheap validators (Machine.load, Kernel, make_workload,
    costs) and, for small runs, api.build; caches by the parts that repeat across runs."""

    def __init__(self):
        from . import api
        from .core.cost import COSTS
        from .kernel import KNOBS
        from .machine import Machine
        from .workloads import make_workload
        self.api, self.COSTS, self.KNOBS, self.Machine, self.make_workload = api, COSTS, KNOBS, Machine, make_workload
        self._machines: dict = {}
        self._workloads: dict = {}
        self._built: set = set()
        self.max_state_bytes = 0
        self.max_state_config: dict | None = None

    def normalize(self, cfg: dict) -> dict:
        """Validate `cfg` and return it normalised: scale float, seed int, knob values as the kernel
        parses them (knobs at their default left out), costs floats; params as written."""
        for k in cfg:
            if k not in self.api.CONFIG_KEYS:
                raise ConfigError(f"unknown config key {k!r}; accepted: {', '.join(sorted(self.api.CONFIG_KEYS))}")
        out: dict = {"machine": cfg["machine"], "workload": cfg["workload"]}
        if not isinstance(cfg["machine"], str):
            raise ConfigError(f"machine: expected a preset name or a path, got {cfg['machine']!r}")
        if not isinstance(cfg["workload"], str):
            raise ConfigError(f"workload: expected a workload name, got {cfg['workload']!r}")
        try:
            scale = float(cfg.get("scale", 1.0))
        except (TypeError, ValueError):
            raise ConfigError(f"scale: expected a number > 0, got {cfg.get('scale')!r}") from None
        if not scale > 0 or not math.isfinite(scale):
            raise ConfigError(f"scale: expected a number > 0, got {cfg.get('scale')!r}")
        out["scale"] = scale
        out["seed"] = int(cfg.get("seed", 0))
        knobs = {}
        for k, v in (cfg.get("knobs") or {}).items():
            if k not in self.KNOBS:
                raise ConfigError(f"unknown knob {k!r}; accepted knobs: {', '.join(self.KNOBS)}")
            x = self.KNOBS[k].parse(v)
            if self.KNOBS[k].default is None or x != float(self.KNOBS[k].default):
                knobs[k] = x   # a knob at the kernel's default is the same run as an unset one
        out["knobs"] = knobs
        costs = {}
        for k, v in (cfg.get("costs") or {}).items():
            if k not in self.COSTS:
                raise ConfigError(f"unknown cost {k!r}; accepted: {', '.join(self.COSTS)}")
            try:
                costs[k] = float(v)
            except (TypeError, ValueError):
                raise ConfigError(f"{k}: expected a number, got {v!r}") from None
        if costs:
            out["costs"] = costs
        out["params"] = dict(cfg.get("params") or {})
        if "sample_interval_ms" in cfg:
            try:
                si = float(cfg["sample_interval_ms"])
            except (TypeError, ValueError):
                raise ConfigError(f"sample_interval_ms: expected a number > 0, got {cfg['sample_interval_ms']!r}") from None
            if not si > 0:
                raise ConfigError(f"sample_interval_ms: must be > 0, got {cfg['sample_interval_ms']!r}")
            out["sample_interval_ms"] = si

        mkey = (out["machine"], scale)
        if mkey not in self._machines:
            self._machines[mkey] = self.Machine.load(out["machine"]).scaled(scale)
        machine = self._machines[mkey]
        wkey = (out["workload"], canonical_json(out["params"]), scale)
        if wkey not in self._workloads:
            self._workloads[wkey] = self.make_workload(out["workload"], out["params"], scale=scale)
        workload = self._workloads[wkey]
        regions = workload.regions()
        for r in regions:
            for n in r.nodes:
                if not 0 <= n < machine.nr_nodes:
                    raise ConfigError(f"region {r.name}: node {n} does not exist; machine {machine.name} has "
                                      f"nodes 0..{machine.nr_nodes - 1}")
        pages = sum(r.pages for r in regions)
        need = self.api.state_bytes(pages)
        if need > self.max_state_bytes:
            self.max_state_bytes, self.max_state_config = need, out
        if pages <= BUILD_CHECK_MAX_PAGES:
            bkey = canonical_json({k: v for k, v in out.items() if k != "seed"})
            if bkey not in self._built:
                self.api.build(out)   # the authoritative check (builds a small state)
                self._built.add(bkey)
        return out


def _attribute(spec: Spec, varied: dict, raw: dict, msg: str) -> tuple[str, str | None]:
    """Which spec entry an error message is about: (section, key) of a varied or base key whose name
    the message quotes or starts with, else one whose name it mentions; varied keys first, the base's
    top-level keys (machine, workload, ...) last."""
    cands = [("grid", k) for k in spec.grid] + [("zip", k) for z in spec.zips for k in z]
    tops = []
    for k, v in spec.base.items():
        if isinstance(v, dict):
            cands += [("base", f"{k}.{k2}") for k2 in v]
        else:
            tops.append(("base", k))
    cands += tops
    for strong in (True, False):
        for sect, key in cands:
            leaf = re.escape(key.split(".")[-1])
            pat = (rf"(^{leaf}\s*[:=]|['\"]{leaf}['\"])" if strong
                   else r"(^|[\s'\"(,])" + leaf + r"(['\":,\s)]|$)")
            if re.search(pat, msg):
                return sect, key
    return "", None


def plan(spec, version: str | None = None) -> list[Run]:
    """Expand `spec` and validate every run before any runs: a list of Run in table order. Raises
    ConfigError naming the spec file, line and key of the first bad value."""
    spec = load_spec(spec)
    version = version or tierlab_version()
    v = _Validator()
    runs: list[Run] = []
    seen: dict[str, int] = {}
    expanded = expand(spec)
    for i, (raw, varied, seed) in enumerate(expanded):
        try:
            cfg = v.normalize(raw)
        except TierlabError as e:
            msg = str(e)
            sect, key = _attribute(spec, varied, raw, msg)
            desc = " ".join(f"{k}={_short(x)}" for k, x in varied.items())
            at = f" (run {i + 1} of {len(expanded)}{': ' + desc if desc else ''})"
            if key:
                val = varied.get(key) if sect in ("grid", "zip") else None
                what = f"{sect} {key!r}" + (f" = {_short(val)}" if val is not None else "")
                raise spec.error(sect, key, f"{what}: {msg}{at}") from None
            raise ConfigError(f"{spec.where}: {msg}{at}") from None
        key = run_key(cfg, version)
        if key in seen:
            j = seen[key]
            raise ConfigError(f"{spec.where}: runs {j + 1} and {i + 1} resolve to the same config "
                              f"({runs[j].label()} / {' '.join(f'{k}={_short(x)}' for k, x in varied.items())}); "
                              "remove the duplicate value")
        seen[key] = i
        runs.append(Run(index=i, key=key, config=cfg, varied=dict(varied), seed=seed))
    if v.max_state_bytes:
        avail = v.api.available_memory_bytes()
        if v.max_state_bytes > 0.8 * avail:
            c = v.max_state_config
            raise ConfigError(f"{spec.where}: the largest run ({c['workload']} at scale {c['scale']:g}) needs "
                              f"~{v.max_state_bytes / 2**30:.1f} GiB of state but only {avail / 2**30:.1f} GiB is "
                              "available; raise `scale` in [base] (or the grid)")
    spec._max_state_bytes = v.max_state_bytes  # used to size the local pool
    return runs


# ---------------------------------------------------------------------------------------------
# storage


def runs_dir(out_dir) -> str:
    return os.path.join(os.fspath(out_dir), "runs")


def run_path(out_dir, key: str) -> str:
    return os.path.join(runs_dir(out_dir), key + ".json")


def table_path(out_dir, spec: Spec) -> str:
    return os.path.join(os.fspath(out_dir), spec.name + ".parquet")


def _fsync_dir(d: str) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(d, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


@contextlib.contextmanager
def _atomic(path: str):
    """A temporary path ('.<name>.<random>.tmp' next to `path`); moved into place on success."""
    d, base = os.path.split(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix="." + base + ".", suffix=".tmp", dir=d)
    os.close(fd)
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        yield tmp
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
        _fsync_dir(d)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def store_run(out_dir, run: Run, record: dict, version: str) -> str:
    """Write a finished run's file atomically; return its path."""
    path = run_path(out_dir, run.key)
    doc = {"format": RUN_FORMAT, "key": run.key, "tierlab": version, "config": run.config,
           "varied": run.varied, "seed": run.seed, **record}
    with _atomic(path) as tmp:
        with open(tmp, "w") as f:
            json.dump(doc, f, allow_nan=True)
    return path


def load_run(out_dir, key: str) -> dict | None:
    """A stored run's record, or None when it is not stored. A file that does not parse (written by
    something other than this module) is removed so the run is computed again."""
    path = run_path(out_dir, key)
    try:
        with open(path) as f:
            doc = json.load(f)
        if doc.get("key") != key or "counters" not in doc:
            raise ValueError("not a run record of this key")
        return doc
    except FileNotFoundError:
        return None
    except (ValueError, OSError) as e:
        print(f"tierlab: warning: {path}: unreadable run file ({e}); it will be computed again", file=sys.stderr)
        with contextlib.suppress(OSError):
            os.unlink(path)
        return None


def done_keys(out_dir) -> set[str]:
    d = runs_dir(out_dir)
    try:
        names = os.listdir(d)
    except FileNotFoundError:
        return set()
    return {n[:-5] for n in names if n.endswith(".json") and not n.startswith(".")}


def clean_temp_files(out_dir) -> int:
    """Remove temporary files a killed sweep left behind (only call while holding the lock)."""
    n = 0
    for d in (os.fspath(out_dir), runs_dir(out_dir)):
        with contextlib.suppress(FileNotFoundError):
            for name in os.listdir(d):
                if name.startswith(".") and name.endswith(".tmp"):
                    with contextlib.suppress(OSError):
                        os.unlink(os.path.join(d, name))
                        n += 1
    return n


@contextlib.contextmanager
def _locked(out_dir):
    import fcntl
    path = os.path.join(os.fspath(out_dir), ".lock")
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ConfigError(f"--out {os.fspath(out_dir)!r}: another sweep is writing there (lock {path}); "
                              "wait for it or use another directory") from None
        yield
    finally:
        os.close(fd)


# ---------------------------------------------------------------------------------------------
# running


def execute_run(config: dict) -> dict:
    """Run one resolved config (in a worker) and return its record: counters (kernel names), final
    free pages per node, simulated times, marks, cycle times, host wall time."""
    from .api import run_config
    t0 = time.perf_counter()
    res = run_config(config)
    wall = time.perf_counter() - t0
    d = res.to_dict()
    rec = {
        "counters": d["counters"],
        "nr_free_pages": d["nr_free_pages"],
        "sim_time_s": float(res.sim_time_s),
        "task_times_s": d["task_times_s"],
        "marks_s": {k: [x.item() if hasattr(x, "item") else x for x in v] for k, v in d["marks_s"].items()},
        "cycle_times_s": [float(x) for x in res.cycle_times_s(0)] if len(res.marks_s) else None,
        "wall_s": wall,
        "host": os.uname().nodename,
    }
    return rec


def _worker_init(driver_pid: int) -> None:
    """Pool workers die with the sweep that started them, so a SIGKILLed sweep leaves no orphan
    computing. Forkserver workers are children of the fork server, not of the sweep, and hold the
    server's liveness pipe open; so a thread watches the sweep's process (pidfd) and exits the worker
    when it ends (at the latest when the current numba call returns the GIL)."""
    with contextlib.suppress(Exception):
        import ctypes
        import signal
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    import threading
    threading.Thread(target=_watch_driver, args=(driver_pid,), name="tierlab-sweep-watchdog", daemon=True).start()


def _pid_alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
        return stat[stat.rindex(")") + 2:].split()[0] not in ("Z", "X")
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass
        return True


def _watch_driver(pid: int) -> None:
    import select
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        os._exit(1)
    except (AttributeError, OSError):
        fd = None
    if fd is not None:
        select.select([fd], [], [])   # a pidfd turns readable when the process ends
    else:
        while _pid_alive(pid):
            time.sleep(1.0)
    os._exit(1)


def default_workers() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:
        return max(1, os.cpu_count() or 1)


def _pool_workers(workers: int | None, todo: int, state_bytes: int) -> int:
    if workers is not None:
        return max(1, min(int(workers), todo))
    n = min(default_workers(), todo)
    if state_bytes > 0:  # as many concurrent runs as the memory holds
        from .api import available_memory_bytes
        n = min(n, max(1, int(0.7 * available_memory_bytes() // (state_bytes * 1.3))))
    return max(1, n)


def _iter_local(todo: list[Run], workers: int):
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed
    method = "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"
    ctx = multiprocessing.get_context(method)
    if method == "forkserver":
        # the server (started at the first pool) warms up the workloads of this sweep
        os.environ["TIERLAB_SWEEP_WARM"] = json.dumps(sorted({r.config["workload"] for r in todo}))
        ctx.set_forkserver_preload(["tierlab._sweep_warm"])
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_worker_init,
                               initargs=(os.getpid(),))
    try:
        futs = {pool.submit(execute_run, r.config): r for r in todo}
        for f in as_completed(futs):
            try:
                yield futs[f], f.result(), None
            except Exception as e:  # noqa: BLE001 - reported per run
                yield futs[f], None, e
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown(wait=True)


def _iter_serial(todo: list[Run]):
    for r in todo:
        try:
            rec = execute_run(r.config)
        except Exception as e:  # noqa: BLE001
            yield r, None, e
            continue
        yield r, rec, None


def _dask_client(scheduler: str | None, workers: int | None, client=None):
    """(client, close) for the dask executor: the given Client, a Client to `scheduler`, or a
    LocalCluster of `workers` single-threaded worker processes."""
    if client is not None:
        return client, (lambda: None)
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise ConfigError("--executor dask needs the 'distributed' package (pip install 'dask[distributed]')") from None
    if scheduler:
        try:
            c = Client(scheduler, timeout="20s")
        except (OSError, TimeoutError) as e:
            raise ConfigError(f"--scheduler {scheduler!r}: cannot connect ({e})") from None
        return c, c.close
    import logging
    cluster = LocalCluster(n_workers=workers or default_workers(), threads_per_worker=1, processes=True,
                           dashboard_address=":0", silence_logs=logging.ERROR)
    c = Client(cluster)

    def close():
        c.close()
        cluster.close()
    return c, close


def _iter_dask(todo: list[Run], client):
    from distributed import as_completed
    import uuid
    tag = uuid.uuid4().hex[:8]
    futs = {}
    for r in todo:
        f = client.submit(execute_run, r.config, key=f"tierlab-run-{r.key}-{tag}", pure=False)
        futs[f] = r
    try:
        for f in as_completed(list(futs)):
            try:
                yield futs[f], f.result(), None
            except Exception as e:  # noqa: BLE001
                yield futs[f], None, e
    except BaseException:
        client.cancel(list(futs))
        raise


def _progress_bar(progress, total: int, initial: int, desc: str):
    if progress is None:
        progress = sys.stderr.isatty() or _in_notebook()
    if not progress:
        return None
    from tqdm.auto import tqdm
    return tqdm(total=total, initial=initial, unit="run", desc=desc, file=sys.stderr, dynamic_ncols=True,
                smoothing=0.1)


def _in_notebook() -> bool:
    try:
        from IPython import get_ipython
        ip = get_ipython()
        return ip is not None and ip.__class__.__name__ == "ZMQInteractiveShell"
    except Exception:
        return False


@dataclass
class SweepStats:
    total: int
    done_before: int
    ran: int
    failed: list[tuple[Run, str]]
    table: str | None
    wall_s: float

    def summary(self) -> str:
        s = (f"{self.total} runs: {self.done_before} already done, {self.ran} run now"
             + (f", {len(self.failed)} failed" if self.failed else ""))
        return s + (f" -> {self.table}" if self.table else "")


def sweep(spec, out_dir, executor: str = "local", workers: int | None = None, scheduler: str | None = None,
          progress=None, client=None, on_run: Callable[[Run, dict], None] | None = None) -> tuple["Any", SweepStats]:
    """Plan (validate) the sweep, run every run not already stored in `out_dir`, store each as it
    finishes, and (re)build the table. Returns (DataFrame, SweepStats)."""
    t_start = time.perf_counter()
    if executor not in EXECUTORS:
        raise ConfigError(f"--executor {executor!r}: accepted: {', '.join(EXECUTORS)}")
    if workers is not None and (not isinstance(workers, int) or workers < 1):
        raise ConfigError(f"--workers {workers!r}: expected an integer >= 1")
    if scheduler and executor != "dask":
        raise ConfigError(f"--scheduler is for --executor dask, not {executor}")
    spec = load_spec(spec)
    runs = plan(spec)                      # every run validated before anything runs or is written
    version = tierlab_version()
    out_dir = os.fspath(out_dir)
    if os.path.exists(out_dir) and not os.path.isdir(out_dir):
        raise ConfigError(f"--out {out_dir!r}: exists and is not a directory")
    failed: list[tuple[Run, str]] = []
    close = None
    dask_client = None
    if executor == "dask" and any(r.key not in done_keys(out_dir) for r in runs):
        dask_client, close = _dask_client(scheduler, workers, client)   # connect before writing anything
    try:
        os.makedirs(runs_dir(out_dir), exist_ok=True)
        with _locked(out_dir):
            clean_temp_files(out_dir)
            stored = done_keys(out_dir)
            todo = [r for r in runs if not (r.key in stored and load_run(out_dir, r.key) is not None)]
            done_before = len(runs) - len(todo)
            bar = _progress_bar(progress, len(runs), done_before, spec.name)
            ran = 0
            it = None
            try:
                if todo:
                    if executor == "serial":
                        it = _iter_serial(todo)
                    elif executor == "local":
                        n = _pool_workers(workers, len(todo), getattr(spec, "_max_state_bytes", 0))
                        it = _iter_serial(todo) if n == 1 and workers is None and len(todo) == 1 else _iter_local(todo, n)
                    else:
                        if dask_client is None:
                            dask_client, close = _dask_client(scheduler, workers, client)
                        it = _iter_dask(todo, dask_client)
                    for run, rec, exc in it:
                        if exc is not None:
                            msg = f"{type(exc).__name__}: {exc}" if not isinstance(exc, TierlabError) else str(exc)
                            failed.append((run, msg))
                            line = f"tierlab: run {run.index + 1} ({run.label()}) failed: {msg}"
                            (bar.write(line, file=sys.stderr) if bar is not None else print(line, file=sys.stderr))
                        else:
                            store_run(out_dir, run, rec, version)
                            ran += 1
                            if on_run is not None:
                                on_run(run, rec)
                        if bar is not None:
                            bar.update(1)
                            if failed:
                                bar.set_postfix(failed=len(failed))
            finally:
                if it is not None:
                    it.close()
                if bar is not None:
                    bar.close()
                # the table of every finished run, also after a failure or Ctrl-C
                df = assemble(spec, out_dir, runs)
                tpath = table_path(out_dir, spec)
                if len(df) or os.path.exists(tpath):
                    write_table(df, spec, out_dir, runs)
                else:
                    tpath = None
    finally:
        if close is not None:
            close()
    stats = SweepStats(total=len(runs), done_before=done_before, ran=ran, failed=failed, table=tpath,
                       wall_s=time.perf_counter() - t_start)
    df.attrs["sweep"] = {"total": stats.total, "done_before": stats.done_before, "ran": stats.ran,
                         "failed": len(failed), "table": tpath}
    return df, stats


def run_sweep(spec_or_path, out_dir, executor="local", workers: int | None = None, progress=True,
              scheduler: str | None = None):
    """For notebooks: run (or resume) a sweep and return its table as a pandas DataFrame.

    `executor`: "local" (process pool, default `workers` = cores), "dask" (a LocalCluster, or the
    scheduler at `scheduler`), "serial" (this process), or a `distributed.Client` to use as is.
    `df.attrs["sweep"]` holds how many runs were already done, run now and failed."""
    client = None
    if not isinstance(executor, str):
        client, executor = executor, "dask"
    df, _ = sweep(spec_or_path, out_dir, executor=executor, workers=workers, scheduler=scheduler,
                  progress=progress, client=client)
    return df


# ---------------------------------------------------------------------------------------------
# the table


def _column(values: list):
    """Varied values as one Parquet-able column: ints/floats/bools/strings kept, mixed types as str."""
    kinds = {type(v) for v in values}
    if kinds <= {int} or kinds <= {float} or kinds <= {str} or kinds <= {bool}:
        return values
    if kinds <= {int, float}:
        return [float(v) for v in values]
    return [v if isinstance(v, str) else json.dumps(v) for v in values]


def assemble(spec, out_dir, runs: list[Run] | None = None):
    """The sweep table from the stored runs (finished runs only, in plan order). Columns: run_key,
    each varied key (spec spelling of the value), seed, every counter (kernel names), sim_time_s,
    task_times_s (list), cycle_times_s (list; when any run recorded marks), wall_s."""
    import numpy as np
    import pandas as pd
    spec = load_spec(spec)
    runs = runs if runs is not None else plan(spec)
    recs = []
    for r in runs:
        doc = load_run(out_dir, r.key)
        if doc is not None:
            recs.append((r, doc))
    counter_names: list[str] = []
    seen = set()
    for _, doc in recs:
        for k in doc["counters"]:
            if k not in seen:
                seen.add(k)
                counter_names.append(k)
    cols: dict[str, list] = {"run_key": [r.key for r, _ in recs]}
    for k in spec.varied_keys:
        cols[k] = _column([r.varied[k] for r, _ in recs])
    cols["seed"] = [r.seed for r, _ in recs]
    for c in counter_names:
        cols[c] = [int(doc["counters"].get(c, 0)) for _, doc in recs]
    cols["sim_time_s"] = [float(doc["sim_time_s"]) for _, doc in recs]
    # list columns hold float64 arrays, as pandas.read_parquet gives them back
    cols["task_times_s"] = [np.asarray(doc.get("task_times_s", []), dtype=np.float64) for _, doc in recs]
    if any(doc.get("cycle_times_s") is not None for _, doc in recs):
        cols["cycle_times_s"] = [np.asarray(doc.get("cycle_times_s") or [], dtype=np.float64) for _, doc in recs]
    cols["wall_s"] = [float(doc.get("wall_s", float("nan"))) for _, doc in recs]
    df = pd.DataFrame(cols)
    for c in counter_names + ["seed"]:
        df[c] = df[c].astype("int64")
    return df


def write_table(df, spec: Spec, out_dir, runs: list[Run]) -> str:
    """Write the table to DIR/<name>.parquet atomically; the spec and version go in the schema
    metadata under b'tierlab_sweep'."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    path = table_path(out_dir, spec)
    table = pa.Table.from_pandas(df, preserve_index=False)
    md = dict(table.schema.metadata or {})
    md[b"tierlab_sweep"] = json.dumps({"name": spec.name, "spec": spec.to_dict(), "spec_path": spec.path,
                                       "tierlab": tierlab_version(), "runs": len(runs),
                                       "finished": len(df)}, default=str).encode()
    table = table.replace_schema_metadata(md)
    with _atomic(path) as tmp:
        pq.write_table(table, tmp)
    return path


def read_table(path):
    """(DataFrame, metadata dict) of a sweep table."""
    import pyarrow.parquet as pq
    t = pq.read_table(path)
    md = t.schema.metadata or {}
    return t.to_pandas(), json.loads(md.get(b"tierlab_sweep", b"{}"))


# ---------------------------------------------------------------------------------------------
# dry run and the command line


def dry_run_report(spec, out_dir) -> str:
    """The runs of `spec` (validated) with done/todo status in `out_dir`, and a summary line."""
    spec = load_spec(spec)
    runs = plan(spec)
    if out_dir is not None and os.path.exists(out_dir) and not os.path.isdir(out_dir):
        raise ConfigError(f"--out {os.fspath(out_dir)!r}: exists and is not a directory")
    done = done_keys(out_dir) if out_dir is not None else set()
    heads = ["#", "run_key"] + spec.varied_keys + ["seed", "status"]
    rows = [[str(r.index + 1), r.key] + [_short(r.varied[k]) for k in spec.varied_keys] + [str(r.seed),
            "done" if r.key in done else "todo"] for r in runs]
    w = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(heads)]
    lines = ["  ".join(h.ljust(w[i]) for i, h in enumerate(heads))]
    lines += ["  ".join(c.ljust(w[i]) for i, c in enumerate(row)) for row in rows]
    n_done = sum(r.key in done for r in runs)
    extra = len(done - {r.key for r in runs})
    lines.append("")
    lines.append(f"{spec.name}: {len(runs)} runs, {n_done} already done, {len(runs) - n_done} to run"
                 + (f" (out: {out_dir})" if out_dir is not None else "")
                 + (f"; {extra} other stored runs in {runs_dir(out_dir)} are not part of this sweep" if extra else ""))
    return "\n".join(lines)


def add_sweep_arguments(p) -> None:
    p.add_argument("spec", help="sweep spec (TOML), e.g. experiments/quickstart.toml")
    p.add_argument("--out", metavar="DIR", default=None,
                   help="output directory: DIR/runs/<key>.json per run, DIR/<name>.parquet (default sweeps/<name>)")
    p.add_argument("--executor", choices=EXECUTORS, default=None,
                   help="local: process pool (default); dask: distributed Client; serial: this process")
    p.add_argument("--workers", type=int, default=None, metavar="N",
                   help="worker processes (local, or a dask LocalCluster); default: cores (bounded by memory)")
    p.add_argument("--scheduler", metavar="ADDRESS", default=None,
                   help="dask scheduler address (implies --executor dask); default: a LocalCluster")
    p.add_argument("--dry-run", action="store_true", help="validate, list the runs and how many are done; run nothing")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--progress", dest="progress", action="store_true", default=None, help="show a progress bar")
    g.add_argument("--no-progress", dest="progress", action="store_false", help="no progress bar")


def add_sweep_commands(subparsers) -> None:
    """Register `tierlab sweep` on the CLI's subparsers (tierlab.cli.COMMANDS)."""
    p = subparsers.add_parser("sweep", help="run a parameter sweep from a TOML spec into a Parquet table",
                              description="Run every run of a sweep spec (grid, zip, repeats) not already "
                                          "stored in --out, then write DIR/<name>.parquet. See docs/sweeps.md.")
    add_sweep_arguments(p)
    p.set_defaults(func=main_sweep)


add_sweep_command = add_sweep_commands


def main_sweep(args) -> int:
    """`tierlab sweep` (exit 0: all runs finished; 1: some runs failed; 2: bad input, via ConfigError)."""
    spec = load_spec(args.spec)
    out = args.out if args.out is not None else os.path.join("sweeps", spec.name)
    if args.dry_run:
        print(dry_run_report(spec, out))
        return 0
    executor = args.executor or ("dask" if args.scheduler else "local")
    df, stats = sweep(spec, out, executor=executor, workers=args.workers, scheduler=args.scheduler,
                      progress=args.progress)
    print(f"{spec.name}: {stats.summary()} ({stats.wall_s:.1f} s)", file=sys.stderr)
    return 1 if stats.failed else 0   # each failure was reported when it happened


def main(argv: list[str] | None = None) -> int:
    """`python -m tierlab.sweep SPEC --out DIR ...` (the same as `python -m tierlab sweep`)."""
    import argparse
    p = argparse.ArgumentParser(prog="tierlab sweep", description="Run a tierlab parameter sweep.")
    add_sweep_arguments(p)
    args = p.parse_args(argv)
    try:
        return main_sweep(args)
    except TierlabError as e:
        print(f"tierlab: error: {' '.join(str(e).split())}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("tierlab: interrupted; finished runs are stored, re-run to resume", file=sys.stderr)
        return 130


if __name__ == "__main__":
    from tierlab.sweep import main as _main   # functions pickle as tierlab.sweep.*, not __main__.*
    sys.exit(_main())
