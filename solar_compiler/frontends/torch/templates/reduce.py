"""Reductions: an init statement over the kept dims, then an accumulating statement with the
reduced dims innermost (`+=`, `*=`, `max=`, `min=`), then (mean, var, std, norms) one
finalising statement on the small result. Arg-reductions take two passes: the extreme value,
then the smallest index holding it (torch returns the first occurrence)."""

from __future__ import annotations

import math

from solar_compiler.frontends.builder.exprs import (
    INF,
    add,
    bin_,
    c,
    cast,
    cmp,
    div,
    index_value,
    mul,
    p_norm_parts,
    sub,
    un,
)
from solar_compiler.frontends.builder.index_maps import (
    bcast_index,
    bcast_shape,
    count,
    kept_shape,
    norm_dims,
    reshape_map,
)
from solar_compiler.frontends.builder.statements import (
    accumulate,
    arg_index,
    copy_into,
    finalize,
    kept_read,
    reduce_into,
)
from solar_compiler.frontends.builder.translator import Translator
from solar_compiler.frontends.builder.values import Loop, Val, fill, ivars, loops, stored, view
from solar_compiler.frontends.captured_program import AtenNode
from solar_compiler.loopir.affine import AffExpr
from solar_compiler.loopir.ast import Read, SExpr, TensorDecl

from ..registry import template


def _dims_keep(tr: Translator, x: Val) -> tuple[list[int], bool]:
    """The `dim` (None or []: all dims) and `keepdim` arguments of a reduction."""
    dims = norm_dims(tr.arg(1, "dim", None), x.ndim)
    return dims, bool(tr.arg(2, "keepdim", False))


@template("aten.sum.dim_IntList", kind="+=")
@template("aten.mean.dim", kind="+=", mean=True)
@template("aten.amax.default", kind="max=")
@template("aten.amin.default", kind="min=")
@template("aten.sum.default", kind="+=", all_dims=True)
@template("aten.mean.default", kind="+=", mean=True, all_dims=True)
@template("aten.max.default", kind="max=", all_dims=True)
@template("aten.min.default", kind="min=", all_dims=True)
def _reduce(tr: Translator, node: AtenNode, kind: str, mean: bool = False, all_dims: bool = False) -> Val:
    """One accumulation over the `dim` argument's dims (every dim when `all_dims`); `mean`
    divides by the element count."""
    x = tr.val(node.args[0])
    dims, keepdim = (list(range(x.ndim)), False) if all_dims else _dims_keep(tr, x)
    target = tr.result()
    accumulate(tr, target, x, dims, keepdim, kind)
    if mean:
        n = count(x.shape, dims)
        finalize(tr, target, lambda v: div(v, c(n, v)))
    return stored(target)


@template("aten.prod.dim_int", "aten.prod.default")
def _prod(tr: Translator, node: AtenNode) -> Val:
    x = tr.val(node.args[0])
    if node.op.endswith(".default"):
        dims, keepdim = list(range(x.ndim)), False
    else:
        dims, keepdim = norm_dims(node.args[1], x.ndim), bool(tr.arg(2, "keepdim", False))
    target = tr.result()
    accumulate(tr, target, x, dims, keepdim, "*=")
    return stored(target)


@template("aten.max.dim", kind="max=")
@template("aten.min.dim", kind="min=")
def _max_dim(tr: Translator, node: AtenNode, kind: str) -> tuple[Val | None, Val | None]:
    """max.dim / min.dim: (values, indices); the index pass only when the indices are used."""
    x = tr.val(node.args[0])
    dims, keepdim = norm_dims(node.args[1], x.ndim), bool(tr.arg(2, "keepdim", False))
    values = tr.result(0) if tr.used(0) else tr.declare(f"{node.outputs[1].name}_val",
                                                         kept_shape(x.shape, dims, keepdim), x.dtype)
    accumulate(tr, values, x, dims, keepdim, kind)
    indices = arg_index(tr, tr.result(1), values, x, dims, keepdim) if tr.used(1) else None
    return (stored(values) if tr.used(0) else None), indices


