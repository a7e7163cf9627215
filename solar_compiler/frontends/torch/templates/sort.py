"""sort (values and indices, ascending or descending, stable) and order statistics (kthvalue, median,
mode) by rank, and bincount by a scatter of ones: nests that stand in for what production code runs
(`Translator.stand_in`).

sort: each element's rank along `dim` is the number of elements that precede it (smaller, or equal
at a smaller index: a stable order; descending, larger), then the element and its position are
written at their rank (a scatter: each rank is written once). The nest is O(N^2) comparisons per
row; CUB's radix sort does integer digit passes and no floating-point work (docs/llm-frontend.md
section 7), so it is a stand-in: no compute term, its traffic counted. It computes torch's values
on every input, so the translation holds for fresh samples. It orders ties stably; a sort that is
not stable (`stable=False`) may order them otherwise (their order is the implementation's choice),
so validation accepts indices that differ from torch's among tied values only (frontends/torch/ties.py).

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

Order statistics rank as the sort does, NaN above every number (torch's selections order it so):
kthvalue is the element of stable rank k - 1; median and nanmedian the lower median, rank
(m - 1) // 2 among the row's m numbers (median: a row holding a NaN gives its first NaN, rank m;
nanmedian: a row of NaNs gives rank 0; without a dim, over the flattened tensor); mode counts each
element's equal elements and takes the smallest value of the row's largest count (CPU torch's) at its
last position. Each is picked by a `max=` (mode's value a `min=`) over the row where the rank or the
count matches; they stand in for a radix select or a sort. Their values are torch's on every input.
Indices of tied values are the implementation's choice; median's are CPU torch's (its nth_element
breaks ties by index: the stable order), but CPU torch's kthvalue is a quickselect, which is not
stable, its mode sorts with std::sort, whose introsort orders equal values as it leaves them in rows
over 16 elements (up to 16 it is an insertion sort: the last occurrence), and its nanmedian of a row
of NaNs only takes nth_element's choice among them (on CUDA they are the implementation's choice
too): validation accepts those indices where they select tied values (frontends/torch/ties.py).
Mode with NaNs is not defined by torch (std::sort's order is not one with NaN).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from solar_compiler.frontends.builder.exprs import (
    add,
    bin_,
    c,
    cast,
    cmp,
    div,
    index_read,
    index_value,
    maximum,
    minimum,
    mul,
    select,
    sub,
    un,
)
from solar_compiler.frontends.builder.index_maps import kept_shape, norm_dim, reshape_map
from solar_compiler.frontends.builder.statements import copy_into, kept_read, prefix_count, reduce_into
from solar_compiler.frontends.builder.translator import Translator
from solar_compiler.frontends.builder.values import Loop, Val, loops, stored, view
from solar_compiler.frontends.captured_program import AtenNode
from solar_compiler.loopir.affine import AffExpr
from solar_compiler.loopir.ast import FLOAT_DTYPES, Read, SExpr, TensorDecl
from solar_compiler.loopir.rules import reduction_identity

from ..registry import template


def _stable_ranks(tr: Translator, x: Val, dim: int, hint: str, descending: bool = False,
                  nan_last: bool = False) -> TensorDecl:
    """rank[i] = the number of elements of i's row along `dim` that precede it in a stable order
    (smaller, or equal at a smaller index; descending: larger): an O(N^2) count. `nan_last` orders
    NaN above every number and NaNs among themselves by index, as torch's selections do."""
    lps = loops("i", x.shape)
    idx = [AffExpr.var(lp.iv) for lp in lps]
    other = AffExpr.var("j")
    xi, xj = x.read(idx), x.read([other if d == dim else e for d, e in enumerate(idx)])
    first, me = index_value(other, "i64"), index_value(idx[dim], "i64")
    less, same = cmp("gt" if descending else "lt", xj, xi), cmp("eq", xj, xi)
    if nan_last and x.dtype in FLOAT_DTYPES:
        less = bin_("or", less, bin_("and", un("isnan", xi), un("not", un("isnan", xj))))
        same = bin_("or", same, bin_("and", un("isnan", xi), un("isnan", xj)))
    before = bin_("or", less, bin_("and", same, cmp("lt", first, me)))
    rank = tr.declare(f"{hint}_rank", x.shape, "i64")
    tr.emit(rank, idx, "=", c(0, "i64"), lps)
    tr.emit(rank, idx, "+=", select(before, c(1, "i64"), c(0, "i64")), [*lps, Loop("j", 0, x.shape[dim])])
    return rank


