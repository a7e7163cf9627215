"""Micro-benchmarks for the ``host`` target: matmul rates and memory bandwidth, best of several
methods and sizes, with the spread between trials (a busy machine measures low and noisy).

These rates are kept BESIDE the ceilings ``cpu.py`` derives, never instead of them, except for
memory bandwidth, which no CPU flag states: there the best measured rate times a stated margin is
the ceiling (``host.DRAM_MARGIN``). numpy and torch are imported inside the functions.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Rate:
    """A best observed rate, how it was obtained, and the spread between its trials
    ((slowest - fastest) / slowest: 0 on a quiet machine)."""

    value: float
    how: str
    spread: float = 0.0


@dataclass(frozen=True)
class Measurements:
    """What ``measure`` observed: matmul FLOP/s per format, bandwidths in bytes/s (read + written)."""

    matmul: dict[str, Rate] = field(default_factory=dict)
    dram: Rate | None = None
    cache: Rate | None = None

    def worst_spread(self) -> float:
        rates = [*self.matmul.values(), *(r for r in (self.dram, self.cache) if r is not None)]
        return max((r.spread for r in rates), default=0.0)


@dataclass(frozen=True)
class Bench:
    """Benchmark sizes. The full run takes a few seconds (plus importing torch)."""

    max_n: int = 2048  # largest matmul edge tried
    start_n: int = 256  # first matmul edge (doubles while one product takes < grow_s)
    grow_s: float = 0.02
    budget_s: float = 0.25  # time spent repeating the final matmul size, per dtype
    dram_sizes: tuple[int, ...] = (64 << 20, 256 << 20)  # each at least 4 x the last-level cache
    copy_reps: int = 3


FULL = Bench()
QUICK = Bench(max_n=128, start_n=64, grow_s=0.0, budget_s=0.01, dram_sizes=(4 << 20,), copy_reps=2)


def _trials(fn: Callable[[], object], budget_s: float, min_reps: int = 3, max_reps: int = 50) -> list[float]:
    times = []
    start = time.perf_counter()
    for rep in range(max_reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
        if rep + 1 >= min_reps and time.perf_counter() - start >= budget_s:
            break
    return times


def spread(times: list[float]) -> float:
    """(slowest - fastest) / slowest of a set of trial times."""
    return (max(times) - min(times)) / max(times) if times and max(times) > 0 else 0.0


def matmul_rate(make: Callable[[int], tuple[Any, Any]], mm: Callable[[Any, Any], object], bench: Bench,
                how: str) -> Rate:
    """Best FLOP/s of an n x n x n product (2 n^3 FLOP), growing n until the fastest of three products
    takes grow_s (the fastest, so that one descheduled call on a busy machine does not stop the
    growth at a size too small to reach the machine's rate)."""
    n = bench.start_n
    while True:
        a, b = make(n)
        fastest = min(_trials(lambda a=a, b=b: mm(a, b), 0.0, min_reps=3, max_reps=3))
        if fastest >= bench.grow_s or n * 2 > bench.max_n:
            break
        n *= 2
    times = _trials(lambda: mm(a, b), bench.budget_s)
    return Rate(2.0 * n**3 / min(times), f"{how} {n}^3", spread(times))


def _threaded_bandwidth(np: Any, nbytes: int, threads: int, reps: int, kind: str, inner: int = 1) -> Rate:
    """Best bytes/s of ``kind`` ('copy': read + write, 'read': a sum, 'write': a fill) over an
    ``nbytes`` array split across ``threads`` threads (numpy releases the GIL)."""
    from concurrent.futures import ThreadPoolExecutor

    n = max(nbytes // 8, threads * 1024)
    src = np.ones(n)
    dst = np.zeros(n)
    parts = [(i * n // threads, (i + 1) * n // threads) for i in range(threads)]
    moved = {"copy": 2, "read": 1, "write": 1}[kind] * src.nbytes * inner

    def work(lo_hi: tuple[int, int]) -> None:
        lo, hi = lo_hi
        for _ in range(inner):
            if kind == "copy":
                np.copyto(dst[lo:hi], src[lo:hi])
            elif kind == "read":
                src[lo:hi].sum()
            else:
                dst[lo:hi].fill(1.0)

    times = []
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(work, parts))  # warm the pool and the pages
        for _ in range(reps):
            t0 = time.perf_counter()
            list(pool.map(work, parts))
            times.append(time.perf_counter() - t0)
    size = f"{nbytes >> 20} MiB" if nbytes >= 1 << 20 else f"{nbytes >> 10} KiB"
    return Rate(moved / min(times), f"{threads}-thread numpy {kind} of {size}", spread(times))


def _torch_copy(torch: Any, nbytes: int, reps: int) -> Rate:
    src = torch.ones(nbytes // 4, dtype=torch.float32)
    dst = torch.empty_like(src)
    dst.copy_(src)
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        dst.copy_(src)
        times.append(time.perf_counter() - t0)
    return Rate(2.0 * src.numel() * 4 / min(times), f"torch copy_ of {nbytes >> 20} MiB", spread(times))


def best(rates: list[Rate]) -> Rate:
    """The fastest rate, with the worst spread among them (how noisy the machine was)."""
    top = max(rates, key=lambda r: r.value)
    return Rate(top.value, top.how, max(r.spread for r in rates))


def measure(bench: Bench, threads: int, llc_bytes: int | None, use_torch: bool = True) -> Measurements:
    """Matmul FLOP/s (numpy f64/f32; torch f64/f32/bf16/f16 when importable, where faster) and the
    best bandwidth over methods (copy, read, write; numpy threads and torch) and sizes: DRAM with
    arrays of at least 4 x the last-level cache, the cache with an array of a quarter of it."""
    import numpy as np

    rng = np.random.default_rng(0)

    def np_make(dt: Any) -> Callable[[int], tuple[Any, Any]]:
        return lambda n: (rng.random((n, n), dtype=dt), rng.random((n, n), dtype=dt))

    matmul = {"fp64": matmul_rate(np_make(np.float64), np.matmul, bench, "numpy float64 matmul"),
              "fp32": matmul_rate(np_make(np.float32), np.matmul, bench, "numpy float32 matmul")}
    torch: Any = None
    if use_torch:
        try:
            import torch
        except ImportError:
            torch = None
    if torch is not None:
        for fmt, dt in (("fp64", torch.float64), ("fp32", torch.float32), ("bf16", torch.bfloat16),
                        ("fp16", torch.float16)):
            def t_make(n: int, dt: Any = dt) -> tuple[Any, Any]:
                return torch.rand(n, n).to(dt), torch.rand(n, n).to(dt)

            try:
                r = matmul_rate(t_make, torch.matmul, bench, f"torch {str(dt).removeprefix('torch.')} matmul")
            except (RuntimeError, TypeError):  # dtype unsupported on this CPU build
                continue
            if fmt not in matmul or r.value > matmul[fmt].value:
                matmul[fmt] = r
    dram_rates = []
    for size in bench.dram_sizes:
        nbytes = max(size, 4 * (llc_bytes or 0))
        for kind in ("copy", "read", "write"):
            dram_rates.append(_threaded_bandwidth(np, nbytes, threads, bench.copy_reps, kind))
        if torch is not None:
            dram_rates.append(_torch_copy(torch, nbytes, bench.copy_reps))
    cache = None
    if llc_bytes:
        inner_bytes = max(llc_bytes // 4, 64 << 10)
        inner = max(1, min(50, (64 << 20) // inner_bytes)) if bench is not QUICK else 2
        cache = best([_threaded_bandwidth(np, inner_bytes, threads, bench.copy_reps, kind, inner)
                      for kind in ("copy", "read")])
    return Measurements(matmul, best(dram_rates), cache)
