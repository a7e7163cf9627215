"""Convolutions (1-d, 2-d, 3-d; stride, padding, dilation, groups; transposed).

Direct form: `out[n, o, p] += x[n, c, p*s + r*d - pad] * w[o, c, r]` after `out = bias`.
Padding is a guard on the input index (no padded copy), emitted only where the index can leave
the input. Groups split channels into `g*Cg + c` (a loop over groups, absent when groups == 1).
Transposed form scatters: `out[n, o, i*s + r*d - pad] += x[n, c, i] * w[c, o, r]`, guarded."""

from __future__ import annotations

from collections.abc import Sequence

from solar_compiler.frontends.builder.exprs import c, cast, mul
from solar_compiler.frontends.builder.index_maps import int_tuple, window_index
from solar_compiler.frontends.builder.translator import Translator
from solar_compiler.frontends.builder.values import Loop, Val, ivars, stored
from solar_compiler.frontends.program import AtenNode
from solar_compiler.loopir.affine import AffExpr

from ..registry import template


def convolution(tr: Translator, x: Val, w: Val, b: Val | None, stride: Sequence[int], padding: Sequence[int],
                dilation: Sequence[int], transposed: bool, groups: int) -> Val:
    out = tr.result()
    dt = out.dtype
    N, Cin = x.shape[0], x.shape[1]
    osp, isp, ksp = out.shape[2:], x.shape[2:], w.shape[2:]
    Cout = out.shape[1]
    G = groups
    Cg, Og = Cin // G, Cout // G
    g_lps = [Loop("g", 0, G)] if G > 1 else []
    g = AffExpr.var("g") if G > 1 else AffExpr.lit(0)
    n_l, o_l, c_l = Loop("n", 0, N), Loop("o", 0, Og), Loop("c", 0, Cg)
    n, o, ci = AffExpr.var("n"), AffExpr.var("o"), AffExpr.var("c")
    r_lps = [Loop(f"r{d}", 0, k) for d, k in enumerate(ksp)]
    r = ivars(r_lps)
    och = g * Og + o
    ich = g * Cg + ci
    # init: out = bias or 0 over the whole output
    init_lps = [Loop("n", 0, N), Loop("o", 0, Cout)] + [Loop(f"p{d}", 0, s) for d, s in enumerate(osp)]
    iidx = ivars(init_lps)
    tr.emit(out, iidx, "=", cast(b.read([iidx[1]]), dt) if b is not None else c(0, dt), init_lps)
    # direct: loop over output positions p, read the input window; transposed: loop over input
    # positions, scatter to the output window
    sp = osp if not transposed else isp
    p_lps = [Loop(f"p{d}", 0, s) for d, s in enumerate(sp)]
    p = ivars(p_lps)
    win, guards = window_index(p, r, sp, isp if not transposed else osp, ksp, stride, padding, dilation)
    if not transposed:
        x_idx, w_idx, out_idx = [n, ich, *win], [och, ci, *r], [n, och, *p]
    else:
        x_idx, w_idx, out_idx = [n, ich, *p], [ich, o, *r], [n, och, *win]
    value = mul(cast(x.read(x_idx), dt), cast(w.read(w_idx), dt))
    tr.emit(out, out_idx, "+=", value, [n_l, *g_lps, o_l, *p_lps, c_l, *r_lps], guards)
    return stored(out)


@template("aten.convolution.default", "aten._convolution.default")
def _convolution(tr: Translator, node: AtenNode) -> Val:
    a = list(node.args)
    x, w = tr.val(a[0]), tr.val(a[1])
    b = tr.opt_val(a[2])
    nsp = x.ndim - 2
    if any(int(p) for p in int_tuple(a[7], nsp)) and not a[6]:
        raise tr.error("output_padding on a non-transposed convolution")
    return convolution(tr, x, w, b, int_tuple(a[3], nsp), int_tuple(a[4], nsp), int_tuple(a[5], nsp),
                       bool(a[6]), int(a[8]))


@template("aten.conv1d.default", "aten.conv2d.default", "aten.conv3d.default", "aten.conv1d.padding",
          "aten.conv2d.padding", "aten.conv3d.padding")
def _conv_nd(tr: Translator, node: AtenNode) -> Val:
    """conv1d/2d/3d(x, w, b, stride, padding, dilation, groups); padding may be 'same'/'valid'."""
    x, w = tr.val(node.args[0]), tr.val(node.args[1])
    b = tr.opt_val(tr.arg(2, "bias", None))
    nsp = x.ndim - 2
    stride = int_tuple(tr.arg(3, "stride", 1), nsp)
    dilation = int_tuple(tr.arg(5, "dilation", 1), nsp)
    pad = tr.arg(4, "padding", 0)
    if pad == "valid":
        padding = [0] * nsp
    elif pad == "same":
        padding = [dilation[d] * (w.shape[2 + d] - 1) // 2 for d in range(nsp)]
        if any(dilation[d] * (w.shape[2 + d] - 1) % 2 for d in range(nsp)):
            raise tr.error("padding='same' with an asymmetric total padding has no template")
    else:
        padding = int_tuple(pad, nsp)
    return convolution(tr, x, w, b, stride, padding, dilation, False, int(tr.arg(6, "groups", 1)))


@template("aten.conv_transpose1d.default", "aten.conv_transpose2d.input", "aten.conv_transpose3d.input")
def _conv_transpose_nd(tr: Translator, node: AtenNode) -> Val:
    """conv_transposeNd(x, w, b, stride, padding, output_padding, groups, dilation)."""
    x, w = tr.val(node.args[0]), tr.val(node.args[1])
    b = tr.opt_val(tr.arg(2, "bias", None))
    nsp = x.ndim - 2
    return convolution(tr, x, w, b, int_tuple(tr.arg(3, "stride", 1), nsp),
                       int_tuple(tr.arg(4, "padding", 0), nsp), int_tuple(tr.arg(7, "dilation", 1), nsp),
                       True, int(tr.arg(6, "groups", 1)))
