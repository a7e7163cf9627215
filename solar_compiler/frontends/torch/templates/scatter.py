"""Scatters: index_put (with and without accumulate), index_add, scatter, scatter_add, scatter_reduce,
nonzero, and masked_scatter (a gather at the mask's prefix count). Each scatter is one indirect
write `out[.., I[..], ..] kind src[..]` over the source's (or index's) shape: the index tensor is
read at affine indices and its value addresses the target. `=` keeps the last write in program order
(torch leaves repeated indices unspecified; validation on the model's own inputs catches a program
that relies on its order).

The target is the base's own local tensor when this op is the last reader of the base (what the
eager in-place `index_add_` / `index_put_` do, and never more work than the out-of-place op), else
a fresh copy of the base. Index values are used as given (no negative-index wrap, as for gathers).

nonzero computes its index list in the loop IR: an exclusive prefix count of the mask (a `scan`),
then per coordinate column an indirect write of every position's coordinate to row `count + 1` of
a buffer one row larger than the traced count, or to the scratch row 0 for an unmasked position;
the result is rows 1.. of that buffer. The row count is the traced sample's (the capture flags the
program value-dependent): on other data a longer list is an out-of-range error and a shorter one
leaves undefined rows, never a silently wrong answer.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from solar_compiler.executor.numeric import identity
from solar_compiler.frontends.builder.exprs import (
    add,
    c,
    cast,
    cmp,
    index_read,
    index_value,
    mul,
    select,
    sub,
)
from solar_compiler.frontends.builder.index_maps import (
    advanced_position,
    bcast_index,
    bcast_shape,
    norm_dim,
    reshape_map,
)
from solar_compiler.frontends.builder.inplace import updated_input, validation_only
from solar_compiler.frontends.builder.statements import copy_into, prefix_count
from solar_compiler.frontends.builder.translator import Translator
from solar_compiler.frontends.builder.values import Loop, Val, fill, ivars, loops, stored, view
from solar_compiler.frontends.captured_program import AtenNode, TensorRef, tensor_refs
from solar_compiler.loopir.affine import AffExpr
from solar_compiler.loopir.ast import Index, Read, SExpr, TensorDecl

from ..registry import template

REDUCE_KIND = {"sum": "+=", "add": "+=", "prod": "*=", "multiply": "*=", "amax": "max=", "amin": "min="}


# ---- the written tensor ------------------------------------------------------------------------------
def _reads_tensor(v: Val, name: str) -> bool:
    """Whether `v` (a stored value, a view or a generator) reads kernel tensor `name`; a reader
    that cannot be applied to symbolic indices counts as reading it (the base is then copied)."""
    try:
        e = v.read([AffExpr.var(f"q{d}") for d in range(v.ndim)])
    except (ValueError, TypeError, KeyError, IndexError):
        return True
    return any(isinstance(r, Read) and r.tensor == name for r in e.walk())


def _in_place(tr: Translator, ref: object) -> TensorDecl | None:
    """The local tensor holding `ref` when no later op (nor a program output) can read it, through
    any name or view, and this op reads it only as its base: then the scatter may overwrite it."""
    if not isinstance(ref, TensorRef):
        return None
    name = tr.val(ref).stored
    decl = next((t for t in tr.tensors if t.name == name), None)
    if decl is None or decl.role != "local" or name in tr.random.values():
        return None
    node = tr.node
    assert node is not None
    nodes = tr.program.nodes
    here = next(i for i, n in enumerate(nodes) if n is node)
    later = {r for n in nodes[here + 1:] for r in tensor_refs((n.args, n.kwargs))} | set(tr.program.outputs)
    mine = list(tensor_refs((node.args, node.kwargs)))
    if mine.count(ref.name) != 1:
        return None
    for key, v in tr.env.items():
        if (key in later or (key in mine and key != ref.name)) and _reads_tensor(v, name):
            return None
    return decl


def _target(tr: Translator, node: AtenNode, addressed: bool = True) -> TensorDecl:
    """Where the scatter writes: the base in place when possible, else a copy of it. A scatter that
    touches only the elements it addresses (`addressed`: all but the masked select, which rewrites
    every element) of an input forward updates in place, as its final version that no later op
    reads, writes its result without the copy: eager (`index_put_`, `index_add_`, `scatter_add_`)
    reads and writes the addressed elements of the caller's buffer and moves nothing else. The copy
    then exists in the validation kernel only, run first there (`Translator.validation_prologue`), so
    the output is still checked whole. An accumulating scatter then reads the old values of the
    elements it adds into from the output, which the bound does not count as input bytes: it errs
    low by at most those elements."""
    decl = _in_place(tr, node.args[0])
    if decl is not None:
        return decl
    out = tr.result()
    updated = updated_input(tr, node) if addressed else None
    if updated is not None:
        with validation_only(tr, node, updated):
            copy_into(tr, out, tr.val(node.args[0]))
        return out
    copy_into(tr, out, tr.val(node.args[0]))
    return out


def _index_expr(tr: Translator, v: Val, idx: Sequence[AffExpr]) -> SExpr:
    if v.dtype == "bool":
        raise tr.error("no loop-IR template for a boolean-mask index in a scatter (its positions "
                       "depend on values)")
    return index_read(v, idx)


# ---- index_put / index_add ----------------------------------------------------------------------------
@template("aten.index_put.default", "aten._unsafe_index_put.default")
def _index_put(tr: Translator, node: AtenNode) -> Val:
    """out[i0, ..., I0[b], ..., In[b], ...] (+)= values[...] over the shape of `x[indices]`."""
    x = tr.val(node.args[0])
    positions = list(node.args[1])
    values = tr.val(node.args[2])
    accumulate = bool(tr.arg(3, "accumulate", False))
    tens = [(d, tr.val(r)) for d, r in enumerate(positions) if isinstance(r, TensorRef)]
    if not tens:
        raise tr.error("index_put without an index tensor")
    if any(v.dtype == "bool" for _, v in tens):
        return _masked_put(tr, node, x, tens, values, accumulate)
    bshape = bcast_shape([v.shape for _, v in tens])
    nb = len(bshape)
    dims = [d for d, _ in tens]
    first = advanced_position(dims)
    rest_shape = [n for d, n in enumerate(x.shape) if d not in dims]
    shape = [*rest_shape[:first], *bshape, *rest_shape[first:]]
    out = _target(tr, node)
    lps = loops("i", shape)
    idx = ivars(lps)
    bidx = idx[first:first + nb]
    rest = iter(idx[:first] + idx[first + nb:])
    by_dim = dict(tens)
    tidx: list[Index] = [_index_expr(tr, by_dim[d], bcast_index(bidx, by_dim[d].shape, bshape))
                         if d in by_dim else next(rest) for d in range(x.ndim)]
    value = cast(values.read(bcast_index(idx, values.shape, shape)), out.dtype)
    tr.emit(out, tidx, "+=" if accumulate else "=", value, lps)
    return stored(out)


def _masked_put(tr: Translator, node: AtenNode, x: Val, tens: list[tuple[int, Val]], values: Val,
                accumulate: bool) -> Val:
    """`x[mask] = v` (or `+=`) with one value for every selected element: the select `where(mask, v,
    x)` over all of x, the mask read at the dims it covers. Many values (one per selected element, in
    order) would need the selected elements' ranks, which depend on values: no template."""
    (d, mask), = tens if len(tens) == 1 else (None,)
    if d is None or math.prod(values.shape) != 1 or tuple(x.shape[d:d + mask.ndim]) != tuple(mask.shape):
        raise tr.error("no loop-IR template for a boolean-mask index_put with one value per selected "
                       "element (their positions depend on values)")
    # `x[m] = v` changes the selected elements only: a conditional store, in place into an input
    out = _target(tr, node, addressed=not accumulate)
    lps = loops("i", x.shape)
    idx = ivars(lps)
    hit = mask.read(idx[d:d + mask.ndim])
    value = cast(values.read([0] * values.ndim), out.dtype)
    here = Read(out.name, tuple(idx), out.dtype)
    new = add(here, select(hit, value, c(0, out.dtype))) if accumulate else select(hit, value, here)
    tr.emit(out, idx, "=", new, lps)
    return stored(out)