@template("aten.argmax.default", kind="max=")
@template("aten.argmin.default", kind="min=")
def _argext(tr: Translator, node: AtenNode, kind: str) -> Val:
    x = tr.val(node.args[0])
    dim = tr.arg(1, "dim", None)
    keepdim = bool(tr.arg(2, "keepdim", False))
    if dim is None:  # over the flattened tensor
        n = math.prod(x.shape)
        x = view(x, (n,), reshape_map(x.shape, (n,)))
        dims, keepdim = [0], False
    else:
        dims = norm_dims(dim, x.ndim)
    meta = tr.out_meta()
    values = tr.declare(f"{meta.name}_val", kept_shape(x.shape, dims, keepdim), x.dtype)
    accumulate(tr, values, x, dims, keepdim, kind)
    out = arg_index(tr, tr.result(), values, x, dims, keepdim)
    if dim is None and meta.shape != ():
        raise tr.error("argmax over all dims with keepdim")
    return out


# ---- statistics ---------------------------------------------------------------------------------
def _correction(tr: Translator, node: AtenNode) -> float:
    if node.op.endswith(".correction"):
        corr = node.kwargs.get("correction", None)
        return 1.0 if corr is None else float(corr)
    unbiased = tr.arg(2, "unbiased", True)
    return 1.0 if unbiased else 0.0


def moments(tr: Translator, x: Val, dims: list[int], keepdim: bool, hint: str,
            mean_target: TensorDecl | None = None,
            sq_target: TensorDecl | None = None) -> tuple[TensorDecl, TensorDecl]:
    """Two-pass statistics: mean, then the sum of squared deviations (not yet divided)."""
    dt = x.dtype
    mean = mean_target or tr.declare(f"{hint}_mean", kept_shape(x.shape, dims, keepdim), dt)
    accumulate(tr, mean, x, dims, keepdim, "+=")
    n = count(x.shape, dims)
    finalize(tr, mean, lambda v: div(v, c(n, v)))
    ssd = sq_target or tr.declare(f"{hint}_ssd", kept_shape(x.shape, dims, keepdim), dt)

    def dev(full: list[AffExpr]) -> SExpr:
        d = sub(x.read(full), kept_read(mean, dims, keepdim, full))
        return mul(d, d)

    accumulate(tr, ssd, x, dims, keepdim, "+=", dev)
    return mean, ssd


@template("aten.var.correction", "aten.var.dim", std=False)
@template("aten.std.correction", "aten.std.dim", std=True)
@template("aten.var_mean.correction", std=False, with_mean=True)
@template("aten.std_mean.correction", std=True, with_mean=True)
def _var(tr: Translator, node: AtenNode, std: bool, with_mean: bool = False):
    x = tr.val(node.args[0])
    dims = norm_dims(tr.arg(1, "dim", None), x.ndim)
    keepdim = bool(node.kwargs.get("keepdim", tr.arg(3, "keepdim", False)))
    corr = _correction(tr, node)
    n = count(x.shape, dims)
    out = tr.result(0)
    mean_t = tr.result(1) if with_mean and tr.used(1) else None
    mean, ssd = moments(tr, x, dims, keepdim, out.name, mean_target=mean_t, sq_target=out)
    denom = max(n - corr, 0)

    def fin(v: SExpr) -> SExpr:
        r = div(v, c(denom, v))
        return un("sqrt", r) if std else r

    finalize(tr, out, fin)
    if with_mean:
        return stored(out), (stored(mean) if mean_t is not None else None)
    return stored(out)


@template("aten.linalg_vector_norm.default")
def _vector_norm(tr: Translator, node: AtenNode) -> Val:
    x = tr.val(node.args[0])
    kind, term, finish = p_norm_parts(float(tr.arg(1, "ord", 2)))
    dims = norm_dims(tr.arg(2, "dim", None), x.ndim)
    keepdim = bool(tr.arg(3, "keepdim", False))
    out = tr.result()
    dt = out.dtype
    accumulate(tr, out, x, dims, keepdim, kind, lambda f: term(cast(x.read(f), dt)))
    if finish is not None:
        finalize(tr, out, finish)
    return stored(out)


