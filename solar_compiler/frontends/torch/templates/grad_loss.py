"""Backward ops of losses, one statement each, as torch's kernels define them
(`aten/src/ATen/native/Loss.cpp`, `LossNLL.cpp`, `PointwiseOps.cpp`): MSE, smooth L1, Huber and
binary cross-entropy (elementwise, `k = 1/numel` for a mean else 1, the grad a 0-d tensor for a
reduced loss, broadcast) and NLL (a one-hot select, no gather)."""

from __future__ import annotations

import math

from solar_compiler.frontends.builder.exprs import (
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
from solar_compiler.frontends.builder.statements import map_op
from solar_compiler.frontends.builder.translator import Translator
from solar_compiler.frontends.builder.values import Val, ivars, loops, stored
from solar_compiler.frontends.captured_program import AtenNode
from solar_compiler.loopir.ast import SExpr

from ..registry import template

REDUCTIONS = {0: "none", 1: "mean", 2: "sum"}


def _norm(tr: Translator, node: AtenNode, at: int) -> float:
    """1 / numel of the input for a mean reduction (argument `at`), else 1."""
    red = tr.arg(at, "reduction", 1)
    if red not in REDUCTIONS:
        raise tr.error(f"unknown loss reduction {red!r}")
    return 1 / math.prod(tr.val(node.args[1]).shape) if REDUCTIONS[int(red)] == "mean" else 1.0  # type: ignore[call-overload]


@template("aten.mse_loss_backward.default")
def _mse_loss_backward(tr: Translator, node: AtenNode) -> Val:
    """(grad, x, target, reduction): 2k * (x - target) * grad."""
    k = 2 * _norm(tr, node, 3)
    return map_op(tr, lambda g, a, t: mul(mul(c(k, a), sub(a, t)), g), list(node.args[:3]))


@template("aten.smooth_l1_loss_backward.default")
def _smooth_l1_loss_backward(tr: Translator, node: AtenNode) -> Val:
    """(grad, x, target, reduction, beta), d = x - target: k * grad * (d < -beta ? -1 : d > beta ? 1 :
    d / beta); beta = 0 is the L1 gradient k * grad * sign(d)."""
    k = _norm(tr, node, 3)
    beta = float(tr.arg(4, "beta", 1.0))

    def fn(g: SExpr, a: SExpr, t: SExpr) -> SExpr:
        d = sub(a, t)
        if beta == 0:
            return mul(mul(c(k, a), un("sign", d)), g)
        inner = div(d, c(beta, d))
        slope = select(cmp("lt", d, c(-beta, d)), c(-1, d), select(cmp("gt", d, c(beta, d)), c(1, d), inner))
        return mul(mul(c(k, a), slope), g)

    return map_op(tr, fn, list(node.args[:3]))


@template("aten.huber_loss_backward.default")
def _huber_loss_backward(tr: Translator, node: AtenNode) -> Val:
    """(grad, x, target, reduction, delta), d = x - target: k * grad * clamp(d, -delta, delta)."""
    k = _norm(tr, node, 3)
    delta = float(tr.arg(4, "delta", 1.0))

    def fn(g: SExpr, a: SExpr, t: SExpr) -> SExpr:
        d = sub(a, t)
        slope = minimum(maximum(d, c(-delta, d)), c(delta, d))
        return mul(mul(c(k, a), slope), g)

    return map_op(tr, fn, list(node.args[:3]))


@template("aten.binary_cross_entropy_backward.default")
def _bce_backward(tr: Translator, node: AtenNode) -> Val:
    """(grad, x, target, weight, reduction): k * grad * (x - target) / max((1 - x) * x, 1e-12) (* weight)."""
    k = _norm(tr, node, 4)
    w = tr.arg(3, "weight", None)

    def fn(g: SExpr, a: SExpr, t: SExpr, *wt: SExpr) -> SExpr:
        den = maximum(mul(sub(c(1, a), a), a), c(1e-12, a))
        v = mul(mul(c(k, a), g), div(sub(a, t), den))
        return mul(v, wt[0]) if wt else v

    return map_op(tr, fn, [*node.args[:3], *([w] if w is not None else [])])


@template("aten.nll_loss_backward.default")
def _nll_loss_backward(tr: Translator, node: AtenNode) -> Val:
    """nll_loss_backward(grad, x, target, weight, reduction, ignore_index, total_weight):
    gx[n, c] = -w[c] * grad (/ total_weight for a mean) where c == target[n] != ignore_index, else 0
    (`x` is `[N, C]` or `[C]`; `w[c]` is `w[target[n]]` where it counts, an affine read)."""
    gy, x, t = tr.val(node.args[0]), tr.val(node.args[1]), tr.val(node.args[2])
    w = tr.opt_val(tr.arg(3, "weight", None))
    red = tr.arg(4, "reduction", 1)
    if red not in REDUCTIONS:
        raise tr.error(f"unknown loss reduction {red!r}")
    ignore = int(tr.arg(5, "ignore_index", -100))  # type: ignore[call-overload]
    total = tr.val(tr.arg(6, "total_weight", None)) if REDUCTIONS[int(red)] == "mean" else None  # type: ignore[call-overload]
    if x.ndim not in (1, 2):
        raise tr.error(f"nll_loss_backward of a rank-{x.ndim} input has no template")
    out = tr.result()
    dt = out.dtype
    lps = loops("i", x.shape)
    idx = ivars(lps)
    row = idx[:-1]
    tv = index_read(t, row)
    hit = cmp("eq", tv, index_value(idx[-1]))
    if ignore >= 0:  # a class index can only equal a non-negative ignore_index
        hit = select(cmp("ne", tv, c(ignore, "i64")), hit, c(False, "bool"))
    g = cast(gy.read(row if REDUCTIONS[int(red)] == "none" else []), dt)  # type: ignore[call-overload]
    v = un("neg", g) if w is None else mul(un("neg", g), cast(w.read([idx[-1]]), dt))
    if total is not None:
        v = div(v, cast(total.read([]), dt))
    tr.emit(out, idx, "=", select(hit, v, c(0, dt)), lps)
    return stored(out)
