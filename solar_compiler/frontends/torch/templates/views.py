"""Views: no statement, an index map composed into the consumers' reads.

A reshape of a (logically contiguous) tensor maps a view index to the linear offset and back
into the base dims with `//` and `%`; `_div_mod` drops every `//`/`%` that the index ranges make
exact (flatten then unflatten gives back the plain indices), so most reshapes stay affine.
Values that torch copies but that keep their elements (clone, contiguous, same-dtype `_to_copy`)
are aliases here too: fewer bytes than eager moves, so the bound stays a lower bound.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from solar_compiler.loopir.affine import AffExpr
from solar_compiler.loopir.ast import Binary, Const, Index

from ..capture import AtenNode
from ..translate import Translator, Val, view
from .common import norm_dim

Term = tuple[AffExpr, int, int]  # (expression >= 0, coefficient > 0, max value of the expression)


def _sum(terms: Sequence[Term]) -> AffExpr:
    out = AffExpr.lit(0)
    for e, cf, _ in terms:
        out = out + e * cf
    return out


def _quot(terms: Sequence[Term], s: int) -> list[Term]:
    """(sum of terms) // s, exact under the term ranges."""
    if s == 1:
        return list(terms)
    whole = [(e, cf // s, m) for e, cf, m in terms if cf % s == 0]
    rest = [t for t in terms if t[1] % s != 0]
    rmax = sum(cf * m for _, cf, m in rest)
    if rest and rmax >= s:
        whole.append((_sum(rest) // s, 1, rmax // s))
    return whole


def _mod(terms: Sequence[Term], n: int) -> list[Term]:
    """(sum of terms) % n, exact under the term ranges."""
    kept = [(e, cf % n, m) for e, cf, m in terms if cf % n != 0]
    if sum(cf * m for _, cf, m in kept) < n:
        return kept
    return [(_sum(kept) % n, 1, n - 1)]


def reshape_map(old: Sequence[int], new: Sequence[int]):
    """Index map of `base(old).reshape(new)`: view index -> base index."""
    if math.prod(old) != math.prod(new):
        raise ValueError(f"cannot reshape {list(old)} to {list(new)}")
    if list(old) == list(new):
        return lambda idx: idx
    new_strides = [math.prod(new[d + 1:]) for d in range(len(new))]
    old_strides = [math.prod(old[d + 1:]) for d in range(len(old))]

    def index_map(idx: tuple[Index, ...]) -> list[Index]:
        terms: list[Term] = []
        for e, st, n in zip(idx, new_strides, new, strict=True):
            if n == 1:
                continue
            if not isinstance(e, AffExpr):
                # an indirect index survives only a reshape that keeps its dimension whole
                return _indirect_reshape(idx, old, new)
            terms.append((e, st, n - 1))
        return [AffExpr.lit(0) if n == 1 else _sum(_mod(_quot(terms, st), n))
                for st, n in zip(old_strides, old, strict=True)]

    return index_map


def _indirect_reshape(idx: tuple[Index, ...], old: Sequence[int], new: Sequence[int]) -> list[Index]:
    drop_old = [n for n in old if n != 1]
    drop_new = [(i, n) for i, n in zip(idx, new, strict=True) if n != 1]
    if drop_old != [n for _, n in drop_new]:
        raise ValueError("an indirect (gathered) index passes through a reshape that merges dimensions")
    it = iter(i for i, _ in drop_new)
    return [AffExpr.lit(0) if n == 1 else next(it) for n in old]


def iadd(i: Index, k: int) -> Index:
    if k == 0:
        return i
    if isinstance(i, AffExpr):
        return i + k
    return Binary("add", i, Const(int(k), i.dtype), i.dtype)


def imul(i: Index, k: int) -> Index:
    if k == 1:
        return i
    if isinstance(i, AffExpr):
        return i * k
    return Binary("mul", i, Const(int(k), i.dtype), i.dtype)


def ineg_from(n: int, i: Index) -> Index:
    """n - i."""
    if isinstance(i, AffExpr):
        return AffExpr.lit(n) - i
    return Binary("sub", Const(int(n), i.dtype), i, i.dtype)


# ---- templates ----------------------------------------------------------------------------------
def _reshape(tr: Translator, node: AtenNode) -> Val:
    x = tr.val(node.args[0])
    shape = tr.out_meta().shape
    return view(x, shape, reshape_map(x.shape, shape))


def _permute(tr: Translator, node: AtenNode) -> Val:
    x = tr.val(node.args[0])
    perm = [norm_dim(int(d), x.ndim) for d in node.args[1]]
    inv = [perm.index(d) for d in range(x.ndim)]
    return view(x, [x.shape[p] for p in perm], lambda idx: [idx[inv[d]] for d in range(x.ndim)])


def _transpose(tr: Translator, node: AtenNode) -> Val:
    x = tr.val(node.args[0])
    if x.ndim < 2:
        return x
    a, b = (norm_dim(int(d), x.ndim) for d in (tr.arg(1, "dim0", 0), tr.arg(2, "dim1", 1)))
    perm = list(range(x.ndim))
    perm[a], perm[b] = perm[b], perm[a]
    return view(x, [x.shape[p] for p in perm], lambda idx: [idx[perm[d]] for d in range(x.ndim)])


def _expand(tr: Translator, node: AtenNode) -> Val:
    x = tr.val(node.args[0])
    shape = tr.out_meta().shape
    off = len(shape) - x.ndim
    return view(x, shape, lambda idx: [AffExpr.lit(0) if n == 1 and shape[off + d] != 1 else idx[off + d]
                                       for d, n in enumerate(x.shape)])


def _squeeze_like(tr: Translator, node: AtenNode) -> Val:
    """squeeze / unsqueeze: only size-1 dims come or go, so the non-1 indices pass through."""
    x = tr.val(node.args[0])
    shape = tr.out_meta().shape
    return view(x, shape, _indirect_reshape_map(x.shape, shape))


def _indirect_reshape_map(old: Sequence[int], new: Sequence[int]):
    return lambda idx: _indirect_reshape(idx, old, new)


def _slice(tr: Translator, node: AtenNode) -> Val:
    x = tr.val(node.args[0])
    dim = norm_dim(int(tr.arg(1, "dim", 0)), x.ndim)
    n = x.shape[dim]
    start = tr.arg(2, "start", None)
    step = int(tr.arg(4, "step", 1))
    start = 0 if start is None else int(start)
    start = min(max(start + n if start < 0 else start, 0), n)
    shape = tr.out_meta().shape
    return view(x, shape, lambda idx: [iadd(imul(i, step), start) if d == dim else i
                                       for d, i in enumerate(idx)])


def _narrow(tr: Translator, node: AtenNode) -> Val:
    x = tr.val(node.args[0])
    dim = norm_dim(int(node.args[1]), x.ndim)
    start = int(node.args[2])
    start = start + x.shape[dim] if start < 0 else start
    return view(x, tr.out_meta().shape, lambda idx: [iadd(i, start) if d == dim else i
                                                     for d, i in enumerate(idx)])


def _select(tr: Translator, node: AtenNode) -> Val:
    x = tr.val(node.args[0])
    dim = norm_dim(int(node.args[1]), x.ndim)
    k = int(node.args[2])
    k = k + x.shape[dim] if k < 0 else k
    return view(x, tr.out_meta().shape, lambda idx: [*idx[:dim], AffExpr.lit(k), *idx[dim:]])


def _unfold(tr: Translator, node: AtenNode) -> Val:
    """x.unfold(dim, size, step): a new last dim k; element (.., w, .., k) = x(.., w*step + k, ..)."""
    x = tr.val(node.args[0])
    dim = norm_dim(int(node.args[1]), x.ndim)
    step = int(node.args[3])

    def index_map(idx: tuple[Index, ...]) -> list[Index]:
        base = list(idx[:-1])
        w, k = base[dim], idx[-1]
        if not (isinstance(w, AffExpr) and isinstance(k, AffExpr)):
            raise ValueError("an indirect index into an unfold view")
        base[dim] = w * step + k
        return base

    return view(x, tr.out_meta().shape, index_map)


def _as_strided(tr: Translator, node: AtenNode) -> Val:
    """as_strided on the logical (contiguous) layout of its input: offset -> base indices."""
    x = tr.val(node.args[0])
    size, strides = list(node.args[1]), list(node.args[2])
    offset = int(tr.arg(3, "storage_offset", 0) or 0)
    old_strides = [math.prod(x.shape[d + 1:]) for d in range(x.ndim)]
    total = math.prod(x.shape)
    top = offset + sum(st * (n - 1) for st, n in zip(strides, size, strict=True))
    if any(st < 0 for st in strides) or top >= max(total, 1):
        raise tr.error("as_strided outside its input's storage")

    def index_map(idx: tuple[Index, ...]) -> list[Index]:
        terms: list[Term] = [(e, st, n - 1) for e, st, n in zip(idx, strides, size, strict=True)
                             if n != 1 and st != 0]
        if any(not isinstance(e, AffExpr) for e, _, _ in terms):
            raise ValueError("an indirect index into an as_strided view")
        terms += [(AffExpr.lit(1), offset, 1)] if offset else []
        return [AffExpr.lit(0) if n == 1 else _sum(_mod(_quot(terms, st), n))
                for st, n in zip(old_strides, x.shape, strict=True)]

    return view(x, size, index_map)


def _alias(tr: Translator, node: AtenNode) -> Val:
    return tr.val(node.args[0])


def _to_same(tr: Translator, node: AtenNode) -> Val:
    """A copy/conversion op: an alias when the dtype is unchanged, else an elementwise cast."""
    from .elementwise import cast_op

    x = tr.val(node.args[0])
    if x.dtype == tr.out_meta().dtype:
        return x
    return cast_op(tr, node)


TABLE = {
    **{f"aten.{op}.default": _reshape for op in ("view", "reshape", "_unsafe_view", "view_copy",
                                                   "_reshape_alias", "_reshape_copy")},
    "aten.permute.default": _permute,
    "aten.permute_copy.default": _permute,
    "aten.transpose.int": _transpose,
    "aten.transpose_copy.int": _transpose,
    "aten.t.default": _transpose,
    "aten.t_copy.default": _transpose,
    "aten.expand.default": _expand,
    "aten.expand_copy.default": _expand,
    "aten.squeeze.dim": _squeeze_like,
    "aten.squeeze.dims": _squeeze_like,
    "aten.squeeze.default": _squeeze_like,
    "aten.squeeze_copy.dim": _squeeze_like,
    "aten.squeeze_copy.dims": _squeeze_like,
    "aten.unsqueeze.default": _squeeze_like,
    "aten.unsqueeze_copy.default": _squeeze_like,
    "aten.slice.Tensor": _slice,
    "aten.slice_copy.Tensor": _slice,
    "aten.narrow.default": _narrow,
    "aten.select.int": _select,
    "aten.select_copy.int": _select,
    "aten.unfold.default": _unfold,
    "aten.unfold_copy.default": _unfold,
    "aten.as_strided.default": _as_strided,
    "aten.as_strided_copy.default": _as_strided,
    "aten.alias.default": _alias,
    "aten.alias_copy.default": _alias,
    "aten.detach.default": _alias,
    "aten.detach_copy.default": _alias,
    "aten.lift_fresh_copy.default": _alias,
    "aten.lift_fresh.default": _alias,
    "aten.clone.default": _alias,
    "aten.contiguous.default": _alias,
    "aten._to_copy.default": _to_same,
    "aten.to.dtype": _to_same,
    "aten.to.dtype_layout": _to_same,
    "aten.to.device": _to_same,
    "aten._to_dim_order_copy.default": _to_same,
}
