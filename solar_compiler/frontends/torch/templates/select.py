"""topk by k successive selections: step j finds the largest element that comes after the
(j-1)-th pick in (value descending, index ascending) order, then its smallest index. Work is
O(N * k) comparisons per row, as a selection-based top-k does; the step loop is a `scan`.
The picks depend on the values (the capture flags the program as value-dependent). Among tied
values torch's order is unspecified (CUDA's radix select differs from CPU's); validation accepts
indices that differ from torch's among tied values only (frontends/torch/ties.py).

For k > 1 the nest stands in for a radix select (PyTorch's CUDA `topk`: integer digit histograms, a
few passes whatever k is), whose work a k-step selection exceeds: no compute term, its traffic
counted (`Translator.stand_in`, docs/llm-frontend.md section 7). A top-1 is a max and its index,
the comparisons any implementation makes, priced as written."""

from __future__ import annotations

from solar_compiler.frontends.builder.exprs import INF, bin_, c, cmp, index_value, select
from solar_compiler.frontends.builder.index_maps import norm_dim
from solar_compiler.frontends.builder.translator import Translator
from solar_compiler.frontends.builder.values import Loop, Val, stored
from solar_compiler.frontends.captured_program import AtenNode
from solar_compiler.loopir.affine import AffExpr
from solar_compiler.loopir.ast import Read, SExpr

from ..registry import template


@template("aten.topk.default")
def _topk(tr: Translator, node: AtenNode) -> tuple[Val | None, Val | None]:
    x = tr.val(node.args[0])
    k = int(node.args[1])
    dim = norm_dim(int(tr.arg(2, "dim", -1)), x.ndim)
    largest = bool(tr.arg(3, "largest", True))
    n = x.shape[dim]
    if k > 1:
        tr.mark_stand_in()
    shape = [k if d == dim else s for d, s in enumerate(x.shape)]
    vals = tr.result(0) if tr.used(0) else tr.declare(f"{node.outputs[1].name}_values", shape, x.dtype)
    inds = tr.result(1) if tr.used(1) else tr.declare(f"{vals.name}_indices", shape, "i64")
    kept = [Loop(f"i{d}", 0, s) for d, s in enumerate(x.shape) if d != dim]
    red = Loop(f"k{dim}", 0, n)
    kind, ident, before = ("max=", -INF, "lt") if largest else ("min=", INF, "gt")
    dt = x.dtype

    def at(j: AffExpr) -> list[AffExpr]:
        it = iter(AffExpr.var(lp.iv) for lp in kept)
        return [j if d == dim else next(it) for d in range(x.ndim)]

    i = AffExpr.var(red.iv)
    full = [i if d == dim else e for d, e in enumerate(at(AffExpr.lit(0)))]
    xv = x.read(full)
    pos = index_value(i, "i64")

    def step(j: AffExpr, first: bool, outer: list[Loop]) -> None:
        tv, ti = at(j), at(j)
        if first:
            eligible: SExpr = c(True, "bool")
        else:
            pv = Read(vals.name, tuple(at(j - 1)), dt)
            pi = Read(inds.name, tuple(at(j - 1)), "i64")
            eligible = bin_("or", cmp(before, xv, pv), bin_("and", cmp("eq", xv, pv), cmp("gt", pos, pi)))
        tr.emit(vals, tv, "=", c(ident, dt), outer + kept)
        tr.emit(vals, tv, kind, xv if first else select(eligible, xv, c(ident, dt)), outer + kept + [red])
        hit = cmp("eq", xv, Read(vals.name, tuple(tv), dt))
        hit = hit if first else bin_("and", hit, eligible)
        tr.emit(inds, ti, "=", c(n, "i64"), outer + kept)
        tr.emit(inds, ti, "min=", select(hit, pos, c(n, "i64")), outer + kept + [red])

    step(AffExpr.lit(0), True, [])
    if k > 1:
        with tr.inside(Loop("j", 1, k, sequential=True)) as j:
            step(j, False, [])
    return (stored(vals) if tr.used(0) else None), (stored(inds) if tr.used(1) else None)