@template("aten.index_add.default")
def _index_add(tr: Translator, node: AtenNode) -> Val:
    """out[.., index[k], ..] += alpha * source[.., k, ..]."""
    x = tr.val(node.args[0])
    dim = norm_dim(int(node.args[1]), x.ndim)
    ind, src = tr.val(node.args[2]), tr.val(node.args[3])
    alpha = tr.arg(4, "alpha", 1)
    out = _target(tr, node)
    lps = loops("i", src.shape)
    idx = ivars(lps)
    tidx: list[Index] = list(idx)
    if x.ndim:
        tidx[dim] = _index_expr(tr, ind, [idx[dim]] if ind.ndim else [])
    value = cast(src.read(idx), out.dtype)
    if alpha != 1:  # a unit alpha costs no FLOP
        value = mul(value, c(alpha, value))
    tr.emit(out, tidx, "+=", value, lps)
    return stored(out)


# ---- scatter family -------------------------------------------------------------------------------------
@template("aten.scatter_add.default", kind="+=")
def _scatter_into(tr: Translator, node: AtenNode, kind: str, include_self: bool = True) -> Val:
    """out[.., index[idx], ..] kind src[idx] over the index's shape (src a tensor or a scalar)."""
    x = tr.val(node.args[0])
    dim = norm_dim(int(node.args[1]), x.ndim)
    ind = tr.val(node.args[2])
    src = node.args[3]
    out = _target(tr, node)
    lps = loops("i", ind.shape)
    idx = ivars(lps)
    tidx: list[Index] = list(idx)
    if x.ndim:
        tidx[dim] = _index_expr(tr, ind, idx)
    if isinstance(src, TensorRef):
        value = cast(tr.val(src).read(idx), out.dtype)
    elif isinstance(src, (bool, int, float)):
        value = c(src, out.dtype)
    else:
        raise tr.error(f"unsupported scatter source {src!r}")
    if not include_self:  # the scattered positions start from the identity, not from the base
        tr.emit(out, tidx, "=", c(identity(kind, out.dtype), out.dtype), lps)
    tr.emit(out, tidx, kind, value, lps)
    return stored(out)


