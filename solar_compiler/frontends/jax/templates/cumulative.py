"""`cumsum`, `cumprod`, `cummax`, `cummin`, `cumlogsumexp` (axis, reverse): the shared cumulative
scan, a peeled first element then a `scan` loop carrying the running value."""

from __future__ import annotations

from collections.abc import Callable

from solar_compiler.frontends.builder.exprs import add, maximum, minimum, mul, sub, un
from solar_compiler.frontends.builder.statements import scan_along
from solar_compiler.frontends.builder.values import Val, stored
from solar_compiler.frontends.captured_program import AtenNode
from solar_compiler.loopir.ast import SExpr

from ..registry import template
from ..translator import JaxTranslator


def _logaddexp(a: SExpr, b: SExpr) -> SExpr:
    """log(exp(a) + exp(b)) = max + log1p(exp(min - max)), safe for large values."""
    hi, lo = maximum(a, b), minimum(a, b)
    return add(hi, un("log1p", un("exp", sub(lo, hi))))


@template("jax.cumsum", fn=add)
@template("jax.cumprod", fn=mul)
@template("jax.cummax", fn=maximum)
@template("jax.cummin", fn=minimum)
@template("jax.cumlogsumexp", fn=_logaddexp)
def _cumulative(tr: JaxTranslator, node: AtenNode, fn: Callable[[SExpr, SExpr], SExpr]) -> Val:
    x = tr.val(node.args[0])
    out = tr.result()
    scan_along(tr, out, x, int(node.kwargs["axis"]) % x.ndim, fn, bool(node.kwargs.get("reverse", False)))
    return stored(out)
