"""Reductions: an init statement over the kept dims, then an accumulating statement with the
reduced dims innermost (`+=`, `*=`, `max=`, `min=`), then (mean, var, std, norms) one
finalising statement on the small result. Arg-reductions take two passes: the extreme value,
then the smallest index holding it (torch returns the first occurrence)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from solar_compiler.loopir.affine import AffExpr
from solar_compiler.loopir.ast import Read, SExpr, TensorDecl

from ..capture import AtenNode
from ..translate import Translator, Val, ivars, loops, stored, view
from .common import (
    INF,
    bin_,
    c,
    cast,
    cmp,
    count,
    div,
    finalize,
    index_value,
    kept_shape,
    mul,
    norm_dims,
    reduce_into,
    select,
    sub,
    un,
)
from .views import reshape_map


def _dims_keep(tr: Translator, x: Val, dim_pos: int = 1, keep_pos: int = 2) -> tuple[list[int], bool]:
    dims = norm_dims(tr.arg(dim_pos, "dim", None), x.ndim)
    return dims, bool(tr.arg(keep_pos, "keepdim", False))


def _kept_read(target: TensorDecl, x: Val, dims: Sequence[int], keepdim: bool, full: list[AffExpr]) -> SExpr:
    """Read a reduction result (laid out with or without the reduced dims) at a full index."""
    idx = [AffExpr.lit(0) if d in dims else e for d, e in enumerate(full)] if keepdim \
        else [e for d, e in enumerate(full) if d not in dims]
    return Read(target.name, tuple(idx), target.dtype)


def accumulate(tr: Translator, target: TensorDecl, x: Val, dims: list[int], keepdim: bool, kind: str,
               value=None) -> None:
    """target = identity; target kind= value(x at full index) (default: x cast to target dtype)."""
    ident = {"+=": 0, "*=": 1, "max=": -INF, "min=": INF}[kind]
    if target.dtype in ("i64", "i32", "i8") and kind in ("max=", "min="):
        ident = -(2 ** 63) if kind == "max=" else 2 ** 63 - 1
    body = value or (lambda full: cast(x.read(full), target.dtype))
    reduce_into(tr, target, x.shape, dims, keepdim, kind, c(ident, target.dtype), body)


def _simple(kind: str, mean: bool = False):
    def template(tr: Translator, node: AtenNode) -> Val:
        x = tr.val(node.args[0])
        dims, keepdim = _dims_keep(tr, x)
        target = tr.result()
        accumulate(tr, target, x, dims, keepdim, kind)
        if mean:
            n = count(x.shape, dims)
            finalize(tr, target, lambda v: div(v, c(n, v)))
        return stored(target)

    return template


def _prod(tr: Translator, node: AtenNode) -> Val:
    x = tr.val(node.args[0])
    if node.op.endswith(".default"):
        dims, keepdim = list(range(x.ndim)), False
    else:
        dims, keepdim = norm_dims(node.args[1], x.ndim), bool(tr.arg(2, "keepdim", False))
    target = tr.result()
    accumulate(tr, target, x, dims, keepdim, "*=")
    return stored(target)


def _all_dims(kind: str):
    def template(tr: Translator, node: AtenNode) -> Val:
        x = tr.val(node.args[0])
        target = tr.result()
        accumulate(tr, target, x, list(range(x.ndim)), False, kind)
        return stored(target)

    return template


def _max_dim(kind: str):
    """max.dim / min.dim: (values, indices); the index pass only when the indices are used."""
    def template(tr: Translator, node: AtenNode) -> tuple[Val | None, Val | None]:
        x = tr.val(node.args[0])
        dims, keepdim = norm_dims(node.args[1], x.ndim), bool(tr.arg(2, "keepdim", False))
        values = tr.result(0) if tr.used(0) else tr.declare(f"{node.outputs[1].name}_val",
                                                             kept_shape(x.shape, dims, keepdim), x.dtype)
        accumulate(tr, values, x, dims, keepdim, kind)
        indices = _arg_pass(tr, tr.result(1), values, x, dims, keepdim) if tr.used(1) else None
        return (stored(values) if tr.used(0) else None), indices

    return template


def _arg_pass(tr: Translator, target: TensorDecl, values: TensorDecl, x: Val, dims: list[int],
              keepdim: bool) -> Val:
    (d,) = dims
    n = x.shape[d]

    def body(full: list[AffExpr]) -> SExpr:
        hit = cmp("eq", x.read(full), _kept_read(values, x, dims, keepdim, full))
        return select(hit, index_value(full[d], target.dtype), c(n, target.dtype))

    reduce_into(tr, target, x.shape, dims, keepdim, "min=", c(n, target.dtype), body)
    return stored(target)


def _argext(kind: str):
    def template(tr: Translator, node: AtenNode) -> Val:
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
        out = _arg_pass(tr, tr.result(), values, x, dims, keepdim)
        if dim is None and meta.shape != ():
            raise tr.error("argmax over all dims with keepdim")
        return out

    return template


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
        d = sub(x.read(full), _kept_read(mean, x, dims, keepdim, full))
        return mul(d, d)

    accumulate(tr, ssd, x, dims, keepdim, "+=", dev)
    return mean, ssd


def _var(std: bool, with_mean: bool = False):
    def template(tr: Translator, node: AtenNode):
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

    return template


def _vector_norm(tr: Translator, node: AtenNode) -> Val:
    x = tr.val(node.args[0])
    p = float(tr.arg(1, "ord", 2))
    dims = norm_dims(tr.arg(2, "dim", None), x.ndim)
    keepdim = bool(tr.arg(3, "keepdim", False))
    out = tr.result()
    dt = out.dtype
    if p == math.inf or p == -math.inf:
        accumulate(tr, out, x, dims, keepdim, "max=" if p > 0 else "min=",
                   lambda f: un("abs", cast(x.read(f), dt)))
        return stored(out)
    if p == 0:
        accumulate(tr, out, x, dims, keepdim, "+=",
                   lambda f: cast(cmp("ne", x.read(f), c(0, x.dtype)), dt))
        return stored(out)
    if p == 1:
        accumulate(tr, out, x, dims, keepdim, "+=", lambda f: un("abs", cast(x.read(f), dt)))
        return stored(out)
    if p == 2:
        accumulate(tr, out, x, dims, keepdim, "+=", lambda f: _sq(cast(x.read(f), dt)))
        finalize(tr, out, lambda v: un("sqrt", v))
        return stored(out)
    accumulate(tr, out, x, dims, keepdim, "+=",
               lambda f: bin_("pow", un("abs", cast(x.read(f), dt)), c(p, dt)))
    finalize(tr, out, lambda v: bin_("pow", v, c(1.0 / p, v)))
    return stored(out)


def _sq(v: SExpr) -> SExpr:
    return mul(v, v)


def _any_all(kind: str):
    """any/all: a max/min reduction in i8 (bool tensors take no max=), then a cast to bool."""
    def template(tr: Translator, node: AtenNode) -> Val:
        x = tr.val(node.args[0])
        if node.op.endswith(".default"):
            dims, keepdim = list(range(x.ndim)), False
        else:
            dims, keepdim = norm_dims(tr.arg(1, "dim", None), x.ndim), bool(tr.arg(2, "keepdim", False))
        meta = tr.out_meta()
        acc = tr.declare(f"{meta.name}_acc", meta.shape, "i8")
        accumulate(tr, acc, x, dims, keepdim, kind,
                   lambda f: cast(x.read(f) if x.dtype == "bool" else cmp("ne", x.read(f), c(0, x.dtype)),
                                  "i8"))
        out = tr.result()
        lps = loops("i", meta.shape)
        idx = ivars(lps)
        tr.emit(out, idx, "=", cast(Read(acc.name, tuple(idx), "i8"), "bool"), lps)
        return stored(out)

    return template


TABLE = {
    "aten.sum.dim_IntList": _simple("+="),
    "aten.sum.default": _all_dims("+="),
    "aten.mean.dim": _simple("+=", mean=True),
    "aten.amax.default": _simple("max="),
    "aten.amin.default": _simple("min="),
    "aten.max.default": _all_dims("max="),
    "aten.min.default": _all_dims("min="),
    "aten.max.dim": _max_dim("max="),
    "aten.min.dim": _max_dim("min="),
    "aten.argmax.default": _argext("max="),
    "aten.argmin.default": _argext("min="),
    "aten.prod.dim_int": _prod,
    "aten.prod.default": _prod,
    "aten.var.correction": _var(std=False),
    "aten.var.dim": _var(std=False),
    "aten.std.correction": _var(std=True),
    "aten.std.dim": _var(std=True),
    "aten.var_mean.correction": _var(std=False, with_mean=True),
    "aten.std_mean.correction": _var(std=True, with_mean=True),
    "aten.linalg_vector_norm.default": _vector_norm,
    "aten.any.default": _any_all("max="),
    "aten.any.dim": _any_all("max="),
    "aten.any.dims": _any_all("max="),
    "aten.all.default": _any_all("min="),
    "aten.all.dim": _any_all("min="),
    "aten.all.dims": _any_all("min="),
}


def _mean_all(tr: Translator, node: AtenNode) -> Val:
    x = tr.val(node.args[0])
    target = tr.result()
    accumulate(tr, target, x, list(range(x.ndim)), False, "+=")
    n = math.prod(x.shape)
    finalize(tr, target, lambda v: div(v, c(n, v)))
    return stored(target)


TABLE["aten.mean.default"] = _mean_all