@template("aten.sort.default", "aten.sort.stable")
def _sort(tr: Translator, node: AtenNode) -> tuple[Val | None, Val | None]:
    x = tr.val(node.args[0])
    stable = node.op.endswith(".stable")
    dim = norm_dim(int(node.kwargs.get("dim", -1) if stable else tr.arg(1, "dim", -1)), x.ndim)
    descending = bool(node.kwargs.get("descending", False) if stable else tr.arg(2, "descending", False))
    tr.mark_stand_in()
    rank = _stable_ranks(tr, x, dim, (node.outputs[0] or node.outputs[1]).name, descending)
    lps = loops("i", x.shape)
    idx = [AffExpr.var(lp.iv) for lp in lps]
    xi, me = x.read(idx), index_value(idx[dim], "i64")
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
    return _by_slot(tr, x, flat, slot, "i")


def _by_slot(tr: Translator, x: Val, flat: Val, slot, iv: str) -> tuple[Val | None, Val | None, Val | None]:
    """unique's and unique_consecutive's (values, inverse, counts) once each element of `flat` (x
    flattened, loop variable `iv`) has its slot: its value written there, its slot as its inverse
    index (in x's shape), and one added to its slot's count."""
    n = flat.shape[0]
    e = AffExpr.var(iv)
    at = Read(slot.name, (e,), "i64")
    values = inverse = counts = None
    if tr.used(0):
        out = tr.result(0)
        tr.emit(out, [at], "=", cast(flat.read([e]), out.dtype), [Loop(iv, 0, n)])
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
        tr.emit(out, [at], "+=", c(1, out.dtype), [Loop(iv, 0, n)])
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
    return _by_slot(tr, x, flat, slot, "f")


# ---- order statistics: kthvalue, median, nanmedian, mode -----------------------------------------
def _along(tr: Translator, node: AtenNode, dim_arg: int | None, keep_arg: int | None) \
        -> tuple[Val, int, bool]:
    """The operand (a 0-d one as one element; over every element when `dim_arg` is None), the dim
    the statistic runs along and keepdim."""
    x = tr.val(node.args[0])
    if dim_arg is None or x.ndim == 0:
        n = math.prod(x.shape)
        return view(x, (n,), reshape_map(x.shape, (n,))), 0, False
    keepdim = bool(tr.arg(keep_arg, "keepdim", False)) if keep_arg is not None else False
    return x, norm_dim(int(tr.arg(dim_arg, "dim", -1)), x.ndim), keepdim


def _pick(tr: Translator, target: TensorDecl, x: Val, dim: int, keepdim: bool, kind: str,
          value: Callable[[list[AffExpr]], SExpr], hit: Callable[[list[AffExpr]], SExpr]) -> Val:
    """target[row] = the `kind` (max=, min=) reduction of value(f) over the elements f of the row
    where hit(f); the other elements contribute the identity."""
    none = c(reduction_identity(kind, target.dtype), target.dtype)
    reduce_into(tr, target, x.shape, [dim], keepdim, kind, none, lambda f: select(hit(f), value(f), none))
    return stored(target)


def _selected(tr: Translator, x: Val, dim: int, keepdim: bool, rank: TensorDecl,
              want: Callable[[list[AffExpr]], SExpr]) -> tuple[Val | None, Val | None]:
    """(values, indices) of the element of each row whose rank is want(f), where used."""
    def hit(f: list[AffExpr]) -> SExpr:
        return cmp("eq", Read(rank.name, tuple(f), "i64"), want(f))

    values = indices = None
    if tr.used(0):
        out = tr.result(0)
        values = _pick(tr, out, x, dim, keepdim, "max=", lambda f: cast(x.read(f), out.dtype), hit)
    if tr.used(1):
        out = tr.result(1)
        indices = _pick(tr, out, x, dim, keepdim, "max=", lambda f: index_value(f[dim], out.dtype), hit)
    return values, indices


@template("aten.kthvalue.default")
def _kthvalue(tr: Translator, node: AtenNode) -> tuple[Val | None, Val | None]:
    """The element of stable rank k - 1 (NaN above every number)."""
    x, dim, keepdim = _along(tr, node, 2, 3)
    k = int(node.args[1])
    if not 1 <= k <= x.shape[dim]:
        raise tr.error(f"kthvalue: k = {k} out of range for {x.shape[dim]} elements")
    tr.mark_stand_in()
    rank = _stable_ranks(tr, x, dim, next(m for m in node.outputs if m is not None).name, nan_last=True)
    return _selected(tr, x, dim, keepdim, rank, lambda f: c(k - 1, "i64"))


