"""The statement shapes the op families (of every framework) share: an elementwise map (or an inlined
index-valued generator), a reduction (init, accumulate, finalise), the index pass of an
arg-reduction, a casting copy, a concatenation, constant fills, a zero-padded copy, a
cumulative scan along one dim, and the prefix count of flags over a flat index."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from solar_compiler.loopir.affine import AffCond, AffExpr
from solar_compiler.loopir.ast import INT_DTYPES, Index, Read, SExpr, TensorDecl
from solar_compiler.loopir.rules import reduction_identity
from solar_compiler.loopir.simplify import index_only, literal

from ..captured_program import TensorRef
from .exprs import INF, add, c, cast, cmp, fold, index_value, select
from .index_maps import bcast_index
from .inplace import updated_input, validation_only
from .translator import Translator
from .values import Loop, Val, fill, generator, ivars, loops, stored


# ---- elementwise ----------------------------------------------------------------------------------------
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
    """Element `idx` of a value broadcast to `out_shape`, or a Python scalar, as `dtype`."""
    if isinstance(v, Val):
        return cast(v.read(bcast_index(idx, v.shape, out_shape)), dtype)
    if isinstance(v, (bool, int, float)):
        return literal(v, dtype)
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


def select_in_place(tr: Translator, node: object, base: object, cond: object, new: object,
                    new_when: bool) -> Val | None:
    """`where(cond, new, base)` (`new_when` True; else `where(cond, base, new)`) as a conditional
    store into `base`'s buffer, when `base` is an input that forward updates in place through this
    op (`masked_fill_`, `x[m] = v`) and no later op reads: `out[i] = new if cond else out[i]`
    changes only the elements its condition selects, and eager moves no other. The copy of `base`
    into the output runs in the validation kernel only. None where it does not apply."""
    if not isinstance(base, TensorRef):
        return None
    updated = updated_input(tr, node, base)  # type: ignore[arg-type]
    meta, b = tr.out_meta(), tr.val(base)
    if updated is None or tuple(b.shape) != tuple(meta.shape) or b.dtype != meta.dtype:
        return None
    out = tr.result()
    with validation_only(tr, node, updated):  # type: ignore[arg-type]
        copy_into(tr, out, b)
    lps = loops("i", meta.shape)
    idx = tuple(ivars(lps))
    vals = [tr.val(a) if isinstance(a, TensorRef) else a for a in (cond, new)]
    hit = _operand(tr, vals[0], idx, meta.shape, "bool")
    v = _operand(tr, vals[1], idx, meta.shape, meta.dtype)
    here = Read(out.name, idx, out.dtype)
    tr.emit(out, idx, "=", select(hit, v, here) if new_when else select(hit, here, v), lps)
    return stored(out)


def copy_into(tr: Translator, target: TensorDecl, v: Val) -> None:
    """target[idx] = v[idx] converted to the target's dtype, over `v`'s shape."""
    lps = loops("i", v.shape)
    idx = ivars(lps)
    tr.emit(target, idx, "=", cast(v.read(idx), target.dtype), lps)


def full_val(tr: Translator, shape: Sequence[int], value: object) -> Val:
    """A constant of the output dtype: a Python scalar, or a 0-d tensor value (fill.Tensor)."""
    dtype = tr.out_meta().dtype
    if isinstance(value, (bool, int, float)):
        return fill(shape, dtype, value)
    v = tr.val(value)
    return generator(shape, dtype, lambda idx: cast(v.read([]), dtype))


# ---- reductions ------------------------------------------------------------------------------------------
def reduce_into(tr: Translator, target: TensorDecl, in_shape: Sequence[int], dims: Sequence[int],
                keepdim: bool, kind: str, init: SExpr | None,
                body: Callable[[list[AffExpr]], SExpr], guards: Callable[[list[AffExpr]], list[AffCond]]
                | None = None) -> None:
    """`target[kept] = init` then `target[kept] kind body(idx)` over the reduced dims (innermost)."""
    kept = [d for d in range(len(in_shape)) if d not in dims]
    outer = [Loop(f"i{d}", 0, in_shape[d]) for d in kept]
    inner = [Loop(f"k{d}", 0, in_shape[d]) for d in dims]
    full: list[AffExpr] = [AffExpr.var(f"i{d}") if d in kept else AffExpr.var(f"k{d}")
                           for d in range(len(in_shape))]
    tidx = [AffExpr.lit(0) if d in dims else AffExpr.var(f"i{d}") for d in range(len(in_shape))] \
        if keepdim else [AffExpr.var(f"i{d}") for d in kept]
    if init is not None:
        tr.emit(target, tidx, "=", init, outer)
    tr.emit(target, tidx, kind, body(full), outer + inner, guards(full) if guards else ())


def accumulate(tr: Translator, target: TensorDecl, x: Val, dims: list[int], keepdim: bool, kind: str,
               value: Callable[[list[AffExpr]], SExpr] | None = None) -> None:
    """target = identity; target kind= value(x at full index) (default: x cast to target dtype)."""
    # The dtype's own extreme: -(2**63) does not fit an i8 or i32 accumulator.
    ident = reduction_identity(kind, target.dtype) if target.dtype in INT_DTYPES \
        else {"+=": 0, "*=": 1, "max=": -INF, "min=": INF}[kind]
    body = value or (lambda full: cast(x.read(full), target.dtype))
    reduce_into(tr, target, x.shape, dims, keepdim, kind, c(ident, target.dtype), body)


def finalize(tr: Translator, target: TensorDecl, fn: Callable[[SExpr], SExpr]) -> None:
    """target[idx] = fn(target[idx]): the last step of mean/var/std-like reductions."""
    lps = loops("i", target.shape)
    idx = ivars(lps)
    tr.emit(target, idx, "=", fn(Read(target.name, tuple(idx), target.dtype)), lps)


def kept_read(target: TensorDecl, dims: Sequence[int], keepdim: bool, full: Sequence[AffExpr]) -> SExpr:
    """Read a reduction result (laid out with or without the reduced dims) at a full index."""
    idx = [AffExpr.lit(0) if d in dims else e for d, e in enumerate(full)] if keepdim \
        else [e for d, e in enumerate(full) if d not in dims]
    return Read(target.name, tuple(idx), target.dtype)


def arg_index(tr: Translator, target: TensorDecl, values: TensorDecl, x: Val, dims: list[int],
              keepdim: bool) -> Val:
    """The index pass of an arg-reduction over one dim: the smallest index where `x` equals the
    reduced value `values` (the first occurrence, as torch and XLA return)."""
    (d,) = dims
    n = x.shape[d]

    def body(full: list[AffExpr]) -> SExpr:
        hit = cmp("eq", x.read(full), kept_read(values, dims, keepdim, full))
        return select(hit, index_value(full[d], target.dtype), c(n, target.dtype))

    reduce_into(tr, target, x.shape, dims, keepdim, "min=", c(n, target.dtype), body)
    return stored(target)


def concat_into(tr: Translator, target: TensorDecl, parts: Sequence[Val], dim: int) -> None:
    """`target` = the `parts` concatenated along `dim`: one copy statement per part into its slab."""
    off = 0
    for x in parts:
        if x.shape[dim] == 0:
            continue
        lps = loops("i", x.shape)
        idx = ivars(lps)
        tidx = [e + off if d == dim else e for d, e in enumerate(idx)]
        tr.emit(target, tidx, "=", cast(x.read(idx), target.dtype), lps)
        off += x.shape[dim]


def scan_positions(shape: Sequence[int], dim: int) \
        -> tuple[list[Loop], Callable[[AffExpr], list[AffExpr]]]:
    """The loops over the dims of `shape` other than `dim`, and the index at step `t` of `dim` with
    those loops' variables elsewhere: what a scan along `dim` vectorises over each step."""
    others = [Loop(f"i{d}", 0, s) for d, s in enumerate(shape) if d != dim]

    def full(t: AffExpr) -> list[AffExpr]:
        it = iter(AffExpr.var(lp.iv) for lp in others)
        return [t if d == dim else next(it) for d in range(len(shape))]
    return others, full


