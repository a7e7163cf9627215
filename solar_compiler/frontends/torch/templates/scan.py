"""cumsum / cumprod: a peeled first element, then a `scan` loop carrying the running value
(`out[t] = out[t - 1] + x[t]`) with the other dims vectorised inside each step."""

from __future__ import annotations

from solar_compiler.loopir.affine import AffExpr
from solar_compiler.loopir.ast import Read

from ..capture import AtenNode
from ..translate import Loop, Translator, Val, stored
from .common import add, cast, mul, norm_dim


def _cumulative(fn):
    def template(tr: Translator, node: AtenNode) -> Val:
        x = tr.val(node.args[0])
        out = tr.result()
        if x.ndim == 0:
            return _scalar_copy(tr, x, out)
        dim = norm_dim(int(node.args[1]), x.ndim)
        dt = out.dtype
        others = [Loop(f"i{d}", n) for d, n in enumerate(x.shape) if d != dim]

        def full(t: AffExpr) -> list[AffExpr]:
            it = iter(AffExpr.var(lp.iv) for lp in others)
            return [t if d == dim else next(it) for d in range(x.ndim)]

        zero = full(AffExpr.lit(0))
        tr.emit(out, zero, "=", cast(x.read(zero), dt), others)
        if x.shape[dim] > 1:
            t = AffExpr.var("t")
            cur, prev = full(t), full(t - 1)
            value = fn(Read(out.name, tuple(prev), dt), cast(x.read(cur), dt))
            tr.emit(out, cur, "=", value, [Loop("t", x.shape[dim], 1, sequential=True), *others])
        return stored(out)

    return template


def _scalar_copy(tr: Translator, x: Val, out) -> Val:
    tr.emit(out, [], "=", cast(x.read([]), out.dtype), [])
    return stored(out)


TABLE = {
    "aten.cumsum.default": _cumulative(add),
    "aten.cumprod.default": _cumulative(mul),
}
