"""cumsum / cumprod: a peeled first element, then a `scan` loop carrying the running value
(`out[t] = out[t - 1] + x[t]`) with the other dims vectorised inside each step."""

from __future__ import annotations

from collections.abc import Callable

from solar_compiler.frontends.builder.exprs import add, cast, mul
from solar_compiler.frontends.builder.index_maps import norm_dim
from solar_compiler.frontends.builder.statements import copy_into
from solar_compiler.frontends.builder.translator import Translator
from solar_compiler.frontends.builder.values import Loop, Val, stored
from solar_compiler.frontends.program import AtenNode
from solar_compiler.loopir.affine import AffExpr
from solar_compiler.loopir.ast import Read, SExpr

from ..registry import template


@template("aten.cumsum.default", fn=add)
@template("aten.cumprod.default", fn=mul)
def _cumulative(tr: Translator, node: AtenNode, fn: Callable[[SExpr, SExpr], SExpr]) -> Val:
    x = tr.val(node.args[0])
    out = tr.result()
    if x.ndim == 0:
        copy_into(tr, out, x)
        return stored(out)
    dim = norm_dim(int(node.args[1]), x.ndim)
    dt = out.dtype
    others = [Loop(f"i{d}", 0, n) for d, n in enumerate(x.shape) if d != dim]

    def full(t: AffExpr) -> list[AffExpr]:
        it = iter(AffExpr.var(lp.iv) for lp in others)
        return [t if d == dim else next(it) for d in range(x.ndim)]

    zero = full(AffExpr.lit(0))
    tr.emit(out, zero, "=", cast(x.read(zero), dt), others)
    if x.shape[dim] > 1:
        t = AffExpr.var("t")
        cur, prev = full(t), full(t - 1)
        value = fn(Read(out.name, tuple(prev), dt), cast(x.read(cur), dt))
        tr.emit(out, cur, "=", value, [Loop("t", 1, x.shape[dim], sequential=True), *others])
    return stored(out)

