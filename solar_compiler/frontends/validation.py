"""Validation rules every framework frontend shares: how a translated kernel is checked against the
program's own outputs, and when a size-reduced instance stands in for the full-size one.

A frontend's sample runner executes the kernel (`solar_compiler.executor`) on the program's inputs
and compares with the framework's outputs (`executor.compare`, one tolerance per dtype). Full-size
data is used only when one sample is expected to take under `time_budget` seconds and every tensor
fits in `memory_budget_gb` (`estimate`); otherwise the module-level size constants are scaled down
(`shrink`), the reduced instance is rebuilt (captured and translated again) and validated, and the
full-size kernel must be the same program with only sizes changed (`same_program`). The record
says which was done. The cost model (`estimate`), the size reduction (`shrink`, `candidates`) and the
reference conversion (`as_array`) are shared too; the PyTorch frontend adds its own sampled
(backward-slice) method and float64 second opinion on them (`frontends/torch/validation.py`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from solar_compiler import progress
from solar_compiler.errors import SolarError
from solar_compiler.frontends import FrontendOptions
from solar_compiler.frontends.model_file import ModelFileError, ModelSpec
from solar_compiler.loopir.ast import Kernel, TensorDecl

SAMPLE_SEEDS = (1, 2)   # fresh samples besides get_inputs()
#: fresh samples tried on a value-dependent program for ones that trace it again (`torch/validation._seeds`),
#: and for how long once one has traced another program
RETRACE_SEEDS = (*SAMPLE_SEEDS, 3, 4)
RETRACE_SECONDS = 15.0
MIN_REDUCED = 8         # a reduced size stays at least this large
REDUCIBLE = 16          # sizes below this (kernel sizes, strides, heads, layers) are kept
# Rates of this host (2 shared cores), measured on the executor and torch eager: points per second
# of a contraction statement (BLAS) and of any other statement, executor and framework together,
# and elements per second of input generation, conversion and comparison. Conservative, so that
# "fits the time budget" means the whole validation stays within about that budget. Contractions:
# the executor reached 1.4e10 (a 4096^3 matmul) to 1.9e10 (VGG16's convolutions, 155 G points per
# sample in about 8 s) and torch 2e10 to 4e10 points/s here with a parallel job running; whole
# validation samples of VGG16 and ResNet101 took 12 s each (16 and 18 s estimated with these rates).
MATRIX_RATE = 1.2e10
VECTOR_RATE = 1e8
# NumPy has no BLAS for integers: an integer contraction runs at 0.56e9 (int64) to 1.3e9 (int32)
# points/s here, idle (a 4096^3 int8 matmul estimated at MATRIX_RATE took its 120 s sandbox limit).
INT_MATRIX_RATE = 4e8
# A scatter (several points of a reduction writing one element through an affine target map: a
# transposed convolution's `out[i*s + r*d - pad]`) also costs one update of its target per element
# and tap combination (its points over its reduction length), at a rate set by how the executor
# cuts it (`executor.statement.scatter_form`). "taps": an in-place update per tap, through a
# strided view, of what one BLAS call per tap produced. Measured on 22 KernelBench transposed
# convolutions (1-d to 3-d, strides 1 to 5, groups, 3 to 420 taps) with this host idle and busy:
# where the innermost target index steps by more than 1 (stride 2: every cache line of the target
# is touched for half its elements) 1.9e8 (busy) to 3e8 updates/s (L2 50, 72, 89, 96, whose
# scatter took 2.7 to 5 s a sample); unit steps 4x that (L2 13's reduced instance, 4.3e8 updates
# in 0.35 to 0.9 s). Each tap's piece also costs TAP_SECONDS (grid, views, one contraction): L2 78's
# backward slice, 210 pieces of 125 taps, took 10.5 s, about 2.5e-4 s per tap and piece beyond its
# work. "points": per-point offsets and `ufunc.at`, 2e7 updates/s (L2 13 took 22 s for 4.3e8 that
# way).
TAP_UPDATE_RATE = 2e8
UNIT_TAP_UPDATE_RATE = 8e8
POINT_UPDATE_RATE = 2e7
TAP_SECONDS = 5e-4
IO_RATE = 1e7
STATEMENT_SECONDS = 2e-3  # executor overhead per statement run (per step of a scan loop around it)
FRAMEWORK_MATRIX_RATE = 2.5e10  # the framework alone at full size (sampled validation)
FRAMEWORK_VECTOR_RATE = 3e8


@dataclass(frozen=True)
class Cost:
    """What one validation sample of a kernel is expected to take."""

    seconds: float           # framework + loop IR executed whole + comparison
    kernel_bytes: int        # every kernel tensor (the executor allocates them all)
    framework_bytes: int     # inputs, weights and the peak of live intermediates of an eager run
    framework_seconds: float
    # the executor's float32 copies of narrow-float inputs and weights, held beside the framework's
    # own tensors while sampled validation runs (float32 ones are fed without a copy)
    converted_bytes: int = 0

    def describe(self) -> str:
        return f"estimated {self.seconds:.1f} s, {self.kernel_bytes / 2**30:.2f} GB per sample"

    def fits(self, options: FrontendOptions) -> bool:
        """Whole execution fits the time and memory budgets (one sample)."""
        return self.seconds <= options.time_budget and self.kernel_bytes <= options.memory_budget_gb * 2**30


Built = TypeVar("Built")
# build(spec) -> (kernel, what the sample runner needs) of one instance; raises SolarError or
# ModelFileError when the instance does not build
Build = Callable[[ModelSpec], tuple[Kernel, Built]]
RunSamples = Callable[[ModelSpec, Built], dict[str, Any]]


def validate_sized(spec: ModelSpec, kernel: Kernel, full: Built, options: FrontendOptions,
                   build: Build, run: RunSamples) -> dict[str, Any]:
    """`run` at full size (`full` built from `spec`) when the budget allows, else on the mildest
    reduced instance that fits and is the same program; the record says which."""
    cost = estimate(kernel)
    if cost.fits(options):
        progress.phase("validate", f"executing the loop IR against the framework at full size "
                                   f"(loop IR estimated {cost.seconds:.1f} s per sample)")
        return {**run(spec, full), "method": "full", "sizes": "full"}
    progress.phase("validate", f"not at full size (whole execution {cost.describe()}): on a reduced instance")
    reduced = reduce_instance(spec, kernel, options, build)
    if isinstance(reduced, str):
        return {"validated": False, "method": None, "max_rel_err": None, "samples": 0, "sizes": None,
                "reason": f"too large to validate within budget (whole execution {cost.describe()}) and "
                          f"{reduced}"}
    overrides, spec_r, built_r = reduced
    sizes = ", ".join(f"{k}={v} (of {spec.size_constants[k]})" for k, v in overrides.items())
    progress.phase("validate", f"executing the loop IR against the framework on the reduced instance {sizes}")
    return {**run(spec_r, built_r), "method": "reduced", "reduced_method": "full",
            "sizes": f"reduced: {sizes}", "full_size_same_program": True,
            "why_reduced": f"whole execution {cost.describe()}"}


def is_contraction(stmt) -> bool:
    """`acc += f1 * f2 * ...` with at least two factors that read tensors: the executor evaluates
    each factor over its own variables and contracts them with einsum/BLAS (`executor/contract.py`:
    two through one batched matrix product, more through einsum's greedy path), at MATRIX_RATE. A
    4-operand einsum (Mamba2's chunked scan) was estimated at VECTOR_RATE, 111 s for what took 1.5."""
    from solar_compiler.executor.statement import mul_factors
    from solar_compiler.loopir.ast import reads

    return stmt.kind == "+=" and sum(bool(reads(f)) for f in mul_factors(stmt.value)) >= 2


def _rate(stmt) -> float:
    """Points per second of a statement: a contraction of integer or bool reads only at
    INT_MATRIX_RATE, another at MATRIX_RATE, anything else at VECTOR_RATE."""
    from solar_compiler.loopir.ast import INT_DTYPES, reads

    if not is_contraction(stmt):
        return VECTOR_RATE
    ints = all(r.dtype in (*INT_DTYPES, "bool") for r in reads(stmt.value))
    return INT_MATRIX_RATE if ints else MATRIX_RATE


def statement_seconds(ctx, points: int, runs: int = 1) -> float:
    """Executor seconds for `points` points of the statement `ctx` (a `StmtContext`) run `runs` times
    (once per step of a scan loop around it, per piece of a backward slice): its points at
    MATRIX_RATE (a contraction) or VECTOR_RATE, a scatter's updates of its target (TAP_UPDATE_RATE or
    POINT_UPDATE_RATE; UNIT_TAP_UPDATE_RATE where the innermost varying target index steps by one),
    STATEMENT_SECONDS per run and, for a scatter cut into taps, TAP_SECONDS per run and tap
    combination."""
    from solar_compiler.executor.compare import loop_extents
    from solar_compiler.executor.statement import scatter_form, tap_vars
    from solar_compiler.loopir.affine import AffExpr

    stmt = ctx.stmt
    secs = points / _rate(stmt) + STATEMENT_SECONDS * runs
    if stmt.kind == "=":
        return secs
    ext = loop_extents(ctx.loops)
    counts = {f.iv: ext[f.iv] for f in ctx.loops if not f.sequential}
    form = scatter_form(stmt.indices, counts)
    if form is None:
        return secs
    updates = points / max(1, math.prod(n for v, n in counts.items() if v not in stmt.target_vars))
    if form == "points":
        return secs + updates / POINT_UPDATE_RATE
    taps = tap_vars(stmt.indices, counts) or []
    inner = [(v, c) for e in stmt.indices if isinstance(e, AffExpr)
             for v, c in e.terms if counts.get(v, 1) > 1 and v not in taps][-1:]
    rate = UNIT_TAP_UPDATE_RATE if inner and abs(inner[0][1]) == 1 else TAP_UPDATE_RATE
    return secs + updates / rate + TAP_SECONDS * runs * math.prod(counts[v] for v in taps)


def estimate(kernel: Kernel) -> Cost:
    """The expected cost of one validation sample of `kernel` (`Cost`)."""
    from solar_compiler.executor.compare import loop_extents
    from solar_compiler.loopir.ast import statements, stmt_reads
    from solar_compiler.loopir.domain import iteration_count

    secs = fsecs = 0.0
    ctxs = statements(kernel)
    for ctx in ctxs:
        n = iteration_count(ctx)
        m = is_contraction(ctx.stmt)
        ext = loop_extents(ctx.loops)
        runs = math.prod(ext[f.iv] for f in ctx.loops if f.sequential)
        secs += statement_seconds(ctx, n, runs)
        fsecs += n / (FRAMEWORK_MATRIX_RATE if m else FRAMEWORK_VECTOR_RATE)
    io = sum(math.prod(t.shape) for t in kernel.tensors if t.role in ("input", "output"))
    secs += io / IO_RATE
    fsecs += io / IO_RATE
    # live range of every local/output: first to last statement touching it (eager frees after)
    first: dict[str, int] = {}
    last: dict[str, int] = {}
    for ctx in ctxs:
        for name in [ctx.stmt.target, *(r.tensor for r in stmt_reads(ctx.stmt))]:
            first.setdefault(name, ctx.index)
            last[name] = ctx.index
    fixed = sum(t.nbytes for t in kernel.tensors if t.role in ("input", "weight", "output"))
    delta = [0] * (len(ctxs) + 1)
    for t in kernel.tensors:
        if t.role == "local" and t.name in first:
            delta[first[t.name]] += t.nbytes
            delta[last[t.name] + 1] -= t.nbytes
    peak = live = 0
    for d in delta:
        live += d
        peak = max(peak, live)
    converted = sum(executor_bytes(t) for t in kernel.tensors
                    if t.role in ("input", "weight") and executor_bytes(t) != t.nbytes)
    return Cost(secs, sum(executor_bytes(t) for t in kernel.tensors), fixed + peak, fsecs, converted)


def executor_bytes(t: TensorDecl) -> int:
    """What the executor allocates for `t`: narrow floats (bf16, f16, fp8, fp4) are held in float32
    arrays (`executor/numeric.py`), twice a bf16 tensor's bytes. Counting the declared bytes let a
    bf16 pi0 instance estimated at 2.35 GB take over 8 GB."""
    from solar_compiler.executor.numeric import STORAGE

    return math.prod(t.shape) * STORAGE[t.dtype].itemsize


def shrink(value: int, factor: int) -> int:
    """`value / g` for the largest power of two g <= factor dividing it with a result >= MIN_REDUCED
    (divisibility between sizes is kept); an odd value one short of a multiple of `factor` (a
    sequence of 4095 tokens, padded to blocks of 64 by BigBird) stays one short: `(value + 1) /
    factor - 1` (2047, padded the same way); any other odd value (an irregular size such as 8205,
    a vocabulary of 50257) is divided by `factor` and rounded."""
    if value < REDUCIBLE:
        return value
    g = _largest_divisor(value, factor, MIN_REDUCED)
    if g == 1 and value % 2:
        g = _largest_divisor(value + 1, factor, MIN_REDUCED + 1)
        if g > 1 and (g == factor or round(value / factor) < MIN_REDUCED):
            return (value + 1) // g - 1
        return max(MIN_REDUCED, round(value / factor))
    return value // g


def _largest_divisor(value: int, factor: int, least: int) -> int:
    """The largest power of two g <= factor dividing `value` with `value / g` >= least (1: none)."""
    g = factor
    while g > 1 and (value % g or value // g < least):
        g //= 2
    return g


def candidates(sizes: dict[str, int]):
    """Overrides to try, mildest first: every reducible size scaled by 2, 4, ... 2**16."""
    factor = 2
    while factor <= 2**16:
        ov = {k: shrink(v, factor) for k, v in sizes.items()}
        yield factor, {k: v for k, v in ov.items() if v != sizes[k]}
        factor *= 2


def reduce_instance(spec: ModelSpec, kernel: Kernel, options: FrontendOptions, build: Build):
    """(overrides, spec, built) of the mildest reduction that fits the budget and is the same program
    as the full-size `kernel`, or a string saying why there is none."""
    from solar_compiler.loopir.same_program import same_program

    sizes = {k: v for k, v in spec.size_constants.items() if v >= REDUCIBLE}
    if not sizes:
        return "the file has no module-level size definition to scale down"
    why = "no reduction of its size definitions fits the budget"
    seen: list[dict[str, int]] = []
    rounds = [{k: sizes[k] for k in keys} for keys in size_rounds(spec, sizes)]
    for _, ov in (c for group in rounds for c in candidates(group)):
        if not ov or ov in seen:
            continue
        seen.append(ov)
        progress.phase("validate", "reduced instance " + ", ".join(f"{k}={v}" for k, v in ov.items())
                       + ": capturing and translating")
        try:
            spec_r = spec.with_sizes(ov)
            kernel_r, built_r = build(spec_r)
        except (ModelFileError, SolarError) as e:
            why = f"the reduced instance {ov} does not build ({' '.join(str(e).split())[:160]})"
            continue
        if not estimate(kernel_r).fits(options):
            continue
        diff = same_program(kernel, kernel_r)
        if diff is not None:
            why = f"the reduced instance {ov} is a different program ({diff})"
            continue
        return ov, spec_r, built_r
    return why


def size_rounds(spec: ModelSpec, sizes: dict[str, int]) -> list[list[str]]:
    """The sets of size sites a reduced instance scales, in the order to try: every site, unless the
    file names sites to scale only when the others alone give no instance (`__solar_late_sizes__`,
    names of module-level dicts: a SOL-ExecBench problem's const axes, which a reference may
    hard-code, scaled after its var axes)."""
    late = tuple(f"{n}[" for n in getattr(spec.module, "__solar_late_sizes__", ()) or ())
    early = [k for k in sizes if not k.startswith(late)] if late else list(sizes)
    return [early, list(sizes)] if early and len(early) < len(sizes) else [list(sizes)]


def has_indirect(kernel) -> bool:
    from solar_compiler.loopir.ast import statements, stmt_reads

    return any(c.stmt.indirect or c.stmt.kept_when is not None or any(r.indirect for r in stmt_reads(c.stmt))
               for c in statements(kernel))


def traced_records(kernel, trace) -> list[dict[str, Any]]:
    """The trace as `Translation.traced` records: per statement and tensor, the distinct elements its
    indirect accesses touched, its domain's points and how many such accesses it has; a gather of a
    tensor that other statements gather too adds what they all touched (`union`), which of them it
    is (`member`) and how many they are (`among`)."""
    from solar_compiler.loopir.ast import statements, stmt_reads
    from solar_compiler.loopir.domain import iteration_count

    ctxs = statements(kernel)
    unions = trace.unions()
    out = []
    for (i, tensor, write), n in sorted(trace.counts().items()):
        s = ctxs[i].stmt
        accesses = 1 if write else sum(r.indirect and r.tensor == tensor for r in stmt_reads(s))
        rec = {"stmt": i, "tensor": tensor, "write": write, "elements": n,
               "points": iteration_count(ctxs[i]), "accesses": accesses}
        if not write and (i, tensor) in unions:
            rec["union"], rec["member"], rec["among"] = unions[(i, tensor)]
        out.append(rec)
    return out


def as_array(a: Any, decl: TensorDecl):
    """A reference array in the executor's dtype; a constant captured as shape (1,) for a 0-d tensor
    (same single element) takes the declared shape."""
    import numpy as np

    from solar_compiler.executor.numeric import USER

    a = np.ascontiguousarray(a, dtype=USER[decl.dtype])
    if a.shape != decl.shape and a.size == 1 and math.prod(decl.shape) == 1:
        a = a.reshape(decl.shape)
    return a
