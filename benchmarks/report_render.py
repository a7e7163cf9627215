"""Time to render the text report of a large network: the default view (module tree, kernels by bound,
`--top` rows) against the full per-statement view (`--ops --top 0`), and the plot.

The report is synthetic but shaped like DenseNet201 (2,945 statements in ~1,000 kernels, four dense
blocks of 6/12/48/32 layers, each with norm1/relu1/conv1/norm2/relu2/conv2, transitions between
blocks): rendering only depends on the rows, not on how they were computed, and building it needs
no torchvision. Issue 13: the default view must stay fast at that size (only the rows shown are
rendered); the full per-statement table took ~5 s with rich.

    .venv/bin/python benchmarks/report_render.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from solar_compiler.analysis.costs import Access, GraphCosts, OpCost  # noqa: E402
from solar_compiler.analysis.summary import build_report  # noqa: E402
from solar_compiler.analysis.unfused import UnfusedKernel  # noqa: E402
from solar_compiler.hw import parse_hw_list  # noqa: E402

BLOCKS = (6, 12, 48, 32)
LAYER = (("norm1", "aten.batch_norm.default", 8), ("relu1", "aten.relu.default", 1),
         ("conv1", "aten.convolution.default", 4), ("norm2", "aten.batch_norm.default", 8),
         ("relu2", "aten.relu.default", 1), ("conv2", "aten.convolution.default", 4))


def densenet_like() -> dict:
    """A report with DenseNet201's module structure: ~2,945 statements, ~1,000 kernels."""
    ops: list[OpCost] = []
    kernels: list[UnfusedKernel] = []

    def kernel(module: str, op: str, nstmt: int, n: int, matrix: bool) -> None:
        first = len(ops)
        for s in range(nstmt):
            i = len(ops)
            fm = 2 * n * 64 if matrix and s == nstmt - 1 else 0
            ops.append(OpCost(f"S{i}", "Y[i] = X[i]", "i->i", f"densenet.py:{100 + i % 50}",
                              "matrix" if fm else "vector", fm, n, 0, "f32" if fm else None, "f32", n,
                              (Access(f"X{i}", "f32", n, 4 * n),), (Access(f"Y{i}", "f32", n, 4 * n),)))
        idx = tuple(range(first, len(ops)))
        kernels.append(UnfusedKernel(f"k{len(kernels)}", op, ops[first].loc, idx, idx, ops[first].reads,
                                     ops[-1].writes, module))

    kernel("features.conv0", "aten.convolution.default", 2, 1 << 20, True)
    kernel("features.norm0", "aten.batch_norm.default", 3, 1 << 20, False)
    for b, layers in enumerate(BLOCKS, 1):
        for layer in range(1, layers + 1):
            n = (1 << 16) * (layer % 7 + 1)
            for name, op, nstmt in LAYER:
                kernel(f"features.denseblock{b}.denselayer{layer}.{name}", op, nstmt, n, "conv" in name)
            kernel(f"features.denseblock{b}.denselayer{layer}", "aten.cat.default", 2, n, False)
        if b < len(BLOCKS):
            for name, op, nstmt in (("norm", "aten.batch_norm.default", 8), ("relu", "aten.relu.default", 1),
                                    ("conv", "aten.convolution.default", 4),
                                    ("pool", "aten.avg_pool2d.default", 2)):
                kernel(f"features.transition{b}.{name}", op, nstmt, 1 << 18, "conv" in name)
    kernel("classifier", "aten.addmm.default", 2, 1 << 12, True)
    graph = GraphCosts("densenet", ops, sum(a.bytes for o in ops for a in (*o.reads, *o.writes)) // 4)
    return build_report([graph], parse_hw_list("H100_SXM,B200"), source="densenet.py",
                        validation={"validated": False, "frontend": "synthetic", "max_rel_err": None,
                                    "samples": 0}, unfused=[kernels])


def timed(fn, repeat: int) -> tuple[float, float]:
    """Median wall and CPU seconds (on a shared machine the CPU time is the steadier figure)."""
    wall, cpu = [], []
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return statistics.median(wall), statistics.median(cpu)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    from solar_compiler.plot import write_plot
    from solar_compiler.report import render_text

    r = densenet_like()
    print(f"synthetic DenseNet201-like report: {len(r['ops'])} statements, "
          f"{len(r['kernels_unfused'])} kernels, {len(r['modules'])} modules")
    render_text(r)  # imports (rich) outside the timing
    rows = [("default view (tree, kernels by bound, top 20)", lambda: render_text(r, width=120)),
            ("--ops (per-statement table, top 20)", lambda: render_text(r, width=120, ops=True)),
            ("--ops --top 0 (every statement)", lambda: render_text(r, width=120, ops=True, top=0))]
    with tempfile.TemporaryDirectory() as tmp:
        rows.append(("--plot r.png", lambda: write_plot(r, f"{tmp}/r.png")))
        print("    wall      CPU")
        for what, fn in rows:
            wall, cpu = timed(fn, args.repeat)
            print(f"{wall:7.3f} s {cpu:7.3f} s  {what}")


if __name__ == "__main__":
    main()
