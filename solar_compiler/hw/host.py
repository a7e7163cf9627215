"""The ``host`` target: this machine as a CEILING, written by ``calibrate_host`` to the user cache.

A host bound is compared with eager timings on the same machine, so its peaks must be at least
what the machine can do, not what a (possibly busy) benchmark reached:

* compute peaks are derived from the CPU itself (``cpu.py``: ISA from the flags, usable cores,
  maximum clock); measured matmul rates are kept beside them (``measured``), reported, and a
  measurement above a derived peak flags the model as wrong and raises the peak (``IMPLAUSIBLE``);
* memory bandwidth, which no flag states, is the best of several methods and sizes times a stated
  margin (``DRAM_MARGIN``); the cache bandwidth is the larger of a per-core upper figure and the
  measured rate times the margin;
* a busy machine (load average, spread between trials) is refused unless ``force``; a forced busy
  calibration warns and scales its measured bandwidths by the load factor (load / cores);
* a later calibration of the same machine never lowers a figure (the cached file is merged).

numpy and torch are imported only inside ``calibrate_host``, so importing this module is cheap.
"""

from __future__ import annotations

import datetime
import hashlib
import logging
import math
import os
import platform
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from solar_compiler.hw.cpu import CpuSpec, describe_cpu
from solar_compiler.hw.errors import HwTargetError
from solar_compiler.hw.measure import FULL, QUICK, Measurements, measure
from solar_compiler.hw.model import HOST, HOST_SOURCE, HwTarget
from solar_compiler.hw.schema import load_file

log = logging.getLogger(__name__)

#: Ceiling of DRAM (and measured cache) bandwidth = best measured x this: copies, sums and fills
#: reach 70-85% of a memory system's peak (STREAM-style results), so 1.25 covers the rest.
DRAM_MARGIN = 1.25
#: A measured compute rate above its derived peak raises the peak to measured x this (and warns).
IMPLAUSIBLE = 1.1
#: The machine counts as busy when the 1-minute load average exceeds this many runnable tasks per
#: usable core before measuring, or when trials of one measurement differ by more than BUSY_SPREAD.
BUSY_LOAD = 0.5
BUSY_SPREAD = 0.25
DERIVED_SOURCE = "derived by solar-opt --calibrate-host from this CPU's flags, cores and clock"
_EMULATION = {  # the bundled targets' methods (docs/hw-targets.md), where the CPU has the unit
    "bf16x9": ("fp32", "matrix.bf16", 9, "https://developer.nvidia.com/blog/unlocking-tensor-core-performance-"
               "with-floating-point-emulation-in-cublas"),
    "fp16x3": ("fp32", "matrix.fp16", 3, "https://arxiv.org/abs/2203.03341"),
    "ozaki2_int8_fp32": ("fp32", "matrix.int8", 6, "https://github.com/RIKEN-RCCS/GEMMul8"),
    "ozaki2_int8_fp64": ("fp64", "matrix.int8", 14, "https://github.com/RIKEN-RCCS/GEMMul8"),
}


