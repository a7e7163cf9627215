"""Convolutions (1-d, 2-d, 3-d; stride, padding, dilation, groups; transposed).

Direct form: `out[n, o, p] += x[n, c, p*s + r*d - pad] * w[o, c, r]` after `out = bias`.
Padding is a guard on the input index (no padded copy), emitted only where the index can leave
the input. Groups split channels into `g*Cg + c` (a loop over groups, absent when groups == 1).
Transposed form scatters: `out[n, o, i*s + r*d - pad] += x[n, c, i] * w[c, o, r]`, guarded."""

from __future__ import annotations

from collections.abc import Sequence

from solar_compiler.loopir.affine import AffCond, AffExpr

from ..capture import AtenNode, TensorRef
from ..translate import Loop, Translator, Val, ivars, stored
from .common import c, cast, mul


def _tuple(v: object, n: int) -> list[int]:
    if isinstance(v, (list, tuple)):
        vals = [int(x) for x in v]
        return vals * n if len(vals) == 1 else vals
    return [int(v)] * n


def _range_guards(e: AffExpr, lo_val: int, hi_val: int, size: int) -> list[AffCond]:
    """Guards 0 <= e < size, only for the sides the index can actually cross."""
    out = []
    if lo_val < 0:
        out.append(AffCond.compare(e, ">=", AffExpr.lit(0)))
    if hi_val > size - 1:
        out.append(AffCond.compare(e, "<=", AffExpr.lit(size - 1)))
    return out


def convolution(tr: Translator, x: Val, w: Val, b: Val | None, stride: Sequence[int], padding: Sequence[int],
                dilation: Sequence[int], transposed: bool, groups: int) -> Val:
    out = tr.result()
    dt = out.dtype
    nsp = x.ndim - 2
    N, Cin = x.shape[0], x.shape[1]
    osp, isp, ksp = out.shape[2:], x.shape[2:], w.shape[2:]
    Cout = out.shape[1]
    G = groups
    Cg, Og = Cin // G, Cout // G
    g_lps = [Loop("g", G)] if G > 1 else []
    g = AffExpr.var("g") if G > 1 else AffExpr.lit(0)
    n_l, o_l, c_l = Loop("n", N), Loop("o", Og), Loop("c", Cg)
    n, o, ci = AffExpr.var("n"), AffExpr.var("o"), AffExpr.var("c")
    r_lps = [Loop(f"r{d}", k) for d, k in enumerate(ksp)]
    r = ivars(r_lps)
    och = g * Og + o
    ich = g * Cg + ci
    # init: out = bias or 0 over the whole output
    init_lps = [Loop("n", N), Loop("o", Cout)] + [Loop(f"p{d}", s) for d, s in enumerate(osp)]
    iidx = ivars(init_lps)
    tr.emit(out, iidx, "=", cast(b.read([iidx[1]]), dt) if b is not None else c(0, dt), init_lps)
    guards: list[AffCond] = []
    if not transposed:
        p_lps = [Loop(f"p{d}", s) for d, s in enumerate(osp)]
        p = ivars(p_lps)
        xsp = []
        for d in range(nsp):
            e = p[d] * stride[d] + r[d] * dilation[d] - padding[d]
            hi = (osp[d] - 1) * stride[d] + (ksp[d] - 1) * dilation[d] - padding[d]
            guards += _range_guards(e, -padding[d], hi, isp[d])
            xsp.append(e)
        value = mul(cast(x.read([n, ich, *xsp]), dt), cast(w.read([och, ci, *r]), dt))
        lps = [n_l, *g_lps, o_l, *p_lps, c_l, *r_lps]
        tr.emit(out, [n, och, *p], "+=", value, lps, guards)
        return stored(out)
    i_lps = [Loop(f"p{d}", s) for d, s in enumerate(isp)]
    i = ivars(i_lps)
    osp_idx = []
    for d in range(nsp):
        e = i[d] * stride[d] + r[d] * dilation[d] - padding[d]
        hi = (isp[d] - 1) * stride[d] + (ksp[d] - 1) * dilation[d] - padding[d]
        guards += _range_guards(e, -padding[d], hi, osp[d])
        osp_idx.append(e)
    value = mul(cast(x.read([n, ich, *i]), dt), cast(w.read([ich, o, *r]), dt))
    lps = [n_l, *g_lps, o_l, *i_lps, c_l, *r_lps]
    tr.emit(out, [n, och, *osp_idx], "+=", value, lps, guards)
    return stored(out)


def _convolution(tr: Translator, node: AtenNode) -> Val:
    a = list(node.args)
    x, w = tr.val(a[0]), tr.val(a[1])
    b = tr.val(a[2]) if isinstance(a[2], TensorRef) else None
    nsp = x.ndim - 2
    if any(int(p) for p in _tuple(a[7], nsp)) and not a[6]:
        raise tr.error("output_padding on a non-transposed convolution")
    return convolution(tr, x, w, b, _tuple(a[3], nsp), _tuple(a[4], nsp), _tuple(a[5], nsp), bool(a[6]),
                       int(a[8]))


def _conv_nd(tr: Translator, node: AtenNode) -> Val:
    """conv1d/2d/3d(x, w, b, stride, padding, dilation, groups); padding may be 'same'/'valid'."""
    x, w = tr.val(node.args[0]), tr.val(node.args[1])
    bias = tr.arg(2, "bias", None)
    b = tr.val(bias) if isinstance(bias, TensorRef) else None
    nsp = x.ndim - 2
    stride = _tuple(tr.arg(3, "stride", 1), nsp)
    dilation = _tuple(tr.arg(5, "dilation", 1), nsp)
    pad = tr.arg(4, "padding", 0)
    if pad == "valid":
        padding = [0] * nsp
    elif pad == "same":
        padding = [dilation[d] * (w.shape[2 + d] - 1) // 2 for d in range(nsp)]
        if any(dilation[d] * (w.shape[2 + d] - 1) % 2 for d in range(nsp)):
            raise tr.error("padding='same' with an asymmetric total padding has no template")
    else:
        padding = _tuple(pad, nsp)
    return convolution(tr, x, w, b, stride, padding, dilation, False, int(tr.arg(6, "groups", 1)))


def _conv_transpose_nd(tr: Translator, node: AtenNode) -> Val:
    """conv_transposeNd(x, w, b, stride, padding, output_padding, groups, dilation)."""
    x, w = tr.val(node.args[0]), tr.val(node.args[1])
    bias = tr.arg(2, "bias", None)
    b = tr.val(bias) if isinstance(bias, TensorRef) else None
    nsp = x.ndim - 2
    return convolution(tr, x, w, b, _tuple(tr.arg(3, "stride", 1), nsp), _tuple(tr.arg(4, "padding", 0), nsp),
                       _tuple(tr.arg(7, "dilation", 1), nsp), True, int(tr.arg(6, "groups", 1)))


TABLE = {
    "aten.convolution.default": _convolution,
    "aten._convolution.default": _convolution,
    "aten.conv1d.default": _conv_nd,
    "aten.conv2d.default": _conv_nd,
    "aten.conv3d.default": _conv_nd,
    "aten.conv1d.padding": _conv_nd,
    "aten.conv2d.padding": _conv_nd,
    "aten.conv3d.padding": _conv_nd,
    "aten.conv_transpose1d.default": _conv_transpose_nd,
    "aten.conv_transpose2d.input": _conv_transpose_nd,
    "aten.conv_transpose3d.input": _conv_transpose_nd,
}
