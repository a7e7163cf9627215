"""Backward ops of activations and losses that are one elementwise statement each, written as
torch's own kernels define them (`aten/src/ATen/native/cpu/*Kernel.cpp`, `Loss.cpp`):
threshold (ReLU), GELU (erf and tanh forms), sigmoid, tanh, SiLU, MSE and NLL loss."""

from __future__ import annotations

import math

from solar_compiler.frontends.builder.exprs import (
    add,
    c,
    cast,
    cmp,
    div,
    index_read,
    index_value,
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


def gelu_grad(x: SExpr, approximate: str) -> SExpr:
    """d gelu(x) / dx."""
    if approximate == "tanh":
        beta, kappa = math.sqrt(2 / math.pi), 0.044715
        x2 = mul(x, x)
        t = un("tanh", mul(c(beta, x), add(x, mul(c(kappa, x), mul(x2, x)))))
        left_d = mul(c(0.5, x), add(c(1, x), t))
        right_d = mul(sub(c(1, x), mul(t, t)), mul(c(beta, x), add(c(1, x), mul(c(3 * kappa, x), x2))))
        return add(left_d, mul(mul(c(0.5, x), x), right_d))
    cdf = mul(c(0.5, x), add(c(1, x), un("erf", mul(x, c(1 / math.sqrt(2), x)))))
    pdf = mul(un("exp", mul(mul(x, x), c(-0.5, x))), c(1 / math.sqrt(2 * math.pi), x))
    return add(cdf, mul(x, pdf))


@template("aten.threshold_backward.default")
def _threshold_backward(tr: Translator, node: AtenNode) -> Val:
    """grad where x > threshold, else 0."""
    th = node.args[2]
    return map_op(tr, lambda g, x: select(cmp("le", x, c(th, x)), c(0, g), g), list(node.args[:2]))


@template("aten.gelu_backward.default")
def _gelu_backward(tr: Translator, node: AtenNode) -> Val:
    approx = tr.arg(2, "approximate", "none")
    if approx not in ("none", "tanh"):
        raise tr.error(f"gelu_backward with approximate={approx!r}")
    return map_op(tr, lambda g, x: mul(g, gelu_grad(x, str(approx))), list(node.args[:2]))


@template("aten.sigmoid_backward.default")
def _sigmoid_backward(tr: Translator, node: AtenNode) -> Val:
    """grad * (1 - y) * y, y the forward's output."""
    return map_op(tr, lambda g, y: mul(mul(g, sub(c(1, y), y)), y), list(node.args[:2]))


@template("aten.tanh_backward.default")
def _tanh_backward(tr: Translator, node: AtenNode) -> Val:
    """grad * (1 - y * y), y the forward's output."""
    return map_op(tr, lambda g, y: mul(g, sub(c(1, y), mul(y, y))), list(node.args[:2]))


@template("aten.silu_backward.default")
def _silu_backward(tr: Translator, node: AtenNode) -> Val:
    """grad * s * (1 + x * (1 - s)), s = sigmoid(x)."""
    def fn(g: SExpr, x: SExpr) -> SExpr:
        s = un("sigmoid", x)
        return mul(mul(g, s), add(c(1, x), mul(x, sub(c(1, x), s))))

    return map_op(tr, fn, list(node.args[:2]))


def _reduction(tr: Translator, value: object) -> str:
    if value not in REDUCTIONS:
        raise tr.error(f"unknown loss reduction {value!r}")
    return REDUCTIONS[int(value)]  # type: ignore[call-overload]


@template("aten.mse_loss_backward.default")
def _mse_loss_backward(tr: Translator, node: AtenNode) -> Val:
    """mse_loss_backward(grad, x, target, reduction): k * (x - target) * grad, k = 2 (2 / numel for
    a mean); the grad is a 0-d tensor for a reduced loss, broadcast."""
    x = tr.val(node.args[1])
    red = _reduction(tr, tr.arg(3, "reduction", 1))
    k = 2 / math.prod(x.shape) if red == "mean" else 2

    def fn(g: SExpr, a: SExpr, t: SExpr) -> SExpr:
        return mul(mul(c(k, a), sub(a, t)), g)

    return map_op(tr, fn, list(node.args[:3]))


@template("aten.nll_loss_backward.default")
def _nll_loss_backward(tr: Translator, node: AtenNode) -> Val:
    """nll_loss_backward(grad, x, target, weight, reduction, ignore_index, total_weight):
    gx[n, c] = -w[c] * grad (/ total_weight for a mean) where c == target[n] != ignore_index, else 0
    (`x` is `[N, C]` or `[C]`; `w[c]` is `w[target[n]]` where it counts, an affine read)."""
    gy, x, t = tr.val(node.args[0]), tr.val(node.args[1]), tr.val(node.args[2])
    w = tr.opt_val(tr.arg(3, "weight", None))
    red = _reduction(tr, tr.arg(4, "reduction", 1))
    ignore = int(tr.arg(5, "ignore_index", -100))  # type: ignore[call-overload]
    total = tr.val(tr.arg(6, "total_weight", None)) if red == "mean" else None
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
    g = cast(gy.read(row if red == "none" else []), dt)
    v = un("neg", g) if w is None else mul(un("neg", g), cast(w.read([idx[-1]]), dt))
    if total is not None:
        v = div(v, cast(total.read([]), dt))
    tr.emit(out, idx, "=", select(hit, v, c(0, dt)), lps)
    return stored(out)

