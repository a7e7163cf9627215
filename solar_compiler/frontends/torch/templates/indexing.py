"""Gathers: embedding, index_select, gather, advanced indexing (`x[idx]`). Each is one statement
with an indirect read `x[.., I[..], ..]`: the index tensor is read at affine indices and its
value indexes the data. Index values are used as given (torch's negative-index wrap is not
modelled; validation on the model's own inputs catches a program that relies on it). Boolean-mask
indexing has a value-dependent shape and no template. Also the renormalised weight of an embedding
with `max_norm` (`embedding_renorm`): gathered row norms and a per-row scale table."""

from __future__ import annotations

import math

from solar_compiler.frontends.builder.exprs import (
    add,
    c,
    cast,
    cmp,
    div,
    index_read,
    mul,
    p_norm_parts,
    select,
)
from solar_compiler.frontends.builder.index_maps import (
    advanced_position,
    bcast_index,
    bcast_shape,
    norm_dim,
    reshape_map,
)
from solar_compiler.frontends.builder.statements import finalize, reduce_into
from solar_compiler.frontends.builder.translator import Translator
from solar_compiler.frontends.builder.values import Loop, Val, ivars, loops, stored, view
from solar_compiler.frontends.captured_program import AtenNode, TensorRef
from solar_compiler.loopir.affine import AffExpr
from solar_compiler.loopir.ast import Index, Read

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


@template("aten.embedding_renorm.default")
def _embedding_renorm(tr: Translator, node: AtenNode) -> Val:
    """`nn.Embedding(max_norm=...)`: every row the indices name whose p-norm exceeds max_norm is scaled
    by `max_norm / (norm + 1e-7)` (in f64, as torch's), the other rows are left as they are. Eager
    updates those rows of the weight in place; here the norm of the row each index names is computed
    (a gathered reduction), its scale scattered into a per-row table of ones, and the result is the
    weight read through that table, `w[r, d] * scale[r]`, a product inlined into whoever reads it
    (the embedding's gather reads only the rows it needs). A row named twice has its norm computed
    twice (eager sorts the indices and skips repeats)."""
    w, ind = tr.val(node.args[0]), tr.val(node.args[1])
    max_norm, p = float(node.args[2]), float(node.args[3])
    if w.ndim != 2:
        raise tr.error(f"no loop-IR template for embedding_renorm of a rank-{w.ndim} weight")
    kind, term, finish = p_norm_parts(p)
    dt = w.dtype
    n = math.prod(ind.shape)
    flat = view(ind, (n,), reshape_map(ind.shape, (n,)))
    name = tr.out_meta().name
    k, r = AffExpr.var("k"), AffExpr.var("r")
    row = index_read(flat, [k])
    norm = tr.declare(f"{name}_norm", (n,), dt)
    ident = {"+=": 0, "max=": -math.inf, "min=": math.inf}[kind]
    reduce_into(tr, norm, (n, w.shape[1]), [1], False, kind, c(ident, dt),
                lambda full: term(cast(w.read([index_read(flat, [full[0]]), full[1]]), dt)))
    if finish is not None:
        finalize(tr, norm, finish)
    scale = tr.declare(f"{name}_scale", (w.shape[0],), dt)
    tr.emit(scale, [r], "=", c(1, dt), [Loop("r", 0, w.shape[0])])
    v = cast(Read(norm.name, (k,), dt), "f64")
    over = cmp("gt", v, c(max_norm, v))
    factor = cast(div(c(max_norm, v), add(v, c(1e-7, v))), dt)
    tr.emit(scale, [row], "=", select(over, factor, c(1, dt)), [Loop("k", 0, n)])
    return Val(w.shape, dt, lambda idx: mul(w.read(idx), Read(scale.name, (idx[0],), dt)))


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
