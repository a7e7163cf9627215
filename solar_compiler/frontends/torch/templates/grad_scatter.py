"""Backward ops that are scatter-adds (an indirect write `out[.., I[..], ..] += g[..]` after a zero
fill): the embedding gradient (rows of the table addressed by the token ids) and the max-pool
gradient (each window's gradient to the input element its argmax index names)."""

from __future__ import annotations

from solar_compiler.frontends.builder.exprs import bin_, c, cast, cmp, index_read, select
from solar_compiler.frontends.builder.translator import Translator
from solar_compiler.frontends.builder.values import Loop, Val, ivars, loops, stored
from solar_compiler.frontends.captured_program import AtenNode
from solar_compiler.loopir.affine import AffExpr
from solar_compiler.loopir.ast import Index

from ..registry import template


def _zeroed_result(tr: Translator, g: Val) -> tuple[Val, list[Loop], list[AffExpr]]:
    """The result zeroed (a scatter-add accumulates into it) and the loops over the gradient `g` that
    scatter into it, with their index variables."""
    out = tr.result()
    init = loops("i", out.shape)
    tr.emit(out, ivars(init), "=", c(0, out.dtype), init)
    lps = loops("i", g.shape)
    return out, lps, ivars(lps)


@template("aten.embedding_dense_backward.default")
def _embedding_dense_backward(tr: Translator, node: AtenNode) -> Val:
    """(grad_output [*, D], indices [*], num_weights, padding_idx, scale_grad_by_freq) ->
    gw [num_weights, D]: gw = 0; gw[I[i], d] += g[i, d], the padding row receiving nothing."""
    g, ind = tr.val(node.args[0]), tr.val(node.args[1])
    pad = int(tr.arg(3, "padding_idx", -1))  # type: ignore[call-overload]
    if tr.arg(4, "scale_grad_by_freq", False):
        raise tr.error("no loop-IR template for embedding_dense_backward with scale_grad_by_freq")
    out, lps, idx = _zeroed_result(tr, g)
    dt = out.dtype
    row = index_read(ind, idx[:-1])
    value = cast(g.read(idx), dt)
    if pad >= 0:  # ids are non-negative: a negative padding_idx is "none"
        value = select(cmp("eq", row, c(pad, "i64")), c(0, dt), value)
    tr.emit(out, [row, idx[-1]], "+=", value, lps)
    return stored(out)


@template("aten.max_pool2d_with_indices_backward.default", "aten.max_pool3d_with_indices_backward.default")
def _max_pool_backward(tr: Translator, node: AtenNode) -> Val:
    """(grad_output, input, kernel, stride, padding, dilation, ceil_mode, indices) -> gx: gx = 0;
    gx[.., I // W, I % W] += g over the pooled positions, I the flat index into each plane of the
    input's spatial dims (2 for max_pool2d, 3 for max_pool3d) that the forward returned."""
    g, x, ind = tr.val(node.args[0]), tr.val(node.args[1]), tr.val(node.args[7])
    nsp = 3 if "3d" in node.op else 2
    out, lps, idx = _zeroed_result(tr, g)
    dt = out.dtype
    flat = index_read(ind, idx)
    lead = len(x.shape) - nsp
    sizes = x.shape[lead:]
    tidx: list[Index] = list(idx[:lead])
    for d in range(nsp):  # the spatial coordinates of the flat index, outermost first
        inner = 1
        for n in sizes[d + 1:]:
            inner *= n
        q = bin_("floordiv", flat, c(inner, "i64")) if inner != 1 else flat
        tidx.append(bin_("mod", q, c(sizes[d], "i64")) if d else q)
    tr.emit(out, tidx, "+=", cast(g.read(idx), dt), lps)
    return stored(out)
