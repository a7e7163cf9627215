"""Executor speed against torch eager on three shapes (not a unit test: timings depend on the host).

    .venv/bin/python benchmarks/executor_speed.py [reps, default 10]

Prints, per case, the executor's and torch's best-of-N wall time (and median) and the ratio of the
best times, and checks that both agree (`compare`), so a fast wrong answer cannot pass as a result.
On a shared host the median swings by 10x (BLAS threads losing their cores); the best time is the
figure to compare.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable

import numpy as np
import torch

from solar_compiler.executor import compare, execute
from solar_compiler.executor.compare import output_dtypes
from solar_compiler.text.parser import parse_kernel

MATMUL = """kernel matmul(A: f32[512, 512] input, B: f32[512, 512] weight, C: f32[512, 512] output):
    for i in range(512):
        for j in range(512):
            C[i, j] = 0.0
            for k in range(512):
                C[i, j] += A[i, k] * B[k, j]
"""

CONV = """kernel conv(X: f32[8, 64, 96, 96] input, W: f32[128, 64, 3, 3] weight,
            Y: f32[8, 128, 96, 96] output):
    for n in range(8):
        for o in range(128):
            for p in range(96):
                for q in range(96):
                    Y[n, o, p, q] = 0.0
                    for c in range(64):
                        for r in range(3):
                            for s in range(3):
                                if p + r >= 1 and p + r <= 96 and q + s >= 1 and q + s <= 96:
                                    Y[n, o, p, q] += X[n, c, p + r - 1, q + s - 1] * W[o, c, r, s]
"""

CHAIN = """kernel chain(x: f32[4096, 4096] input, b: f32[4096] weight, y: f32[4096, 4096] output):
    for i in range(4096):
        for j in range(4096):
            y[i, j] = max(x[i, j] * 2.0 + b[j], 0.0) * exp(0.0 - x[i, j]) + tanh(x[i, j])
"""


REPS = int(sys.argv[1]) if len(sys.argv) > 1 else 10


def timed(fn: Callable[[], object]) -> tuple[float, float, object]:
    """(best, median, last result) over REPS runs."""
    out, times = None, []
    for _ in range(REPS):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return min(times), statistics.median(times), out


def case(name: str, src: str, inputs: dict[str, np.ndarray], ref: Callable[..., torch.Tensor]) -> None:
    kernel = parse_kernel(src, f"{name}.loop")
    e_best, e_med, got = timed(lambda: execute(kernel, inputs))
    tin = {k: torch.from_numpy(v) for k, v in inputs.items()}
    with torch.no_grad():
        t_best, t_med, want = timed(lambda: ref(**tin))
    out = next(iter(output_dtypes(kernel)))
    res = compare({out: want.numpy()}, got, output_dtypes(kernel))
    print(f"{name:8s} executor {e_best * 1e3:7.1f} ms (median {e_med * 1e3:7.1f})   "
          f"torch {t_best * 1e3:7.1f} ms (median {t_med * 1e3:7.1f})   ratio {e_best / t_best:5.2f}   "
          f"rel err {res.max_rel_err:.1e} {'ok' if res.ok else 'MISMATCH'}")


def main() -> None:
    rng = np.random.default_rng(0)
    print(f"torch threads: {torch.get_num_threads()}")
    case("matmul", MATMUL, {"A": rng.standard_normal((512, 512), np.float32),
                            "B": rng.standard_normal((512, 512), np.float32)}, lambda A, B: A @ B)
    case("conv", CONV, {"X": rng.standard_normal((8, 64, 96, 96), np.float32),
                        "W": rng.standard_normal((128, 64, 3, 3), np.float32)},
         lambda X, W: torch.nn.functional.conv2d(X, W, padding=1))
    case("chain", CHAIN, {"x": rng.standard_normal((4096, 4096), np.float32),
                          "b": rng.standard_normal(4096, np.float32)},
         lambda x, b: torch.clamp(x * 2.0 + b, min=0.0) * torch.exp(0.0 - x) + torch.tanh(x))


if __name__ == "__main__":
    main()
