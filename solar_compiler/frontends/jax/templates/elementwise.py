"""Elementwise primitives: arithmetic, math, comparisons, logical ops, `select_n`, `clamp`,
`convert_element_type`, `integer_pow`. Each is one `=` statement over the output's shape through
the shared `map_op` (or none when the result is index-valued: an iota comparison stays an affine
condition inlined into its consumers). Operands have the output's shape or are scalars (jaxpr
literals, rank-0 values); arithmetic runs in the output dtype, comparisons in the operands'.

A primitive is the ops XLA evaluates for it: `integer_pow` y=3 is two multiplies, `exp2` is
`pow(2, x)`, `square` one multiply, `logistic` the loop IR's `sigmoid`."""

from __future__ import annotations

from collections.abc import Callable

from solar_compiler.frontends.builder.exprs import (
    INF,
    add,
    bin_,
    c,
    cast,
    cmp,
    div,
    maximum,
    minimum,
    mul,
    select,
    sub,
    un,
)
from solar_compiler.frontends.builder.statements import map_op
from solar_compiler.frontends.builder.values import Val
from solar_compiler.frontends.captured_program import AtenNode, TensorRef
from solar_compiler.loopir.ast import FLOAT_DTYPES, Cast, IndexValue, SExpr

from ..operands import literal_val, operand_dtype
from ..registry import template
from ..translator import JaxTranslator

# ---- unary ------------------------------------------------------------------------------------------------
UNARY: dict[str, Callable[[SExpr], SExpr]] = {
    "neg": lambda x: un("neg", x), "exp": lambda x: un("exp", x), "log": lambda x: un("log", x),
    "sqrt": lambda x: un("sqrt", x), "rsqrt": lambda x: un("rsqrt", x), "tanh": lambda x: un("tanh", x),
    "logistic": lambda x: un("sigmoid", x), "erf": lambda x: un("erf", x), "abs": lambda x: un("abs", x),
    "floor": lambda x: un("floor", x), "ceil": lambda x: un("ceil", x), "sign": lambda x: un("sign", x),
    "sin": lambda x: un("sin", x), "cos": lambda x: un("cos", x), "log1p": lambda x: un("log1p", x),
    "expm1": lambda x: un("expm1", x), "square": lambda x: mul(x, x),
    "tan": lambda x: div(un("sin", x), un("cos", x)),
    "exp2": lambda x: bin_("pow", c(2, x), x),
    "erfc": lambda x: sub(c(1, x), un("erf", x)),
    "cbrt": lambda x: mul(un("sign", x), bin_("pow", un("abs", x), c(1 / 3, x))),
    "is_finite": lambda x: cmp("lt", un("abs", x), c(INF, x)),
    **{f: (lambda name: lambda x: un(name, x))(f)
       for f in ("atan", "asin", "acos", "sinh", "cosh", "asinh", "acosh", "atanh")},
}


def _unary(tr: JaxTranslator, node: AtenNode, fn: Callable[[SExpr], SExpr]) -> Val:
    dt = operand_dtype(tr, node)
    return map_op(tr, fn, node.args[:1], compute=dt)


for _name, _fn in UNARY.items():
    template(f"jax.{_name}", fn=_fn)(_unary)


@template("jax.not")
def _not(tr: JaxTranslator, node: AtenNode) -> Val:
    if operand_dtype(tr, node) != "bool":
        raise tr.error("bitwise not of an integer has no loop-IR operation")
    return map_op(tr, lambda x: un("not", x), node.args[:1])


@template("jax.round")
def _round(tr: JaxTranslator, node: AtenNode) -> Val:
    """Rounding to nearest even is the loop IR's `round`; away from zero is sign(x)*floor(|x| + 0.5)."""
    to_even = int(node.kwargs.get("rounding_method", 0)) == 1
    fn = (lambda x: un("round", x)) if to_even else \
        (lambda x: mul(un("sign", x), un("floor", add(un("abs", x), c(0.5, x)))))
    return map_op(tr, fn, node.args[:1])


