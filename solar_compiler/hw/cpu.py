"""What this CPU can do at most, from its own description: the ``host`` target's ceilings.

A host bound must be a ceiling, so its peaks are derived from the CPU rather than measured (a busy
machine measures far below what it can do): usable cores x FLOP per cycle of the widest ISA the
flags advertise x maximum clock. Every input is text the caller reads (``/proc/cpuinfo``, cpufreq,
cgroup quota), so tests inject fakes. Assumptions, all on the high (safe) side:

* two FMA pipes of the widest vector width (Zen 4 has one 512-bit FMA per cycle: 2x high there),
  an FMA counting 2 FLOP; integer and 16-bit dot products two per cycle; AMX tiles at Intel's
  per-core figures;
* every usable logical CPU is a core (SMT siblings share FMA pipes: up to 2x high);
* the maximum clock is cpufreq's ``cpuinfo_max_freq`` (what ``lscpu`` prints as "CPU max MHz");
  without it (virtual machines: ``cpu MHz`` is then the nominal clock, and bogomips twice it) the
  highest maximum boost of the CPU's series (``SERIES_MAX_BOOST``, by vendor, family and model) when
  the series is known; else the highest clock the model name or ``cpu MHz`` states, times
  ``TURBO_ALLOWANCE`` (those are base or current clocks, and turbo runs above them).

``measure.py`` measures rates beside these; a measurement above a ceiling flags the model as wrong
(``host.calibrate_host`` then raises the ceiling and says so).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

#: Ratio of maximum turbo to the base clock a model name states, for clocks that are not a maximum.
#: Server parts stay below 2 (Xeon Platinum 8480+: 3.8 / 2.0 GHz; Xeon 6980P: 3.9 / 2.0; EPYC
#: 9575F: 5.0 / 3.3), so 2.0 is a ceiling for them; a desktop E-core (2.4 base, 6.0 turbo) is not.
TURBO_ALLOWANCE = 2.0

#: (vendor_id, cpu family, first model, last model) -> (the highest maximum boost clock of any part of the
#: series, what it is and where it is printed). A ceiling for a VM whose model name hides the part:
#: no part of the series runs faster. Sources: AMD product pages / datasheets ("Max. Boost Clock").
SERIES_MAX_BOOST: tuple[tuple[str, int, int, int, float, str], ...] = (
    ("AuthenticAMD", 23, 0x30, 0x3F, 3.9e9, "AMD EPYC 7002 (Rome, Zen 2): EPYC 7F32 max boost 3.9 GHz"),
    ("AuthenticAMD", 25, 0x00, 0x0F, 4.1e9, "AMD EPYC 7003 (Milan, Zen 3): EPYC 72F3 max boost 4.1 GHz"),
    ("AuthenticAMD", 25, 0x10, 0x1F, 4.4e9, "AMD EPYC 9004 (Genoa, Zen 4): EPYC 9174F max boost 4.4 GHz"),
    ("AuthenticAMD", 26, 0x00, 0x1F, 5.0e9, "AMD EPYC 9005 (Turin, Zen 5): EPYC 9575F max boost 5.0 GHz"),
)

#: FLOP (OP for int8) per cycle per core, by CPU flag and format; the best flag present wins.
#: Vector FMA: 2 pipes x lanes x 2. AVX without FMA: one add and one mul pipe. Dot products
#: (VDPBF16PS, VPDPBUSD): 2 per cycle x pairs x 2. AMX: Intel's per-core peaks (1024 BF16/FP16
#: FLOP, 2048 INT8 OP per cycle). NEON/SVE: 4 FMA pipes of 128 bits (Neoverse V2), SVE 2 x 256.
_MATRIX_RATES: tuple[tuple[str, Mapping[str, int]], ...] = (
    ("avx512f", {"fp64": 32, "fp32": 64}),
    ("fma", {"fp64": 16, "fp32": 32}),
    ("avx", {"fp64": 8, "fp32": 16}),
    ("sse2", {"fp64": 4, "fp32": 8}),
    ("sve", {"fp64": 16, "fp32": 32}),
    ("asimd", {"fp64": 16, "fp32": 32}),
    ("amx_bf16", {"bf16": 1024}),
    ("avx512_bf16", {"bf16": 128}),
    ("bf16", {"bf16": 128}),  # aarch64 BFMMLA/BFDOT
    ("amx_fp16", {"fp16": 1024}),
    ("avx512_fp16", {"fp16": 128}),
    ("asimdhp", {"fp16": 64}),
    ("amx_int8", {"int8": 2048}),
    ("avx512_vnni", {"int8": 256}),
    ("avx_vnni", {"int8": 128}),
    ("i8mm", {"int8": 256}),
    ("asimddp", {"int8": 128}),
)
#: Elementwise (vector) work: FMA lanes for fp64/fp32, packed half arithmetic for fp16.
_VECTOR_FORMATS = ("fp64", "fp32")
_VECTOR_FP16_FLAGS = {"avx512_fp16": 128, "asimdhp": 64}
#: Bytes per cycle per core a core's private caches can be fed from the shared cache (an upper
#: figure: Zen 4/5 and Golden Cove move 32-64 B/cycle from L3 or L2).
CACHE_BYTES_PER_CYCLE = 64


@dataclass(frozen=True)
class CpuSpec:
    """The CPU as its own description states it."""

    vendor: str
    model: str
    flags: frozenset[str]
    cores: int
    cores_how: str
    clock_hz: float
    clock_how: str
    clock_exact: bool  # from cpufreq's maximum (else a base/current clock x TURBO_ALLOWANCE)

    def per_cycle(self) -> dict[str, int]:
        """FLOP (OP) per cycle per core for each matrix format the flags support."""
        out: dict[str, int] = {}
        for flag, rates in _MATRIX_RATES:
            if flag in self.flags:
                for fmt, n in rates.items():
                    out[fmt] = max(out.get(fmt, 0), n)
        return out

    def matrix_peaks(self) -> dict[str, tuple[float, str]]:
        """fmt -> (FLOP/s ceiling, how it was derived)."""
        out = {}
        for fmt, n in self.per_cycle().items():
            flag = next(f for f, r in _MATRIX_RATES if f in self.flags and r.get(fmt) == n)
            out[fmt] = (self.cores * n * self.clock_hz, self._how(n, flag, fmt))
        return out

    def vector_peaks(self) -> dict[str, tuple[float, str]]:
        out = {fmt: v for fmt, v in self.matrix_peaks().items() if fmt in _VECTOR_FORMATS}
        for flag, n in _VECTOR_FP16_FLAGS.items():
            if flag in self.flags and "fp16" not in out:
                out["fp16"] = (self.cores * n * self.clock_hz, self._how(n, flag, "fp16"))
        return out

    def _how(self, n: int, flag: str, fmt: str) -> str:
        op = "OP" if fmt.startswith("int") else "FLOP"
        return f"{self.cores} cores x {n} {op}/cycle ({flag}) x {self.clock_hz / 1e9:.4g} GHz"

    def cache_bandwidth(self) -> tuple[float, str]:
        """Ceiling on the bandwidth from the shared cache into the cores' private caches."""
        return (self.cores * CACHE_BYTES_PER_CYCLE * self.clock_hz,
                f"{self.cores} cores x {CACHE_BYTES_PER_CYCLE} B/cycle x {self.clock_hz / 1e9:.3g} GHz")


