"""Elementwise ops: one statement `out[i..] = f(operands broadcast to i..)` per ATen op.

Arithmetic runs in the output dtype (torch's promoted type); comparisons and logical ops run in
the promoted input type and produce bool. Activations are written with the closed scalar-op set
exactly as torch defines them (e.g. GELU with erf, or its tanh form; softplus with its threshold).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from solar_compiler.loopir.ast import SExpr

from ..capture import AtenNode
from ..translate import Translator, Val
from .common import (
    add,
    bin_,
    c,
    cast,
    cmp,
    div,
    dtype_of,
    map_op,
    maximum,
    minimum,
    mul,
    promote,
    scale,
    select,
    sub,
    un,
)


# ---- scalar formulas ----------------------------------------------------------------------------
def relu(x: SExpr) -> SExpr:
    return maximum(x, c(0, x))


def gelu(x: SExpr, approximate: str = "none") -> SExpr:
    if approximate == "tanh":
        inner = mul(c(math.sqrt(2 / math.pi), x), add(x, mul(c(0.044715, x), mul(x, mul(x, x)))))
        return mul(mul(c(0.5, x), x), add(c(1, x), un("tanh", inner)))
    return mul(mul(c(0.5, x), x), add(c(1, x), un("erf", mul(x, c(1 / math.sqrt(2), x)))))


def silu(x: SExpr) -> SExpr:
    return mul(x, un("sigmoid", x))


def softplus(x: SExpr, beta: float = 1.0, threshold: float = 20.0) -> SExpr:
    bx = scale(x, beta)
    soft = un("log1p", un("exp", bx))
    soft = soft if beta == 1 else div(soft, c(beta, x))
    return select(cmp("gt", bx, c(threshold, x)), x, soft)


def mish(x: SExpr) -> SExpr:
    return mul(x, un("tanh", softplus(x)))


def hardsigmoid(x: SExpr) -> SExpr:
    return div(minimum(maximum(add(x, c(3, x)), c(0, x)), c(6, x)), c(6, x))


def hardswish(x: SExpr) -> SExpr:
    return mul(x, hardsigmoid(x))


def hardtanh(x: SExpr, lo: float = -1.0, hi: float = 1.0) -> SExpr:
    return minimum(maximum(x, c(lo, x)), c(hi, x))


def elu(x: SExpr, alpha: float = 1.0, scale_: float = 1.0, input_scale: float = 1.0) -> SExpr:
    neg = scale(scale(un("expm1", scale(x, input_scale)), alpha), scale_)
    return select(cmp("gt", x, c(0, x)), scale(x, scale_), neg)


def leaky_relu(x: SExpr, slope: float = 0.01) -> SExpr:
    return select(cmp("gt", x, c(0, x)), x, scale(x, slope))


def power(x: SExpr, e: float | int) -> SExpr:
    """x ** e with torch's special cases (square = one multiply, 0.5 = sqrt, -1 = reciprocal)."""
    if e == 1:
        return x
    if e == 2:
        return mul(x, x)
    if e == 3:
        return mul(mul(x, x), x)
    if e == 0.5:
        return un("sqrt", x)
    if e == -0.5:
        return un("rsqrt", x)
    if e == -1:
        return un("reciprocal", x)
    if e == -2:
        return un("reciprocal", mul(x, x))
    return bin_("pow", x, c(e, x))


def trunc(x: SExpr) -> SExpr:
    return mul(un("sign", x), un("floor", un("abs", x)))


def fmod(a: SExpr, b: SExpr) -> SExpr:
    if dtype_of(a) in ("i64", "i32", "i8"):
        r = bin_("mod", a, b)  # python-style; fix the sign to follow the dividend like C fmod
        fix = cmp("ne", r, c(0, r))
        sign_diff = cmp("lt", mul(un("sign", a), un("sign", b)), c(0, a))
        return select(bin_("and", fix, sign_diff), sub(r, b), r)
    return sub(a, mul(b, trunc(div(a, b))))


# ---- templates ----------------------------------------------------------------------------------
def unary(f: Callable[[SExpr], SExpr]):
    def template(tr: Translator, node: AtenNode) -> Val:
        return map_op(tr, f, [node.args[0]])

    return template