@template("jax.integer_pow")
def _integer_pow(tr: JaxTranslator, node: AtenNode) -> Val:
    """x**y by repeated multiplication (square-and-multiply, as XLA expands it); y < 0 is 1/x**-y."""
    y = int(node.kwargs["y"])

    def power(x: SExpr, n: int) -> SExpr:
        if n == 0:
            return c(1, x)
        if n == 1:
            return x
        half = power(x, n // 2)
        sq = mul(half, half)
        return mul(sq, x) if n % 2 else sq

    return map_op(tr, lambda x: power(x, y) if y >= 0 else div(c(1, x), power(x, -y)), node.args[:1])


# ---- binary -----------------------------------------------------------------------------------------------
def _rem(a: SExpr, b: SExpr) -> SExpr:
    """C's fmod (the result has the dividend's sign): integers a - b*(a/b) (the loop IR's integer
    division truncates), floats numpy's mod corrected by b where the signs differ."""
    if a.dtype not in FLOAT_DTYPES:
        return sub(a, mul(b, div(a, b)))
    m = bin_("mod", a, b)
    fix = select(cmp("ne", cmp("lt", a, c(0, a)), cmp("lt", b, c(0, b))), b, c(0, b))
    return sub(m, select(cmp("ne", m, c(0, m)), fix, c(0, m)))


BINARY: dict[str, Callable[[SExpr, SExpr], SExpr]] = {
    "add": add, "add_any": add, "sub": sub, "mul": mul, "div": div, "max": maximum, "min": minimum,
    "pow": lambda a, b: bin_("pow", a, b), "rem": _rem,
    "and": lambda a, b: bin_("and", a, b), "or": lambda a, b: bin_("or", a, b),
    "xor": lambda a, b: bin_("xor", a, b), "atan2": lambda a, b: bin_("atan2", a, b),
}


def _binary(tr: JaxTranslator, node: AtenNode, fn: Callable[[SExpr, SExpr], SExpr]) -> Val:
    dt = tr.out_meta().dtype
    if dt in ("i32", "i8") and fn in (add, sub, mul):
        # narrow integer arithmetic computed in i64 and converted back (the same values, wrap-around
        # included): on loop counters and iotas it folds into one affine index value
        return map_op(tr, lambda a, b: cast(fn(_widen(a), _widen(b)), dt), node.args[:2])
    return map_op(tr, fn, node.args[:2])


def _widen(e: SExpr) -> SExpr:
    """`e` as i64: a narrowed index value is the index value itself."""
    return e.x if isinstance(e, Cast) and isinstance(e.x, IndexValue) else cast(e, "i64")


for _name, _fn in BINARY.items():
    template(f"jax.{_name}", fn=_fn)(_binary)


def _compare(tr: JaxTranslator, node: AtenNode, pred: str) -> Val:
    dt = operand_dtype(tr, node)
    if dt in ("i32", "i8"):
        # narrow integers compared as i64 (exact): on iotas and loop counters the comparison is one of
        # affine index values, a mask that needed-work narrowing reads as a condition on the loops
        return map_op(tr, lambda a, b: cmp(pred, _widen(a), _widen(b)), node.args[:2], compute=dt)
    return map_op(tr, lambda a, b: cmp(pred, a, b), node.args[:2], compute=dt)


for _pred in ("eq", "ne", "lt", "le", "gt", "ge"):
    template(f"jax.{_pred}", pred=_pred)(_compare)


@template("jax.select_n")
def _select_n(tr: JaxTranslator, node: AtenNode) -> Val:
    """select_n(which, *cases): cases[which]; a bool `which` picks cases[1] where true."""
    which, cases = node.args[0], node.args[1:]
    wdt = tr.val(which).dtype if isinstance(which, TensorRef) else "bool"
    out = tr.out_meta().dtype

    def fn(w: SExpr, *vals: SExpr) -> SExpr:
        if wdt == "bool":
            return select(w, vals[1], vals[0]) if len(vals) == 2 else vals[0]
        e = vals[-1]
        for k in range(len(vals) - 2, -1, -1):
            e = select(cmp("eq", w, c(k, w)), vals[k], e)
        return e

    return map_op(tr, fn, [which, *cases], compute=[wdt, *[out] * len(cases)])


@template("jax.clamp")
def _clamp(tr: JaxTranslator, node: AtenNode) -> Val:
    """clamp(lo, x, hi) = min(max(x, lo), hi)."""
    lo, x, hi = node.args
    return map_op(tr, lambda a, v, b: minimum(maximum(v, a), b), [lo, x, hi])


@template("jax.convert_element_type")
def _convert(tr: JaxTranslator, node: AtenNode) -> Val:
    """A cast (no FLOPs); to the same dtype, the value itself."""
    x = node.args[0]
    if isinstance(x, TensorRef) and tr.val(x).dtype == tr.out_meta().dtype:
        return tr.val(x)
    return map_op(tr, lambda v: v, [x], compute=operand_dtype(tr, node))


@template("jax.stop_gradient", "jax.copy", "jax.copy_p", "jax.optimization_barrier")
def _identity(tr: JaxTranslator, node: AtenNode) -> Val | tuple[Val, ...]:
    """Values passed through (no kernel): gradients and copies do not change the forward values."""
    vals = tuple(tr.val(a) if isinstance(a, TensorRef) else literal_val(tr, a, i)
                 for i, a in enumerate(node.args))
    return vals if len(node.outputs) > 1 else vals[0]
