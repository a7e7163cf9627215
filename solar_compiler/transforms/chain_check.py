"""The execution check of `reorder-chains`: the rewritten program computes what the original did.

Both programs run in the executor on the same random inputs and their outputs, and every rewritten
tree's output, are compared with `executor.compare` (dtype-aware relative-norm tolerances). Both run
in float64: the rewrite is an identity of real arithmetic, and rounding in the program's own
precision would let a large softmax turn a last-bit difference of the reassociated sums into a
visible one; in float64 the check is tight (tolerance 1e-10). The original itself was checked
against the source program by the frontend.

The whole programs run when the executor's estimated time fits `BUDGET_S` (the torch frontend's
rate model); otherwise, or when a program cannot run on random inputs (loaded indices out of
range), each rewritten tree runs alone: its statements as written against its new statements, on
random leaves, and when even that is too large, on a sample of its outputs (`chain_sample.probed`:
a few elements and exactly the work they depend on). A mismatch is a bug of the rewrite and
raises; a check that could not run is recorded as not validated, with the reason.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from solar_compiler.analysis.chain_order import ChainPlan
from solar_compiler.dialects.graph_convert import graph_to_kernel
from solar_compiler.errors import SolarError
from solar_compiler.executor import compare, execute
from solar_compiler.loopir.affine import AffExpr
from solar_compiler.loopir.ast import (
    FLOAT_DTYPES,
    INT_DTYPES,
    Assign,
    Const,
    For,
    If,
    Kernel,
    LoopIRError,
    Node,
    StmtContext,
    TensorDecl,
    expr_vars,
    product_factors,
    statements,
)
from solar_compiler.loopir.domain import iteration_count
from solar_compiler.loopir.grouping import NodeGroup
from solar_compiler.transforms.chain_sample import probed, to_f64

BUDGET_S = 20.0          # estimated executor seconds for all runs of one check
MATRIX_RATE = 2e9        # points per second of a contraction statement (BLAS)
VECTOR_RATE = 2e7        # of any other statement
MEMORY_BYTES = 2 * 2**30  # float64 tensors of one program
SEEDS = (0, 1)


def validate_reorder(before: Sequence[Kernel], after: Sequence[Kernel], plans: Sequence[ChainPlan],
                     programs: Mapping[str, tuple[Kernel, Sequence[NodeGroup]]]) -> dict[str, Any]:
    """The check's record: `validated`, `how` ("whole program" or "each tree"), `samples`, `dtype`,
    `max_rel_err`, and `reason` when not validated. `programs`: each touched kernel as written, by
    name, with its node groups (`graph_to_kernel` of its graph before the rewrite)."""
    record = {"validated": False, "how": None, "samples": 0, "dtype": "f64", "max_rel_err": None,
              "reason": None}
    why = "too large for the executor budget"
    roots: dict[str, set[str]] = {}
    for plan in plans:
        roots.setdefault(plan.tree.kernel, set()).add(plan.tree.output)
    before = [_exposed(k, roots.get(k.name, set())) for k in before]
    after = [_exposed(k, roots.get(k.name, set())) for k in after]
    if _fits(before) and _fits(after):
        try:
            err = max(_agree(b, a, f"kernel '{b.name}'") for b, a in zip(before, after, strict=True))
            return {**record, "validated": True, "how": "whole program", "samples": len(SEEDS),
                    "max_rel_err": err}
        except LoopIRError as e:
            why = f"the program does not run on random inputs ({e.message})"
    worst, sampled = 0.0, False
    for plan in plans:
        assert plan.best is not None
        what = f"tree {plan.tree.root} of kernel '{plan.tree.kernel}'"
        pair = [_written_kernel(plan, *programs[plan.tree.kernel]),
                _with_zero_output(graph_to_kernel(plan.best.graph)[0], plan.tree.output)]
        try:
            if not _fits(pair):
                pair, sampled = probed(pair, plan.tree.output), True
                if not _fits(pair):
                    return {**record, "reason": f"{why}, and so is {what} even on a sample of its outputs"}
            worst = max(worst, _agree(pair[0], pair[1], what))
        except LoopIRError as e:
            return {**record, "reason": f"{what} does not run on random inputs ({e.message})"}
    how = "each tree, sampled outputs" if sampled else "each tree"
    return {**record, "validated": True, "how": how, "samples": len(SEEDS), "max_rel_err": worst}


def _exposed(k: Kernel, names: set[str]) -> Kernel:
    """`k` with the trees' outputs among its results: a rewritten tree is compared where it ends,
    not only through what the program does with it afterwards (a sum or a `1 - x` may hide it)."""
    tensors = [replace(t, role="output") if t.name in names and t.role == "local" else t for t in k.tensors]
    return Kernel(k.name, tensors, k.body)


def _agree(before: Kernel, after: Kernel, what: str) -> float:
    a, b = to_f64(before), to_f64(after)
    worst = 0.0
    for seed in SEEDS:
        feed = random_inputs(a, seed)
        ref = execute(a, feed)
        got = execute(b, feed)
        cmp = compare(ref, got, {t.name: t.dtype for t in a.by_role("output")})
        if not cmp.ok:
            raise SolarError(f"reorder-chains: the rewritten {what} does not reproduce the original "
                             f"(seed {seed}): {cmp.first_mismatch}; this is a bug in reorder-chains")
        worst = max(worst, cmp.max_rel_err)
    return worst


def _fits(kernels: Sequence[Kernel]) -> bool:
    secs = 0.0
    for k in kernels:
        for ctx in statements(k):
            secs += iteration_count(ctx) / (MATRIX_RATE if _is_contraction(ctx) else VECTOR_RATE)
    nbytes = sum(8 * math.prod(t.shape) for k in kernels for t in k.tensors)
    return secs * 2 * len(SEEDS) <= BUDGET_S and nbytes <= MEMORY_BYTES


def _is_contraction(ctx: StmtContext) -> bool:
    """A `+=` of a product with two or more factors that vary along a reduced loop (a multiply-add per
    point: the matrix rate of the execution-time estimate)."""
    s = ctx.stmt
    reduced = set(ctx.ivs) - s.target_vars
    return s.kind == "+=" and sum(bool(expr_vars(f) & reduced) for f in product_factors(s.value)) >= 2


def random_inputs(k: Kernel, seed: int) -> dict[str, np.ndarray]:
    """Standard normal floats, zero integers (a loaded index 0 is always in range), random bools."""
    rng = np.random.default_rng(seed)
    out = {}
    for t in k.by_role("input", "weight"):
        if t.dtype in FLOAT_DTYPES:
            out[t.name] = rng.standard_normal(t.shape)
        elif t.dtype in INT_DTYPES:
            out[t.name] = np.zeros(t.shape, dtype=np.dtype(t.dtype.replace("i", "int")))
        else:
            out[t.name] = rng.random(t.shape) < 0.5
    return out


# ---- one tree alone ------------------------------------------------------------------------------------
def _written_kernel(plan: ChainPlan, kernel: Kernel, groups: Sequence[NodeGroup]) -> Kernel:
    """The tree's statements as written (each in its own loop nest: statements run one after the
    other, `docs/bounds.md` section 5), with its leaves as inputs and its output zeroed first."""
    t = plan.tree
    names = set(t.nodes) | set(t.fills)
    body: list[Node] = []
    for g in groups:
        if g.name not in names:
            continue
        for ctx in g.stmts:
            inner: list[Node] = [If(ctx.guards, [ctx.stmt])] if ctx.guards else [ctx.stmt]
            for f in reversed(ctx.loops):
                inner = [For(f.iv, f.lb, f.ub, f.step, f.sequential, inner)]
            body += inner
    new = plan.best.graph.tensor_ops().values() if plan.best else ()
    leaves = [TensorDecl(d.sym_name.data, d.dims, d.dtype, d.role.data) for d in new
              if d.role.data in ("input", "weight")]
    locals_ = [replace(kernel.tensor(n), role="local") for n in t.intermediates]
    out = replace(kernel.tensor(t.output), role="output")
    return _with_zero_output(Kernel(t.kernel, [*leaves, *locals_, out], body), t.output)


def _with_zero_output(k: Kernel, output: str) -> Kernel:
    d = k.tensor(output)
    ivs = [f"_z{i}" for i in range(len(d.shape))]
    inner: list[Node] = [Assign(output, tuple(AffExpr.var(v) for v in ivs), "=", Const(0.0, d.dtype))]
    for v, n in reversed(list(zip(ivs, d.shape, strict=True))):
        inner = [For(v, AffExpr.lit(0), AffExpr.lit(n), 1, False, inner)]
    return Kernel(k.name, list(k.tensors), [*inner, *k.body])
