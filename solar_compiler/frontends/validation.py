"""Validation rules every framework frontend shares: how a translated kernel is checked against the
program's own outputs, and when a size-reduced instance stands in for the full-size one.

A frontend's sample runner executes the kernel (`solar_compiler.executor`) on the program's inputs
and compares with the framework's outputs (`executor.compare`, one tolerance per dtype). Full-size
data is used only when one sample is expected to take under `time_budget` seconds and every tensor
fits in `memory_budget_gb` (`estimate`); otherwise the module-level size constants are scaled down
(`shrink`), the reduced instance is rebuilt (captured and translated again) and validated, and the
full-size kernel must be the same program with only sizes changed (`same_program`). The record
says which was done.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, TypeVar

from solar_compiler.errors import SolarError
from solar_compiler.frontends import FrontendOptions
from solar_compiler.frontends.model_file import ModelFileError, ModelSpec
from solar_compiler.loopir.ast import Kernel, TensorDecl

SAMPLE_SEEDS = (1, 2)   # fresh samples besides get_inputs()
MIN_REDUCED = 8         # a reduced size constant stays at least this large
REDUCIBLE = 16          # constants below this (kernel sizes, strides, heads, layers) are kept
# Points per second of one validation sample (reference forward, fresh inputs, loop-IR execution and
# comparison together; measured here: about 2e7/s for elementwise statements): conservative, so
# that "fits the time budget" means the whole validation stays within a few budgets.
MATRIX_RATE = 2e9       # a contraction statement (executed with einsum/BLAS)
VECTOR_RATE = 2e7       # any other statement

Built = TypeVar("Built")
# build(spec) -> (kernel, what the sample runner needs) of one instance; raises SolarError or
# ModelFileError when the instance does not build
Build = Callable[[ModelSpec], tuple[Kernel, Built]]
RunSamples = Callable[[ModelSpec, Built], dict[str, Any]]


def validate_sized(spec: ModelSpec, kernel: Kernel, full: Built, options: FrontendOptions,
                   build: Build, run: RunSamples) -> dict[str, Any]:
    """`run` at full size (`full` built from `spec`) when the budget allows, else on the mildest
    reduced instance that fits and is the same program; the record says which."""
    seconds, nbytes = estimate(kernel)
    if fits(seconds, nbytes, options):
        return {**run(spec, full), "sizes": "full"}
    reduced = reduce_instance(spec, kernel, options, build)
    if isinstance(reduced, str):
        return {"validated": False, "max_rel_err": None, "samples": 0, "sizes": None,
                "reason": f"too large to validate within budget (estimated {seconds:.1f} s, "
                          f"{nbytes / 2**30:.2f} GB) and {reduced}"}
    overrides, spec_r, built_r = reduced
    sizes = "reduced: " + ", ".join(f"{k}={v}" for k, v in overrides.items())
    return {**run(spec_r, built_r), "sizes": sizes, "full_size_same_program": True}


def fits(seconds: float, nbytes: int, options: FrontendOptions) -> bool:
    return seconds <= options.time_budget and nbytes <= options.memory_budget_gb * 2**30


def estimate(kernel: Kernel) -> tuple[float, int]:
    """(expected seconds of one validation sample, bytes of all tensors) of a kernel."""
    from solar_compiler.analysis.polyhedral import iteration_count
    from solar_compiler.loopir.ast import Binary, Read, statements

    secs = 0.0
    for ctx in statements(kernel):
        v = ctx.stmt.value
        matrix = ctx.stmt.kind == "+=" and isinstance(v, Binary) and v.fn == "mul" and \
            isinstance(v.a, Read) and isinstance(v.b, Read)
        secs += iteration_count(ctx) / (MATRIX_RATE if matrix else VECTOR_RATE)
    return secs, sum(t.nbytes for t in kernel.tensors)


def shrink(value: int, factor: int) -> int:
    """`value / g` for the largest power of two g <= factor dividing it with a result >= MIN_REDUCED."""
    if value < REDUCIBLE:
        return value
    g = factor
    while g > 1 and (value % g or value // g < MIN_REDUCED):
        g //= 2
    return value // g


def reduce_instance(spec: ModelSpec, kernel: Kernel, options: FrontendOptions, build: Build):
    """(overrides, spec, built) of the mildest reduction that fits the budget and is the same program
    as the full-size `kernel`, or a string saying why there is none."""
    from solar_compiler.loopir.same_program import same_program

    sizes = dict(spec.size_constants)
    if not any(v >= REDUCIBLE for v in sizes.values()):
        return "the file has no module-level size constant to scale down"
    why = "no reduction of its size constants fits the budget"
    seen: list[dict[str, int]] = []
    factor = 2
    while factor <= 2**16:
        ov = {k: shrink(v, factor) for k, v in sizes.items()}
        ov = {k: v for k, v in ov.items() if v != sizes[k]}
        factor *= 2
        if not ov or ov in seen:
            continue
        seen.append(ov)
        try:
            spec_r = spec.with_sizes(ov)
            kernel_r, built_r = build(spec_r)
        except (ModelFileError, SolarError) as e:
            why = f"the reduced instance {ov} does not build ({' '.join(str(e).split())[:160]})"
            continue
        if not fits(*estimate(kernel_r), options):
            continue
        diff = same_program(kernel, kernel_r)
        if diff is not None:
            why = f"the reduced instance {ov} is a different program ({diff})"
            continue
        return ov, spec_r, built_r
    return why


def as_array(a: Any, decl: TensorDecl):
    """A reference array in the executor's dtype; a constant captured as shape (1,) for a 0-d tensor
    (same single element) takes the declared shape."""
    import numpy as np

    from solar_compiler.executor.numeric import USER

    a = np.ascontiguousarray(a, dtype=USER[decl.dtype])
    if a.shape != decl.shape and a.size == 1 and math.prod(decl.shape) == 1:
        a = a.reshape(decl.shape)
    return a
