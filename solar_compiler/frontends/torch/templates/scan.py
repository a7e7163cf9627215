"""cumsum / cumprod: a peeled first element, then a `scan` loop carrying the running value
(`out[t] = out[t - 1] + x[t]`) with the other dims vectorised inside each step."""

from __future__ import annotations

from collections.abc import Callable

from solar_compiler.frontends.builder.exprs import add, mul
from solar_compiler.frontends.builder.index_maps import norm_dim
from solar_compiler.frontends.builder.statements import copy_into, scan_along
from solar_compiler.frontends.builder.translator import Translator
from solar_compiler.frontends.builder.values import Val, stored
from solar_compiler.frontends.captured_program import AtenNode
from solar_compiler.loopir.ast import SExpr

from ..registry import template


@template("aten.cumsum.default", fn=add)
@template("aten.cumprod.default", fn=mul)
def _cumulative(tr: Translator, node: AtenNode, fn: Callable[[SExpr, SExpr], SExpr]) -> Val:
    x = tr.val(node.args[0])
    out = tr.result()
    if x.ndim == 0:
        copy_into(tr, out, x)
        return stored(out)
    scan_along(tr, out, x, norm_dim(int(node.args[1]), x.ndim), fn)
    return stored(out)
