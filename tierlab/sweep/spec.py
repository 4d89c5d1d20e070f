"""Sweep specs: parse a TOML spec into a Spec, expand it into runs, validate every run (with
`tierlab.config.check`, the one validator) and key it (docs/sweeps.md)."""
from __future__ import annotations

import hashlib
import itertools
import json
import os
import re
from dataclasses import dataclass, field
from typing import Any

from ..config import check, parse_seed
from ..errors import ConfigError, TierlabError

RUN_FORMAT = 1
SPEC_KEYS = {
    "name": "the sweep's name (also the table's file name: DIR/<name>.parquet)",
    "description": "free text",
    "base": "the base run: machine, workload, params, knobs, costs, scale, seed, sample_interval_ms, quantum_us, tlb_model, page_alloc_model, at",
    "grid": "keys varied as a cartesian product: \"params.X\", \"knobs.Y\", \"costs.Z\", machine, workload, scale, sample_interval_ms, quantum_us, tlb_model, page_alloc_model, at (a list of event lists)",
    "zip": "lists of equal length varied together ([zip], or several [[zip]] groups)",
    "repeat": "seeds = [..] or count = N",
}
BASE_KEYS = ("machine", "workload", "params", "knobs", "costs", "scale", "seed", "sample_interval_ms", "quantum_us",
             "tlb_model", "page_alloc_model", "at")
VARY_TOP = ("machine", "workload", "scale", "sample_interval_ms", "quantum_us", "tlb_model", "page_alloc_model", "at")
VARY_TABLES = ("params", "knobs", "costs")
REPEAT_KEYS = ("seeds", "count")
EXECUTORS = ("local", "dask", "serial")

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
    nr_pages: int = 0                 # the run's simulated pages (sizes the local pool by memory)
    accesses: int | None = None       # the run's simulated accesses, when known up front

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
        base_seed = parse_seed(base.pop("seed", 0))
    except ConfigError as e:
        raise err("base", "seed", f"base.{e}") from None

    # grid and zip
    from ..kernel import KNOBS

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
            if key == "at":
                if not isinstance(v, list) or not all(isinstance(e, str) for e in v):
                    raise err(section, key, f"{section}: 'at': each value is a list of events (strings), e.g. "
                                            f"at = [[], [\"10ms:set numa_balancing=2\"]]; got {v!r}")
            elif not _scalar_ok(v):
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
            for x in s:
                try:
                    parse_seed(x)
                except ConfigError as e:
                    raise err("repeat", "seeds", f"repeat: seeds: {e}") from None
            seeds = list(s)
        elif "count" in r:
            c = r["count"]
            if not isinstance(c, int) or isinstance(c, bool) or c < 1:
                raise err("repeat", "count", f"repeat: count: expected an integer >= 1, got {c!r}")
            seeds = [base_seed + i for i in range(c)]   # derived: base seed, base seed + 1, ...
            try:
                parse_seed(seeds[-1])
            except ConfigError as e:
                raise err("repeat", "count", f"repeat: count: base seed + count - 1: {e}") from None

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
    """Expand `spec` and validate every run with `tierlab.config.check` before any runs: a list of
    Run in table order, each with its resolved config (`RunConfig.to_dict()`). Raises ConfigError
    naming the spec file, line and key of the first bad value."""
    spec = load_spec(spec)
    version = version or tierlab_version()
    runs: list[Run] = []
    seen: dict[str, int] = {}
    expanded = expand(spec)
    for i, (raw, varied, seed) in enumerate(expanded):
        try:
            checked = check(raw)
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
        cfg = checked.config.to_dict()
        key = run_key(cfg, version)
        if key in seen:
            j = seen[key]
            raise ConfigError(f"{spec.where}: runs {j + 1} and {i + 1} resolve to the same config "
                              f"({runs[j].label()} / {' '.join(f'{k}={_short(x)}' for k, x in varied.items())}); "
                              "remove the duplicate value")
        seen[key] = i
        runs.append(Run(index=i, key=key, config=cfg, varied=dict(varied), seed=seed,
                        nr_pages=checked.nr_pages, accesses=checked.accesses))
    return runs
