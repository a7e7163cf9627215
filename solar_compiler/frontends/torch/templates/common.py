"""Helpers shared by the templates: typed scalar-expression builders, broadcasting, promotion,
dimension normalisation and the two statement shapes every family uses (map and reduce)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from solar_compiler.loopir.affine import AffCond, AffExpr
from solar_compiler.loopir.ast import (
    FLOAT_DTYPES,
    INT_DTYPES,
    Binary,
    Cast,
    Cmp,
    Const,
    Index,
    IndexValue,
    Read,
    Select,
    SExpr,
    TensorDecl,
    Unary,
)

from ..capture import TensorRef
from ..translate import Loop, Translator, Val, const, generator, ivars, loops, stored

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
        return const(e.value, dtype)
    return Cast(e, dtype)


def c(value: float | int | bool, like: SExpr | str) -> Const:
    """A literal of the dtype of `like` (an expression or a dtype name)."""
    return const(value, like if isinstance(like, str) else dtype_of(like))


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


def cmp(pred: str, a: SExpr, b: SExpr) -> SExpr:
    if dtype_of(a) != dtype_of(b):
        raise ValueError(f"comparison of {dtype_of(a)} and {dtype_of(b)}")
    return Cmp(pred, a, b, "bool")


def select(cond: SExpr, a: SExpr, b: SExpr) -> SExpr:
    return Select(cond, a, b, dtype_of(a))


def index_value(e: AffExpr, dtype: str = "i64") -> SExpr:
    return cast(IndexValue(e, "i64"), dtype)


def scale(x: SExpr, k: float | int) -> SExpr:
    """`x * k`, omitted when k == 1 (no FLOP for a unit factor)."""
    return x if k == 1 else mul(x, c(k, x))


# ---- dtypes -----------------------------------------------------------------------------------
_CATEGORY = {"bool": 0, **{d: 1 for d in INT_DTYPES}, **{d: 2 for d in FLOAT_DTYPES}}
_RANK = {"bool": 0, "i8": 1, "i32": 2, "i64": 3, "f8e4m3": 1, "f8e5m2": 1, "f16": 2, "bf16": 2, "f32": 3,
         "f64": 4}


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
    return max(cands, key=lambda d: _RANK[d])


# ---- shapes -------------------------------------------------------------------------------------
def norm_dim(d: int, ndim: int) -> int:
    n = max(ndim, 1)
    if not -n <= d < n:
        raise ValueError(f"dimension {d} out of range for rank {ndim}")
    return d % n


def norm_dims(dims: object, ndim: int) -> list[int]:
    """Reduction dims: None or [] means all dims."""
    if dims is None or (isinstance(dims, (list, tuple)) and len(dims) == 0):
        return list(range(ndim))
    if isinstance(dims, int):
        dims = [dims]
    return sorted({norm_dim(int(d), ndim) for d in dims})


def bcast_index(idx: Sequence[Index], in_shape: Sequence[int], out_shape: Sequence[int]) -> list[Index]:
    """Indices into a tensor of `in_shape` broadcast (right-aligned) to `out_shape`."""
    off = len(out_shape) - len(in_shape)
    return [AffExpr.lit(0) if n == 1 and out_shape[off + d] != 1 else idx[off + d]
            for d, n in enumerate(in_shape)]


def operand(tr: Translator, arg: object, idx: Sequence[Index], out_shape: Sequence[int], dtype: str) -> SExpr:
    """Element of a tensor argument (broadcast) or a Python scalar, as `dtype`."""
    if isinstance(arg, TensorRef):
        v = tr.val(arg)
        return cast(v.read(bcast_index(idx, v.shape, out_shape)), dtype)
    if isinstance(arg, (bool, int, float)):
        return const(arg, dtype)
    raise tr.error(f"unsupported operand {arg!r}")


# ---- statement shapes ----------------------------------------------------------------------------
def map_op(tr: Translator, fn: Callable[..., SExpr], args: Sequence[object],
           compute: str | Sequence[str] | None = None, out: int = 0) -> Val:
    """out[idx] = fn(args at idx): one statement over the output's shape, or no statement at all
    when the value is index-valued (see `store_or_inline`). `compute` is the dtype the operands
    are cast to (default: the output dtype), or one dtype per operand."""
    meta = tr.out_meta(out)
    dts = [compute or meta.dtype] * len(args) if compute is None or isinstance(compute, str) \
        else list(compute)
    # operands resolved now: an inlined value is read later, from its consumers
    vals = [tr.val(a) if isinstance(a, TensorRef) else a for a in args]
    shape = tuple(meta.shape)

    def value(idx: tuple[Index, ...]) -> SExpr:
        ops = [_operand(tr, v, idx, shape, dt) for v, dt in zip(vals, dts, strict=True)]
        return cast(fn(*ops), meta.dtype)

    return store_or_inline(tr, out, value)


def _operand(tr: Translator, v: object, idx: Sequence[Index], out_shape: Sequence[int], dtype: str) -> SExpr:
    if isinstance(v, Val):
        return cast(v.read(bcast_index(idx, v.shape, out_shape)), dtype)
    if isinstance(v, (bool, int, float)):
        return const(v, dtype)
    raise tr.error(f"unsupported operand {v!r}")


def store_or_inline(tr: Translator, out: int, value: Callable[[tuple[Index, ...]], SExpr]) -> Val:
    """Output `out` of the current node, element `idx` being `value(idx)` (of the output dtype).

    An index-valued result (`index_only`: an arange, a comparison of aranges, a mask made of them,
    a constant) is not stored: it stays a generator, inlined into every consumer, so that a causal
    mask reaches its select as an affine comparison of loop variables, which needed-work narrowing
    can see. Anything else is one statement into a fresh local."""
    meta = tr.out_meta(out)
    folded = lambda idx: fold(value(idx))  # noqa: E731
    lps = loops("i", meta.shape)
    idx = tuple(ivars(lps))
    probe = folded(idx)
    if index_only(probe):
        return generator(meta.shape, meta.dtype, folded)
    decl = tr.result(out)
    tr.emit(decl, idx, "=", probe, lps)
    return stored(decl)


# ---- index-valued expressions --------------------------------------------------------------------
_LOGICAL = frozenset({"not", "and", "or", "xor"})
_NEGATE = {"eq": "ne", "ne": "eq", "lt": "ge", "ge": "lt", "gt": "le", "le": "gt"}


def index_only(e: SExpr) -> bool:
    """True when `e` reads no tensor and does no arithmetic (index values, literals, casts,
    comparisons, selects and logical ops only): inlining it costs nothing narrowing cannot remove."""
    for x in e.walk():
        if isinstance(x, Read):
            return False
        if isinstance(x, Unary | Binary) and x.fn not in _LOGICAL:
            return False
    return True


def negate(cond: SExpr) -> SExpr:
    """`not cond`, as the opposite comparison when `cond` is one (it stays affine)."""
    if isinstance(cond, Cmp):
        return Cmp(_NEGATE[cond.pred], cond.a, cond.b, "bool")
    if isinstance(cond, Unary) and cond.fn == "not":
        return cond.x
    return Unary("not", cond, "bool")


def fold(e: SExpr) -> SExpr:
    """`e` with literal arithmetic evaluated (the executor's own), i64 arithmetic on index values
    made one index value, and an op on a two-literal select and literals pushed into the select:
    `where(i >= j, 1.0, 0.0) == 0` becomes `i < j`."""
    from ..translate import simplify_expr

    e = simplify_expr(e, {})
    kids = e.children
    if not kids or isinstance(e, Read):
        return e
    new = [fold(k) for k in kids]
    if isinstance(e, Select):
        cond, a, b = new
        if isinstance(cond, Const):
            return a if cond.value else b
        if isinstance(a, Const) and isinstance(b, Const) and repr(a) == repr(b):
            return a
        if isinstance(a, Const) and isinstance(b, Const) and e.dtype == "bool":
            return cond if a.value else negate(cond)
        return Select(cond, a, b, e.dtype)
    e = _rebuild(e, new)
    sel = [k for k in new if isinstance(k, Select) and isinstance(k.a, Const) and isinstance(k.b, Const)]
    if all(isinstance(k, Const) for k in new):
        v = _evaluate(e)
        return e if v is None else const(v, e.dtype)
    if sel and all(isinstance(k, Const) or (isinstance(k, Select) and k.cond == sel[0].cond
                                            and k in sel) for k in new):
        cond = sel[0].cond
        branch = [_rebuild(e, [k.a if isinstance(k, Select) else k for k in new]),
                  _rebuild(e, [k.b if isinstance(k, Select) else k for k in new])]
        return fold(Select(cond, *branch, e.dtype))
    return e


def _rebuild(e: SExpr, kids: Sequence[SExpr]) -> SExpr:
    from dataclasses import replace

    fields = {"Unary": ("x",), "Binary": ("a", "b"), "Cmp": ("a", "b"), "Cast": ("x",)}[type(e).__name__]
    return replace(e, **dict(zip(fields, kids, strict=True)))


def _evaluate(e: SExpr) -> float | int | bool | None:
    """The executor's value of `e` (literal operands only); None when not a usable literal."""
    import numpy as np

    from solar_compiler.executor.evaluate import Evaluator
    from solar_compiler.loopir.ast import Assign

    try:
        with np.errstate(all="ignore"):
            v = Evaluator(None, {}, {}, Assign("_", (), "=", e))(e).item()  # type: ignore[arg-type]
    except (ArithmeticError, ValueError):
        return None
    return None if isinstance(v, float) and math.isnan(v) else v


def reduce_into(tr: Translator, target: TensorDecl, in_shape: Sequence[int], dims: Sequence[int],
                keepdim: bool, kind: str, init: SExpr | None,
                body: Callable[[list[AffExpr]], SExpr], guards: Callable[[list[AffExpr]], list[AffCond]]
                | None = None) -> None:
    """`target[kept] = init` then `target[kept] kind body(idx)` over the reduced dims (innermost)."""
    kept = [d for d in range(len(in_shape)) if d not in dims]
    outer = [Loop(f"i{d}", in_shape[d]) for d in kept]
    inner = [Loop(f"k{d}", in_shape[d]) for d in dims]
    full: list[AffExpr] = [AffExpr.var(f"i{d}") if d in kept else AffExpr.var(f"k{d}")
                           for d in range(len(in_shape))]
    tidx = [AffExpr.lit(0) if d in dims else AffExpr.var(f"i{d}") for d in range(len(in_shape))] \
        if keepdim else [AffExpr.var(f"i{d}") for d in kept]
    if init is not None:
        tr.emit(target, tidx, "=", init, outer)
    tr.emit(target, tidx, kind, body(full), outer + inner, guards(full) if guards else ())


def finalize(tr: Translator, target: TensorDecl, fn: Callable[[SExpr], SExpr]) -> None:
    """target[idx] = fn(target[idx]): the last step of mean/var/std-like reductions."""
    from solar_compiler.loopir.ast import Read

    lps = loops("i", target.shape)
    idx = ivars(lps)
    tr.emit(target, idx, "=", fn(Read(target.name, tuple(idx), target.dtype)), lps)


def count(shape: Sequence[int], dims: Sequence[int]) -> int:
    return math.prod(shape[d] for d in dims)


def kept_shape(shape: Sequence[int], dims: Sequence[int], keepdim: bool) -> tuple[int, ...]:
    return tuple(1 if d in dims else n for d, n in enumerate(shape) if keepdim or d not in dims)
