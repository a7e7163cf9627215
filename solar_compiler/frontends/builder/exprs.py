"""Typed scalar-expression builders (every node gets its dtype as it is built), torch's dtype
promotion, and literal folding with the executor's own arithmetic."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from solar_compiler.executor.evaluate import Evaluator
from solar_compiler.loopir.affine import AffExpr
from solar_compiler.loopir.ast import (
    FLOAT_DTYPES,
    INT_DTYPES,
    Assign,
    Binary,
    Bitcast,
    Cast,
    Cmp,
    Const,
    Index,
    IndexValue,
    Select,
    SExpr,
    Unary,
)
from solar_compiler.loopir.simplify import Literal, literal, simplify_expr, with_children
from solar_compiler.loopir.simplify import fold as fold_with

from ..captured_program import TensorRef
from .translator import Translator
from .values import Val

INF = math.inf


# ---- typed expression builders ------------------------------------------------------------------
def dtype_of(e: SExpr) -> str:
    dt = getattr(e, "dtype", None)
    if dt is None:
        raise ValueError(f"untyped expression {e}")
    return dt


def cast(e: SExpr, dtype: str) -> SExpr:
    if dtype_of(e) == dtype:
        return e
    if isinstance(e, Const) and not (dtype in INT_DTYPES and isinstance(e.value, float)
                                     and not math.isfinite(e.value)):
        return literal(e.value, dtype)
    return Cast(e, dtype)


def bitcast(e: SExpr, dtype: str) -> SExpr:
    """`e`'s bits read as `dtype`, of the same width (a literal's are folded where a statement reads them)."""
    return e if dtype_of(e) == dtype else Bitcast(e, dtype)


def c(value: float | int | bool, like: SExpr | str) -> Const:
    """A literal of the dtype of `like` (an expression or a dtype name)."""
    return literal(value, like if isinstance(like, str) else dtype_of(like))


def un(fn: str, x: SExpr) -> SExpr:
    return Unary(fn, x, "bool" if fn in ("not", "isnan") else dtype_of(x))


def bin_(fn: str, a: SExpr, b: SExpr) -> SExpr:
    if dtype_of(a) != dtype_of(b):
        raise ValueError(f"'{fn}' of {dtype_of(a)} and {dtype_of(b)}")
    return Binary(fn, a, b, dtype_of(a))


def add(a: SExpr, b: SExpr) -> SExpr:
    return bin_("add", a, b)


def sub(a: SExpr, b: SExpr) -> SExpr:
    return bin_("sub", a, b)


def mul(a: SExpr, b: SExpr) -> SExpr:
    return bin_("mul", a, b)


def div(a: SExpr, b: SExpr) -> SExpr:
    return bin_("div", a, b)


def maximum(a: SExpr, b: SExpr) -> SExpr:
    return bin_("max", a, b)


def minimum(a: SExpr, b: SExpr) -> SExpr:
    return bin_("min", a, b)


def logaddexp(a: SExpr, b: SExpr) -> SExpr:
    """log(exp(a) + exp(b)) as max(a, b) + log1p(exp(-|a - b|)), with equal infinities kept (a - b
    would be NaN there)."""
    return select(cmp("eq", a, b), add(a, c(math.log(2), a)),
                  add(maximum(a, b), un("log1p", un("exp", un("neg", un("abs", sub(a, b)))))))


def p_norm_parts(p: float) -> tuple[str, Callable[[SExpr], SExpr], Callable[[SExpr], SExpr] | None]:
    """The vector p-norm of torch (`linalg.vector_norm`, `pdist`, `embedding_renorm`) as a reduction:
    (the accumulation kind, the term of one element, the finishing function of the accumulated value
    or None). p = inf / -inf: the max / min of |x|; 0: the count of nonzeros; 1: the sum of |x|; 2: the
    root of the sum of squares; otherwise (sum |x|^p)^(1/p)."""
    if p in (INF, -INF):
        return ("max=" if p > 0 else "min="), lambda x: un("abs", x), None
    if p == 0:
        return "+=", lambda x: cast(cmp("ne", x, c(0, x)), dtype_of(x)), None
    if p == 1:
        return "+=", lambda x: un("abs", x), None
    if p == 2:
        return "+=", lambda x: mul(x, x), lambda v: un("sqrt", v)
    return "+=", lambda x: bin_("pow", un("abs", x), c(p, x)), lambda v: bin_("pow", v, c(1.0 / p, v))


def cmp(pred: str, a: SExpr, b: SExpr) -> SExpr:
    if dtype_of(a) != dtype_of(b):
        raise ValueError(f"comparison of {dtype_of(a)} and {dtype_of(b)}")
    return Cmp(pred, a, b, "bool")


def select(cond: SExpr, a: SExpr, b: SExpr) -> SExpr:
    return Select(cond, a, b, dtype_of(a))


def index_value(e: AffExpr, dtype: str = "i64") -> SExpr:
    return cast(IndexValue(e, "i64"), dtype)


def index_read(v: Val, idx: Sequence[Index]) -> SExpr:
    """Element `idx` of an index tensor as an i64 index value (a gather's or scatter's index)."""
    e = v.read(idx)
    return e if v.dtype == "i64" else cast(e, "i64")


def scale(x: SExpr, k: float | int) -> SExpr:
    """`x * k`, omitted when k == 1 (no FLOP for a unit factor)."""
    return x if k == 1 else mul(x, c(k, x))


def settle(e: SExpr, ranges: dict[str, tuple[int, int]]) -> SExpr:
    """`e` with comparisons of affine index values decided where the loop ranges settle them, and
    selects on a decided condition replaced by their branch (JAX's negative-index wrap-around
    `select(i < 0, i + n, i)` on a loop counter is the counter itself)."""
    kids = e.children
    if not kids:
        return e
    new = [settle(k, ranges) for k in kids]
    if isinstance(e, Cast) and isinstance(new[0], IndexValue) and e.dtype in ("i32", "i64"):
        return new[0]
    if isinstance(e, Cmp) and all(isinstance(k, IndexValue | Const) for k in new):
        diff = _aff(new[0]) - _aff(new[1])
        lo, hi = diff.bounds(ranges)
        known = {"lt": (hi < 0, lo >= 0), "le": (hi <= 0, lo > 0), "gt": (lo > 0, hi <= 0),
                 "ge": (lo >= 0, hi < 0), "eq": (lo == hi == 0, lo > 0 or hi < 0),
                 "ne": (lo > 0 or hi < 0, lo == hi == 0)}[e.pred]
        if known[0] or known[1]:
            return Const(bool(known[0]), "bool")
    if isinstance(e, Select) and isinstance(new[0], Const):
        return new[1] if new[0].value else new[2]
    return simplify_expr(with_children(e, new), ranges)


def _aff(e: SExpr) -> AffExpr:
    return e.expr if isinstance(e, IndexValue) else AffExpr.lit(int(e.value))  # type: ignore[attr-defined]


# ---- literal folding -------------------------------------------------------------------------------
def fold(e: SExpr) -> SExpr:
    """`loopir.simplify.fold` with the executor's arithmetic on literals: a folded literal has
    exactly the value the executor would compute."""
    return fold_with(e, _evaluate)


def _evaluate(e: SExpr) -> Literal | None:
    """The executor's value of `e` (literal operands only); None when not a usable literal."""
    try:
        with np.errstate(all="ignore"):
            v = Evaluator(None, {}, {}, Assign("_", (), "=", e))(e).item()  # type: ignore[arg-type]
    except (ArithmeticError, ValueError):
        return None
    return None if isinstance(v, float) and math.isnan(v) else v


