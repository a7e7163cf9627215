"""cumsum / cumprod / logcumsumexp / cummax / cummin: a peeled first element, then a `scan` loop
carrying the running value (`out[t] = out[t - 1] + x[t]`) with the other dims vectorised inside each
step; cummax's indices are a second scan (the latest position of the running extreme, as torch's)."""

from __future__ import annotations

from collections.abc import Callable

from solar_compiler.frontends.builder.exprs import add, c, cast, cmp, logaddexp, maximum, minimum, mul, select
from solar_compiler.frontends.builder.index_maps import norm_dim
from solar_compiler.frontends.builder.statements import copy_into, scan_along, scan_positions
from solar_compiler.frontends.builder.translator import Translator
from solar_compiler.frontends.builder.values import Loop, Val, stored
from solar_compiler.frontends.captured_program import AtenNode
from solar_compiler.loopir.affine import AffExpr
from solar_compiler.loopir.ast import IndexValue, Read, SExpr

from ..registry import template


@template("aten.cumsum.default", fn=add)
@template("aten.cumprod.default", fn=mul)
@template("aten.logcumsumexp.default", fn=logaddexp)
def _cumulative(tr: Translator, node: AtenNode, fn: Callable[[SExpr, SExpr], SExpr]) -> Val:
    x = tr.val(node.args[0])
    out = tr.result()
    if x.ndim == 0:
        copy_into(tr, out, x)
        return stored(out)
    scan_along(tr, out, x, norm_dim(int(node.args[1]), x.ndim), fn)
    return stored(out)


@template("aten.cummax.default", pred="ge", fn=maximum)
@template("aten.cummin.default", pred="le", fn=minimum)
def _cumulative_extreme(tr: Translator, node: AtenNode, pred: str,
                        fn: Callable[[SExpr, SExpr], SExpr]) -> tuple[Val, Val]:
    """(values, indices): the running extreme, and the position it was last reached at (`x[t] >=
    running[t - 1]` moves it, ties included, as torch's cummax does)."""
    x = tr.val(node.args[0])
    values, indices = tr.result(0), tr.result(1)
    if x.ndim == 0:
        copy_into(tr, values, x)
        tr.emit(indices, [], "=", c(0, indices.dtype), [])
        return stored(values), stored(indices)
    dim = norm_dim(int(node.args[1]), x.ndim)
    scan_along(tr, values, x, dim, fn)
    others, full = scan_positions(x.shape, dim)
    tr.emit(indices, full(AffExpr.lit(0)), "=", c(0, indices.dtype), others)
    if x.shape[dim] > 1:
        t = AffExpr.var("t")
        before = tuple(full(t - 1))
        moved = cmp(pred, cast(x.read(full(t)), values.dtype), Read(values.name, before, values.dtype))
        value = select(moved, cast(IndexValue(t), indices.dtype), Read(indices.name, before, indices.dtype))
        tr.emit(indices, full(t), "=", value, [Loop("t", 1, x.shape[dim], sequential=True), *others])
    return stored(values), stored(indices)