def parse_cpuinfo(text: str) -> tuple[str, str, frozenset[str], list[float]]:
    """(vendor, model name, flags, every 'cpu MHz') from /proc/cpuinfo text (x86 or aarch64)."""
    vendor, model, flags, mhz = "", "", frozenset[str](), []
    for line in text.splitlines():
        key, _, val = line.partition(":")
        key, val = key.strip(), val.strip()
        if key in ("vendor_id", "CPU implementer") and val and not vendor:
            vendor = val
        elif key in ("model name", "Model", "Hardware") and val and not model:
            model = val
        elif key in ("flags", "Features") and val and not flags:
            flags = frozenset(val.split())
        elif key == "cpu MHz":
            try:
                mhz.append(float(val))
            except ValueError:
                pass
    return vendor, model, flags, mhz


def usable_cores(affinity: Iterable[int], quota: str | None) -> tuple[int, str]:
    """min(CPUs this process may run on, the cgroup CPU quota rounded up). ``quota`` is cgroup v2
    ``cpu.max`` text ("max 100000", "150000 100000") or v1 "<quota_us> <period_us>" ("-1 100000")."""
    n = len(set(affinity)) or 1
    how = f"{n} CPUs in the affinity mask"
    if quota:
        parts = quota.split()
        if len(parts) == 2 and parts[0] not in ("max", "-1"):
            try:
                limit = math.ceil(int(parts[0]) / int(parts[1]))
            except (ValueError, ZeroDivisionError):
                limit = n
            if 0 < limit < n:
                n, how = limit, f"cgroup CPU quota {parts[0]}/{parts[1]} us"
    return n, how


