"""Torch frontend cost: translation + validation wall time per example against the model's own
torch-eager CPU forward (median of 5), then the 6 GB-input example through the whole `solar-opt`
command (sandboxed capture, reduced-size validation, lifting, bounds): total time and peak memory
of the process tree (targets: < 30 s, < 8 GB). Not a unit test: timings depend on the host.

    .venv/bin/python benchmarks/torch_pipeline.py [substring ...]
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from solar_compiler.errors import SolarError
from solar_compiler.frontends import FrontendOptions
from solar_compiler.frontends.model_file import load_model_file
from solar_compiler.frontends.torch.frontend import translate_job

ROOT = Path(__file__).resolve().parent.parent
BIG = "examples/torch/big_elementwise_6gb.py"
EAGER_LIMIT_BYTES = 2 * 2**30  # inputs + weights above this: no eager timing (the 6 GB example)


def eager_ms(path: str, reps: int = 5) -> float | None:
    """Median forward time of the model on its get_inputs() sample, in eval mode, after a warm-up."""
    spec = load_model_file(path)
    torch.manual_seed(0)
    model = spec.build_model().eval()
    inputs = spec.sample_inputs()
    tensors = [t for t in [*inputs, *model.parameters()] if isinstance(t, torch.Tensor)]
    size = sum(t.numel() * t.element_size() for t in tensors)
    if size > EAGER_LIMIT_BYTES:
        return None
    times = []
    with torch.no_grad():
        model(*inputs)
        for _ in range(reps):
            t = time.perf_counter()
            model(*inputs)
            times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e3


def per_example(names: list[str]) -> None:
    head = (f"{'example':32} {'capture':>8} {'transl':>7} {'valid':>7} {'total s':>8} {'eager ms':>9} "
            f"{'ratio':>8}  sizes")
    print(head)
    print("-" * len(head))
    totals = []
    for name in names:
        path = f"examples/torch/{name}"
        t0 = time.perf_counter()
        try:
            v = translate_job(path, FrontendOptions()).validation
        except SolarError as e:
            print(f"{name:32} failed: {str(e)[:90]}")
            continue
        total = time.perf_counter() - t0
        totals.append(total)
        ms = eager_ms(path) if path != BIG else None
        s = v["seconds"]
        ratio = f"{total * 1e3 / ms:8.0f}" if ms else "     n/a"
        eager = f"{ms:9.3f}" if ms else "      n/a"
        print(f"{name:32} {s['capture']:8.2f} {s['translate']:7.3f} {s['validate']:7.2f} {total:8.2f} "
              f"{eager} {ratio}  {v['sizes'] or v.get('reason', '')}")
    if totals:
        print(f"{len(totals)} examples: {sum(totals):.1f} s in all, median {statistics.median(totals):.2f} s")


def big_example() -> None:
    """The full command on the 6 GB example, uncached, in a fresh process tree."""
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "XDG_CACHE_HOME": cache}
        cmd = [str(Path(sys.executable).parent / "solar-opt"), BIG, "--translate", "--lift-einsum",
               "--roofline=all", "--hw", "H100_SXM"]
        t = time.perf_counter()
        proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
        wall = time.perf_counter() - t
    peak_gb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024 / 2**30
    line = next((x for x in proc.stdout.splitlines() if x.startswith("validation:")), proc.stderr.strip())
    print(f"\n{BIG}: exit {proc.returncode}, total {wall:.1f} s (target < 30 s), "
          f"peak memory {peak_gb:.2f} GB (target < 8 GB)")
    print(f"  {line}")


def main() -> None:
    os.chdir(ROOT)
    wanted = sys.argv[1:]
    names = sorted(p.name for p in (ROOT / "examples" / "torch").glob("*.py"))
    names = [n for n in names if not wanted or any(w in n for w in wanted)]
    per_example(names)
    if not wanted or any(w in BIG for w in wanted):
        big_example()


if __name__ == "__main__":
    main()
