"""Shape primitives. Views (index maps composed into the consumers' reads, no statement):
`broadcast_in_dim`, `reshape`, `transpose`, `squeeze`, `rev`, `slice`, `dynamic_slice` (starts
constant or affine in the enclosing loops), `pad` that only crops; generators: `iota`. Statements:
`concatenate` (one copy per operand), `pad` (the shared border-slab copy; interior padding a fill
and a strided copy), `dynamic_update_slice` (a copy of the operand, then the update)."""

from __future__ import annotations

from collections.abc import Sequence

from solar_compiler.frontends.builder.exprs import cast, index_value
from solar_compiler.frontends.builder.index_maps import iadd, ineg_from, range_guards, reshape_map
from solar_compiler.frontends.builder.statements import concat_into, copy_into, pad_into
from solar_compiler.frontends.builder.values import Val, generator, ivars, loops, stored, view
from solar_compiler.frontends.captured_program import AtenNode
from solar_compiler.loopir.affine import AffExpr
from solar_compiler.loopir.ast import Const, Index

from ..operands import scalar, static_start
from ..registry import template
from ..translator import JaxTranslator


@template("jax.broadcast_in_dim")
def _broadcast_in_dim(tr: JaxTranslator, node: AtenNode) -> Val:
    shape = tuple(int(s) for s in node.kwargs["shape"])
    dims = [int(d) for d in node.kwargs["broadcast_dimensions"]]
    x = scalar(tr, node.args[0], tr.out_meta().dtype)
    return view(x, shape, lambda idx: [AffExpr.lit(0) if x.shape[k] == 1 and shape[d] != 1 else idx[d]
                                       for k, d in enumerate(dims)])


@template("jax.reshape")
def _reshape(tr: JaxTranslator, node: AtenNode) -> Val:
    x = tr.val(node.args[0])
    perm = node.kwargs.get("dimensions")
    if perm is not None:  # reshape of the operand transposed by `dimensions`
        x = _transposed(x, [int(p) for p in perm])
    new = tuple(int(s) for s in node.kwargs["new_sizes"])
    return view(x, new, reshape_map(x.shape, new))


def _transposed(x: Val, perm: Sequence[int]) -> Val:
    def index_map(idx: tuple[Index, ...]) -> list[Index]:
        out: list[Index] = [AffExpr.lit(0)] * len(perm)
        for i, p in enumerate(perm):
            out[p] = idx[i]
        return out

    return view(x, [x.shape[p] for p in perm], index_map)


@template("jax.transpose")
def _transpose(tr: JaxTranslator, node: AtenNode) -> Val:
    return _transposed(tr.val(node.args[0]), [int(p) for p in node.kwargs["permutation"]])


@template("jax.squeeze")
def _squeeze(tr: JaxTranslator, node: AtenNode) -> Val:
    x = tr.val(node.args[0])
    dims = {int(d) % max(x.ndim, 1) for d in node.kwargs["dimensions"]}
    shape = [n for d, n in enumerate(x.shape) if d not in dims]

    def index_map(idx: tuple[Index, ...]) -> list[Index]:
        it = iter(idx)
        return [AffExpr.lit(0) if d in dims else next(it) for d in range(x.ndim)]

    return view(x, shape, index_map)


@template("jax.expand_dims")
def _expand_dims(tr: JaxTranslator, node: AtenNode) -> Val:
    x = tr.val(node.args[0])
    shape = tr.out_meta().shape
    return view(x, shape, reshape_map(x.shape, shape))


@template("jax.rev")
def _rev(tr: JaxTranslator, node: AtenNode) -> Val:
    x = tr.val(node.args[0])
    dims = {int(d) for d in node.kwargs["dimensions"]}
    return view(x, x.shape, lambda idx: [ineg_from(x.shape[d] - 1, e) if d in dims else e
                                         for d, e in enumerate(idx)])


@template("jax.slice")
def _slice(tr: JaxTranslator, node: AtenNode) -> Val:
    x = tr.val(node.args[0])
    start = [int(s) for s in node.kwargs["start_indices"]]
    strides = node.kwargs.get("strides") or [1] * x.ndim
    return view(x, tr.out_meta().shape, lambda idx: [iadd(e * int(st) if isinstance(e, AffExpr) else e, s0)
                                                     for e, s0, st in zip(idx, start, strides, strict=True)])


