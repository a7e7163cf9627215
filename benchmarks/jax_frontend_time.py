"""Wall time of translation + validation per JAX example against the PyTorch frontend on the closest
torch example: the whole command `solar-opt F --translate --no-cache` (a fresh process: interpreter,
driver, the sandboxed child with its framework import, capture, translation, validation on
get_inputs() and two fresh samples), repeated and interleaved, medians reported.

    .venv/bin/python benchmarks/jax_frontend_time.py [repeats] [substring ...]
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOLAR_OPT = str(Path(sys.executable).parent / "solar-opt")
# JAX example -> the torch example computing the closest function
PAIRS = {
    "matmul.py": "matmul.py", "batched_matmul.py": "bmm.py", "conv_nchw.py": "conv2d_strided_padded.py",
    "conv_nhwc.py": "conv_bn_relu.py", "mlp_gelu.py": "gemm_bias_gelu.py", "layernorm.py": "layernorm.py",
    "rmsnorm.py": "rmsnorm.py", "causal_attention.py": "causal_attention_manual.py",
    "dot_product_attention.py": "sdpa_causal.py", "rnn_scan.py": "gru.py", "fori_loop.py": "mlp2.py",
    "embedding.py": "embedding.py", "nnx_mlp.py": "mlp2.py",
    "nnx_transformer_block.py": "transformer_encoder_sdpa.py", "nnx_cnn.py": "small_cnn.py",
}


def run(path: str) -> float:
    with tempfile.TemporaryDirectory() as d:
        t = time.perf_counter()
        r = subprocess.run([SOLAR_OPT, path, "--translate", "--no-cache", "-o", os.devnull], cwd=ROOT,
                           capture_output=True, text=True, env={**os.environ, "XDG_CACHE_HOME": d})
        dt = time.perf_counter() - t
    if r.returncode != 0:
        raise SystemExit(f"{path}: {r.stderr.strip()}")
    return dt


def main() -> int:
    args = sys.argv[1:]
    repeats = int(args.pop(0)) if args and args[0].isdigit() else 3
    names = [n for n in PAIRS if not args or any(s in n for s in args)]
    times: dict[str, list[float]] = {n: [] for n in names}
    torch_times: dict[str, list[float]] = {n: [] for n in names}
    for _ in range(repeats):
        for n in names:
            times[n].append(run(f"examples/jax/{n}"))
            torch_times[n].append(run(f"examples/torch/{PAIRS[n]}"))
    print("| JAX example | median s | torch example | median s | JAX / torch |")
    print("|---|---:|---|---:|---:|")
    for n in names:
        j, t = statistics.median(times[n]), statistics.median(torch_times[n])
        print(f"| {n} | {j:.2f} | {PAIRS[n]} | {t:.2f} | {j / t:.2f} |")
    all_j = statistics.median(x for v in times.values() for x in v)
    all_t = statistics.median(x for v in torch_times.values() for x in v)
    print(f"| all (median of every run) | {all_j:.2f} | | {all_t:.2f} | {all_j / all_t:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