def _reduce_kind(tr: Translator, reduce: object) -> str:
    if reduce not in REDUCE_KIND:
        raise tr.error(f"no loop-IR template for scatter reduction '{reduce}' "
                       f"(known: {', '.join(sorted(REDUCE_KIND))})")
    return REDUCE_KIND[str(reduce)]


@template("aten.scatter.src", "aten.scatter.value", "aten.scatter.reduce", "aten.scatter.value_reduce")
def _scatter(tr: Translator, node: AtenNode) -> Val:
    reduce = tr.arg(4, "reduce", None)
    return _scatter_into(tr, node, "=" if reduce is None else _reduce_kind(tr, reduce))


@template("aten.scatter_reduce.two")
def _scatter_reduce(tr: Translator, node: AtenNode) -> Val:
    kind = _reduce_kind(tr, tr.arg(4, "reduce", None))
    return _scatter_into(tr, node, kind, include_self=bool(tr.arg(5, "include_self", True)))


# ---- masked_scatter ------------------------------------------------------------------------------------
@template("aten.masked_scatter.default")
def _masked_scatter(tr: Translator, node: AtenNode) -> Val:
    """`out = x` but the true positions of the mask (both broadcast to the output's shape) take the
    source's elements in order: the k-th true position in row-major order takes `source.flatten()[k]`.
    k is the inclusive count of the mask up to the position, less one (`prefix_count`: two scans of
    about sqrt(n) steps); the source is gathered there, and a select keeps x elsewhere. The count is integer
    work (a scan of flags, as CUDA's masked_scatter runs), the select moves values: a stand-in."""
    x, mask, src = (tr.val(a) for a in node.args[:3])
    shape = tuple(tr.out_meta().shape)
    n, n_src = math.prod(shape), math.prod(src.shape)
    tr.mark_stand_in()
    out = tr.result()
    lps = loops("i", shape)
    idx = ivars(lps)
    base = cast(x.read(bcast_index(idx, x.shape, shape)), out.dtype)
    if n == 0 or n_src == 0:  # no source element: no position may be true (torch checks it)
        tr.emit(out, idx, "=", base, lps)
        return stored(out)
    to_coords = reshape_map(shape, (n,))
    (flat,) = reshape_map((n,), shape)(tuple(idx))

    def hit(at: Sequence[Index]) -> SExpr:
        v = mask.read(bcast_index(at, mask.shape, shape))
        return v if mask.dtype == "bool" else cmp("ne", v, c(0, v))

    count = prefix_count(tr, out.name, n, lambda f: cast(hit(to_coords((f,))), "i64"))
    # the gather in a statement of its own, not under the select: its traced footprint is then the
    # source elements consumed (a gather under a select branch is counted at its minimum, one)
    at = select(hit(idx), sub(count(flat), c(1, "i64")), c(0, "i64"))
    source = view(src, (n_src,), reshape_map(src.shape, (n_src,)))
    taken = tr.declare(f"{out.name}_source", shape, out.dtype)
    tr.emit(taken, idx, "=", cast(source.read([at]), out.dtype), lps)
    tr.emit(out, idx, "=", select(hit(idx), Read(taken.name, tuple(idx), out.dtype), base), lps)
    return stored(out)


# ---- nonzero ---------------------------------------------------------------------------------------------
@template("aten.nonzero.default")
def _nonzero(tr: Translator, node: AtenNode) -> Val:
    x = tr.val(node.args[0])
    meta = tr.out_meta()
    n_rows, rank = int(meta.shape[0]), x.ndim
    if rank == 0:
        raise tr.error("no loop-IR template for nonzero of a 0-d tensor")
    size = math.prod(x.shape)
    if size == 0:
        return fill(meta.shape, "i64", 0)
    strides = [math.prod(x.shape[d + 1:]) for d in range(rank)]
    f = AffExpr.var("f")

    def coords(p: AffExpr) -> list[AffExpr]:
        return [(p // strides[d]) % n if d else p // strides[d] for d, n in enumerate(x.shape)]

    def hit(p: AffExpr) -> SExpr:
        v = x.read(coords(p))
        return v if x.dtype == "bool" else cmp("ne", v, c(0, v))

    count = tr.declare(f"{meta.name}_prefix", [size], "i64")
    rows = tr.declare(meta.name, [n_rows + 1, rank], "i64")
    tr.emit(count, [AffExpr.lit(0)], "=", c(0, "i64"), [])
    if size > 1:
        prev = Read(count.name, (f - 1,), "i64")
        tr.emit(count, [f], "=", add(prev, cast(hit(f - 1), "i64")), [Loop("f", 1, size, sequential=True)])
    row = select(hit(f), add(Read(count.name, (f,), "i64"), c(1, "i64")), c(0, "i64"))
    for d, e in enumerate(coords(f)):
        tr.emit(rows, [row, AffExpr.lit(d)], "=", index_value(e), [Loop("f", 0, size)])
    return view(stored(rows), meta.shape, lambda idx: [idx[0] + 1, idx[1]])

