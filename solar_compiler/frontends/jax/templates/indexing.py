"""`gather` and `scatter` (`scatter-add`, `-mul`, `-min`, `-max`) with XLA's general dimension
numbers, which cover `x[idx]`, `jnp.take`, `take_along_axis`, embedding lookups and `.at[idx]` updates.

A gather is one statement over the result's shape reading the operand at `start + offset` per dim,
the start loaded from the index tensor (an indirect read) or, when the index is affine in the
loops (an iota, a loop counter), an affine index. A scatter copies the operand, then writes every
update through the same kind of index (an indirect write), `=` or combining (`+=`, `*=`, `min=`,
`max=`). Index modes: `clip` clamps the start as XLA does (two vector ops per element);
`promise_in_bounds` and `fill`/`drop` use the index as given: the programs validated here keep
their indices in range (the executor stops with an error naming the statement otherwise), and a
bound for data with out-of-range indices would count the fill values as reads.
"""

from __future__ import annotations

from collections.abc import Sequence

from solar_compiler.frontends.builder.exprs import (
    add,
    c,
    cast,
    index_read,
    index_value,
    maximum,
    minimum,
    settle,
)
from solar_compiler.frontends.builder.statements import copy_into
from solar_compiler.frontends.builder.values import Val, ivars, loops, stored
from solar_compiler.frontends.captured_program import AtenNode
from solar_compiler.loopir.affine import AffExpr
from solar_compiler.loopir.ast import Index, IndexValue, SExpr

from ..registry import template
from ..translator import JaxTranslator


def _start(tr: JaxTranslator, indices: Val, batch: Sequence[Index], m: int, size: int, window: int,
           clip: bool) -> SExpr:
    """Component `m` of the index vector at batch position `batch`, as an i64 expression."""
    e = index_read(indices, [*batch, AffExpr.lit(m)])
    e = settle(e, tr.ranges)
    if clip:
        e = minimum(maximum(e, c(0, e)), c(size - window, e))
    return e


def _index(start: SExpr | None, offset: Index) -> Index:
    """start + offset as an index: affine when both are, else an i64 expression (indirect)."""
    if start is None:
        return offset
    if isinstance(start, IndexValue) and isinstance(offset, AffExpr):
        return start.expr + offset
    if isinstance(offset, AffExpr) and offset.is_const() and offset.const == 0:
        return start
    off = index_value(offset) if isinstance(offset, AffExpr) else offset
    return add(start, off)


def _clip(node: AtenNode) -> bool:
    return "CLIP" in str(node.kwargs.get("mode", "")).upper()


@template("jax.gather")
def _gather(tr: JaxTranslator, node: AtenNode) -> Val:
    x, ind = tr.val(node.args[0]), tr.val(node.args[1])
    dn = node.kwargs["dimension_numbers"]
    sizes = [int(s) for s in node.kwargs["slice_sizes"]]
    offset_dims = list(dn.offset_dims)
    collapsed = set(dn.collapsed_slice_dims)
    start_map = list(dn.start_index_map)
    op_batch = list(getattr(dn, "operand_batching_dims", ()))
    ind_batch = list(getattr(dn, "start_indices_batching_dims", ()))
    window_dims = [d for d in range(x.ndim) if d not in collapsed and d not in op_batch]
    out = tr.result()
    lps = loops("i", out.shape)
    o = ivars(lps)
    batch = [o[d] for d in range(len(out.shape)) if d not in offset_dims]
    offset = {wd: o[od] for wd, od in zip(window_dims, offset_dims, strict=True)}
    clip = _clip(node)
    idx: list[Index] = []
    for d in range(x.ndim):
        if d in op_batch:
            idx.append(batch[ind_batch[op_batch.index(d)]])
            continue
        start = _start(tr, ind, batch, start_map.index(d), x.shape[d], sizes[d], clip) \
            if d in start_map else None
        idx.append(_index(start, offset.get(d, AffExpr.lit(0))))
    tr.emit(out, o, "=", cast(x.read(idx), out.dtype), lps)
    return stored(out)


@template("jax.scatter", kind="=")
@template("jax.scatter-add", "jax.scatter_add", kind="+=")
@template("jax.scatter-mul", "jax.scatter_mul", kind="*=")
@template("jax.scatter-min", "jax.scatter_min", kind="min=")
@template("jax.scatter-max", "jax.scatter_max", kind="max=")
def _scatter(tr: JaxTranslator, node: AtenNode, kind: str) -> Val:
    x, ind, upd = (tr.val(a) for a in node.args[:3])
    dn = node.kwargs["dimension_numbers"]
    window_upd = list(dn.update_window_dims)
    inserted = set(dn.inserted_window_dims)
    to_operand = list(dn.scatter_dims_to_operand_dims)
    op_batch = list(getattr(dn, "operand_batching_dims", ()))
    ind_batch = list(getattr(dn, "scatter_indices_batching_dims", ()))
    window_dims = [d for d in range(x.ndim) if d not in inserted and d not in op_batch]
    out = tr.result()
    copy_into(tr, out, x)
    lps = loops("u", upd.shape)
    u = ivars(lps)
    batch = [u[d] for d in range(upd.ndim) if d not in window_upd]
    offset = {wd: u[ud] for wd, ud in zip(window_dims, window_upd, strict=True)}
    clip = _clip(node)
    idx: list[Index] = []
    for d in range(x.ndim):
        if d in op_batch:
            idx.append(batch[ind_batch[op_batch.index(d)]])
            continue
        window = upd.shape[window_upd[window_dims.index(d)]] if d in window_dims else 1
        start = _start(tr, ind, batch, to_operand.index(d), x.shape[d], window, clip) \
            if d in to_operand else None
        idx.append(_index(start, offset.get(d, AffExpr.lit(0))))
    tr.emit(out, idx, kind, cast(upd.read(u), out.dtype), lps)
    return stored(out)
