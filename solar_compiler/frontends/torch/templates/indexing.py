"""Gathers: embedding, index_select, gather, advanced indexing (`x[idx]`). Each is one statement
with an indirect read `x[.., I[..], ..]`: the index tensor is read at affine indices and its
value indexes the data. Index values are used as given (torch's negative-index wrap is not
modelled; validation on the model's own inputs catches a program that relies on it). Boolean-mask
indexing has a value-dependent shape and no template."""

from __future__ import annotations

from solar_compiler.loopir.affine import AffExpr
from solar_compiler.loopir.ast import Index, SExpr

from ..capture import AtenNode, TensorRef
from ..translate import Translator, Val, ivars, loops, stored
from .common import bcast_index, cast, norm_dim


def _index_expr(v: Val, idx: list[AffExpr]) -> SExpr:
    e = v.read(idx)
    return e if v.dtype == "i64" else cast(e, "i64")


def _embedding(tr: Translator, node: AtenNode) -> Val:
    w, ind = tr.val(node.args[0]), tr.val(node.args[1])
    out = tr.result()
    lps = loops("i", out.shape)
    idx = ivars(lps)
    row = _index_expr(ind, idx[:-1])
    tr.emit(out, idx, "=", cast(w.read([row, idx[-1]]), out.dtype), lps)
    return stored(out)


def _index_select(tr: Translator, node: AtenNode) -> Val:
    x = tr.val(node.args[0])
    dim = norm_dim(int(node.args[1]), x.ndim)
    ind = tr.val(node.args[2])
    out = tr.result()
    lps = loops("i", out.shape)
    idx = ivars(lps)
    sel: list[Index] = list(idx)
    sel[dim] = _index_expr(ind, [idx[dim]] if ind.ndim == 1 else [])
    tr.emit(out, idx, "=", cast(x.read(sel), out.dtype), lps)
    return stored(out)


def _gather(tr: Translator, node: AtenNode) -> Val:
    x = tr.val(node.args[0])
    dim = norm_dim(int(node.args[1]), x.ndim)
    ind = tr.val(node.args[2])
    out = tr.result()
    lps = loops("i", out.shape)
    idx = ivars(lps)
    sel: list[Index] = list(idx)
    sel[dim] = _index_expr(ind, idx)
    tr.emit(out, idx, "=", cast(x.read(sel), out.dtype), lps)
    return stored(out)


def _index(tr: Translator, node: AtenNode) -> Val:
    """x[i0, i1, ...] with some positions None (full slices)."""
    x = tr.val(node.args[0])
    positions = list(node.args[1])
    if getattr(node, "_bool_index", False):
        raise tr.error("no loop-IR template for boolean-mask indexing (its shape depends on values)")
    tens = [(d, tr.val(r)) for d, r in enumerate(positions) if isinstance(r, TensorRef)]
    if any(v.dtype == "bool" for _, v in tens):
        raise tr.error("no loop-IR template for boolean-mask indexing (its shape depends on values)")
    nb = max(v.ndim for _, v in tens)
    bshape = [1] * nb
    for _, v in tens:
        for d, n in enumerate(v.shape):
            k = nb - v.ndim + d
            bshape[k] = max(bshape[k], n)
    dims = [d for d, _ in tens]
    adjacent = dims == list(range(dims[0], dims[0] + len(dims)))
    out = tr.result()
    lps = loops("i", out.shape)
    idx = ivars(lps)
    first = dims[0] if adjacent else 0
    bidx = idx[first:first + nb]
    rest = idx[:first] + idx[first + nb:]
    it = iter(rest)
    sel: list[Index] = []
    by_dim = dict(tens)
    for d in range(x.ndim):
        if d in by_dim:
            v = by_dim[d]
            sel.append(_index_expr(v, bcast_index(bidx, v.shape, bshape)))
        else:
            sel.append(next(it))
    tr.emit(out, idx, "=", cast(x.read(sel), out.dtype), lps)
    return stored(out)


TABLE = {
    "aten.embedding.default": _embedding,
    "aten.index_select.default": _index_select,
    "aten.gather.default": _gather,
    "aten.index.Tensor": _index,
    "aten._unsafe_index.Tensor": _index,
}
