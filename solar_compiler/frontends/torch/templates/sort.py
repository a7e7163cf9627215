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

histc: bincount's scatter of ones to each element's bin (elements outside the range add 0).
unique_consecutive: an element's slot is the count of run starts up to it (a prefix count of flags).
"""

from __future__ import annotations

import math

from solar_compiler.frontends.builder.exprs import (
    add,
    bin_,
    c,
    cast,
    cmp,
    div,
    index_read,
    index_value,
    minimum,
    mul,
    select,
    sub,
)
from solar_compiler.frontends.builder.index_maps import norm_dim, reshape_map
from solar_compiler.frontends.builder.statements import prefix_count
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


@template("aten.histc.default")
def _histc(tr: Translator, node: AtenNode) -> Val:
    """`bins` equal bins over [min, max] (the data's own extremes where min == max, widened by 1 each
    way where those are equal too): an element's bin is `int((x - min) * bins / (max - min))` in the
    input dtype, as torch's CPU kernel computes it, the maximum itself in the last bin; elements
    outside the range (and NaN) add nothing. A histogram, as bincount: a stand-in."""
    x = tr.val(node.args[0])
    bins = int(tr.arg(1, "bins", 100))
    lo, hi = float(tr.arg(2, "min", 0)), float(tr.arg(3, "max", 0))
    tr.mark_stand_in()
    out = tr.result()
    dt = out.dtype
    lps = loops("i", x.shape)
    idx = [AffExpr.var(lp.iv) for lp in lps]
    v = cast(x.read(idx), dt)
    if lo == hi:
        ext = tr.declare(f"{out.name}_range", (2,), dt)
        first, last = AffExpr.lit(0), AffExpr.lit(1)
        tr.emit(ext, [first], "=", c(math.inf, dt), [])
        tr.emit(ext, [first], "min=", v, lps)
        tr.emit(ext, [last], "=", c(-math.inf, dt), [])
        tr.emit(ext, [last], "max=", v, lps)
        low, high = Read(ext.name, (first,), dt), Read(ext.name, (last,), dt)
        same = cmp("eq", low, high)
        left, right = select(same, sub(low, c(1, dt)), low), select(same, add(high, c(1, dt)), high)
    else:
        left, right = c(lo, dt), c(hi, dt)
    inside = bin_("and", cmp("ge", v, left), cmp("le", v, right))
    place = div(mul(sub(v, left), c(bins, dt)), sub(right, left))
    slot = minimum(cast(select(inside, place, c(0, dt)), "i64"), c(bins - 1, "i64"))
    tr.emit(out, [AffExpr.var("b")], "=", c(0, dt), [Loop("b", 0, bins)])
    tr.emit(out, [slot], "+=", select(inside, c(1, dt), c(0, dt)), lps)
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


@template("aten.unique_consecutive.default")
def _unique_consecutive(tr: Translator, node: AtenNode) -> tuple[Val | None, Val | None, Val | None]:
    """(values, inverse, counts) of the runs of equal elements of x flattened: a run starts where an
    element differs from the one before it; an element's slot is the count of run starts after the
    first up to it (`prefix_count`); each element writes its value to its slot, its slot is its
    inverse index, and the counts add one per element. The number of runs is the traced sample's
    (value-dependent). A flag scan, integer work: a stand-in, as unique."""
    x = tr.val(node.args[0])
    if tr.arg(3, "dim", None) is not None and x.ndim > 1:
        raise tr.error("no loop-IR template for unique_consecutive along a dim of a rank > 1 tensor")
    n = math.prod(x.shape)
    flat = view(x, (n,), reshape_map(x.shape, (n,)))
    tr.mark_stand_in()
    base = next(m for m in node.outputs if m is not None).name
    f = AffExpr.var("f")
    slot = tr.declare(f"{base}_slot", (n,), "i64")
    tr.emit(slot, [AffExpr.lit(0)], "=", c(0, "i64"), [])
    if n > 1:  # a run starts at f + 1 where x[f + 1] != x[f]
        starts = prefix_count(tr, base, n - 1,
                              lambda g: cast(cmp("ne", flat.read([g + 1]), flat.read([g])), "i64"))
        tr.emit(slot, [f], "=", starts(f - 1), [Loop("f", 1, n)])
    at = Read(slot.name, (f,), "i64")
    values = inverse = counts = None
    if tr.used(0):
        out = tr.result(0)
        tr.emit(out, [at], "=", cast(flat.read([f]), out.dtype), [Loop("f", 0, n)])
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
        tr.emit(out, [at], "+=", c(1, out.dtype), [Loop("f", 0, n)])
        counts = stored(out)
    return values, inverse, counts
