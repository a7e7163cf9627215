"""Views: no statement, an index map composed into the consumers' reads.

A reshape of a (logically contiguous) tensor maps a view index to the linear offset and back
into the base dims with `//` and `%` (`builder.index_maps.reshape_map`), dropping every `//`/`%`
that the index ranges make exact (flatten then unflatten gives back the plain indices), so most
reshapes stay affine.
Values that torch copies but that keep their elements (clone, contiguous, same-dtype `_to_copy`)
are aliases here too: fewer bytes than eager moves, so the bound stays a lower bound.
"""

from __future__ import annotations

import math

from solar_compiler.frontends.builder.exprs import bitcast
from solar_compiler.frontends.builder.index_maps import (
    Term,
    iadd,
    imul,
    indirect_reshape,
    norm_dim,
    reshape_map,
    unflatten,
)
from solar_compiler.frontends.builder.statements import map_op
from solar_compiler.frontends.builder.translator import Translator
from solar_compiler.frontends.builder.values import Val, view
from solar_compiler.frontends.captured_program import AtenNode
from solar_compiler.loopir.affine import AffExpr
from solar_compiler.loopir.ast import Index
from solar_compiler.loopir.rules import RuleError, bitcast_result

from ..registry import template


# ---- templates ----------------------------------------------------------------------------------
@template(*(f"aten.{op}.default" for op in ("view", "reshape", "_unsafe_view", "view_copy",
                                              "_reshape_alias", "_reshape_copy")))
def _reshape(tr: Translator, node: AtenNode) -> Val:
    x = tr.val(node.args[0])
    shape = tr.out_meta().shape
    return view(x, shape, reshape_map(x.shape, shape))


@template("aten.permute.default", "aten.permute_copy.default")
def _permute(tr: Translator, node: AtenNode) -> Val:
    x = tr.val(node.args[0])
    perm = [norm_dim(int(d), x.ndim) for d in node.args[1]]
    inv = [perm.index(d) for d in range(x.ndim)]
    return view(x, [x.shape[p] for p in perm], lambda idx: [idx[inv[d]] for d in range(x.ndim)])


@template("aten.transpose.int", "aten.transpose_copy.int", "aten.t.default", "aten.t_copy.default")
def _transpose(tr: Translator, node: AtenNode) -> Val:
    x = tr.val(node.args[0])
    if x.ndim < 2:
        return x
    a, b = (norm_dim(int(d), x.ndim) for d in (tr.arg(1, "dim0", 0), tr.arg(2, "dim1", 1)))
    perm = list(range(x.ndim))
    perm[a], perm[b] = perm[b], perm[a]
    return view(x, [x.shape[p] for p in perm], lambda idx: [idx[perm[d]] for d in range(x.ndim)])


@template("aten.expand.default", "aten.expand_copy.default")
def _expand(tr: Translator, node: AtenNode) -> Val:
    x = tr.val(node.args[0])
    shape = tr.out_meta().shape
    off = len(shape) - x.ndim
    return view(x, shape, lambda idx: [AffExpr.lit(0) if n == 1 and shape[off + d] != 1 else idx[off + d]
                                       for d, n in enumerate(x.shape)])


@template("aten.squeeze.dim", "aten.squeeze.dims", "aten.squeeze.default", "aten.squeeze_copy.dim",
          "aten.squeeze_copy.dims", "aten.unsqueeze.default", "aten.unsqueeze_copy.default")
def _squeeze_like(tr: Translator, node: AtenNode) -> Val:
    """squeeze / unsqueeze: only size-1 dims come or go, so the non-1 indices pass through."""
    x = tr.val(node.args[0])
    shape = tr.out_meta().shape
    return view(x, shape, lambda idx: indirect_reshape(idx, x.shape, shape))


@template("aten.slice.Tensor", "aten.slice_copy.Tensor")
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


@template("aten.narrow.default")
def _narrow(tr: Translator, node: AtenNode) -> Val:
    x = tr.val(node.args[0])
    dim = norm_dim(int(node.args[1]), x.ndim)
    start = int(node.args[2])
    start = start + x.shape[dim] if start < 0 else start
    return view(x, tr.out_meta().shape, lambda idx: [iadd(i, start) if d == dim else i
                                                     for d, i in enumerate(idx)])


@template("aten.select.int", "aten.select_copy.int")
def _select(tr: Translator, node: AtenNode) -> Val:
    x = tr.val(node.args[0])
    dim = norm_dim(int(node.args[1]), x.ndim)
    k = int(node.args[2])
    k = k + x.shape[dim] if k < 0 else k
    return view(x, tr.out_meta().shape, lambda idx: [*idx[:dim], AffExpr.lit(k), *idx[dim:]])


@template("aten.unfold.default", "aten.unfold_copy.default")
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


@template("aten.as_strided.default", "aten.as_strided_copy.default")
def _as_strided(tr: Translator, node: AtenNode) -> Val:
    """as_strided on the logical (contiguous) layout of its input: offset -> base indices."""
    x = tr.val(node.args[0])
    size, strides = list(node.args[1]), list(node.args[2])
    offset = int(tr.arg(3, "storage_offset", 0) or 0)
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
        return unflatten(terms, x.shape)

    return view(x, size, index_map)


@template("aten.alias.default", "aten.alias_copy.default", "aten.detach.default", "aten.detach_copy.default",
          "aten.lift_fresh_copy.default", "aten.lift_fresh.default", "aten.clone.default",
          "aten.contiguous.default")
def _alias(tr: Translator, node: AtenNode) -> Val:
    return tr.val(node.args[0])


@template("aten._to_copy.default", "aten.to.dtype", "aten.to.dtype_layout", "aten.to.device",
          "aten._to_dim_order_copy.default")
def _to_same(tr: Translator, node: AtenNode) -> Val:
    """A copy/conversion op: an alias when the dtype is unchanged, else an elementwise cast."""
    x = tr.val(node.args[0])
    if x.dtype == tr.out_meta().dtype:
        return x
    return map_op(tr, lambda v: v, [node.args[0]], x.dtype)


@template("aten.view.dtype")
def _view_dtype(tr: Translator, node: AtenNode) -> Val:
    """A reinterpretation of the bytes. Between dtypes of one width (`x.view(torch.int32)` of floats:
    torchao's MX quantisers read exponents so) each element is its source element's bits, a bit
    cast composed into the consumers' reads like any view: no statement, no FLOP, no bytes of its
    own. The capture holds a packed fp4 tensor (float4_e2m1fn_x2) as its bytes, so its uint8 view
    (how a reference decodes fp4 on any device) is the same tensor. A view that changes the element
    size (f32 -> u8 x 4) moves elements across the last dim, which no scalar op expresses."""
    x = tr.val(node.args[0])
    dtype = tr.out_meta().dtype
    if x.dtype == dtype:
        return x
    try:
        bitcast_result(x.dtype, dtype)
    except RuleError:
        raise tr.error(f"no loop-IR template for a bit cast from {x.dtype} to {dtype} (view(dtype)): "
                       "only dtypes of one element size are") from None
    return Val(x.shape, dtype, lambda idx: bitcast(x.read(idx), dtype))