def host_cache_path() -> Path:
    """Where the host calibration is cached: ``$XDG_CACHE_HOME/solar-opt/host.yaml``
    (``~/.cache/solar-opt/host.yaml`` when XDG_CACHE_HOME is unset)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "solar-opt" / "host.yaml"


@dataclass(frozen=True)
class HostFacts:
    """What the operating system says about this machine (``read_host_facts``; tests build fakes)."""

    cpuinfo: str
    affinity: tuple[int, ...]
    quota: str | None  # cgroup cpu.max (v2) or "<cfs_quota_us> <cfs_period_us>" (v1)
    cpufreq_khz: tuple[str, ...]  # cpuinfo_max_freq of each usable CPU that has one
    llc_bytes: int | None  # last-level cache, summed over the instances the usable CPUs share
    l2_core: int | None
    l1d_core: int | None
    cache_source: str
    phys_bytes: int | None
    loadavg: float | None  # 1-minute load average


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def _parse_size(text: str) -> int:
    text = text.strip().upper()
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
    return int(text.rstrip("KMGB") or 0) * mult


def _cpu_caches(cpus: tuple[int, ...]) -> tuple[int | None, int | None, int | None, str]:
    """(last-level cache bytes summed over the distinct instances these CPUs use, per-core L2, per-core
    L1d, where it was read from)."""
    root = Path("/sys/devices/system/cpu")
    instances: dict[tuple[int, str], int] = {}
    per_core: dict[int, int] = {}
    for cpu in cpus:
        for idx in sorted((root / f"cpu{cpu}" / "cache").glob("index*")):
            try:
                level = int((idx / "level").read_text())
                kind = (idx / "type").read_text().strip()
                size = _parse_size((idx / "size").read_text())
                shared = (idx / "shared_cpu_list").read_text().strip()
            except (OSError, ValueError):
                continue
            if kind == "Instruction" or size <= 0:
                continue
            instances[(level, shared)] = size
            if cpu == cpus[0]:
                per_core[level] = size
    if instances:
        top = max(level for level, _ in instances)
        llc = sum(size for (level, _), size in instances.items() if level == top)
        return llc, per_core.get(2), per_core.get(1), "/sys/devices/system/cpu/cpu*/cache"
    sizes = {}
    for level in (1, 2, 3):
        key = "SC_LEVEL1_DCACHE_SIZE" if level == 1 else f"SC_LEVEL{level}_CACHE_SIZE"
        try:
            sizes[level] = int(os.sysconf(key)) if key in os.sysconf_names else 0
        except (OSError, ValueError):
            sizes[level] = 0
    return sizes[3] or sizes[2] or None, sizes[2] or None, sizes[1] or None, "os.sysconf"


def read_host_facts() -> HostFacts:
    try:
        cpus = tuple(sorted(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        cpus = tuple(range(os.cpu_count() or 1))
    quota = _read(Path("/sys/fs/cgroup/cpu.max"))
    if quota is None:
        v1 = Path("/sys/fs/cgroup/cpu")
        q, p = _read(v1 / "cpu.cfs_quota_us"), _read(v1 / "cpu.cfs_period_us")
        quota = f"{q.strip()} {p.strip()}" if q and p else None
    root = Path("/sys/devices/system/cpu")
    freq = tuple(t for c in cpus if (t := _read(root / f"cpu{c}" / "cpufreq" / "cpuinfo_max_freq")))
    try:
        phys: int | None = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        phys = None
    try:
        load: float | None = os.getloadavg()[0]
    except (AttributeError, OSError):
        load = None
    cpuinfo = _read(Path("/proc/cpuinfo")) or f"model name: {platform.processor() or platform.machine()}\n"
    return HostFacts(cpuinfo, cpus, quota, freq, *_cpu_caches(cpus), phys, load)


def busy_reasons(facts: HostFacts, cores: int, m: Measurements | None) -> list[str]:
    """Why measurements on this machine may be low: load before measuring, spread between trials."""
    out = []
    if facts.loadavg is not None and facts.loadavg > BUSY_LOAD * cores:
        out.append(f"load average {facts.loadavg:.2f} on {cores} usable cores (> {BUSY_LOAD:g} per core)")
    if m is not None and m.worst_spread() > BUSY_SPREAD:
        out.append(f"trials differ by up to {m.worst_spread():.0%} (> {BUSY_SPREAD:.0%})")
    return out


def calibrate_host(path: Path | None = None, *, quick: bool = False, use_torch: bool = True,
                   force: bool = False, facts: HostFacts | None = None,
                   measurements: Measurements | None = None,
                   today: str | None = None) -> HwTarget:
    """Derive this machine's ceilings, measure beside them, write the ``host`` target YAML (default
    ``host_cache_path()``, merged with an earlier calibration of the same machine so that no figure
    goes down) and return it loaded. A busy machine raises ``HwTargetError`` unless ``force``.
    ``facts`` and ``measurements`` replace reading the system and benchmarking (tests); ``quick``
    uses tiny benchmark sizes; ``use_torch=False`` skips torch."""
    facts = facts or read_host_facts()
    try:
        cpu = describe_cpu(facts.cpuinfo, facts.affinity, facts.quota, facts.cpufreq_khz)
    except ValueError as e:
        raise HwTargetError(f"host: cannot derive a ceiling for this CPU: {e}") from None
    _refuse_if_busy(busy_reasons(facts, cpu.cores, None), force)
    m = measurements or measure(QUICK if quick else FULL, cpu.cores, facts.llc_bytes, use_torch)
    busy = busy_reasons(facts, cpu.cores, m)
    _refuse_if_busy(busy, force)
    for why in busy:
        log.warning("host calibration on a busy machine: %s; measured rates may be low", why)
    out = Path(path) if path is not None else host_cache_path()
    doc = host_document(cpu, facts, m, today or datetime.date.today().isoformat(), busy)
    old = _previous(out)
    if old is not None and old.get("machine") == doc["machine"]:
        doc = merge_never_lower(doc, old)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + f".{os.getpid()}.tmp")
    header = ("# Host target written by solar-opt --calibrate-host: ceilings derived from the CPU,\n"
              "# measured rates beside them under 'measured'. Dense FLOP/s (never MAC/s); bandwidths\n"
              "# count bytes read + written. Levels: chip = all cache storage, core = one core's L2 + L1d.\n")
    tmp.write_text(header + yaml.dump(doc, Dumper=_HostDumper, sort_keys=False, width=1000,
                                      default_flow_style=None), encoding="utf-8")
    os.replace(tmp, out)
    return load_file(out)


def _refuse_if_busy(reasons: list[str], force: bool) -> None:
    if reasons and not force:
        raise HwTargetError(f"host: the machine is busy ({'; '.join(reasons)}): calibrate on a quiet "
                            "machine, or pass --force to record it anyway (an earlier calibration's figures "
                            "are kept)")


def _fig(value: float, unit: str, source: str, note: str | None = None,
         estimate: bool = True) -> dict[str, Any]:
    """A figure for the YAML: bytes and counts whole; rates to 4 significant digits, rounded UP for
    ceilings (``estimate``) so that rounding never lowers one, to the nearest for measurements."""
    if unit in ("count", "bytes"):
        shown: float = int(value)
    elif estimate and value > 0:
        exp = math.floor(math.log10(value)) - 3
        shown = float(f"{math.ceil(round(value / 10**exp, 9))}e{exp}")
    else:
        shown = float(f"{value:.4g}")
    d: dict[str, Any] = {"value": shown, "unit": unit, "source": source, "estimate": estimate}
    if note:
        d["note"] = note
    return d


Peaks = dict[str, tuple[float, str]]


def _ceilings(cpu: CpuSpec, m: Measurements) -> tuple[Peaks, Peaks]:
    """Matrix and vector ceilings: derived peaks, raised where a measurement exceeds them (the model
    is then wrong for this CPU). A format without a derived peak is priced through the exact formats
    (bf16 at the fp32 rate): a measurement above that rate adds the format."""
    matrix, vector = dict(cpu.matrix_peaks()), dict(cpu.vector_peaks())
    for fmt, r in m.matmul.items():
        have = matrix.get(fmt) or matrix.get("fp32")
        if have is None or r.value > have[0]:
            log.warning("host: measured %s matmul %.4g FLOP/s exceeds the derived %s; raising it to %gx the "
                        "measurement", fmt, r.value, f"{have[0]:.4g}" if have else "nothing", IMPLAUSIBLE)
            matrix[fmt] = (r.value * IMPLAUSIBLE, f"IMPLAUSIBLE derived peak: {r.how} measured {r.value:.4g} "
                           f"FLOP/s, above it; {IMPLAUSIBLE:g} x the measurement")
            if fmt in vector:
                vector[fmt] = matrix[fmt]
    return matrix, vector


def host_document(cpu: CpuSpec, facts: HostFacts, m: Measurements, today: str,
                  busy: list[str]) -> dict[str, Any]:
    """The host target as a YAML document (schema: docs/hw-targets.md)."""
    matrix, vector = _ceilings(cpu, m)
    exact = cpu.clock_exact

    def peak(v: tuple[float, str], fmt: str) -> dict[str, Any]:
        return _fig(v[0], "OP/s" if fmt == "int8" else "FLOP/s", DERIVED_SOURCE, v[1], estimate=not exact)

    if m.dram is None:
        raise HwTargetError("host: no DRAM bandwidth measurement")
    # A busy machine measures bandwidth low: with L runnable tasks on C cores a benchmark may get as
    # little as C / L of it, so a forced busy calibration scales its bandwidths up by L / C.
    load = max(1.0, (facts.loadavg or 0.0) / cpu.cores) if busy else 1.0
    margin = DRAM_MARGIN * load
    why = f" x margin {DRAM_MARGIN:g}" + (f" x load factor {load:.3g} (busy)" if load > 1 else "")
    # from the measurement as the YAML reports it (4 digits, to the nearest): a ceiling is never below
    # what it lists as measured beside it, even when the measurement rounds up
    dram_bw = max(m.dram.value, float(f"{m.dram.value:.4g}")) * margin
    dram_note = f"best of methods and sizes: {m.dram.how} {m.dram.value:.4g} B/s{why}"
    cache_bw, cache_note = cpu.cache_bandwidth()
    if m.cache is not None and m.cache.value * margin > cache_bw:
        cache_bw, cache_note = m.cache.value * margin, f"{m.cache.how}{why}"
    cache_bw = max(cache_bw, dram_bw * 1.01)  # the inner boundary is never slower than DRAM
    per_core = (facts.l2_core or 0) + (facts.l1d_core or 0)
    flags = hashlib.sha256(" ".join(sorted(cpu.flags)).encode()).hexdigest()[:12]
    doc: dict[str, Any] = {
        "name": HOST,
        "vendor": cpu.vendor,
        "description": f"{cpu.model} ({cpu.cores} usable cores), calibrated {today}"
                       + (f"; BUSY: {'; '.join(busy)}" if busy else ""),
        "machine": f"{cpu.vendor}|{cpu.model}|{cpu.cores} cores|flags {flags}",
        "matrix": {fmt: peak(v, fmt) for fmt, v in matrix.items()},
        "vector": {fmt: peak(v, fmt) for fmt, v in vector.items()},
        "dram": {"bandwidth": _fig(dram_bw, "bytes/s", HOST_SOURCE, dram_note)},
    }
    doc["emulation"] = {name: _method(c, via, n, src)
                        for name, (c, via, n, src) in _EMULATION.items() if via.split(".")[1] in matrix}
    if facts.phys_bytes:
        doc["dram"]["capacity"] = _fig(facts.phys_bytes, "bytes", "physical memory (sysconf)", estimate=False)
    if facts.llc_bytes:
        doc["l2"] = {"size": _fig(facts.llc_bytes, "bytes", f"last-level cache, from {facts.cache_source}",
                                  estimate=False),
                     "bandwidth": _fig(cache_bw, "bytes/s", DERIVED_SOURCE, cache_note)}
    doc["sm"] = {"count": _fig(cpu.cores, "count", f"usable cores: {cpu.cores_how}", estimate=False)}
    if facts.l1d_core:
        doc["sm"]["smem_per_sm"] = _fig(facts.l1d_core, "bytes", f"per-core L1d, from {facts.cache_source}",
                                        estimate=False)
    doc["clock_hz"] = _fig(cpu.clock_hz, "Hz", DERIVED_SOURCE, cpu.clock_how, estimate=not exact)
    levels: list[dict[str, Any]] = []
    if facts.llc_bytes:
        chip = facts.llc_bytes + cpu.cores * per_core
        levels.append({"name": "chip", "units": 1,
                       "capacity": _fig(chip, "bytes", f"from {facts.cache_source}",
                                        f"all cache storage: last-level cache + {cpu.cores} x (L2 + L1d)"),
                       "bandwidth": _fig(dram_bw, "bytes/s", HOST_SOURCE, "as dram.bandwidth")})
        if 0 < per_core < chip:
            levels.append({"name": "core", "units": "core",
                           "capacity": _fig(per_core, "bytes", f"from {facts.cache_source}", "L2 + L1d"),
                           "bandwidth": _fig(cache_bw, "bytes/s", DERIVED_SOURCE, "as l2.bandwidth")})
    doc["levels"] = levels
    measured: dict[str, Any] = {
        f"matrix.{fmt}": _fig(r.value, "OP/s" if fmt == "int8" else "FLOP/s", HOST_SOURCE,
                              f"{r.how}; trials spread {r.spread:.0%}", estimate=False)
        for fmt, r in m.matmul.items()}
    for key, r in (("dram.bandwidth", m.dram), ("l2.bandwidth", m.cache)):
        if r is not None:
            measured[key] = _fig(r.value, "bytes/s", HOST_SOURCE, f"{r.how}; trials spread {r.spread:.0%}",
                                 estimate=False)
    doc["measured"] = measured
    doc["measured_on"] = today
    return doc


def _method(computes: str, via: str, products: int, source: str) -> dict[str, Any]:
    return {"computes": computes, "via": via, "products": products, "source": source, "estimate": True}


def _previous(path: Path) -> dict[str, Any] | None:
    """The earlier calibration's document, if it exists and still loads as a valid target."""
    if not path.is_file():
        return None
    try:
        load_file(path)
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except (HwTargetError, yaml.YAMLError, OSError):
        log.warning("host: ignoring an unreadable earlier calibration at %s", path)
        return None