def with_scalars(f: Callable[..., SExpr], names: tuple[tuple[str, object], ...]):
    """`op(x, s1=d1, s2=d2, ...)` with scalar parameters taken from args or kwargs."""
    def template(tr: Translator, node: AtenNode) -> Val:
        params = [tr.arg(i + 1, n, d) for i, (n, d) in enumerate(names)]
        return map_op(tr, lambda x: f(x, *params), [node.args[0]])

    return template


def binary(f: Callable[[SExpr, SExpr], SExpr], alpha: bool = False, reverse: bool = False):
    def template(tr: Translator, node: AtenNode) -> Val:
        a, b = node.args[0], node.args[1]
        k = tr.arg(2, "alpha", 1) if alpha else 1
        out = tr.out_meta().dtype
        compute = out if out != "bool" else promote(tr, a, b)

        def fn(x: SExpr, y: SExpr) -> SExpr:
            y = scale(y, k) if k != 1 else y
            return f(y, x) if reverse else f(x, y)

        return map_op(tr, fn, [a, b], compute)

    return template


def compare(pred: str):
    def template(tr: Translator, node: AtenNode) -> Val:
        a, b = node.args[0], node.args[1]
        return map_op(tr, lambda x, y: cmp(pred, x, y), [a, b], promote(tr, a, b))

    return template


def logical(fn: str):
    def template(tr: Translator, node: AtenNode) -> Val:
        args = list(node.args[:2])
        return map_op(tr, lambda *xs: bin_(fn, *xs) if fn != "not" else un("not", xs[0]), args, "bool")

    return template


def bitwise(fn: str):
    def template(tr: Translator, node: AtenNode) -> Val:
        args = list(node.args[:2])
        return map_op(tr, lambda *xs: bin_(fn, *xs) if fn != "not" else un("not", xs[0]), args,
                      tr.out_meta().dtype)

    return template


def cast_op(tr: Translator, node: AtenNode) -> Val:
    return map_op(tr, lambda x: x, [node.args[0]], tr.val(node.args[0]).dtype)


def _where(tr: Translator, node: AtenNode) -> Val:
    cond, a, b = node.args[0], node.args[1], node.args[2]
    out = tr.out_meta().dtype
    return map_op(tr, select, [cond, a, b], ["bool", out, out])


def _masked_fill(tr: Translator, node: AtenNode) -> Val:
    x, mask, value = node.args[0], node.args[1], node.args[2]
    out = tr.out_meta().dtype
    return map_op(tr, lambda xv, m, v: select(m, v, xv), [x, mask, value], [out, "bool", out])


def _clamp(tr: Translator, node: AtenNode) -> Val:
    x = node.args[0]
    lo, hi = tr.arg(1, "min", None), tr.arg(2, "max", None)
    args = [x] + [v for v in (lo, hi) if v is not None]

    def fn(xv: SExpr, *bounds: SExpr) -> SExpr:
        it = iter(bounds)
        r = xv
        if lo is not None:
            r = maximum(r, next(it))
        if hi is not None:
            r = minimum(r, next(it))
        return r

    return map_op(tr, fn, args)


def _clamp_one(which: str):
    def template(tr: Translator, node: AtenNode) -> Val:
        return map_op(tr, maximum if which == "min" else minimum, [node.args[0], node.args[1]])

    return template


def _div_mode(tr: Translator, node: AtenNode) -> Val:
    mode = tr.arg(2, "rounding_mode", None)
    out = tr.out_meta().dtype
    a, b = node.args[0], node.args[1]
    if mode is None:
        return map_op(tr, div, [a, b], out)
    if out in ("i64", "i32", "i8"):
        if mode == "floor":
            return map_op(tr, lambda x, y: bin_("floordiv", x, y), [a, b], out)
        # trunc toward zero: floor division, plus one where the signs differ and it is inexact
        def tdiv(x: SExpr, y: SExpr) -> SExpr:
            q = bin_("floordiv", x, y)
            inexact = cmp("ne", mul(q, y), x)
            neg = cmp("lt", mul(un("sign", x), un("sign", y)), c(0, x))
            return select(bin_("and", inexact, neg), add(q, c(1, q)), q)
        return map_op(tr, tdiv, [a, b], out)
    if mode == "floor":
        return map_op(tr, lambda x, y: un("floor", div(x, y)), [a, b], out)
    return map_op(tr, lambda x, y: trunc(div(x, y)), [a, b], out)


