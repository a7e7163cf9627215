"""sort (values and indices, ascending or descending, stable) by rank, and bincount by a scatter of
ones: nests that stand in for what production code runs (`Translator.stand_in`).

sort: each element's rank along `dim` is the number of elements that precede it (smaller, or equal
at a smaller index: a stable order; descending, larger), then the element and its position are
written at their rank (a scatter: each rank is written once). The nest is O(N^2) comparisons per
row; CUB's radix sort does integer digit passes and no floating-point work (docs/llm-frontend.md
section 7), so it is a stand-in: no compute term, its traffic counted. It computes torch's values
on every input, so the translation holds for fresh samples. It orders ties stably; a sort that is
not stable (`stable=False`) may order them otherwise, so a program that returns those indices can
fail validation (an explicit failure: their order is the implementation's choice).

bincount: `out[x[i]] += 1` (or the weight), a histogram, whose length is the traced sample's (the
program is value-dependent); GPU histograms are atomics or sorts, integer work, so it is a
stand-in too.
"""

from __future__ import annotations

from solar_compiler.frontends.builder.exprs import bin_, c, cast, cmp, index_read, index_value, select
from solar_compiler.frontends.builder.index_maps import norm_dim
from solar_compiler.frontends.builder.translator import Translator
from solar_compiler.frontends.builder.values import Loop, Val, loops, stored
from solar_compiler.frontends.captured_program import AtenNode
from solar_compiler.loopir.affine import AffExpr
from solar_compiler.loopir.ast import Read

from ..registry import template

STAND_IN = "stand-in"


@template("aten.sort.default", "aten.sort.stable")
def _sort(tr: Translator, node: AtenNode) -> tuple[Val | None, Val | None]:
    x = tr.val(node.args[0])
    stable = node.op.endswith(".stable")
    dim = norm_dim(int(node.kwargs.get("dim", -1) if stable else tr.arg(1, "dim", -1)), x.ndim)
    descending = bool(node.kwargs.get("descending", False) if stable else tr.arg(2, "descending", False))
    tr.stand_in = STAND_IN
    n = x.shape[dim]
    lps = loops("i", x.shape)
    idx = [AffExpr.var(lp.iv) for lp in lps]
    other = AffExpr.var("j")
    at_j = [other if d == dim else e for d, e in enumerate(idx)]
    xi, xj = x.read(idx), x.read(at_j)
    first, me = index_value(other, "i64"), index_value(idx[dim], "i64")
    before = bin_("or", cmp("gt" if descending else "lt", xj, xi),
                  bin_("and", cmp("eq", xj, xi), cmp("lt", first, me)))
    rank = tr.declare(f"{(node.outputs[0] or node.outputs[1]).name}_rank", x.shape, "i64")
    tr.emit(rank, idx, "=", c(0, "i64"), lps)
    tr.emit(rank, idx, "+=", select(before, c(1, "i64"), c(0, "i64")), [*lps, Loop("j", 0, n)])
    where = [Read(rank.name, tuple(idx), "i64") if d == dim else e for d, e in enumerate(idx)]
    values = indices = None
    if tr.used(0):
        out = tr.result(0)
        tr.emit(out, where, "=", cast(xi, out.dtype), lps)
        values = stored(out)
    if tr.used(1):
        out = tr.result(1)
        tr.emit(out, where, "=", cast(me, out.dtype), lps)
        indices = stored(out)
    return values, indices


@template("aten.bincount.default")
def _bincount(tr: Translator, node: AtenNode) -> Val:
    x = tr.val(node.args[0])
    weights = tr.opt_val(tr.arg(1, "weights", None))
    tr.stand_in = STAND_IN
    out = tr.result()
    tr.emit(out, [AffExpr.var("b")], "=", c(0, out.dtype), [Loop("b", 0, out.shape[0])])
    lps = loops("i", x.shape)
    idx = [AffExpr.var(lp.iv) for lp in lps]
    one = cast(weights.read(idx), out.dtype) if weights is not None else c(1, out.dtype)
    tr.emit(out, [index_read(x, idx)], "+=", one, lps)
    return stored(out)
