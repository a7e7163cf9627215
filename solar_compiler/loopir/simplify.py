"""Exact simplification of loop-IR expressions, independent of any frontend.

Two rewrites, both value-preserving:

* `simplify_affine` / `simplify_expr`: every `//` and `%` that the loop ranges make exact is
  rewritten affinely (`(2*i + k) // 64` with `0 <= k < 2` is `i // 32`), so a flatten followed by
  an unflatten gives the plain indices back and needed-work narrowing sees affine accesses.
* `fold`: literal arithmetic evaluated, i64 arithmetic on index values made one index value, and an
  op applied to a two-literal select pushed into the select (`where(i >= j, 1.0, 0.0) == 0` becomes
  `i < j`), floor division and modulo of an index value by a positive constant made index values,
  and an order comparison of an integer |x|, max or min of index values split into comparisons of
  the operands (`|i - j| < w` is `i - j < w and j - i < w`), so that masks built from indices
  (causal, banded, block-causal) reach their consumers as affine comparisons.

`fold` takes the evaluator of a literal expression as an argument: the values must be the ones the
executor computes, and the IR layer does not import the executor.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from solar_compiler.loopir.affine import AffExpr, FloorDiv
from solar_compiler.loopir.ast import (
    INT_DTYPES,
    Binary,
    Bitcast,
    Cast,
    Cmp,
    Const,
    IndexValue,
    Read,
    Select,
    SExpr,
    Unary,
)

Ranges = Mapping[str, tuple[int, int]]  # loop variable -> (lowest, highest) value, inclusive
Literal = float | int | bool

# the dataclass fields holding the children of each compound expression, in `children` order
_CHILD_FIELDS = {Unary: ("x",), Binary: ("a", "b"), Cmp: ("a", "b"), Select: ("cond", "a", "b"), Cast: ("x",),
                Bitcast: ("x",)}
_LOGICAL = frozenset({"not", "and", "or", "xor"})
_NEGATE = {"eq": "ne", "ne": "eq", "lt": "ge", "ge": "lt", "gt": "le", "le": "gt"}


def with_children(e: SExpr, kids: Sequence[SExpr]) -> SExpr:
    """`e` (a Unary, Binary, Cmp, Select, Cast or Bitcast) with its children replaced by `kids`."""
    return replace(e, **dict(zip(_CHILD_FIELDS[type(e)], kids, strict=True)))


# ---- // and % under loop ranges ------------------------------------------------------------------------
def simplify_affine(e: AffExpr, ranges: Ranges) -> AffExpr:
    """`e` with every floor division / modulo rewritten affinely where the variable ranges make
    that exact: (a*x + b) // d with 0 <= b < g, g | a and g | d becomes (a/g * x) // (d/g), ..."""
    if not e.is_quasi():
        return e
    out = AffExpr.lit(e.const)
    for a, k in e.terms:
        if isinstance(a, str):
            out = out + AffExpr.var(a) * k
        else:
            out = out + _divmod(simplify_affine(a.num, ranges), a.den, isinstance(a, FloorDiv), ranges) * k
    return out


