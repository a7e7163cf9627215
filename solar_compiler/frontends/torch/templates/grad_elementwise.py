"""Backward ops of activations, one elementwise statement each, written as torch's own kernels
define them (`aten/src/ATen/native/cpu/Activation.cpp`, `BinaryOpsKernel.cpp`): threshold (ReLU),
GELU (erf and tanh forms), sigmoid, tanh, SiLU, Mish, hardtanh (ReLU6), leaky ReLU, ELU (and SELU,
CELU through it), softplus, hardswish, hardsigmoid. The capture keeps each whole, as the one eager
kernel it is (decomposed, one op would be priced as several kernels)."""

from __future__ import annotations

import math

from solar_compiler.frontends.builder.exprs import (
    add,
    bin_,
    c,
    cmp,
    div,
    mul,
    select,
    sub,
    un,
)
from solar_compiler.frontends.builder.statements import map_op
from solar_compiler.frontends.builder.translator import Translator
from solar_compiler.frontends.builder.values import Val
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


@template("aten.mish_backward.default")
def _mish_backward(tr: Translator, node: AtenNode) -> Val:
    """grad * (tanh(sp) + x * sigmoid(x) * (1 - tanh(sp)^2)), sp = softplus(x)."""
    def fn(g: SExpr, x: SExpr) -> SExpr:
        t = un("tanh", un("log1p", un("exp", x)))
        return mul(g, add(t, mul(mul(x, un("sigmoid", x)), sub(c(1, x), mul(t, t)))))

    return map_op(tr, fn, list(node.args[:2]))


@template("aten.hardtanh_backward.default")
def _hardtanh_backward(tr: Translator, node: AtenNode) -> Val:
    """grad where min < x < max, else 0."""
    lo, hi = tr.arg(2, "min_val", -1.0), tr.arg(3, "max_val", 1.0)

    def fn(g: SExpr, x: SExpr) -> SExpr:
        out = bin_("or", cmp("le", x, c(lo, x)), cmp("ge", x, c(hi, x)))
        return select(out, c(0, g), g)

    return map_op(tr, fn, list(node.args[:2]))


@template("aten.leaky_relu_backward.default")
def _leaky_relu_backward(tr: Translator, node: AtenNode) -> Val:
    """grad where x > 0, else grad * negative_slope (x the input or the result: same sign)."""
    slope = tr.arg(2, "negative_slope", 0.01)
    return map_op(tr, lambda g, x: select(cmp("gt", x, c(0, x)), g, mul(g, c(slope, g))),
                  list(node.args[:2]))


@template("aten.elu_backward.default")
def _elu_backward(tr: Translator, node: AtenNode) -> Val:
    """(grad, alpha, scale, input_scale, is_result, self_or_result): for x <= 0 (y <= 0)
    grad * input_scale * alpha * scale * exp(x * input_scale) (grad * input_scale * (y + alpha *
    scale)), else grad * scale."""
    alpha, sc, isc = (float(tr.arg(i, n, 1.0)) for i, n in ((1, "alpha"), (2, "scale"), (3, "input_scale")))
    is_result = bool(tr.arg(4, "is_result", False))

    def fn(g: SExpr, v: SExpr) -> SExpr:
        if is_result:
            neg = mul(mul(g, c(isc, g)), add(v, c(alpha * sc, v)))
        else:
            neg = mul(mul(g, c(isc * alpha * sc, g)), un("exp", mul(v, c(isc, v))))
        return select(cmp("le", v, c(0, v)), neg, mul(g, c(sc, g)))

    return map_op(tr, fn, [node.args[0], node.args[5]])


@template("aten.softplus_backward.default")
def _softplus_backward(tr: Translator, node: AtenNode) -> Val:
    """grad where x * beta > threshold, else grad * z / (z + 1), z = exp(x * beta)."""
    beta, th = float(tr.arg(2, "beta", 1.0)), float(tr.arg(3, "threshold", 20.0))

    def fn(g: SExpr, x: SExpr) -> SExpr:
        bx = mul(x, c(beta, x))
        z = un("exp", bx)
        return select(cmp("gt", bx, c(th, x)), g, mul(g, div(z, add(z, c(1, z)))))

    return map_op(tr, fn, list(node.args[:2]))


@template("aten.hardswish_backward.default")
def _hardswish_backward(tr: Translator, node: AtenNode) -> Val:
    """0 for x < -3, grad * (x / 3 + 0.5) up to 3, grad above."""
    def fn(g: SExpr, x: SExpr) -> SExpr:
        mid = mul(g, add(div(x, c(3, x)), c(0.5, x)))
        return select(cmp("lt", x, c(-3, x)), c(0, g), select(cmp("le", x, c(3, x)), mid, g))

    return map_op(tr, fn, list(node.args[:2]))


@template("aten.hardsigmoid_backward.default")
def _hardsigmoid_backward(tr: Translator, node: AtenNode) -> Val:
    """grad / 6 where -3 < x < 3, else 0."""
    def fn(g: SExpr, x: SExpr) -> SExpr:
        inside = bin_("and", cmp("gt", x, c(-3, x)), cmp("lt", x, c(3, x)))
        return select(inside, div(g, c(6, g)), c(0, g))

    return map_op(tr, fn, list(node.args[:2]))
