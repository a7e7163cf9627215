"""The ``host`` target: this machine, measured by ``calibrate_host`` and cached in the user cache dir.
numpy and torch are imported only inside ``calibrate_host``, so importing this module is cheap."""

from __future__ import annotations

import datetime
import math
import os
import platform
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from solar_compiler.hw.model import HOST, HOST_SOURCE, HwTarget
from solar_compiler.hw.schema import load_file


def host_cache_path() -> Path:
    """Where the host calibration is cached: ``$XDG_CACHE_HOME/solar-opt/host.yaml``
    (``~/.cache/solar-opt/host.yaml`` when XDG_CACHE_HOME is unset)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "solar-opt" / "host.yaml"


@dataclass(frozen=True)
class _Bench:
    """Benchmark sizes. The full run stays under ~5 s including importing torch."""

    max_n: int = 2048  # largest matmul edge tried
    start_n: int = 256  # first matmul edge (doubles while one product takes < grow_s)
    grow_s: float = 0.02
    budget_s: float = 0.25  # time spent repeating the final matmul size, per dtype
    copy_min_bytes: int = 64 << 20  # DRAM copy array: max(this, 4 x LLC), capped at copy_max_bytes
    copy_max_bytes: int = 512 << 20
    copy_reps: int = 3


_FULL = _Bench()
_QUICK = _Bench(
    max_n=128,
    start_n=64,
    grow_s=0.0,
    budget_s=0.01,
    copy_min_bytes=4 << 20,
    copy_max_bytes=4 << 20,
    copy_reps=2,
)


def _best_time(fn: Callable[[], object], budget_s: float, min_reps: int = 2, max_reps: int = 50) -> float:
    best = math.inf
    start = time.perf_counter()
    for rep in range(max_reps):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
        if rep + 1 >= min_reps and time.perf_counter() - start >= budget_s:
            break
    return best


def _matmul_rate(
    make: Callable[[int], tuple[Any, Any]], mm: Callable[[Any, Any], object], bench: _Bench
) -> float:
    """Best FLOP/s of an n x n x n product (2 n^3 FLOP), growing n until one product is measurable."""
    n = bench.start_n
    while True:
        a, b = make(n)
        t0 = time.perf_counter()
        mm(a, b)
        elapsed = time.perf_counter() - t0
        if elapsed >= bench.grow_s or n * 2 > bench.max_n:
            break
        n *= 2
    return 2.0 * n**3 / _best_time(lambda: mm(a, b), bench.budget_s)


def _parse_size(text: str) -> int:
    text = text.strip().upper()
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
    return int(text.rstrip("KMGB") or 0) * mult


def _usable_cpus() -> list[int]:
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return list(range(os.cpu_count() or 1))


def _cpu_caches(cpus: list[int]) -> tuple[int | None, int | None, int | None, str]:
    """(last-level cache bytes summed over the distinct instances these CPUs use, per-core L2 bytes,
    per-core L1d bytes, where it was read from)."""
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
    llc = sizes[3] or sizes[2] or None
    return llc, (sizes[2] or None), (sizes[1] or None), "os.sysconf"


def _copy_bandwidth(np: Any, nbytes: int, threads: int, reps: int, inner: int = 1) -> float:
    """Best bytes/s (read + write) of copying an ``nbytes`` array, split across ``threads`` threads
    (numpy releases the GIL during copies), ``inner`` copies per timed call."""
    from concurrent.futures import ThreadPoolExecutor

    n = max(nbytes // 8, threads * 1024)
    src = np.ones(n)
    dst = np.zeros(n)
    bounds = [(i * n // threads, (i + 1) * n // threads) for i in range(threads)]

    def work(lo_hi: tuple[int, int]) -> None:
        lo, hi = lo_hi
        for _ in range(inner):
            np.copyto(dst[lo:hi], src[lo:hi])

    best = 0.0
    with ThreadPoolExecutor(threads) as pool:
        for _ in range(reps + 1):  # first pass warms the pool and the pages
            t0 = time.perf_counter()
            list(pool.map(work, bounds))
            best = max(best, 2.0 * src.nbytes * inner / (time.perf_counter() - t0))
    return best


def _cpu_model() -> tuple[str, str]:
    vendor, model = platform.machine() or "cpu", platform.processor() or ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, val = line.partition(":")
            key, val = key.strip(), val.strip()
            if key == "vendor_id" and val:
                vendor = val
            elif key in ("model name", "Model", "Hardware") and val and not model:
                model = val
    except OSError:
        pass
    return vendor, model or platform.platform()


def _max_clock_hz() -> float | None:
    try:
        return int(Path("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq").read_text()) * 1e3
    except (OSError, ValueError):
        pass
    try:
        mhz = [
            float(line.split(":")[1])
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("cpu MHz")
        ]
        return max(mhz) * 1e6 if mhz else None
    except (OSError, ValueError, IndexError):
        return None


class _HostDumper(yaml.SafeDumper):
    """Writes floats as 4.920e+10: readable, and a float to every YAML loader (PyYAML needs the dot)."""


_HostDumper.add_representer(float, lambda d, v: d.represent_scalar("tag:yaml.org,2002:float", f"{v:.3e}"))


def calibrate_host(path: Path | None = None, *, quick: bool = False, use_torch: bool = True) -> HwTarget:
    """Measure this machine and write a target YAML (default ``host_cache_path()``); return it loaded.

    Measures matmul FLOP/s for f64/f32 with numpy (and torch where faster), bf16/f16 with torch when it
    is importable; read+write bandwidth of a multi-threaded array copy larger than the last-level cache
    (DRAM) and of one inside it (LLC); cache sizes from /sys (or sysconf); usable core count. Peaks are
    the best observed, so they are achievable rates rather than datasheet maxima. ``quick`` uses tiny
    sizes (tests); ``use_torch=False`` skips torch.
    """
    import numpy as np

    bench = _QUICK if quick else _FULL
    out = Path(path) if path is not None else host_cache_path()
    cpus = _usable_cpus()
    threads = len(cpus)
    llc, l2_core, l1_core, cache_src = _cpu_caches(cpus)
    rng = np.random.default_rng(0)

    def np_make(dt: Any) -> Callable[[int], tuple[Any, Any]]:
        return lambda n: (rng.random((n, n), dtype=dt), rng.random((n, n), dtype=dt))

    rates: dict[str, tuple[float, str]] = {
        "fp64": (_matmul_rate(np_make(np.float64), np.matmul, bench), "numpy float64 matmul"),
        "fp32": (_matmul_rate(np_make(np.float32), np.matmul, bench), "numpy float32 matmul"),
    }
    torch: Any = None
    if use_torch:
        try:
            import torch
        except ImportError:
            torch = None
    if torch is not None:
        for fmt, dt in (
            ("fp64", torch.float64),
            ("fp32", torch.float32),
            ("bf16", torch.bfloat16),
            ("fp16", torch.float16),
        ):

            def t_make(n: int, dt: Any = dt) -> tuple[Any, Any]:
                return torch.rand(n, n, dtype=torch.float32).to(dt), torch.rand(n, n, dtype=torch.float32).to(
                    dt
                )

            try:
                rate = _matmul_rate(t_make, torch.matmul, bench)
            except (RuntimeError, TypeError):  # dtype unsupported on this CPU build
                continue
            if rate > rates.get(fmt, (0.0, ""))[0]:
                rates[fmt] = (rate, f"torch {str(dt).removeprefix('torch.')} matmul")

    dram_bytes = min(max(bench.copy_min_bytes, 4 * (llc or 0)), bench.copy_max_bytes)
    try:
        phys = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        phys = 0
    if phys:
        dram_bytes = min(dram_bytes, phys // 8)
    dram_bw = _copy_bandwidth(np, dram_bytes, threads, bench.copy_reps)
    llc_bw = None
    if llc:
        inner_bytes = max(llc // 4, 64 << 10)
        inner = max(1, min(50, (64 << 20) // inner_bytes)) if not quick else 2
        llc_bw = _copy_bandwidth(np, inner_bytes, threads, bench.copy_reps, inner=inner)

    def fig(value: float, unit: str, note: str | None = None) -> dict[str, Any]:
        d: dict[str, Any] = {
            "value": float(f"{value:.4g}") if unit not in ("count", "bytes") else int(value),
            "unit": unit,
            "source": HOST_SOURCE,
            "estimate": False,
        }
        if note:
            d["note"] = note
        return d

    vendor, model = _cpu_model()
    today = datetime.date.today().isoformat()
    doc: dict[str, Any] = {
        "name": HOST,
        "vendor": vendor,
        "description": f"{model} ({threads} usable cores), measured {today}",
        "matrix": {fmt: fig(rate, "FLOP/s", f"best {how}") for fmt, (rate, how) in rates.items()},
        "vector": {
            fmt: fig(
                rates[fmt][0],
                "FLOP/s",
                f"FMA throughput via {rates[fmt][1]} (elementwise numpy is memory-bound)",
            )
            for fmt in ("fp64", "fp32")
        },
        "dram": {
            "bandwidth": fig(
                dram_bw, "bytes/s", f"{threads}-thread copy of {dram_bytes >> 20} MiB, read+write"
            )
        },
    }
    if phys:
        doc["dram"]["capacity"] = fig(phys, "bytes", "physical memory (sysconf)")
    if llc:
        doc["l2"] = {"size": fig(llc, "bytes", f"last-level cache, from {cache_src}")}
        if llc_bw:
            doc["l2"]["bandwidth"] = fig(llc_bw, "bytes/s", "copy inside the last-level cache, read+write")
    doc["sm"] = {"count": fig(threads, "count", "CPU cores this process may use")}
    if l1_core:
        doc["sm"]["smem_per_sm"] = fig(l1_core, "bytes", f"per-core L1d, from {cache_src}")
    clock = _max_clock_hz()
    if clock:
        doc["clock_hz"] = fig(clock, "Hz", "max frequency reported by the OS")
    levels: list[dict[str, Any]] = []
    if llc:
        levels.append(
            {
                "name": "chip",
                "units": 1,
                "capacity": fig(llc, "bytes", "last-level cache"),
                "bandwidth": fig(dram_bw, "bytes/s", "DRAM copy bandwidth"),
            }
        )
        if l2_core and llc_bw and l2_core < llc:
            levels.append(
                {
                    "name": "core",
                    "units": "core",
                    "capacity": fig(l2_core, "bytes", "per-core L2"),
                    "bandwidth": fig(llc_bw, "bytes/s", "last-level-cache copy bandwidth"),
                }
            )
    doc["levels"] = levels
    doc["measured_on"] = today

    header = (
        "# Host target measured by solar-opt --calibrate-host; regenerate with that flag.\n"
        "# Rates are the best observed dense FLOP/s (never MAC/s); bandwidths count bytes read + written.\n"
        "# 'l2' here is the last-level cache; levels: chip = LLC size, core = per-core L2.\n"
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + f".{os.getpid()}.tmp")
    tmp.write_text(
        header + yaml.dump(doc, Dumper=_HostDumper, sort_keys=False, width=1000, default_flow_style=None),
        encoding="utf-8",
    )
    os.replace(tmp, out)
    return load_file(out)