def _divmod(num: AffExpr, d: int, floor: bool, ranges: Ranges) -> AffExpr:
    try:
        lo, hi = num.bounds(ranges)
    except KeyError:
        return num // d if floor else num % d
    if 0 <= lo and hi < d:
        return AffExpr.lit(0) if floor else num
    for g in sorted((g for g in range(2, d + 1) if d % g == 0), reverse=True):
        whole = AffExpr._make({a: k for a, k in num.terms if k % g == 0}, (num.const // g) * g)
        rest = num - whole
        rlo, rhi = rest.bounds(ranges)
        if 0 <= rlo and rhi < g:
            q = AffExpr._make({a: k // g for a, k in whole.terms}, whole.const // g)
            if floor:
                return q if d == g else _divmod(q, d // g, True, ranges)
            return rest if d == g else _divmod(q, d // g, False, ranges) * g + rest
    return num // d if floor else num % d


def simplify_index(i: AffExpr | SExpr, ranges: Ranges) -> AffExpr | SExpr:
    """An index position (affine or loaded) simplified under `ranges`."""
    return simplify_affine(i, ranges) if isinstance(i, AffExpr) else simplify_expr(i, ranges)


def simplify_expr(e: SExpr, ranges: Ranges) -> SExpr:
    """`e` with every affine index simplified (`simplify_affine`) and i64 arithmetic on index values
    made one index value (as the text form reads it back)."""
    if isinstance(e, Read):
        return replace(e, indices=tuple(simplify_index(i, ranges) for i in e.indices))
    if isinstance(e, IndexValue):
        return replace(e, expr=simplify_affine(e.expr, ranges))
    kids = e.children
    if not kids:
        return e
    new = [simplify_expr(k, ranges) for k in kids]
    folded = _fold_index_arith(e, new)
    if folded is not None:
        return folded
    return with_children(e, new)


def _fold_index_arith(e: SExpr, kids: list[SExpr]) -> SExpr | None:
    """i64 arithmetic on index values is itself an index value."""

    def aff(x: SExpr) -> AffExpr | None:
        if isinstance(x, IndexValue):
            return x.expr
        if isinstance(x, Const) and x.dtype == "i64" and not isinstance(x.value, bool):
            return AffExpr.lit(int(x.value))
        return None

    if getattr(e, "dtype", None) != "i64":
        return None
    if isinstance(e, Unary) and e.fn == "neg" and isinstance(kids[0], IndexValue):
        return IndexValue(-kids[0].expr)
    if isinstance(e, Binary) and e.fn in ("add", "sub", "mul"):
        a, b = aff(kids[0]), aff(kids[1])
        if a is None or b is None or not (isinstance(kids[0], IndexValue) or isinstance(kids[1], IndexValue)):
            return None
        if e.fn == "mul" and not (a.is_const() or b.is_const()):
            return None
        return IndexValue(a + b if e.fn == "add" else a - b if e.fn == "sub" else a * b)
    if isinstance(e, Binary) and e.fn in ("floordiv", "mod") and isinstance(kids[0], IndexValue):
        d = aff(kids[1])  # floor division and modulo by a positive constant are quasi-affine
        if d is None or not d.is_const() or d.const <= 0:
            return None
        return IndexValue(kids[0].expr // d.const if e.fn == "floordiv" else kids[0].expr % d.const)
    return None


# ---- comparisons of |x|, max and min of index values -----------------------------------------------
_SWAP = {"lt": "gt", "le": "ge", "gt": "lt", "ge": "le"}


def _pieces(x: SExpr) -> tuple[str, list[SExpr]] | None:
    """`x` as ("max" | "min", operands) when it is |y| (max(y, -y)), max or min of integers."""
    if isinstance(x, Unary) and x.fn == "abs" and x.dtype in INT_DTYPES:
        return "max", [x.x, Unary("neg", x.x, x.dtype)]
    if isinstance(x, Binary) and x.fn in ("max", "min") and x.dtype in INT_DTYPES:
        return x.fn, [x.a, x.b]
    return None


def _split_cmp(e: Cmp) -> SExpr | None:
    """An order comparison of an integer |x|, max or min with another value, as the logical
    combination of comparisons of its operands (`|i - j| < 128` is `i - j < 128 and j - i < 128`),
    so a band mask reaches needed-work narrowing as affine comparisons. Exact on integers."""
    if e.pred not in _SWAP:
        return None
    pred, a, b = e.pred, e.a, e.b
    if _pieces(a) is None:
        pred, a, b = _SWAP[pred], b, a
    got = _pieces(a)
    if got is None:
        return None
    fn, ops = got
    below = pred in ("lt", "le")  # max(..) < b: all are; min(..) < b: any is
    logic = "and" if (fn == "max") == below else "or"
    parts = [_split_cmp(Cmp(pred, o, b, "bool")) or Cmp(pred, o, b, "bool") for o in ops]
    return Binary(logic, parts[0], parts[1], "bool")


# ---- index-valued expressions and literal folding ------------------------------------------------------
def index_only(e: SExpr) -> bool:
    """True when `e` reads no tensor and does no arithmetic (index values, literals, casts,
    comparisons, selects and logical ops only, and the integer |x|, max and min that a comparison
    splits into affine ones): inlining it costs nothing narrowing cannot remove."""
    for x in e.walk():
        if isinstance(x, Read):
            return False
        if isinstance(x, Unary | Binary) and x.fn not in _LOGICAL and _pieces(x) is None:
            return False
    return True


def negate(cond: SExpr) -> SExpr:
    """`not cond`, as the opposite comparison when `cond` is one (it stays affine)."""
    if isinstance(cond, Cmp):
        return Cmp(_NEGATE[cond.pred], cond.a, cond.b, "bool")
    if isinstance(cond, Unary) and cond.fn == "not":
        return cond.x
    return Unary("not", cond, "bool")


def fold(e: SExpr, evaluate: Callable[[SExpr], Literal | None]) -> SExpr:
    """`e` with literal arithmetic evaluated by `evaluate` (None: not a usable literal), index
    arithmetic made index values, and an op on a two-literal select and literals pushed into the
    select (see the module doc). Literals are rebuilt with `Const(value, dtype)` of `e`'s dtype."""
    e = simplify_expr(e, {})
    kids = e.children
    if not kids or isinstance(e, Read):
        return e
    new = [fold(k, evaluate) for k in kids]
    if isinstance(e, Select):
        cond, a, b = new
        if isinstance(cond, Const):
            return a if cond.value else b
        if isinstance(a, Const) and isinstance(b, Const) and repr(a) == repr(b):
            return a
        if isinstance(a, Const) and isinstance(b, Const) and e.dtype == "bool":
            return cond if a.value else negate(cond)
        return Select(cond, a, b, e.dtype)
    e = with_children(e, new)
    if isinstance(e, Cmp) and any(_pieces(k) is not None for k in new) and index_only(e):
        split = _split_cmp(e)
        if split is not None:
            return fold(split, evaluate)
    sel = [k for k in new if isinstance(k, Select) and isinstance(k.a, Const) and isinstance(k.b, Const)]
    if all(isinstance(k, Const) for k in new):
        v = evaluate(e)
        return e if v is None else literal(v, e.dtype)
    if sel and all(isinstance(k, Const) or (isinstance(k, Select) and k.cond == sel[0].cond
                                            and k in sel) for k in new):
        cond = sel[0].cond
        branch = [with_children(e, [k.a if isinstance(k, Select) else k for k in new]),
                  with_children(e, [k.b if isinstance(k, Select) else k for k in new])]
        return fold(Select(cond, *branch, e.dtype), evaluate)
    return e


def literal(value: Literal, dtype: str) -> Const:
    """A literal of `dtype`, its Python value converted to that dtype's kind (bool, int or float)."""
    if dtype == "bool":
        return Const(bool(value), "bool")
    if dtype in INT_DTYPES:
        return Const(int(value), dtype)
    return Const(float(value), dtype)
