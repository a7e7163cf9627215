"""`conv_general_dilated`: dimension numbers (any layout), window strides, (lo, hi) padding (negative
too), lhs (input) dilation, rhs (kernel) dilation, feature and batch groups, through the shared
`builder/conv.py`: `out[n, o, p] += x[n, c, p*s + r*d - lo] * w[o, c, r]` after `out = 0`, padding and
input dilation as guards (taps on padding or on the zeros between dilated inputs are not work)."""

from __future__ import annotations

from solar_compiler.frontends.builder.conv import convolution
from solar_compiler.frontends.builder.values import Val
from solar_compiler.frontends.captured_program import AtenNode

from ..registry import template
from ..translator import JaxTranslator


@template("jax.conv_general_dilated")
def _conv_general_dilated(tr: JaxTranslator, node: AtenNode) -> Val:
    x, w = tr.val(node.args[0]), tr.val(node.args[1])
    p = node.kwargs
    dn = p["dimension_numbers"]
    layouts = (tuple(dn.lhs_spec), tuple(dn.rhs_spec), tuple(dn.out_spec))
    nsp = x.ndim - 2
    stride = [int(s) for s in p.get("window_strides") or [1] * nsp]
    low = [int(lo) for lo, _ in p["padding"]]
    lhs_dil = [int(d) for d in p.get("lhs_dilation") or [1] * nsp]
    rhs_dil = [int(d) for d in p.get("rhs_dilation") or [1] * nsp]
    return convolution(tr, x, w, None, stride, low, rhs_dil, False, int(p.get("feature_group_count", 1)),
                       lhs_dilation=lhs_dil, batch_groups=int(p.get("batch_group_count", 1)), layouts=layouts)
