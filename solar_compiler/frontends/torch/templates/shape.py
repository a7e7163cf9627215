"""Creation and data-movement ops: fills and ranges (generators, no tensor), cat/stack (one copy
statement per piece), split/chunk/flip/roll/repeat (views), padding (disjoint region statements,
so every output element is written exactly once), tril/triu masks, and the coordinates of a
triangle (tril_indices / triu_indices)."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from contextlib import nullcontext

from solar_compiler.frontends.builder.exprs import (
    add,
    c,
    cast,
    cmp,
    index_value,
    maximum,
    minimum,
    mul,
    select,
    sub,
)
from solar_compiler.frontends.builder.index_maps import (
    Term,
    iadd,
    imod,
    ineg_from,
    norm_dim,
    reshape_map,
    unflatten,
)
from solar_compiler.frontends.builder.inplace import copied_from, updated_input, validation_only
from solar_compiler.frontends.builder.statements import (
    concat_into,
    copy_into,
    full_val,
    pad_into,
    store_or_inline,
)
from solar_compiler.frontends.builder.translator import Translator
from solar_compiler.frontends.builder.values import Loop, Val, generator, ivars, loops, stored, view
from solar_compiler.frontends.captured_program import AtenNode, TensorRef
from solar_compiler.loopir.affine import AffCond, AffExpr
from solar_compiler.loopir.ast import INT_DTYPES, Index, Read, SExpr, TensorDecl
from solar_compiler.loopir.simplify import literal

from ..registry import template


@template("aten.full.default")
def _full(tr: Translator, node: AtenNode) -> Val:
    return full_val(tr, tr.out_meta().shape, tr.arg(1, "fill_value", 0))


@template("aten.zeros.default", "aten.empty.memory_format", "aten.empty_strided.default",
          "aten.empty_permuted.default", "aten.zeros_like.default", "aten.empty_like.default",
          "aten.new_zeros.default", "aten.new_empty.default", "aten.new_empty_strided.default", value=0)
@template("aten.ones.default", "aten.ones_like.default", "aten.new_ones.default", value=1)
def _const_like(tr: Translator, node: AtenNode, value: float) -> Val:
    return full_val(tr, tr.out_meta().shape, value)


@template("aten.scalar_tensor.default")
def _scalar_tensor(tr: Translator, node: AtenNode) -> Val:
    return full_val(tr, (), node.args[0])


@template("aten.new_full.default")
def _new_full(tr: Translator, node: AtenNode) -> Val:
    return full_val(tr, tr.out_meta().shape, tr.arg(2, "fill_value", 0))


@template("aten.arange.default", "aten.arange.start", "aten.arange.start_step")
def _arange(tr: Translator, node: AtenNode) -> Val:
    args = [a for a in node.args if isinstance(a, (int, float))]
    start, step = (0, 1)
    if node.op.endswith(".default"):
        start = 0
    elif len(args) >= 2:
        start = args[0]
        step = args[2] if len(args) >= 3 else node.kwargs.get("step", 1)
    dtype = tr.out_meta().dtype

    def gen(idx: tuple[Index, ...]) -> SExpr:
        (i,) = idx
        assert isinstance(i, AffExpr)
        if dtype in INT_DTYPES or (isinstance(start, int) and isinstance(step, int)):
            return cast(index_value(i * int(step) + int(start)), dtype)
        v = index_value(i, dtype)
        return add(mul(v, literal(step, dtype)), literal(start, dtype)) if step != 1 or start != 0 else v

    return generator(tr.out_meta().shape, dtype, gen)


@template("aten.cat.default", "aten.concat.default")
def _cat(tr: Translator, node: AtenNode) -> Val:
    meta = tr.out_meta()
    dim = norm_dim(int(tr.arg(1, "dim", 0)), len(meta.shape))
    parts, names = [], set()
    for ref in node.args[0]:
        x = tr.val(ref)
        if x.ndim != len(meta.shape):  # legacy: 1-d empty tensors are skipped by torch
            if sum(x.shape) == 0:
                continue
            raise tr.error(f"cat of rank-{x.ndim} and rank-{len(meta.shape)} tensors")
        parts.append(x)
        names.add(ref.name)
    if len(parts) > 1 and len(names) == 1:
        # one tensor k times is `x.repeat` along dim (read x[i % n]), so the products it repeats are
        # seen as one (docs/bounds.md, deduplication); eager still writes the result (`_fresh_tensors`)
        x, n = parts[0], parts[0].shape[dim]
        return view(x, meta.shape, lambda idx: [imod(e, n) if d == dim else e for d, e in enumerate(idx)])
    decl = tr.result()
    concat_into(tr, decl, parts, dim)
    return stored(decl)


@template("aten.stack.default")
def _stack(tr: Translator, node: AtenNode) -> Val:
    meta = tr.out_meta()
    dim = norm_dim(int(tr.arg(1, "dim", 0)), len(meta.shape))
    if len(node.args[0]) > 1 and len({ref.name for ref in node.args[0]}) == 1:
        # one tensor k times: an `expand` along the new dim (eager still writes it, `_fresh_tensors`)
        return view(tr.val(node.args[0][0]), meta.shape, lambda idx: [*idx[:dim], *idx[dim + 1:]])
    decl = tr.result()
    for k, ref in enumerate(node.args[0]):
        x = tr.val(ref)
        lps = loops("i", x.shape)
        idx = ivars(lps)
        tidx = [*idx[:dim], AffExpr.lit(k), *idx[dim:]]
        tr.emit(decl, tidx, "=", cast(x.read(idx), decl.dtype), lps)
    return stored(decl)


@template("aten.split.Tensor", "aten.split_with_sizes.default", "aten.split_with_sizes_copy.default",
          "aten.unbind.int")
def _split(tr: Translator, node: AtenNode) -> tuple[Val | None, ...]:
    """split / split_with_sizes / unbind / chunk: every piece is a view (a slice or select)."""
    x = tr.val(node.args[0])
    dim_arg = tr.arg(2, "dim", 0) if not node.op.startswith("aten.unbind") else tr.arg(1, "dim", 0)
    dim = norm_dim(int(dim_arg), x.ndim)
    outs: list[Val | None] = []
    off = 0
    for meta in node.outputs:
        if node.op.startswith("aten.unbind"):
            k = off
            outs.append(None if meta is None else
                        view(x, meta.shape, lambda idx, k=k: [*idx[:dim], AffExpr.lit(k), *idx[dim:]]))
            off += 1
            continue
        if meta is None:
            # an unused piece: its size still moves the offset
            sizes = _split_sizes(tr, node, x.shape[dim])
            off += sizes[len(outs)]
            outs.append(None)
            continue
        start = off
        outs.append(view(x, meta.shape, lambda idx, s=start: [iadd(e, s) if d == dim else e
                                                              for d, e in enumerate(idx)]))
        off += meta.shape[dim]
    return tuple(outs)


def _split_sizes(tr: Translator, node: AtenNode, n: int) -> list[int]:
    arg = node.args[1]
    if isinstance(arg, (list, tuple)):
        return [int(s) for s in arg]
    size = int(arg)
    return [min(size, n - s) for s in range(0, n, size)]


@template("aten.flip.default")
def _flip(tr: Translator, node: AtenNode) -> Val:
    x = tr.val(node.args[0])
    dims = {norm_dim(int(d), x.ndim) for d in node.args[1]}
    return view(x, x.shape, lambda idx: [ineg_from(x.shape[d] - 1, e) if d in dims else e
                                         for d, e in enumerate(idx)])


@template("aten.roll.default")
def _roll(tr: Translator, node: AtenNode) -> Val:
    x = tr.val(node.args[0])
    shifts = [int(s) for s in node.args[1]]
    dims = [norm_dim(int(d), x.ndim) for d in tr.arg(2, "dims", [])] or None
    if dims is None:  # roll of the flattened tensor
        n = math.prod(x.shape)
        flat = view(x, (n,), reshape_map(x.shape, (n,)))
        rolled = view(flat, (n,), lambda idx: [imod(iadd(idx[0], n - shifts[0] % n), n)])
        return view(rolled, x.shape, reshape_map((n,), x.shape))
    by_dim = dict(zip(dims, shifts, strict=True))

    def index_map(idx: tuple[Index, ...]) -> list[Index]:
        out: list[Index] = []
        for d, e in enumerate(idx):
            s = by_dim.get(d, 0) % x.shape[d] if x.shape[d] else 0
            out.append(imod(iadd(e, x.shape[d] - s), x.shape[d]) if s else e)
        return out

    return view(x, x.shape, index_map)


def _aff(e: Index) -> AffExpr:
    if not isinstance(e, AffExpr):
        raise ValueError("an indirect index into a diagonal view")
    return e


@template("aten.repeat.default")
def _repeat(tr: Translator, node: AtenNode) -> Val:
    x = tr.val(node.args[0])
    shape = tr.out_meta().shape
    off = len(shape) - x.ndim
    return view(x, shape, lambda idx: [e if x.shape[d] == shape[off + d] else
                                       (AffExpr.lit(0) if x.shape[d] == 1 else imod(e, x.shape[d]))
                                       for d, e in enumerate(idx[off:])])


@template("aten.tril.default", upper=False)
@template("aten.triu.default", upper=True)
def _tri(tr: Translator, node: AtenNode, upper: bool) -> Val:
    x = tr.val(node.args[0])
    k = int(tr.arg(1, "diagonal", 0))

    def value(idx: tuple[Index, ...]) -> SExpr:
        i, j = idx[-2], idx[-1]
        assert isinstance(i, AffExpr) and isinstance(j, AffExpr)
        diff = index_value(j - i)
        keep = cmp("ge", diff, c(k, diff)) if upper else cmp("le", diff, c(k, diff))
        return select(keep, x.read(idx), c(0, x.dtype))

    return store_or_inline(tr, 0, value)


@template("aten.tril_indices.default", upper=False)
@template("aten.triu_indices.default", upper=True)
def _tri_indices(tr: Translator, node: AtenNode, upper: bool) -> Val:
    """The [2, count] coordinates of the lower (upper) triangle of a row x col matrix, `j - i <= offset`
    (`>=`), in row-major order: a scan of the rows' lengths gives the entries before each row, then
    each kept (i, j) writes i and j at `before[i] + j - first(i)`. Index generation (integer work):
    a stand-in."""
    row, col, k = int(node.args[0]), int(node.args[1]), int(tr.arg(2, "offset", 0))
    meta = tr.out_meta()
    if meta.shape[1] == 0:
        return full_val(tr, meta.shape, 0)
    tr.mark_stand_in()
    out = tr.result()
    i, j, t = AffExpr.var("i"), AffExpr.var("j"), AffExpr.var("t")

    def clamp(r: AffExpr, v: int) -> SExpr:  # r + v clamped to [0, col], for rows r in 0 .. row - 1
        e = index_value(r + v)
        e = e if v >= 0 else maximum(e, c(0, "i64"))
        return e if row - 1 + v <= col else minimum(e, c(col, "i64"))

    def first(r: AffExpr) -> SExpr:  # the first kept column of row r
        return clamp(r, k) if upper else c(0, "i64")

    before = tr.declare(f"{out.name}_before", (row,), "i64")
    tr.emit(before, [AffExpr.lit(0)], "=", c(0, "i64"), [])
    if row > 1:
        length = sub(c(col, "i64"), first(t - 1)) if upper else clamp(t - 1, k + 1)
        tr.emit(before, [t], "=", add(Read(before.name, (t - 1,), "i64"), length),
                [Loop("t", 1, row, sequential=True)])
    at = add(Read(before.name, (i,), "i64"), index_value(j))
    at = sub(at, first(i)) if upper else at
    keep = AffCond.compare(j - i, ">=" if upper else "<=", AffExpr.lit(k))
    grid = [Loop("i", 0, row), Loop("j", 0, col)]
    for d, e in enumerate((i, j)):
        tr.emit(out, [AffExpr.lit(d), at], "=", cast(index_value(e), out.dtype), grid, [keep])
    return stored(out)


@template("aten.diagonal.default")
def _diagonal(tr: Translator, node: AtenNode) -> Val:
    x = tr.val(node.args[0])
    off = int(tr.arg(1, "offset", 0))
    d1 = norm_dim(int(tr.arg(2, "dim1", 0)), x.ndim)
    d2 = norm_dim(int(tr.arg(3, "dim2", 1)), x.ndim)
    rest = [d for d in range(x.ndim) if d not in (d1, d2)]

    def index_map(idx: tuple[Index, ...]) -> list[Index]:
        out: list[Index] = [AffExpr.lit(0)] * x.ndim
        for d, e in zip(rest, idx[:-1], strict=True):
            out[d] = e
        k = _aff(idx[-1])
        out[d1], out[d2] = (k, k + off) if off >= 0 else (k - off, k)
        return out

    return view(x, tr.out_meta().shape, index_map)


# ---- padding ------------------------------------------------------------------------------------
def _pairs(pad: Sequence[int], ndim: int) -> dict[int, tuple[int, int]]:
    """torch's pad list (last dim first, (lo, hi) pairs) -> {dim: (lo, hi)}."""
    out = {}
    for k in range(len(pad) // 2):
        out[ndim - 1 - k] = (int(pad[2 * k]), int(pad[2 * k + 1]))
    return out


@template("aten.constant_pad_nd.default", "aten.pad.default")
def _constant_pad(tr: Translator, node: AtenNode) -> Val:
    x = tr.val(node.args[0])
    pads = _pairs(node.args[1], x.ndim)
    mode = tr.arg(2, "mode", "constant") if node.op == "aten.pad.default" else "constant"
    value = tr.arg(3 if node.op == "aten.pad.default" else 2, "value", 0.0)
    value = 0.0 if value is None else value
    if mode != "constant":
        return _region_pad(tr, x, pads, mode)
    # negative padding crops: a view of the input
    crop = {d: (max(0, -lo), max(0, -hi)) for d, (lo, hi) in pads.items()}
    if any(a or b for a, b in crop.values()):
        base = x
        shape = [n - sum(crop.get(d, (0, 0))) for d, n in enumerate(x.shape)]
        x = view(base, shape, lambda idx: [iadd(e, crop.get(d, (0, 0))[0]) for d, e in enumerate(idx)])
    pads = {d: (max(0, lo), max(0, hi)) for d, (lo, hi) in pads.items()}
    decl = tr.result()
    pad_into(tr, decl, x, pads, value)
    return stored(decl)


def _region_pad(tr: Translator, x: Val, pads: dict[int, tuple[int, int]], mode: str) -> Val:
    """reflect / replicate / circular: each output region (left, middle, right per padded dim)
    is one statement reading the input at an affine index."""
    meta = tr.out_meta()
    decl = tr.result()
    dims = sorted(pads)
    for combo in itertools.product(("L", "M", "R"), repeat=len(dims)):
        region = dict(zip(dims, combo, strict=True))
        lps: list[Loop] = []
        ok = True
        for d in range(len(meta.shape)):
            lo, hi = pads.get(d, (0, 0))
            n = x.shape[d]
            r = region.get(d, "M")
            a, b = {"L": (0, lo), "M": (lo, lo + n), "R": (lo + n, lo + n + hi)}[r]
            if b <= a:
                ok = False
                break
            lps.append(Loop(f"i{d}", a, b))
        if not ok:
            continue
        idx = ivars(lps)
        src: list[Index] = []
        for d, e in enumerate(idx):
            lo, _ = pads.get(d, (0, 0))
            n = x.shape[d]
            r = region.get(d, "M")
            if r == "M":
                src.append(e - lo)
            elif mode == "reflect":
                src.append(AffExpr.lit(lo) - e if r == "L" else AffExpr.lit(2 * (n - 1) + lo) - e)
            elif mode == "replicate":
                src.append(AffExpr.lit(0) if r == "L" else AffExpr.lit(n - 1))
            elif mode == "circular":
                src.append(e + (n - lo) if r == "L" else e - lo - n)
            else:
                raise tr.error(f"padding mode '{mode}' has no template")
        tr.emit(decl, idx, "=", cast(x.read(src), decl.dtype), lps)
    return stored(decl)


@template("aten.reflection_pad1d.default", "aten.reflection_pad2d.default", "aten.reflection_pad3d.default",
          mode="reflect")
@template("aten.replication_pad1d.default", "aten.replication_pad2d.default",
          "aten.replication_pad3d.default", mode="replicate")
def _named_pad(tr: Translator, node: AtenNode, mode: str) -> Val:
    x = tr.val(node.args[0])
    return _region_pad(tr, x, _pairs(node.args[1], x.ndim), mode)


# ---- functional scatters of views (in-place writes into slices) ---------------------------------
@template("aten.slice_scatter.default")
def _slice_scatter(tr: Translator, node: AtenNode) -> Val:
    """base with base[.., start:end:step, ..] = src: disjoint statements, each element written once
    (the kept ranges of base, then src). A scatter that only copies (`copied_from`: a source of the
    base's shape, or the base's own slice written back where it was, as `buf[:, :8] += x` does) is
    the tensor it copies, with no statement."""
    same = copied_from(tr.program, node)
    if same is not None:
        return tr.val(TensorRef(same[0]))
    base, src = tr.val(node.args[0]), tr.val(node.args[1])
    dim = norm_dim(int(tr.arg(2, "dim", 0)), base.ndim)
    n = base.shape[dim]
    start = tr.arg(3, "start", None)
    start = 0 if start is None else int(start)
    start = min(max(start + n if start < 0 else start, 0), n)
    step = int(tr.arg(5, "step", 1))
    m = src.shape[dim]
    return _scatter_into(tr, base, src, dim, start, step, m)


@template("aten.select_scatter.default")
def _select_scatter(tr: Translator, node: AtenNode) -> Val:
    base, src = tr.val(node.args[0]), tr.val(node.args[1])
    dim = norm_dim(int(node.args[2]), base.ndim)
    k = int(node.args[3])
    k = k + base.shape[dim] if k < 0 else k
    src1 = view(src, [*src.shape[:dim], 1, *src.shape[dim:]], lambda idx: [*idx[:dim], *idx[dim + 1:]])
    return _scatter_into(tr, base, src1, dim, k, 1, 1)


@template("aten.diagonal_scatter.default")
def _diagonal_scatter(tr: Translator, node: AtenNode) -> Val:
    """`x.diagonal(offset, dim1, dim2)` replaced by src (`x.diagonal().add_(1)` on an input)."""
    base, src = tr.val(node.args[0]), tr.val(node.args[1])
    offset = int(tr.arg(2, "offset", 0))
    d1, d2 = norm_dim(int(tr.arg(3, "dim1", 0)), base.ndim), norm_dim(int(tr.arg(4, "dim2", 1)), base.ndim)
    rest = [d for d in range(base.ndim) if d not in (d1, d2)]

    def at(idx: Sequence[AffExpr]) -> list[Index]:
        out: list[Index] = [AffExpr.lit(0)] * base.ndim
        for d, e in zip(rest, idx[:-1], strict=True):
            out[d] = e
        out[d1], out[d2] = idx[-1] + max(-offset, 0), idx[-1] + max(offset, 0)
        return out
    return _scatter_through(tr, base, src, at)


@template("aten.as_strided_scatter.default")
def _as_strided_scatter(tr: Translator, node: AtenNode) -> Val:
    """`x.as_strided(size, stride, offset)` replaced by src on x's contiguous layout (`fill_diagonal_`
    is one: size [n], stride [n + 1])."""
    base, src = tr.val(node.args[0]), tr.val(node.args[1])
    size, strides = list(node.args[2]), list(node.args[3])
    offset = int(tr.arg(4, "storage_offset", 0) or 0)
    top = offset + sum(st * (n - 1) for st, n in zip(strides, size, strict=True))
    if any(st < 0 for st in strides) or top >= max(math.prod(base.shape), 1) or tuple(size) != src.shape:
        raise tr.error("as_strided_scatter outside its input's storage")

    def at(idx: Sequence[AffExpr]) -> list[Index]:
        terms: list[Term] = [(e, st, n - 1) for e, st, n in zip(idx, strides, size, strict=True)
                             if n != 1 and st != 0]
        terms += [(AffExpr.lit(1), offset, 1)] if offset else []
        return unflatten(terms, base.shape)
    return _scatter_through(tr, base, src, at)


def _scatter_through(tr: Translator, base: Val, src: Val, at) -> Val:  # noqa: ANN001 - idx -> base idx
    """`base` with the elements `at` maps src's positions to replaced by src's: a copy of base (in the
    validation kernel only, for an input updated in place: `inplace.validation_only`), then src's
    elements written where they go."""
    out = tr.result()
    assert tr.node is not None
    updated = updated_input(tr, tr.node)
    with validation_only(tr, tr.node, updated) if updated is not None else nullcontext():
        copy_into(tr, out, base)
    lps = loops("i", src.shape)
    idx = ivars(lps)
    tr.emit(out, at(idx), "=", cast(src.read(idx), out.dtype), lps)
    return stored(out)


def _scatter_into(tr: Translator, base: Val, src: Val, dim: int, start: int, step: int, m: int) -> Val:
    """An input that forward updates in place through the slice (`cache[a:b] = new`, `x[:, :8].mul_(2)`)
    as its final version that no later op reads moves only the written elements: the copy of the rest
    is in the validation kernel only (`scatter.validation_only`)."""
    out = tr.result()
    assert tr.node is not None
    updated = updated_input(tr, tr.node)
    with validation_only(tr, tr.node, updated) if updated is not None else nullcontext():
        _copy_kept(tr, base, out, dim, start, step, m)
    if m:
        lps = loops("i", src.shape)
        idx = ivars(lps)
        tidx = [e * step + start if d == dim else e for d, e in enumerate(idx)]
        tr.emit(out, tidx, "=", cast(src.read(idx), out.dtype), lps)
    return stored(out)


def _copy_kept(tr: Translator, base: Val, out: TensorDecl, dim: int, start: int, step: int, m: int) -> None:
    """The elements of `base` outside the slice start:stop:step of dim, copied into `out`."""
    n = base.shape[dim]
    stop = start + step * (m - 1) + 1 if m else start

    def copy_base(lo: int, hi: int, stride: int = 1, offset: int = 0) -> None:
        if hi <= lo:
            return
        lps = [Loop(f"i{d}", 0, s) for d, s in enumerate(base.shape)]
        count = (hi - lo + stride - 1) // stride
        lps[dim] = Loop(f"i{dim}", 0, count)
        idx = ivars(lps)
        bidx = [e * stride + lo if d == dim else e for d, e in enumerate(idx)]
        tr.emit(out, bidx, "=", cast(base.read(bidx), out.dtype), lps)

    copy_base(0, start)
    copy_base(stop, n)
    for gap in range(1, step):  # the elements between the strided slice positions
        copy_base(start + gap, stop, step)


@template("aten.copy.default")
def _copy(tr: Translator, node: AtenNode) -> Val:
    """copy(dst, src): src broadcast to dst's shape and cast to its dtype (a view when no cast)."""
    dst, src = tr.val(node.args[0]), tr.val(node.args[1])
    off = dst.ndim - src.ndim
    b = view(src, dst.shape, lambda idx: [AffExpr.lit(0) if n == 1 and dst.shape[off + d] != 1
                                          else idx[off + d] for d, n in enumerate(src.shape)])
    if src.dtype == dst.dtype:
        return b
    out = tr.result(dtype=dst.dtype)
    copy_into(tr, out, b)
    return stored(out)