def _pow(tr: Translator, node: AtenNode) -> Val:
    base, e = node.args[0], node.args[1]
    if isinstance(e, (int, float)) and not isinstance(e, bool):
        return map_op(tr, lambda x: power(x, e), [base])
    return map_op(tr, lambda x, y: bin_("pow", x, y), [base, e])


def _rsub(tr: Translator, node: AtenNode) -> Val:
    return binary(sub, alpha=True, reverse=True)(tr, node)


def _threshold(tr: Translator, node: AtenNode) -> Val:
    th, value = node.args[1], node.args[2]
    return map_op(tr, lambda x: select(cmp("le", x, c(th, x)), c(value, x), x), [node.args[0]])


def _addcmul(op: str):
    def template(tr: Translator, node: AtenNode) -> Val:
        k = tr.arg(3, "value", 1)
        f = mul if op == "mul" else div
        return map_op(tr, lambda x, a, b: add(x, scale(f(a, b), k)), list(node.args[:3]))

    return template


def _lerp(tr: Translator, node: AtenNode) -> Val:
    return map_op(tr, lambda a, b, w: add(a, mul(w, sub(b, a))), list(node.args[:3]))


def _gelu(tr: Translator, node: AtenNode) -> Val:
    approx = tr.arg(1, "approximate", "none")
    return map_op(tr, lambda x: gelu(x, approx), [node.args[0]])


def _celu(tr: Translator, node: AtenNode) -> Val:
    alpha = float(tr.arg(1, "alpha", 1.0))
    return map_op(tr, lambda x: select(cmp("gt", x, c(0, x)), x,
                                       scale(un("expm1", scale(x, 1 / alpha)), alpha)), [node.args[0]])


def _logit(tr: Translator, node: AtenNode) -> Val:
    eps = tr.arg(1, "eps", None)

    def fn(x: SExpr) -> SExpr:
        if eps is not None:
            x = minimum(maximum(x, c(eps, x)), c(1 - eps, x))
        return un("log", div(x, sub(c(1, x), x)))

    return map_op(tr, fn, [node.args[0]])


def _fill_like(tr: Translator, node: AtenNode) -> Val:
    from .shape import full_val

    return full_val(tr, tr.out_meta().shape, node.args[1])


_UNARY = {
    "neg": lambda x: un("neg", x), "exp": lambda x: un("exp", x), "log": lambda x: un("log", x),
    "sqrt": lambda x: un("sqrt", x), "rsqrt": lambda x: un("rsqrt", x), "tanh": lambda x: un("tanh", x),
    "sigmoid": lambda x: un("sigmoid", x), "erf": lambda x: un("erf", x), "abs": lambda x: un("abs", x),
    "floor": lambda x: un("floor", x), "ceil": lambda x: un("ceil", x), "round": lambda x: un("round", x),
    "sign": lambda x: un("sign", x), "sin": lambda x: un("sin", x), "cos": lambda x: un("cos", x),
    "log1p": lambda x: un("log1p", x), "expm1": lambda x: un("expm1", x),
    "reciprocal": lambda x: un("reciprocal", x), "isnan": lambda x: un("isnan", x),
    "relu": relu, "silu": silu, "mish": mish, "hardswish": hardswish, "hardsigmoid": hardsigmoid,
    "selu": lambda x: elu(x, 1.6732632423543772, 1.0507009873554805),
    "trunc": trunc, "square": lambda x: mul(x, x), "relu6": lambda x: hardtanh(x, 0.0, 6.0),
    "exp2": lambda x: un("exp", mul(x, c(math.log(2), x))),
    "log2": lambda x: mul(un("log", x), c(1 / math.log(2), x)),
    "log10": lambda x: mul(un("log", x), c(1 / math.log(10), x)),
    "tan": lambda x: div(un("sin", x), un("cos", x)),
    "erfc": lambda x: sub(c(1, x), un("erf", x)),
    "logical_not": lambda x: un("not", cast(x, "bool")),
    "sgn": lambda x: un("sign", x),
    "frac": lambda x: sub(x, trunc(x)),
    "positive": lambda x: x,
}

