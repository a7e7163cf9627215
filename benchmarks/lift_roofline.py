"""Time `--lift-einsum --roofline=all` on loop-IR programs of growing size.

Targets: < 100 ms for a program of 50 statements, excluding Python start-up, and a cost that grows
near-linearly with the program (the figure per statement stays flat from 50 to 3,000 statements).
The program is a stack of transformer-style blocks (matmuls, softmax rows, layernorm, GELU-ish
elementwise), so it mixes contractions, reductions and elementwise statements. Both wall time and
CPU time (`time.process_time`) are printed: on a shared machine the CPU time is the figure to trust.
Run: `.venv/bin/python benchmarks/lift_roofline.py [blocks ...]` (default: 5 50 300, i.e. 55, 550
and 3,300 statements).
"""

from __future__ import annotations

import statistics
import sys
import time

from xdsl.context import Context

from solar_compiler.dialects.convert import kernels_to_module
from solar_compiler.loopir.ast import statements
from solar_compiler.text.parser import parse_kernel

S, D = 512, 256  # sequence length, model width


def block(b: int) -> str:
    """One block = 10 statements: x -> x @ W -> softmax rows -> layernorm -> tanh-gate."""
    return f"""
    for i in range({S}):
        for j in range({D}):
            H{b}[i, j] = 0.0
            for k in range({D}):
                H{b}[i, j] += X{b}[i, k] * W{b}[k, j]
    for i in range({S}):
        M{b}[i] = -inf
        for j in range({D}):
            M{b}[i] max= H{b}[i, j]
        Z{b}[i] = 0.0
        for j in range({D}):
            E{b}[i, j] = exp(H{b}[i, j] - M{b}[i])
            Z{b}[i] += E{b}[i, j]
        for j in range({D}):
            P{b}[i, j] = E{b}[i, j] / Z{b}[i]
        U{b}[i] = 0.0
        for j in range({D}):
            U{b}[i] += P{b}[i, j]
        for j in range({D}):
            X{b + 1}[i, j] = tanh(P{b}[i, j] - U{b}[i] / {float(D)}) * g{b}[j]
"""


def program(blocks: int) -> str:
    params = [f"X0: f32[{S}, {D}] input"]
    locs = []
    for b in range(blocks):
        params += [f"W{b}: f32[{D}, {D}] weight", f"g{b}: f32[{D}] weight"]
        locs += [f"local H{b}: f32[{S}, {D}]", f"local M{b}: f32[{S}]", f"local Z{b}: f32[{S}]",
                 f"local E{b}: f32[{S}, {D}]", f"local P{b}: f32[{S}, {D}]", f"local U{b}: f32[{S}]"]
        if b + 1 < blocks:
            locs.append(f"local X{b + 1}: f32[{S}, {D}]")
    params.append(f"X{blocks}: f32[{S}, {D}] output")
    head = f"kernel blocks({', '.join(params)}):\n" + "".join(f"    {loc}\n" for loc in locs)
    return head + "".join(block(b) for b in range(blocks))


def run_once(text: str) -> float:
    from solar_compiler.analysis.costs import module_costs  # noqa: F401  (imported before timing)
    from solar_compiler.passes import all_passes

    passes = all_passes()
    from solar_compiler.analysis import costs, io_bounds, polyhedral, structured
    from solar_compiler.loopir import domain

    # cold caches: each run counts every domain
    for module in (costs, polyhedral, domain, io_bounds, structured):
        for obj in vars(module).values():
            if hasattr(obj, "cache_clear"):
                obj.cache_clear()
    kernel = parse_kernel(text, "bench.loop")
    module = kernels_to_module([kernel])
    ctx = Context()
    t, c = time.perf_counter(), time.process_time()
    passes["lift-einsum"]()().apply(ctx, module)
    passes["roofline"]()(fidelity="all", hw="H100_SXM").apply(ctx, module)
    return time.perf_counter() - t, time.process_time() - c


def main() -> None:
    from solar_compiler.gc_policy import relax_gc

    relax_gc()  # the collector settings of a `solar-opt` process (driver.run_pipeline)
    sizes = [int(a) for a in sys.argv[1:]] or [5, 50, 300]
    run_once(program(1))  # warm imports (islpy, yaml, rich) so the figures exclude start-up
    for blocks in sizes:
        text = program(blocks)
        n = len(statements(parse_kernel(text, "bench.loop")))
        runs = [run_once(text) for _ in range(5 if n <= 600 else 1)]
        wall = statistics.median(r[0] for r in runs) * 1e3
        cpu = statistics.median(r[1] for r in runs) * 1e3
        print(f"statements: {n:5d}; lift-einsum + roofline=all (H100_SXM): median wall {wall:8.1f} ms, "
              f"CPU {cpu:8.1f} ms ({cpu / n:.2f} ms per statement) over {len(runs)} run(s)")


if __name__ == "__main__":
    main()
