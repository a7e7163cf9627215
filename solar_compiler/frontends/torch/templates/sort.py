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

unique (`_unique2`, sorted: CPU torch sorts whatever `sorted` says): an element is its value's
first occurrence when no earlier element equals it; its slot is the number of first occurrences
with a smaller value; every element writes its value there (equal values, one slot), its slot is its
inverse index, and the counts add one per element. The number of distinct values is the traced
sample's (value-dependent); the nest stands in for a sort and a scan (integer work).
"""

from __future__ import annotations

import math

from solar_compiler.frontends.builder.exprs import bin_, c, cast, cmp, index_read, index_value, select
from solar_compiler.frontends.builder.index_maps import norm_dim, reshape_map
from solar_compiler.frontends.builder.translator import Translator
from solar_compiler.frontends.builder.values import Loop, Val, loops, stored, view
from solar_compiler.frontends.captured_program import AtenNode
from solar_compiler.loopir.affine import AffExpr
from solar_compiler.loopir.ast import Read

from ..registry import template


@template("aten.sort.default", "aten.sort.stable")
def _sort(tr: Translator, node: AtenNode) -> tuple[Val | None, Val | None]:
    x = tr.val(node.args[0])
    stable = node.op.endswith(".stable")
    dim = norm_dim(int(node.kwargs.get("dim", -1) if stable else tr.arg(1, "dim", -1)), x.ndim)
    descending = bool(node.kwargs.get("descending", False) if stable else tr.arg(2, "descending", False))
    tr.mark_stand_in()
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
    tr.mark_stand_in()
    out = tr.result()
    tr.emit(out, [AffExpr.var("b")], "=", c(0, out.dtype), [Loop("b", 0, out.shape[0])])
    lps = loops("i", x.shape)
    idx = [AffExpr.var(lp.iv) for lp in lps]
    one = cast(weights.read(idx), out.dtype) if weights is not None else c(1, out.dtype)
    tr.emit(out, [index_read(x, idx)], "+=", one, lps)
    return stored(out)


@template("aten._unique2.default")
def _unique(tr: Translator, node: AtenNode) -> tuple[Val | None, Val | None, Val | None]:
    x = tr.val(node.args[0])
    n = math.prod(x.shape)
    flat = view(x, (n,), reshape_map(x.shape, (n,)))
    tr.mark_stand_in()
    base = next(m for m in node.outputs if m is not None).name
    i, j = AffExpr.var("i"), AffExpr.var("j")
    xi, xj = flat.read([i]), flat.read([j])
    one, zero = c(1, "i64"), c(0, "i64")
    # repeat[j] = 1 where an earlier element equals x[j]
    repeat = tr.declare(f"{base}_repeat", (n,), "i64")
    tr.emit(repeat, [j], "=", zero, [Loop("j", 0, n)])
    tr.emit(repeat, [j], "max=", select(cmp("eq", flat.read([AffExpr.var("k")]), xj), one, zero),
            [Loop("j", 0, n), Loop("k", 0, j)])
    slot = tr.declare(f"{base}_slot", (n,), "i64")
    first = cmp("eq", Read(repeat.name, (j,), "i64"), zero)
    tr.emit(slot, [i], "=", zero, [Loop("i", 0, n)])
    tr.emit(slot, [i], "+=", select(bin_("and", first, cmp("lt", xj, xi)), one, zero),
            [Loop("i", 0, n), Loop("j", 0, n)])
    at = Read(slot.name, (i,), "i64")
    values = inverse = counts = None
    if tr.used(0):
        out = tr.result(0)
        tr.emit(out, [at], "=", cast(xi, out.dtype), [Loop("i", 0, n)])
        values = stored(out)
    if tr.used(1):
        out = tr.result(1)
        lps = loops("a", x.shape)
        idx = [AffExpr.var(lp.iv) for lp in lps]
        slots = view(stored(slot), x.shape, reshape_map((n,), x.shape))
        tr.emit(out, idx, "=", cast(slots.read(idx), out.dtype), lps)
        inverse = stored(out)
    if tr.used(2):
        out = tr.result(2)
        tr.emit(out, [AffExpr.var("b")], "=", c(0, out.dtype), [Loop("b", 0, out.shape[0])])
        tr.emit(out, [at], "+=", c(1, out.dtype), [Loop("i", 0, n)])
        counts = stored(out)
    return values, inverse, counts