TABLE: dict[str, Callable] = {f"aten.{k}.default": unary(f) for k, f in _UNARY.items()}
TABLE.update({
    "aten.gelu.default": _gelu,
    "aten.leaky_relu.default": with_scalars(leaky_relu, (("negative_slope", 0.01),)),
    "aten.elu.default": with_scalars(elu, (("alpha", 1.0), ("scale", 1.0), ("input_scale", 1.0))),
    "aten.celu.default": _celu,
    "aten.hardtanh.default": with_scalars(hardtanh, (("min_val", -1.0), ("max_val", 1.0))),
    "aten.softplus.default": with_scalars(softplus, (("beta", 1.0), ("threshold", 20.0))),
    "aten.threshold.default": _threshold,
    "aten.logit.default": _logit,
    "aten.clamp.default": _clamp,
    "aten.clamp.Tensor": _clamp,
    "aten.clip.default": _clamp,
    "aten.clamp_min.default": _clamp_one("min"),
    "aten.clamp_max.default": _clamp_one("max"),
    "aten.clamp_min.Tensor": _clamp_one("min"),
    "aten.clamp_max.Tensor": _clamp_one("max"),
    "aten.add.Tensor": binary(add, alpha=True),
    "aten.add.Scalar": binary(add, alpha=True),
    "aten.sub.Tensor": binary(sub, alpha=True),
    "aten.sub.Scalar": binary(sub, alpha=True),
    "aten.rsub.Scalar": _rsub,
    "aten.rsub.Tensor": _rsub,
    "aten.mul.Tensor": binary(mul),
    "aten.mul.Scalar": binary(mul),
    "aten.div.Tensor": binary(div),
    "aten.div.Scalar": binary(div),
    "aten.div.Tensor_mode": _div_mode,
    "aten.div.Scalar_mode": _div_mode,
    "aten.floor_divide.default": binary(lambda a, b: bin_("floordiv", a, b)),
    "aten.floor_divide.Scalar": binary(lambda a, b: bin_("floordiv", a, b)),
    "aten.true_divide.Tensor": binary(div),
    "aten.remainder.Tensor": binary(lambda a, b: bin_("mod", a, b)),
    "aten.remainder.Scalar": binary(lambda a, b: bin_("mod", a, b)),
    "aten.fmod.Tensor": binary(fmod),
    "aten.fmod.Scalar": binary(fmod),
    "aten.maximum.default": binary(maximum),
    "aten.minimum.default": binary(minimum),
    "aten.fmax.default": binary(maximum),
    "aten.fmin.default": binary(minimum),
    "aten.pow.Tensor_Scalar": _pow,
    "aten.pow.Tensor_Tensor": _pow,
    "aten.pow.Scalar": binary(lambda a, b: bin_("pow", a, b)),
    "aten.addcmul.default": _addcmul("mul"),
    "aten.addcdiv.default": _addcmul("div"),
    "aten.lerp.Tensor": _lerp,
    "aten.lerp.Scalar": _lerp,
    "aten.where.self": _where,
    "aten.where.ScalarOther": _where,
    "aten.where.ScalarSelf": _where,
    "aten.where.Scalar": _where,
    "aten.masked_fill.Scalar": _masked_fill,
    "aten.masked_fill.Tensor": _masked_fill,
    "aten.logical_and.default": logical("and"),
    "aten.logical_or.default": logical("or"),
    "aten.logical_xor.default": logical("xor"),
    "aten.bitwise_and.Tensor": bitwise("and"),
    "aten.bitwise_or.Tensor": bitwise("or"),
    "aten.bitwise_xor.Tensor": bitwise("xor"),
    "aten.bitwise_and.Scalar": bitwise("and"),
    "aten.bitwise_or.Scalar": bitwise("or"),
    "aten.bitwise_not.default": bitwise("not"),
    "aten.fill.Scalar": _fill_like,
    "aten.full_like.default": _fill_like,
})
for _p in ("eq", "ne", "lt", "le", "gt", "ge"):
    TABLE[f"aten.{_p}.Tensor"] = compare(_p)
    TABLE[f"aten.{_p}.Scalar"] = compare(_p)
