"""Gathers: embedding, index_select, gather, advanced indexing (`x[idx]`). Each is one statement
with an indirect read `x[.., I[..], ..]`: the index tensor is read at affine indices and its
value indexes the data. Index values are used as given (torch's negative-index wrap is not
modelled; validation on the model's own inputs catches a program that relies on it). Boolean-mask
indexing has a value-dependent shape and no template."""

from __future__ import annotations

from solar_compiler.frontends.builder.exprs import cast, index_read
from solar_compiler.frontends.builder.index_maps import advanced_position, bcast_index, bcast_shape, norm_dim
from solar_compiler.frontends.builder.translator import Translator
from solar_compiler.frontends.builder.values import Val, ivars, loops, stored
from solar_compiler.frontends.captured_program import AtenNode, TensorRef
from solar_compiler.loopir.ast import Index

from ..registry import template


@template("aten.embedding.default")
def _embedding(tr: Translator, node: AtenNode) -> Val:
    w, ind = tr.val(node.args[0]), tr.val(node.args[1])
    out = tr.result()
    lps = loops("i", out.shape)
    idx = ivars(lps)
    row = index_read(ind, idx[:-1])
    tr.emit(out, idx, "=", cast(w.read([row, idx[-1]]), out.dtype), lps)
    return stored(out)


@template("aten.index_select.default", along_dim=True)
@template("aten.gather.default", along_dim=False)
def _gather(tr: Translator, node: AtenNode, along_dim: bool) -> Val:
    """out[.., i, ..] = x[.., I[..], ..] at `dim`: index_select reads the index vector at `i`
    (`along_dim`), gather reads the index tensor (the output's shape) at the whole position."""
    x = tr.val(node.args[0])
    dim = norm_dim(int(node.args[1]), x.ndim)
    ind = tr.val(node.args[2])
    out = tr.result()
    lps = loops("i", out.shape)
    idx = ivars(lps)
    sel: list[Index] = list(idx)
    at = ([idx[dim]] if ind.ndim == 1 else []) if along_dim else idx
    sel[dim] = index_read(ind, at)
    tr.emit(out, idx, "=", cast(x.read(sel), out.dtype), lps)
    return stored(out)


@template("aten.index.Tensor", "aten._unsafe_index.Tensor")
def _index(tr: Translator, node: AtenNode) -> Val:
    """x[i0, i1, ...] with some positions None (full slices)."""
    x = tr.val(node.args[0])
    positions = list(node.args[1])
    tens = [(d, tr.val(r)) for d, r in enumerate(positions) if isinstance(r, TensorRef)]
    if any(v.dtype == "bool" for _, v in tens):
        raise tr.error("no loop-IR template for boolean-mask indexing (its shape depends on values)")
    bshape = bcast_shape([v.shape for _, v in tens])
    nb = len(bshape)
    first = advanced_position([d for d, _ in tens])
    out = tr.result()
    lps = loops("i", out.shape)
    idx = ivars(lps)
    bidx = idx[first:first + nb]
    rest = iter(idx[:first] + idx[first + nb:])
    by_dim = dict(tens)
    sel: list[Index] = [index_read(by_dim[d], bcast_index(bidx, by_dim[d].shape, bshape)) if d in by_dim
                        else next(rest) for d in range(x.ndim)]
    tr.emit(out, idx, "=", cast(x.read(sel), out.dtype), lps)
    return stored(out)