def merge_never_lower(new: dict[str, Any], old: dict[str, Any]) -> dict[str, Any]:
    """``new`` with every figure at least ``old``'s (same machine): rates, bandwidths, capacities and
    the clock keep the larger value, and figures only the old file has are kept."""
    def keep(a: dict[str, Any] | None, b: dict[str, Any] | None) -> dict[str, Any] | None:
        if a is None or b is None:
            return a or b
        return b if float(b["value"]) > float(a["value"]) else a

    out = dict(new)
    for section in ("matrix", "vector", "measured"):
        merged = dict(new.get(section) or {})
        for key, fig in (old.get(section) or {}).items():
            merged[key] = keep(merged.get(key), fig)
        out[section] = merged
    for section, keys in (("dram", ("bandwidth", "capacity")), ("l2", ("size", "bandwidth"))):
        if section in new or section in old:
            merged = dict(new.get(section) or {})
            for key in keys:
                got = keep(merged.get(key), (old.get(section) or {}).get(key))
                if got is not None:
                    merged[key] = got
            out[section] = merged
    out["clock_hz"] = keep(new.get("clock_hz"), old.get("clock_hz"))
    old_levels = {lv["name"]: lv for lv in old.get("levels") or []}
    out["levels"] = [{**lv, **{k: keep(lv[k], old_levels.get(lv["name"], {}).get(k))
                               for k in ("capacity", "bandwidth")}} for lv in new.get("levels") or []]
    for lv in out["levels"]:  # the chip level's bandwidth is the DRAM bandwidth: keep them equal
        if lv["name"] == "chip":
            lv["bandwidth"] = keep(lv["bandwidth"], out["dram"]["bandwidth"])
            out["dram"]["bandwidth"] = lv["bandwidth"]
    out["emulation"] = {name: e for name, e in (new.get("emulation") or {}).items()}
    for name, (c, via, n, src) in _EMULATION.items():
        if via.split(".")[1] in out["matrix"] and name not in out["emulation"]:
            out["emulation"][name] = _method(c, via, n, src)
    return out


def summary(t: HwTarget) -> list[str]:
    """Lines for ``solar-opt --calibrate-host``: each ceiling beside what was measured."""
    lines = [f"host: {t.description}"]
    for key, fig in t._named_figures():
        seen = t.measured.get(key)
        if key.startswith(("matrix.", "vector.", "dram.bandwidth", "l2.bandwidth", "clock_hz")):
            extra = f"; measured {seen.value:.4g} ({seen.value / fig.value:.0%} of it)" if seen else ""
            why = f" ({fig.note})" if key == "clock_hz" and fig.note else ""
            lines.append(f"  {key}: {fig.value:.4g} {fig.unit}{extra}{why}")
    return lines


class _HostDumper(yaml.SafeDumper):
    """Writes floats as 4.920e+10: readable, and a float to every YAML loader (PyYAML needs the dot)."""


_HostDumper.add_representer(float, lambda d, v: d.represent_scalar("tag:yaml.org,2002:float", f"{v:.3e}"))