@template("aten._pdist_forward.default")
def _pdist(tr: Translator, node: AtenNode) -> Val:
    """The p-norm distance of every pair of rows i < j of x [N, M], in the row-major order of the
    upper triangle: the distances accumulate over the triangle (`d[i, j] += (x[i, m] - x[j, m])^2`
    for p = 2: a subtraction, a product and an addition per pair and column), then each finished
    distance is written to its place, `T[i] + j - 1` with `T[i] = i (2N - 3 - i) / 2` (the pairs
    of the rows before i, less i): one index addition per pair, and a table of N row offsets."""
    x = tr.val(node.args[0])
    kind, term, finish = p_norm_parts(float(tr.arg(1, "p", 2.0)))
    out = tr.result()
    n, m = x.shape
    if out.shape[0] == 0:
        return fill(out.shape, out.dtype, 0)
    dt = out.dtype
    i, j, k = AffExpr.var("i"), AffExpr.var("j"), AffExpr.var("k")
    pairs = [Loop("i", 0, n - 1), Loop("j", i + 1, n)]
    acc = tr.declare(f"{out.name}_acc", (n, n), dt)
    tr.emit(acc, [i, j], "=", c(0, dt), pairs)  # every term is >= 0: 0 starts p = inf's max= too
    diff = sub(cast(x.read([i, k]), dt), cast(x.read([j, k]), dt))
    tr.emit(acc, [i, j], kind, term(diff), [*pairs, Loop("k", 0, m)])
    rows = tr.declare(f"{out.name}_row", (n - 1,), "i64")
    tr.emit(rows, [i], "=", bin_("floordiv", mul(index_value(i), index_value(2 * n - 3 - i)), c(2, "i64")),
            [Loop("i", 0, n - 1)])
    value = Read(acc.name, (i, j), dt)
    at = add(Read(rows.name, (i,), "i64"), index_value(j - 1))
    tr.emit(out, [at], "=", finish(value) if finish is not None else value, pairs)
    return stored(out)


def _norm_init(kind: str, dt: str) -> SExpr:
    """The start of a p-norm's accumulation: 0 for the sums and for p = inf's `max=` (every term is
    >= 0, and an empty norm is 0), +inf for p = -inf's `min=`."""
    return c(INF if kind == "min=" else 0, dt)


@template("aten.dist.default")
def _dist(tr: Translator, node: AtenNode) -> Val:
    """`torch.dist(x, y, p)`: the p-norm of `x - y` (broadcast) over all its elements, in the output
    dtype (the operands' promoted float): one accumulation of `term(x - y)` into the scalar, then the
    finishing root (`p_norm_parts`: p = 0 counts the nonzero differences, inf / -inf the max / min
    of |x - y|, p = 1 sums |x - y|, p = 2 takes the root of the sum of squares, any other p
    `(sum |x - y|^p)^(1/p)`)."""
    x, y = tr.val(node.args[0]), tr.val(node.args[1])
    kind, term, finish = p_norm_parts(float(tr.arg(2, "p", 2)))
    out = tr.result()
    dt = out.dtype
    shape = bcast_shape([x.shape, y.shape])

    def body(full: list[AffExpr]) -> SExpr:
        return term(sub(cast(x.read(bcast_index(full, x.shape, shape)), dt),
                        cast(y.read(bcast_index(full, y.shape, shape)), dt)))

    reduce_into(tr, out, shape, list(range(len(shape))), False, kind, _norm_init(kind, dt), body)
    if finish is not None:
        finalize(tr, out, finish)
    return stored(out)


@template("aten._cdist_forward.default")
def _cdist(tr: Translator, node: AtenNode) -> Val:
    """`torch.cdist(x1, x2, p)` where torch does not take its matrix-product form: x1 [*B, P, M], x2
    [*B, R, M] (batch dims broadcast), out[b, i, j] = the p-norm of `x1[b, i, :] - x2[b, j, :]`
    (`p_norm_parts`: any p >= 0, inf). One accumulation per pair into the output, the column
    innermost (p = 1: a subtraction, an absolute value and an addition per pair and column; p = 2 a
    product in place of the absolute value, then a square root per pair), then the finishing root.

    `torch.cdist` itself takes the matrix-product form (`||x||^2 - 2 x.y + ||y||^2`, decomposed
    into ops with their own templates) for p = 2 with more than 25 rows on either side (or
    compute_mode="use_mm_for_euclid_dist"), so `_cdist_forward` arrives with p = 2 only for small
    operands or compute_mode="donot_use_mm_for_euclid_dist", where torch computes the differences as
    this nest does. A p = 2 `_cdist_forward` that torch would compute with the product (a direct call
    with compute_mode 1, or None over 25 rows) still gets this nest: the same distances, rounded
    otherwise."""
    x1, x2 = tr.val(node.args[0]), tr.val(node.args[1])
    p = float(tr.arg(2, "p", 2.0))
    if p < 0:
        raise tr.error(f"cdist with p = {p}: torch takes p >= 0 only")
    kind, term, finish = p_norm_parts(p)
    out = tr.result()
    dt = out.dtype
    batch = tuple(out.shape[:-2])
    m = x1.shape[-1]
    pairs = [Loop(f"b{d}", 0, n) for d, n in enumerate(batch)] + \
        [Loop("i", 0, out.shape[-2]), Loop("j", 0, out.shape[-1])]
    b = [AffExpr.var(f"b{d}") for d in range(len(batch))]
    i, j, k = AffExpr.var("i"), AffExpr.var("j"), AffExpr.var("k")
    at = [*b, i, j]
    tr.emit(out, at, "=", _norm_init(kind, dt), pairs)
    if m:
        diff = sub(cast(x1.read([*bcast_index(b, x1.shape[:-2], batch), i, k]), dt),
                   cast(x2.read([*bcast_index(b, x2.shape[:-2], batch), j, k]), dt))
        tr.emit(out, at, kind, term(diff), [*pairs, Loop("k", 0, m)])
    if finish is not None:
        finalize(tr, out, finish)
    return stored(out)