# ---- dtypes -----------------------------------------------------------------------------------
_CATEGORY = {"bool": 0, **{d: 1 for d in INT_DTYPES}, **{d: 2 for d in FLOAT_DTYPES}}
_RANK = {"bool": 0, "u8": 1, "i8": 1, "i16": 2, "u16": 2, "i32": 3, "i64": 4, "f4e2m1": 0, "f8e4m3": 1,
         "f8e5m2": 1, "f16": 2, "bf16": 2, "f32": 3, "f64": 4}


def promote(tr: Translator, *args: object) -> str:
    """torch's result type: dimensioned tensors first, then 0-d tensors, then Python scalars,
    each only when of a higher category (bool < int < float)."""
    dims = [tr.val(a).dtype for a in args if isinstance(a, TensorRef) and tr.val(a).ndim > 0]
    zero = [tr.val(a).dtype for a in args if isinstance(a, TensorRef) and tr.val(a).ndim == 0]
    scal = [("bool" if isinstance(a, bool) else "i64" if isinstance(a, int) else "f32")
            for a in args if isinstance(a, (bool, int, float))]
    result: str | None = None
    for group in (dims, zero, scal):
        if group:
            best = _widest(group)
            if result is None or _CATEGORY[best] > _CATEGORY[result]:
                result = best
    return result or "f32"


def _widest(dtypes: list[str]) -> str:
    cat = max(_CATEGORY[d] for d in dtypes)
    cands = [d for d in dtypes if _CATEGORY[d] == cat]
    if cat == 2 and {"f16", "bf16"} <= set(cands) and not {"f32", "f64"} & set(cands):
        return "f32"
    if cat == 1 and {"u8", "i8"} <= set(cands) and not {"i16", "i32", "i64"} & set(cands):
        return "i16"  # torch: uint8 with int8 promotes to int16
    if cat == 1 and "u16" in cands and {"i8", "i16"} & set(cands) and not {"i32", "i64"} & set(cands):
        return "i32"  # and uint16 with a signed type no wider to int32
    return max(cands, key=lambda d: _RANK[d])
