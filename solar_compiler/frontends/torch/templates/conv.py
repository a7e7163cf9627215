"""Convolutions (1-d, 2-d, 3-d; stride, padding, dilation, groups; transposed): the argument forms
of torch's convolution ops, all through the shared `builder/conv.py` (its docstring has the loop
shapes: `out[n, o, p] += x[n, c, p*s + r*d - pad] * w[o, c, r]` after `out = bias`; transposed
scatters)."""

from __future__ import annotations

from solar_compiler.frontends.builder.conv import convolution
from solar_compiler.frontends.builder.index_maps import int_tuple
from solar_compiler.frontends.builder.translator import Translator
from solar_compiler.frontends.builder.values import Val
from solar_compiler.frontends.captured_program import AtenNode

from ..registry import template


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