@template("aten.any.default", "aten.any.dim", "aten.any.dims", kind="max=")
@template("aten.all.default", "aten.all.dim", "aten.all.dims", kind="min=")
def _any_all(tr: Translator, node: AtenNode, kind: str) -> Val:
    """any/all: a max/min reduction in i8 (bool tensors take no max=), then a cast to bool.
    The init is False (0) for any and True (1) for all, not the i8 extreme: the values are 0 or 1,
    and an empty reduction must give torch's answer (any([]) is False, all([]) is True)."""
    x = tr.val(node.args[0])
    if node.op.endswith(".default"):
        dims, keepdim = list(range(x.ndim)), False
    else:
        dims, keepdim = norm_dims(tr.arg(1, "dim", None), x.ndim), bool(tr.arg(2, "keepdim", False))
    meta = tr.out_meta()
    acc = tr.declare(f"{meta.name}_acc", meta.shape, "i8")
    reduce_into(tr, acc, x.shape, dims, keepdim, kind, c(0 if kind == "max=" else 1, "i8"),
                lambda f: cast(x.read(f) if x.dtype == "bool" else cmp("ne", x.read(f), c(0, x.dtype)),
                               "i8"))
    out = tr.result()
    copy_into(tr, out, stored(acc))
    return stored(out)



#: The most boundaries a bucketize's count is priced over: up to 16 a count (a compare and an add per
#: boundary) needs no more operations than a binary search (about 5 steps of 6 operations). Over more,
#: the count still computes the indices (and validates), but it stands in for a binary search
#: (`Translator.stand_in`): no compute term, its traffic counted.
MAX_BOUNDARIES = 16


@template("aten.bucketize.Tensor", values_first=True)
@template("aten.searchsorted.Tensor", values_first=False)
def _bucketize(tr: Translator, node: AtenNode, values_first: bool) -> Val:
    """The insertion index of each value among sorted boundaries: the count of boundaries below it
    (`<`; `<=` with right=True or side="right"), over the last dim of a batched sorted sequence."""
    x, seq = (tr.val(node.args[0]), tr.val(node.args[1])) if values_first else \
        (tr.val(node.args[1]), tr.val(node.args[0]))
    if node.kwargs.get("sorter") is not None:
        raise tr.error("no loop-IR template for searchsorted with a sorter")
    right = bool(node.kwargs.get("right", False)) or node.kwargs.get("side") == "right"
    n = seq.shape[-1] if seq.ndim else 1
    if n > MAX_BOUNDARIES:
        tr.mark_stand_in()
    if seq.ndim > 1 and tuple(seq.shape[:-1]) != tuple(x.shape[:-1]):
        raise tr.error(f"searchsorted: sorted sequence {seq.shape} does not match the values' leading dims "
                       f"{x.shape}")
    out = tr.result()
    lps = loops("i", x.shape)
    idx = ivars(lps)
    k = AffExpr.var("kb")
    at = [k] if seq.ndim == 1 else [*idx[:-1], k]
    dt = "f64" if "f64" in (x.dtype, seq.dtype) else x.dtype if x.dtype == seq.dtype else "f32"
    tr.emit(out, idx, "=", c(0, out.dtype), lps)
    below = cmp("le" if right else "lt", cast(seq.read(at), dt), cast(x.read(idx), dt))
    tr.emit(out, idx, "+=", cast(below, out.dtype), [*lps, Loop("kb", 0, n)])
    return stored(out)
