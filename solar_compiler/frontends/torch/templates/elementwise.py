"""Elementwise ops: one statement `out[i..] = f(operands broadcast to i..)` per ATen op.

Arithmetic runs in the output dtype (torch's promoted type); comparisons and logical ops run in
the promoted input type and produce bool. Activations are written with the closed scalar-op set
exactly as torch defines them (e.g. GELU with erf, or its tanh form; softplus with its threshold).
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
    dtype_of,
    logaddexp,
    maximum,
    minimum,
    mul,
    promote,
    scale,
    select,
    sub,
    un,
)
from solar_compiler.frontends.builder.statements import full_val, map_op, select_in_place
from solar_compiler.frontends.builder.translator import Translator
from solar_compiler.frontends.builder.values import Val, ivars, loops, stored
from solar_compiler.frontends.captured_program import AtenNode, TensorRef
from solar_compiler.loopir.ast import FLOAT_DTYPES, INT_DTYPES, SExpr
from solar_compiler.loopir.rules import int_range

from ..registry import template


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
    if dtype_of(a) in INT_DTYPES:
        r = bin_("mod", a, b)  # python-style; fix the sign to follow the dividend like C fmod
        fix = cmp("ne", r, c(0, r))
        sign_diff = cmp("lt", mul(un("sign", a), un("sign", b)), c(0, a))
        return select(bin_("and", fix, sign_diff), sub(r, b), r)
    return sub(a, mul(b, trunc(div(a, b))))


def floordiv(a: SExpr, b: SExpr) -> SExpr:
    return bin_("floordiv", a, b)


def remainder(a: SExpr, b: SExpr) -> SExpr:
    return bin_("mod", a, b)


def pow_(a: SExpr, b: SExpr) -> SExpr:
    return bin_("pow", a, b)


# ---- templates ----------------------------------------------------------------------------------
_UNARY: dict[str, Callable[[SExpr], SExpr]] = {
    "neg": lambda x: un("neg", x), "exp": lambda x: un("exp", x), "log": lambda x: un("log", x),
    "sqrt": lambda x: un("sqrt", x), "rsqrt": lambda x: un("rsqrt", x), "tanh": lambda x: un("tanh", x),
    "sigmoid": lambda x: un("sigmoid", x), "erf": lambda x: un("erf", x), "abs": lambda x: un("abs", x),
    "floor": lambda x: un("floor", x), "ceil": lambda x: un("ceil", x), "round": lambda x: un("round", x),
    "sign": lambda x: un("sign", x), "sin": lambda x: un("sin", x), "cos": lambda x: un("cos", x),
    "log1p": lambda x: un("log1p", x), "expm1": lambda x: un("expm1", x),
    "reciprocal": lambda x: un("reciprocal", x),
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
    **{f: (lambda name: lambda x: un(name, x))(f)
       for f in ("atan", "asin", "acos", "sinh", "cosh", "asinh", "acosh", "atanh")},
    "arctan": lambda x: un("atan", x), "arcsin": lambda x: un("asin", x), "arccos": lambda x: un("acos", x),
}


def unary(tr: Translator, node: AtenNode, f: Callable[[SExpr], SExpr]) -> Val:
    """`f(x)` elementwise: the `aten.<name>.default` op of every entry of `_UNARY`."""
    return map_op(tr, f, [node.args[0]])


for _name, _f in _UNARY.items():
    template(f"aten.{_name}.default", f=_f)(unary)


@template("aten.leaky_relu.default", f=leaky_relu, names=(("negative_slope", 0.01),))
@template("aten.elu.default", f=elu, names=(("alpha", 1.0), ("scale", 1.0), ("input_scale", 1.0)))
@template("aten.hardtanh.default", f=hardtanh, names=(("min_val", -1.0), ("max_val", 1.0)))
@template("aten.softplus.default", f=softplus, names=(("beta", 1.0), ("threshold", 20.0)))
def with_scalars(tr: Translator, node: AtenNode, f: Callable[..., SExpr],
                 names: tuple[tuple[str, object], ...]) -> Val:
    """`op(x, s1=d1, s2=d2, ...)` with scalar parameters taken from args or kwargs."""
    params = [tr.arg(i + 1, n, d) for i, (n, d) in enumerate(names)]
    return map_op(tr, lambda x: f(x, *params), [node.args[0]])


@template("aten.add.Tensor", "aten.add.Scalar", f=add, alpha=True)
@template("aten.sub.Tensor", "aten.sub.Scalar", f=sub, alpha=True)
@template("aten.rsub.Scalar", "aten.rsub.Tensor", f=sub, alpha=True, reverse=True)
@template("aten.mul.Tensor", "aten.mul.Scalar", f=mul)
@template("aten.div.Tensor", "aten.div.Scalar", "aten.true_divide.Tensor", f=div)
@template("aten.floor_divide.default", "aten.floor_divide.Scalar", f=floordiv)
@template("aten.remainder.Tensor", "aten.remainder.Scalar", f=remainder)
@template("aten.fmod.Tensor", "aten.fmod.Scalar", f=fmod)
@template("aten.maximum.default", "aten.fmax.default", f=maximum)
@template("aten.minimum.default", "aten.fmin.default", f=minimum)
@template("aten.pow.Scalar", f=pow_)
@template("aten.atan2.default", "aten.arctan2.default", f=lambda a, b: bin_("atan2", a, b))
def binary(tr: Translator, node: AtenNode, f: Callable[[SExpr, SExpr], SExpr], alpha: bool = False,
           reverse: bool = False) -> Val:
    """`f(a, alpha * b)` (or `f(alpha * b, a)`, reversed) in the output dtype (a bool result:
    in the operands' promoted dtype)."""
    a, b = node.args[0], node.args[1]
    k = tr.arg(2, "alpha", 1) if alpha else 1
    out = tr.out_meta().dtype
    compute = out if out != "bool" else promote(tr, a, b)
    if compute == "bool" and f in (mul, add, maximum, minimum):  # bool arithmetic is logic
        return map_op(tr, lambda x, y: bin_("and" if f in (mul, minimum) else "or", x, y), [a, b], "bool")

    def fn(x: SExpr, y: SExpr) -> SExpr:
        y = scale(y, k) if k != 1 else y
        return f(y, x) if reverse else f(x, y)

    return map_op(tr, fn, [a, b], compute)


def compare(tr: Translator, node: AtenNode, pred: str) -> Val:
    a, b = node.args[0], node.args[1]
    return map_op(tr, lambda x, y: cmp(pred, x, y), [a, b], promote(tr, a, b))


for _p in ("eq", "ne", "lt", "le", "gt", "ge"):
    template(f"aten.{_p}.Tensor", f"aten.{_p}.Scalar", pred=_p)(compare)


@template("aten.logical_and.default", fn="and", compute="bool")
@template("aten.logical_or.default", fn="or", compute="bool")
@template("aten.logical_xor.default", fn="xor", compute="bool")
@template("aten.bitwise_and.Tensor", "aten.bitwise_and.Scalar", fn="and")
@template("aten.bitwise_or.Tensor", "aten.bitwise_or.Scalar", fn="or")
@template("aten.bitwise_xor.Tensor", fn="xor")
@template("aten.bitwise_not.default", fn="not")
def logical(tr: Translator, node: AtenNode, fn: str, compute: str | None = None) -> Val:
    """and/or/xor/not in bool (logical ops) or in the output dtype (bitwise ops)."""
    args = list(node.args[:2])
    return map_op(tr, lambda *xs: bin_(fn, *xs) if fn != "not" else un("not", xs[0]), args,
                  compute or tr.out_meta().dtype)


def _float_in(tr: Translator, node: AtenNode) -> str:
    """The dtype a float predicate or sign operation reads its first operand in."""
    return tr.val(node.args[0]).dtype if isinstance(node.args[0], TensorRef) else tr.out_meta().dtype


def signbit(x: SExpr) -> SExpr:
    """The sign bit: set for negative values and for -0.0 (whose reciprocal is -inf)."""
    if dtype_of(x) not in FLOAT_DTYPES:
        return cmp("lt", x, c(0, x))
    return bin_("or", cmp("lt", x, c(0, x)),
                bin_("and", cmp("eq", x, c(0, x)), cmp("lt", un("reciprocal", x), c(0, x))))


_PREDICATES: dict[str, Callable[[SExpr], SExpr]] = {  # read in the operand's dtype, not the bool result's
    "isnan": lambda x: un("isnan", x),
    "isinf": lambda x: cmp("eq", un("abs", x), c(math.inf, x)),
    "isfinite": lambda x: cmp("lt", un("abs", x), c(math.inf, x)),   # False for NaN too
    "isposinf": lambda x: cmp("eq", x, c(math.inf, x)),
    "isneginf": lambda x: cmp("eq", x, c(-math.inf, x)),
    "signbit": signbit,
}


def _predicate(tr: Translator, node: AtenNode, f: Callable[[SExpr], SExpr]) -> Val:
    """A bool of each element of a float (for an integer operand: its value never is infinite)."""
    dt = _float_in(tr, node)
    if dt not in FLOAT_DTYPES and f is not signbit:  # an integer is finite, never NaN nor infinite
        return map_op(tr, lambda x: c(f is _PREDICATES["isfinite"], "bool"), [node.args[0]], dt)
    return map_op(tr, f, [node.args[0]], dt)


for _name, _f in _PREDICATES.items():
    template(f"aten.{_name}.default", f=_f)(_predicate)


@template("aten.copysign.Tensor", "aten.copysign.Scalar")
def _copysign(tr: Translator, node: AtenNode) -> Val:
    """|a| with the sign bit of b (-0.0 counts as negative), in the (float) output dtype."""
    return map_op(tr, lambda a, b: select(signbit(b), un("neg", un("abs", a)), un("abs", a)),
                  [node.args[0], node.args[1]])


@template("aten.xlogy.Tensor", "aten.xlogy.Scalar_Other", "aten.xlogy.Scalar_Self")
def _xlogy(tr: Translator, node: AtenNode) -> Val:
    """x * log(y), 0 where x == 0 (unless y is NaN)."""
    return map_op(tr, lambda x, y: select(un("isnan", y), y,
                                          select(cmp("eq", x, c(0, x)), c(0, x), mul(x, un("log", y)))),
                  [node.args[0], node.args[1]])


@template("aten.heaviside.default")
def _heaviside(tr: Translator, node: AtenNode) -> Val:
    """1 for x > 0, `values` at x == 0, 0 below (NaN stays NaN)."""
    return map_op(tr, lambda x, v: select(cmp("gt", x, c(0, x)), c(1, x),
                                          select(cmp("eq", x, c(0, x)), v,
                                                 select(un("isnan", x), x, c(0, x)))),
                  [node.args[0], node.args[1]])


@template("aten.hypot.default")
def _hypot(tr: Translator, node: AtenNode) -> Val:
    return map_op(tr, lambda a, b: un("sqrt", add(mul(a, a), mul(b, b))), [node.args[0], node.args[1]])


@template("aten.logaddexp.default")
def _logaddexp(tr: Translator, node: AtenNode) -> Val:
    return map_op(tr, logaddexp, [node.args[0], node.args[1]])


@template("aten.deg2rad.default", k=math.pi / 180)
@template("aten.rad2deg.default", k=180 / math.pi)
def _angle(tr: Translator, node: AtenNode, k: float) -> Val:
    return map_op(tr, lambda x: mul(x, c(k, x)), [node.args[0]])


@template("aten.sinc.default")
def _sinc(tr: Translator, node: AtenNode) -> Val:
    """sin(pi x) / (pi x), 1 at 0."""
    def f(x: SExpr) -> SExpr:
        px = mul(x, c(math.pi, x))
        return select(cmp("eq", x, c(0, x)), c(1, x), div(un("sin", px), px))
    return map_op(tr, f, [node.args[0]])


@template("aten.frexp.Tensor")
def _frexp(tr: Translator, node: AtenNode) -> tuple[Val | None, Val | None]:
    """(mantissa, exponent) with x = mantissa * 2^exponent, 0.5 <= |mantissa| < 1; zero, infinities
    and NaN give (x, 0), as torch's. A kernel reads the exponent bits (integer work); the loop IR has
    no bit cast, so the nest computes the same values in f64 (where every f32 subnormal is normal):
    e = floor(log2 |x|) + 1, m = x * 2^-e, then one step corrects e where the logarithm's rounding
    put m at 1 or below 0.5. Another algorithm than the kernel's: a stand-in (`Translator.stand_in`)."""
    x = tr.val(node.args[0])
    if x.dtype not in FLOAT_DTYPES:
        raise tr.error(f"no loop-IR template for frexp of {x.dtype} (torch takes floats only)")
    tr.mark_stand_in()

    def parts(v: SExpr) -> tuple[SExpr, SExpr, SExpr]:
        """(finite and nonzero, the mantissa, the exponent) of v, in f64."""
        xd = cast(v, "f64")
        ax = un("abs", xd)
        regular = bin_("and", cmp("gt", ax, c(0, ax)), cmp("lt", ax, c(math.inf, ax)))
        e = add(un("floor", mul(un("log", select(regular, ax, c(1, ax))), c(1 / math.log(2), ax))), c(1, ax))
        half = bin_("floordiv", e, c(2, e))  # two exact steps: 2^-e alone leaves the f64 range
        m = mul(mul(xd, bin_("pow", c(2, e), un("neg", half))), bin_("pow", c(2, e), un("neg", sub(e, half))))
        am = un("abs", m)
        big, small = cmp("ge", am, c(1, am)), cmp("lt", am, c(0.5, am))
        mant = select(big, mul(m, c(0.5, m)), select(small, mul(m, c(2, m)), m))
        expo = add(e, select(big, c(1, e), select(small, c(-1, e), c(0, e))))
        return regular, select(regular, mant, xd), select(regular, expo, c(0, expo))

    outs: list[Val | None] = [None, None]
    for k in (0, 1):
        if tr.used(k):
            out = tr.result(k)
            lps = loops("i", out.shape)
            idx = ivars(lps)
            tr.emit(out, idx, "=", cast(parts(x.read(idx))[k + 1], out.dtype), lps)
            outs[k] = stored(out)
    return outs[0], outs[1]


@template("aten.__rshift__.Scalar", "aten.bitwise_right_shift.Tensor_Scalar", left=False)
@template("aten.__lshift__.Scalar", "aten.bitwise_left_shift.Tensor_Scalar", left=True)
def _shift(tr: Translator, node: AtenNode, left: bool) -> Val:
    """A shift by a constant: `x >> s` is the floor division by 2^s (an arithmetic shift of a signed
    value too), `x << s` the product with 2^s, wrapping at the dtype's width as the shift does."""
    out = tr.out_meta().dtype
    s = node.args[1]
    if out not in INT_DTYPES or not isinstance(s, int) or isinstance(s, bool) or s < 0:
        raise tr.error(f"no loop-IR template for a shift of {out} by {s!r} (an integer by a constant)")
    lo, hi = int_range(out)
    if not lo <= 2 ** s <= hi:
        raise tr.error(f"no loop-IR template for a shift of {out} by {s} (2^{s} is no {out} value)")
    step = c(2 ** s, out)
    return map_op(tr, lambda x: mul(x, step) if left else bin_("floordiv", x, step), [node.args[0]], out)


@template("aten.where.self", "aten.where.ScalarOther", "aten.where.ScalarSelf", "aten.where.Scalar")
def _where(tr: Translator, node: AtenNode) -> Val:
    """A select; in place where one branch is an input forward updates through it (`masked_fill_`
    decomposes to `where(m, v, x)`): a conditional store (`select_in_place`)."""
    cond, a, b = node.args[0], node.args[1], node.args[2]
    out = tr.out_meta().dtype
    got = select_in_place(tr, node, b, cond, a, True) or select_in_place(tr, node, a, cond, b, False)
    return got or map_op(tr, select, [cond, a, b], ["bool", out, out])


@template("aten.masked_fill.Scalar", "aten.masked_fill.Tensor")
def _masked_fill(tr: Translator, node: AtenNode) -> Val:
    x, mask, value = node.args[0], node.args[1], node.args[2]
    out = tr.out_meta().dtype
    return select_in_place(tr, node, x, mask, value, True) or \
        map_op(tr, lambda xv, m, v: select(m, v, xv), [x, mask, value], [out, "bool", out])


@template("aten.clamp.default", "aten.clamp.Tensor", "aten.clip.default")
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


@template("aten.clamp_min.default", "aten.clamp_min.Tensor", f=maximum)
@template("aten.clamp_max.default", "aten.clamp_max.Tensor", f=minimum)
def _clamp_one(tr: Translator, node: AtenNode, f: Callable[[SExpr, SExpr], SExpr]) -> Val:
    return map_op(tr, f, [node.args[0], node.args[1]])


@template("aten.div.Tensor_mode", "aten.div.Scalar_mode")
def _div_mode(tr: Translator, node: AtenNode) -> Val:
    mode = tr.arg(2, "rounding_mode", None)
    out = tr.out_meta().dtype
    a, b = node.args[0], node.args[1]
    if mode is None:
        return map_op(tr, div, [a, b], out)
    if out in INT_DTYPES:
        if mode == "floor":
            return map_op(tr, floordiv, [a, b], out)
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


@template("aten.pow.Tensor_Scalar", "aten.pow.Tensor_Tensor")
def _pow(tr: Translator, node: AtenNode) -> Val:
    base, e = node.args[0], node.args[1]
    if isinstance(e, (int, float)) and not isinstance(e, bool):
        return map_op(tr, lambda x: power(x, e), [base])
    return map_op(tr, pow_, [base, e])


@template("aten.threshold.default")
def _threshold(tr: Translator, node: AtenNode) -> Val:
    th, value = node.args[1], node.args[2]
    return map_op(tr, lambda x: select(cmp("le", x, c(th, x)), c(value, x), x), [node.args[0]])


@template("aten.addcmul.default", f=mul)
@template("aten.addcdiv.default", f=div)
def _addcmul(tr: Translator, node: AtenNode, f: Callable[[SExpr, SExpr], SExpr]) -> Val:
    """x + value * f(a, b)."""
    k = tr.arg(3, "value", 1)
    return map_op(tr, lambda x, a, b: add(x, scale(f(a, b), k)), list(node.args[:3]))


@template("aten.lerp.Tensor", "aten.lerp.Scalar")
def _lerp(tr: Translator, node: AtenNode) -> Val:
    return map_op(tr, lambda a, b, w: add(a, mul(w, sub(b, a))), list(node.args[:3]))


@template("aten.gelu.default")
def _gelu(tr: Translator, node: AtenNode) -> Val:
    approx = tr.arg(1, "approximate", "none")
    return map_op(tr, lambda x: gelu(x, approx), [node.args[0]])


@template("aten.celu.default")
def _celu(tr: Translator, node: AtenNode) -> Val:
    alpha = float(tr.arg(1, "alpha", 1.0))
    return map_op(tr, lambda x: select(cmp("gt", x, c(0, x)), x,
                                       scale(un("expm1", scale(x, 1 / alpha)), alpha)), [node.args[0]])


@template("aten.logit.default")
def _logit(tr: Translator, node: AtenNode) -> Val:
    eps = tr.arg(1, "eps", None)

    def fn(x: SExpr) -> SExpr:
        if eps is not None:
            x = minimum(maximum(x, c(eps, x)), c(1 - eps, x))
        return un("log", div(x, sub(c(1, x), x)))

    return map_op(tr, fn, [node.args[0]])


@template("aten.fill.Scalar", "aten.full_like.default")
def _fill_like(tr: Translator, node: AtenNode) -> Val:
    return full_val(tr, tr.out_meta().shape, node.args[1])


@template("aten.ldexp.Tensor")
def _ldexp(tr: Translator, node: AtenNode) -> Val:
    """x * 2^other, in the output dtype (torch's: x's float dtype, f32 for an integer x; a float
    `other` of a wider dtype promotes). Computed in f64, then rounded once to the output dtype, as
    torch's CPU kernel gives an exact ldexp: `2^other` alone can leave the output dtype's range where
    the product does not (`ldexp(1e-30, 130)` is 1.4e9 in f32), negative exponents are exact down to
    the subnormals. Two operations per element (a power and a product), in f64."""
    return map_op(tr, lambda x, e: mul(x, bin_("pow", c(2.0, e), e)), [node.args[0], node.args[1]], "f64")