def scan_along(tr: Translator, target: TensorDecl, x: Val, dim: int, fn: Callable[[SExpr, SExpr], SExpr],
               reverse: bool = False) -> None:
    """`target` = the inclusive scan of `x` along `dim` with `fn` (`fn(running, next)`): a peeled
    first element, then a `scan` loop carrying the running value (`out[t] = fn(out[t - 1], x[t])`,
    or from the end when `reverse`), the other dims vectorised inside each step."""
    dt = target.dtype
    n = x.shape[dim]
    others, full = scan_positions(x.shape, dim)
    first = full(AffExpr.lit(n - 1 if reverse else 0))
    tr.emit(target, first, "=", cast(x.read(first), dt), others)
    if n > 1:
        s = AffExpr.var("t")
        t = AffExpr.lit(n - 1) - s if reverse else s
        cur, prev = full(t), full(t + 1 if reverse else t - 1)
        value = fn(Read(target.name, tuple(prev), dt), cast(x.read(cur), dt))
        tr.emit(target, cur, "=", value, [Loop("t", 1, n, sequential=True), *others])


def prefix_count(tr: Translator, hint: str, n: int, flag: Callable[[AffExpr], SExpr]) \
        -> Callable[[AffExpr], SExpr]:
    """The inclusive count of the flags (`flag(f)`: an i64 0 or 1 at flat position f < n) up to each
    position, in two scans of about sqrt(n) steps instead of one of n: the positions in rows of
    `w` (the smallest divisor of n at least its square root, where one is near; else the root, the
    last row guarded), an inclusive scan along every row at once, then the exclusive scan of the row
    totals. Returns the count at a flat position: its row's offset plus its count in the row."""
    w = _row_width(n)
    rows = -(-n // w)
    a, t = AffExpr.var("a"), AffExpr.var("t")
    inner = tr.declare(f"{hint}_in_row", (rows, w), "i64")
    tr.emit(inner, [a, AffExpr.lit(0)], "=", flag(a * w), [Loop("a", 0, rows)])
    if w > 1:
        guards = [] if n % w == 0 else [AffCond.compare(a * w + t, "<", AffExpr.lit(n))]
        step = add(Read(inner.name, (a, t - 1), "i64"), flag(a * w + t))
        tr.emit(inner, [a, t], "=", step, [Loop("t", 1, w, sequential=True), Loop("a", 0, rows)], guards)
    before = tr.declare(f"{hint}_rows_before", (rows,), "i64")
    tr.emit(before, [AffExpr.lit(0)], "=", c(0, "i64"), [])
    if rows > 1:
        step = add(Read(before.name, (t - 1,), "i64"), Read(inner.name, (t - 1, AffExpr.lit(w - 1)), "i64"))
        tr.emit(before, [t], "=", step, [Loop("t", 1, rows, sequential=True)])
    return lambda f: add(Read(before.name, (f // w,), "i64"), Read(inner.name, (f // w, f % w), "i64"))


def _row_width(n: int) -> int:
    """The row width of `prefix_count`: the smallest divisor of n at least sqrt(n) when it is under
    twice the root (the rows are then whole, often the innermost dim), else the root rounded up."""
    root = math.isqrt(n - 1) + 1 if n > 1 else 1
    return next((d for d in range(root, 2 * root + 1) if n % d == 0), root)


# ---- padding ---------------------------------------------------------------------------------------------
def padded(tr: Translator, x: Val, pads: dict[int, tuple[int, int]], value: float = 0.0) -> Val:
    """A zero-padded copy of `x` in a new local (interior copy plus border slabs)."""
    shape = [n + sum(pads.get(d, (0, 0))) for d, n in enumerate(x.shape)]
    decl = tr.declare(f"{tr.out_meta().name}_padded", shape, x.dtype)
    pad_into(tr, decl, x, pads, value)
    return stored(decl)


def pad_into(tr: Translator, decl: TensorDecl, x: Val, pads: dict[int, tuple[int, int]],
             value: object) -> None:
    """`decl` = `x` padded by `pads` ({dim: (low, high)}) with `value`: every element written once,
    the interior by one copy, the border by two slabs per padded dim (earlier dims interior, later
    dims full)."""
    lps = loops("i", x.shape)
    idx = ivars(lps)
    tr.emit(decl, [e + pads.get(d, (0, 0))[0] for d, e in enumerate(idx)], "=",
            cast(x.read(idx), decl.dtype), lps)
    fillv = literal(value, decl.dtype)
    for d in sorted(pads):
        lo, hi = pads[d]
        for a, b in ((0, lo), (lo + x.shape[d], lo + x.shape[d] + hi)):
            if b <= a:
                continue
            slab = []
            for e in range(len(decl.shape)):
                if e == d:
                    slab.append(Loop(f"i{e}", a, b))
                elif e in pads and e < d:
                    slab.append(Loop(f"i{e}", pads[e][0], pads[e][0] + x.shape[e]))
                else:
                    slab.append(Loop(f"i{e}", 0, decl.shape[e]))
            tr.emit(decl, ivars(slab), "=", fillv, slab)