@template("jax.dynamic_slice")
def _dynamic_slice(tr: JaxTranslator, node: AtenNode) -> Val:
    x = tr.val(node.args[0])
    sizes = [int(s) for s in node.kwargs["slice_sizes"]]
    starts = [static_start(tr, a, n, k) for a, n, k in zip(node.args[1:], x.shape, sizes, strict=True)]
    return view(x, sizes, lambda idx: [s + e if isinstance(e, AffExpr) else iadd(e, 0)
                                       for s, e in zip(starts, idx, strict=True)])


@template("jax.dynamic_update_slice")
def _dynamic_update_slice(tr: JaxTranslator, node: AtenNode) -> Val:
    """The operand copied, then the update written over its window."""
    x, upd = tr.val(node.args[0]), tr.val(node.args[1])
    starts = [static_start(tr, a, n, k) for a, n, k in zip(node.args[2:], x.shape, upd.shape, strict=True)]
    out = tr.result()
    copy_into(tr, out, x)
    lps = loops("i", upd.shape)
    idx = ivars(lps)
    tr.emit(out, [s + e for s, e in zip(starts, idx, strict=True)], "=", cast(upd.read(idx), out.dtype), lps)
    return stored(out)


@template("jax.concatenate")
def _concatenate(tr: JaxTranslator, node: AtenNode) -> Val:
    decl = tr.result()
    concat_into(tr, decl, [tr.val(a) for a in node.args], int(node.kwargs["dimension"]))
    return stored(decl)


@template("jax.iota")
def _iota(tr: JaxTranslator, node: AtenNode) -> Val:
    meta = tr.out_meta()
    d = int(node.kwargs["dimension"])
    return generator(meta.shape, meta.dtype, lambda idx: index_value(idx[d], meta.dtype))  # type: ignore[arg-type]


@template("jax.pad")
def _pad(tr: JaxTranslator, node: AtenNode) -> Val:
    """pad(x, value, [(lo, hi, interior)] per dim): negative lo/hi crop (a view when nothing else);
    without interior padding the shared border-slab copy writes each element once; with it, the
    whole output is filled and x copied to its strided positions."""
    x = tr.val(node.args[0])
    meta = tr.out_meta()
    value = scalar(tr, node.args[1], meta.dtype)
    config = [(int(lo), int(hi), int(it)) for lo, hi, it in node.kwargs["padding_config"]]
    if not any(it for _, _, it in config):
        crop = {d: (max(0, -lo), max(0, -hi)) for d, (lo, hi, _) in enumerate(config)}
        if any(a or b for a, b in crop.values()):
            base = x
            shape = [n - sum(crop[d]) for d, n in enumerate(x.shape)]
            x = view(base, shape, lambda idx: [iadd(e, crop[d][0]) for d, e in enumerate(idx)])
        pads = {d: (max(0, lo), max(0, hi)) for d, (lo, hi, _) in enumerate(config) if lo > 0 or hi > 0}
        if not pads:
            return x
        decl = tr.result()
        fill = value.read([])
        pad_into(tr, decl, x, pads, fill.value if isinstance(fill, Const) else 0.0)
        if not isinstance(fill, Const):
            raise tr.error("padding with a computed (non-literal) value has no template")
        return stored(decl)
    decl = tr.result()
    all_lps = loops("i", meta.shape)
    tr.emit(decl, ivars(all_lps), "=", cast(value.read([]), decl.dtype), all_lps)
    lps = loops("j", x.shape)
    j = ivars(lps)
    tidx, guards = [], []
    for d, (lo, _, it) in enumerate(config):
        e = j[d] * (it + 1) + lo
        tidx.append(e)
        guards += range_guards(e, lo, (x.shape[d] - 1) * (it + 1) + lo, meta.shape[d])
    tr.emit(decl, tidx, "=", cast(x.read(j), decl.dtype), lps, guards)
    return stored(decl)


@template("jax.split")
def _split(tr: JaxTranslator, node: AtenNode) -> tuple[Val, ...]:
    x = tr.val(node.args[0])
    axis = int(node.kwargs["axis"]) % x.ndim
    outs, off = [], 0
    for n in node.kwargs["sizes"]:
        o = off
        shape = list(x.shape)
        shape[axis] = int(n)
        outs.append(view(x, shape, lambda idx, o=o: [iadd(e, o) if d == axis else e
                                                     for d, e in enumerate(idx)]))
        off += int(n)
    return tuple(outs)

