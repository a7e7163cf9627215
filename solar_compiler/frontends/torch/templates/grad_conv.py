"""`convolution_backward`: the three gradients of a convolution (1-3 spatial dims; stride, padding,
dilation, groups; direct or transposed), each only where `output_mask` asks for it.

For a direct convolution `y[n, o, p] = sum x[n, c, p*s + r*d - pad] * w[o, c, r]`:

* the input gradient is the transposed convolution of `g` (= dL/dy) with the same weight (the
  shared `builder/conv.py` scatter `gx[n, c, p*s + r*d - pad] += g[n, o, p] * w[o, c, r]`);
* the weight gradient is the correlation `gw[o, c, r] += g[n, o, p] * x[n, c, p*s + r*d - pad]`;
* the bias gradient is `gb[o] = sum g[n, o, p]`.

Both gradients are contractions over the forward's own (p, r) pairs (padding taps are guards, not
work), so each has the forward's matrix FLOPs. A transposed convolution swaps the roles: its input
gradient is the direct convolution of `g` with the weight, its weight gradient the correlation
`gw[c, o, r] += x[n, c, p] * g[n, o, p*s + r*d - pad]`.
"""

from __future__ import annotations

from collections.abc import Sequence

from solar_compiler.frontends.builder.conv import convolution
from solar_compiler.frontends.builder.exprs import c, cast, mul
from solar_compiler.frontends.builder.index_maps import int_tuple, window_index
from solar_compiler.frontends.builder.statements import accumulate
from solar_compiler.frontends.builder.translator import Translator
from solar_compiler.frontends.builder.values import Loop, Val, ivars, loops, stored
from solar_compiler.frontends.captured_program import AtenNode
from solar_compiler.loopir.affine import AffExpr

from ..registry import template


def _weight_grad(tr: Translator, pos: Val, win: Val, wshape: Sequence[int], stride: Sequence[int],
                 padding: Sequence[int], dilation: Sequence[int], groups: int) -> Val:
    """`gw[g*A + a, b, r] = sum_{n, p} pos[n, g*A + a, p] * win[n, g*B + b, p*s + r*d - pad]`: output
    1 of the node (`pos` is read at the loop's positions, `win` at the window of each tap)."""
    out = tr.result(1)
    dt = out.dtype
    A, B = wshape[0] // groups, wshape[1]
    ksp = wshape[2:]
    init = loops("i", wshape)
    tr.emit(out, ivars(init), "=", c(0, dt), init)
    # loop names unlike the capture's tensor names (a loop variable may not shadow a tensor)
    g_lps = [Loop("grp", 0, groups)] if groups > 1 else []
    g = AffExpr.var("grp") if groups > 1 else AffExpr.lit(0)
    a_l, b_l, n_l = Loop("ch_a", 0, A), Loop("ch_b", 0, B), Loop("nb", 0, pos.shape[0])
    a, b, n = AffExpr.var("ch_a"), AffExpr.var("ch_b"), AffExpr.var("nb")
    r_lps = [Loop(f"r{d}", 0, k) for d, k in enumerate(ksp)]
    p_lps = [Loop(f"p{d}", 0, s) for d, s in enumerate(pos.shape[2:])]
    r, p = ivars(r_lps), ivars(p_lps)
    w_idx, guards = window_index(p, r, pos.shape[2:], win.shape[2:], ksp, stride, padding, dilation)
    value = mul(cast(pos.read([n, g * A + a, *p]), dt), cast(win.read([n, g * B + b, *w_idx]), dt))
    tr.emit(out, [g * A + a, b, *r], "+=", value, [*g_lps, a_l, b_l, *r_lps, n_l, *p_lps], guards)
    return stored(out)


@template("aten.convolution_backward.default")
def _convolution_backward(tr: Translator, node: AtenNode) -> tuple[Val | None, Val | None, Val | None]:
    """convolution_backward(grad_output, input, weight, bias_sizes, stride, padding, dilation,
    transposed, output_padding, groups, output_mask) -> (grad_input, grad_weight, grad_bias)."""
    a = list(node.args)
    gy, x, w = tr.val(a[0]), tr.val(a[1]), tr.val(a[2])
    nsp = x.ndim - 2
    if nsp < 1:
        raise tr.error("convolution_backward of an unbatched input has no template")
    stride, padding, dilation = (int_tuple(a[i], nsp) for i in (4, 5, 6))
    transposed, groups = bool(a[7]), int(a[9])
    mask = [bool(m) for m in a[10]]
    gx = gw = gb = None
    if mask[0]:  # the adjoint of the forward: transposed <-> direct, same weight, same taps
        gx = convolution(tr, gy, w, None, stride, padding, dilation, not transposed, groups, result=0)
    if mask[1]:
        gw = (_weight_grad(tr, x, gy, w.shape, stride, padding, dilation, groups) if transposed
              else _weight_grad(tr, gy, x, w.shape, stride, padding, dilation, groups))
    if mask[2]:
        out = tr.result(2)
        accumulate(tr, out, gy, [d for d in range(gy.ndim) if d != 1], False, "+=")
        gb = stored(out)
    return gx, gw, gb