@template("aten.median.dim", ignore_nan=False)
@template("aten.nanmedian.dim", ignore_nan=True)
@template("aten.median.default", ignore_nan=False, whole=True)
@template("aten.nanmedian.default", ignore_nan=True, whole=True)
def _median(tr: Translator, node: AtenNode, ignore_nan: bool, whole: bool = False) \
        -> Val | tuple[Val | None, Val | None]:
    """The lower median: the element of stable rank (m - 1) // 2 among a row's m numbers, NaN above
    them. median: a row holding a NaN gives its first NaN (rank m; m = n without one); nanmedian:
    rank (m - 1) // 2 of the m non-NaN elements, rank 0 (a NaN) in a row of NaNs."""
    x, dim, keepdim = _along(tr, node, None if whole else 1, None if whole else 2)
    n = x.shape[dim]
    tr.mark_stand_in()
    rank = _stable_ranks(tr, x, dim, next(m for m in node.outputs if m is not None).name, nan_last=True)
    if x.dtype in FLOAT_DTYPES:
        numbers = tr.declare(f"{rank.name}_numbers", kept_shape(x.shape, [dim], False), "i64")
        reduce_into(tr, numbers, x.shape, [dim], False, "+=", c(0, "i64"),
                    lambda f: cast(un("not", un("isnan", x.read(f))), "i64"))

        def want(f: list[AffExpr]) -> SExpr:
            count = kept_read(numbers, [dim], False, f)
            if ignore_nan:
                return bin_("floordiv", maximum(sub(count, c(1, count)), c(0, count)), c(2, count))
            return select(cmp("eq", count, c(n, count)), c((n - 1) // 2, count), count)
    else:
        def want(f: list[AffExpr]) -> SExpr:
            return c((n - 1) // 2, "i64")
    values, indices = _selected(tr, x, dim, keepdim, rank, want)
    return values if whole else (values, indices)


@template("aten.mode.default")
def _mode(tr: Translator, node: AtenNode) -> tuple[Val | None, Val | None]:
    """The most frequent value of each row, the smallest of those tied for it (CPU torch's), and its
    last position: each element's count of equal elements, the row's largest count, the smallest
    value holding it, the largest index holding that value. bool is compared as i8."""
    x, dim, keepdim = _along(tr, node, 1, 2)
    tr.mark_stand_in()
    base = next(m for m in node.outputs if m is not None).name
    kd = "i8" if x.dtype == "bool" else x.dtype

    def key(f: list[AffExpr]) -> SExpr:
        return cast(x.read(f), kd)

    lps = loops("i", x.shape)
    idx = [AffExpr.var(lp.iv) for lp in lps]
    at_j = [AffExpr.var("j") if d == dim else e for d, e in enumerate(idx)]
    count = tr.declare(f"{base}_count", x.shape, "i64")
    tr.emit(count, idx, "=", c(0, "i64"), lps)
    tr.emit(count, idx, "+=", select(cmp("eq", key(at_j), key(idx)), c(1, "i64"), c(0, "i64")),
            [*lps, Loop("j", 0, x.shape[dim])])
    kept = kept_shape(x.shape, [dim], keepdim)
    top = tr.declare(f"{base}_top", kept, "i64")
    reduce_into(tr, top, x.shape, [dim], keepdim, "max=", c(0, "i64"),
                lambda f: Read(count.name, tuple(f), "i64"))
    values = tr.result(0) if tr.used(0) and kd == x.dtype else tr.declare(f"{base}_value", kept, kd)
    _pick(tr, values, x, dim, keepdim, "min=", key,
          lambda f: cmp("eq", Read(count.name, tuple(f), "i64"), kept_read(top, [dim], keepdim, f)))
    out_values = None
    if tr.used(0):
        out_values = stored(values)
        if values.dtype != x.dtype:
            out = tr.result(0)
            copy_into(tr, out, out_values)
            out_values = stored(out)
    indices = None
    if tr.used(1):
        out = tr.result(1)
        indices = _pick(tr, out, x, dim, keepdim, "max=", lambda f: index_value(f[dim], out.dtype),
                        lambda f: cmp("eq", key(f), kept_read(values, [dim], keepdim, f)))
    return out_values, indices