_GHZ = re.compile(r"(\d+(?:\.\d+)?)\s*([GM])Hz", re.IGNORECASE)


def cpu_series(cpuinfo: str) -> tuple[str, int, int] | None:
    """(vendor_id, cpu family, model) of the first CPU in /proc/cpuinfo text, or None (aarch64)."""
    got: dict[str, str] = {}
    for line in cpuinfo.splitlines():
        key, _, val = line.partition(":")
        key = key.strip()
        if key in ("vendor_id", "cpu family", "model") and key not in got:
            got[key] = val.strip()
    try:
        return got["vendor_id"], int(got["cpu family"]), int(got["model"])
    except (KeyError, ValueError):
        return None


def series_max_boost(series: tuple[str, int, int] | None) -> tuple[float, str] | None:
    if series is None:
        return None
    vendor, family, model = series
    for v, f, lo, hi, hz, what in SERIES_MAX_BOOST:
        if (v, f) == (vendor, family) and lo <= model <= hi:
            return hz, what
    return None


def max_clock(cpufreq_khz: Iterable[str], model: str, mhz: Iterable[float],
              series: tuple[str, int, int] | None = None) -> tuple[float, str, bool]:
    """(Hz, how, exact): cpufreq's maximum when any CPU reports one; else the highest maximum boost of
    the CPU's series (`SERIES_MAX_BOOST`); else the highest clock the model name or 'cpu MHz' states
    times TURBO_ALLOWANCE. `how` says which. Raises ValueError when nothing states a clock."""
    mhz = [m for m in mhz if m > 0]
    khz = []
    for text in cpufreq_khz:
        try:
            khz.append(int(text.strip()))
        except ValueError:
            pass
    if khz and max(khz) > 0:
        return max(khz) * 1e3, "cpufreq cpuinfo_max_freq", True
    boost = series_max_boost(series)
    if boost is not None:
        vendor, family, mod = series  # type: ignore[misc]
        seen = f" (cpuinfo 'cpu MHz' states {max(mhz) / 1e3:.4g} GHz, not a maximum)" if mhz else ""
        return boost[0], (f"no cpufreq; highest max boost of the series ({vendor} family {family} "
                          f"model {mod}): {boost[1]}{seen}"), False
    stated = [(float(v) * (1e9 if unit.upper() == "G" else 1e6), f"model name '{model}'")
              for v, unit in _GHZ.findall(model)]
    stated += [(m * 1e6, "/proc/cpuinfo cpu MHz") for m in mhz]
    if not stated:
        raise ValueError("no clock: no cpufreq maximum, no GHz in the model name, no 'cpu MHz'")
    hz, src = max(stated)
    return hz * TURBO_ALLOWANCE, f"{hz / 1e9:.4g} GHz from {src} x turbo allowance {TURBO_ALLOWANCE:g}", False


def describe_cpu(cpuinfo: str, affinity: Iterable[int], quota: str | None,
                 cpufreq_khz: Iterable[str]) -> CpuSpec:
    vendor, model, flags, mhz = parse_cpuinfo(cpuinfo)
    cores, cores_how = usable_cores(affinity, quota)
    hz, how, exact = max_clock(cpufreq_khz, model, mhz, cpu_series(cpuinfo))
    return CpuSpec(vendor or "unknown", model or "unknown CPU", flags, cores, cores_how, hz, how, exact)
