"""Helpers the JAX templates share: reading node operands (tensors or jaxpr literals) as values,
and start indices of dynamic slices, which must be literals or affine in the enclosing loops."""

from __future__ import annotations

from solar_compiler.frontends.builder.exprs import c, cast, settle
from solar_compiler.frontends.builder.values import Val, generator, view
from solar_compiler.frontends.captured_program import AtenNode, TensorRef
from solar_compiler.loopir.affine import AffExpr
from solar_compiler.loopir.ast import Const, IndexValue
from solar_compiler.loopir.simplify import literal, simplify_expr

from .translator import JaxTranslator


def operand_dtype(tr: JaxTranslator, node: AtenNode) -> str:
    """The dtype of a node's tensor operands (its literals take it)."""
    for a in node.args:
        if isinstance(a, TensorRef):
            return tr.val(a).dtype
    return tr.out_meta().dtype


def scalar(tr: JaxTranslator, a: object, dtype: str) -> Val:
    """A rank-0 value: a tensor, or a literal as a constant generator."""
    if isinstance(a, TensorRef):
        return tr.val(a)
    return generator((), dtype, lambda idx: literal(a, dtype))  # type: ignore[arg-type]


def static_start(tr: JaxTranslator, a: object, size: int, window: int) -> AffExpr:
    """A start index of a dynamic slice: a literal, or a value that is affine in the enclosing loops
    (a `fori_loop` counter), clamped to [0, size - window] as XLA does. Anything else is an error."""
    hi = size - window
    if not isinstance(a, TensorRef):
        return AffExpr.lit(min(max(int(a), 0), hi))  # type: ignore[call-overload]
    e = simplify_expr(tr.val(a).read([]), tr.ranges)
    e = settle(e, tr.ranges)
    if isinstance(e, Const):
        return AffExpr.lit(min(max(int(e.value), 0), hi))
    if isinstance(e, IndexValue):
        lo_v, hi_v = e.expr.bounds(tr.ranges)
        if lo_v >= 0 and hi_v <= hi:
            return e.expr
        raise tr.error(f"start index {e.expr} may leave [0, {hi}], where XLA clamps it")
    raise tr.error("a start index that depends on data values has no loop-IR template "
                   "(only literals and loop counters)")


def literal_val(tr: JaxTranslator, value: object, i: int) -> Val:
    """Output `i` of the current node as the constant `value` (a literal passed through)."""
    meta = tr.out_meta(i)
    return view(Val((), meta.dtype, lambda idx: cast(c(value, meta.dtype), meta.dtype)), meta.shape,
                lambda idx: [])
