"""Convolutions (any number of spatial dims; stride, padding, dilation, feature groups; transposed as
a scatter; input (lhs) dilation and batch groups; any dimension layout): the loop shape torch's
convolutions and JAX's `conv_general_dilated` share.

Direct form: `out[n, o, p] += x[n, c, p*s + r*d - pad] * w[o, c, r]` after `out = bias` (or 0).
Padding is a guard on the input index (no padded copy), emitted only where the index can leave the
input. Feature groups split channels into `g*Cg + c` (a loop over groups, absent when there is one
group); batch groups split the input batch into `g*N + n` for output features `g*Og + o`. With an
input dilation `ld`, the dilated index `q = p*s + r*d - pad` reads `x[q // ld]` where `q % ld == 0`
(a guard: the taps on the inserted zeros are not work). Transposed form scatters:
`out[n, o, i*s + r*d - pad] += x[n, c, i] * w[c, o, r]`, guarded. Layouts say where the batch,
feature and spatial dims of each operand are (`(batch, feature, *spatial)` positions, JAX's
ConvDimensionNumbers); the default is torch's `N, C, *spatial` / `O, I, *spatial`.
"""

from __future__ import annotations

from collections.abc import Sequence

from solar_compiler.loopir.affine import AffExpr

from .exprs import c, cast, mul
from .index_maps import dilated_window_index, window_index
from .translator import Translator
from .values import Loop, Val, ivars, stored


def _place(layout: Sequence[int] | None, logical: Sequence[AffExpr]) -> list[AffExpr]:
    """Indices given in logical order (batch/out-feature, feature, *spatial) put at the layout's positions."""
    if layout is None:
        return list(logical)
    out: list[AffExpr] = [AffExpr.lit(0)] * len(logical)
    for pos, e in zip(layout, logical, strict=True):
        out[pos] = e
    return out


def _dims(shape: Sequence[int], layout: Sequence[int] | None) -> list[int]:
    """The sizes of an operand in logical order."""
    return list(shape) if layout is None else [shape[p] for p in layout]


def convolution(tr: Translator, x: Val, w: Val, b: Val | None, stride: Sequence[int], padding: Sequence[int],
                dilation: Sequence[int], transposed: bool, groups: int, *, lhs_dilation: Sequence[int] | None
                = None, batch_groups: int = 1, layouts: tuple[Sequence[int], Sequence[int], Sequence[int]]
                | None = None, result: int = 0) -> Val:
    """The convolution into a fresh tensor for output `result` of the node; `padding` is the low
    padding of each spatial dim (the high one follows from the output size)."""
    out = tr.result(result)
    dt = out.dtype
    xl, wl, ol = layouts if layouts is not None else (None, None, None)
    xs, ws, os_ = _dims(x.shape, xl), _dims(w.shape, wl), _dims(out.shape, ol)
    N, Cin = xs[0], xs[1]
    osp, isp, ksp = os_[2:], xs[2:], ws[2:]
    Cout = os_[1]
    G, BG = groups, batch_groups
    Cg, Og = Cin // G, Cout // (G * BG)
    Nb = N // BG
    g_lps = [Loop("g", 0, G * BG)] if G * BG > 1 else []
    g = AffExpr.var("g") if G * BG > 1 else AffExpr.lit(0)
    n_l, o_l, c_l = Loop("n", 0, Nb), Loop("o", 0, Og), Loop("c", 0, Cg)
    n, o, ci = AffExpr.var("n"), AffExpr.var("o"), AffExpr.var("c")
    r_lps = [Loop(f"r{d}", 0, k) for d, k in enumerate(ksp)]
    r = ivars(r_lps)
    och = g * Og + o
    ich = (g * Cg + ci) if BG == 1 else ci
    xn = n if BG == 1 else g * Nb + n
    # init: out = bias or 0 over the whole output
    init_lps = [Loop("n", 0, os_[0]), Loop("o", 0, Cout)] + [Loop(f"p{d}", 0, s) for d, s in enumerate(osp)]
    iidx = ivars(init_lps)
    tr.emit(out, _place(ol, iidx), "=", cast(b.read([iidx[1]]), dt) if b is not None else c(0, dt), init_lps)
    # direct: loop over output positions p, read the input window; transposed: loop over input
    # positions, scatter to the output window
    sp = osp if not transposed else isp
    p_lps = [Loop(f"p{d}", 0, s) for d, s in enumerate(sp)]
    p = ivars(p_lps)
    ld = list(lhs_dilation) if lhs_dilation is not None else [1] * len(sp)
    if any(k != 1 for k in ld):
        win, guards = dilated_window_index(p, r, sp, isp, ksp, stride, padding, dilation, ld)
    else:
        win, guards = window_index(p, r, sp, isp if not transposed else osp, ksp, stride, padding, dilation)
    if not transposed:
        x_idx, w_idx, out_idx = [xn, ich, *win], [och, ci, *r], [n, och, *p]
    else:
        x_idx, w_idx, out_idx = [n, ich, *p], [ich, o, *r], [n, och, *win]
    value = mul(cast(x.read(_place(xl, x_idx)), dt), cast(w.read(_place(wl, w_idx)), dt))
    tr.emit(out, _place(ol, out_idx), "+=", value, [n_l, *g_lps, o_l, *p_lps, c_l, *r_lps], guards)
    return stored(out)
