"""Pooling (max, avg, adaptive avg/max; 1-3 spatial dims, batched or not), the gradients of the
average poolings, nearest upsampling and linear upsampling (1-3 d).

Windows read `x[.., p*s + r*d - pad]` under guards that keep the index inside the input (the
padding is never materialised). Adaptive windows use torch's bounds start = floor(i*H/O) and
end = ceil((i+1)*H/O), exact integer arithmetic (`//`) in the index and in the guards; average
divisors that vary with the position are computed from the loop indices (no divisor tensor)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from solar_compiler.frontends.builder.exprs import (
    INF,
    add,
    c,
    cast,
    cmp,
    div,
    index_value,
    maximum,
    minimum,
    mul,
    select,
    sub,
)
from solar_compiler.frontends.builder.index_maps import int_tuple, window_index
from solar_compiler.frontends.builder.resample import scale_list, source_index
from solar_compiler.frontends.builder.statements import padded
from solar_compiler.frontends.builder.translator import Translator
from solar_compiler.frontends.builder.values import Loop, Val, ivars, stored, view
from solar_compiler.frontends.captured_program import AtenNode
from solar_compiler.loopir.affine import AffCond, AffExpr
from solar_compiler.loopir.ast import Read, SExpr, TensorDecl

from ..registry import template


def _window_args(tr: Translator, node: AtenNode, k: int, avg: bool):
    kernel = int_tuple(node.args[1], k)
    stride = tr.arg(2, "stride", None)
    stride = kernel if stride in (None, [], ()) else int_tuple(stride, k)
    padding = int_tuple(tr.arg(3, "padding", 0), k)
    dilation = [1] * k if avg else int_tuple(tr.arg(4, "dilation", 1), k)
    return kernel, stride, padding, dilation


def _windows(x: Val, out_sp: Sequence[int], kernel, stride, padding, dilation, k: int):
    """(loops of the lead and output dims, window loops, x index, guards)."""
    lead = x.shape[:x.ndim - k]
    l_lps = [Loop(f"i{d}", 0, s) for d, s in enumerate(lead)]
    p_lps = [Loop(f"p{d}", 0, s) for d, s in enumerate(out_sp)]
    r_lps = [Loop(f"r{d}", 0, s) for d, s in enumerate(kernel)]
    li, p, r = ivars(l_lps), ivars(p_lps), ivars(r_lps)
    isp = x.shape[x.ndim - k:]
    sp_idx, guards = window_index(p, r, out_sp, isp, kernel, stride, padding, dilation)
    xidx = [*li, *sp_idx]
    return l_lps + p_lps, r_lps, xidx, guards


@template("aten.max_pool1d.default", k=1)
@template("aten.max_pool2d.default", k=2)
@template("aten.max_pool3d.default", k=3)
@template("aten.max_pool2d_with_indices.default", k=2, with_indices=True)
@template("aten.max_pool3d_with_indices.default", k=3, with_indices=True)
def _max_pool(tr: Translator, node: AtenNode, k: int, with_indices: bool = False):
    x = tr.val(node.args[0])
    kernel, stride, padding, dilation = _window_args(tr, node, k, avg=False)
    out = tr.result(0)
    out_sp = out.shape[len(out.shape) - k:]
    o_lps, r_lps, xidx, guards = _windows(x, out_sp, kernel, stride, padding, dilation, k)
    oidx = ivars(o_lps)
    tr.emit(out, oidx, "=", c(-INF, out.dtype), o_lps)
    tr.emit(out, oidx, "max=", cast(x.read(xidx), out.dtype), o_lps + r_lps, guards)
    if not (with_indices and tr.used(1)):
        return (stored(out), None) if with_indices else stored(out)
    return stored(out), _argmax_index(tr, x, out, k, o_lps, r_lps, xidx, guards)


def _argmax_index(tr: Translator, x: Val, out: TensorDecl, k: int, o_lps: Sequence[Loop],
                  r_lps: Sequence[Loop], xidx: Sequence[AffExpr], guards: Sequence[AffCond]) -> Val:
    """Max pooling's indices (result 1): the smallest flat spatial index in the window whose element
    equals the window's maximum `out` (the first one torch's kernel scans to)."""
    ind = tr.result(1)
    oidx = ivars(o_lps)
    isp = x.shape[x.ndim - k:]
    flat = sum((xidx[x.ndim - k + d] * math.prod(isp[d + 1:]) for d in range(k)), AffExpr.lit(0))
    big = math.prod(isp)
    hit = cmp("eq", cast(x.read(xidx), out.dtype), Read(out.name, tuple(oidx), out.dtype))
    tr.emit(ind, oidx, "=", c(big, ind.dtype), o_lps)
    tr.emit(ind, oidx, "min=", select(hit, index_value(flat, ind.dtype), c(big, ind.dtype)),
            [*o_lps, *r_lps], guards)
    return stored(ind)


@template("aten.avg_pool1d.default", k=1)
@template("aten.avg_pool2d.default", k=2)
@template("aten.avg_pool3d.default", k=3)
def _avg_pool(tr: Translator, node: AtenNode, k: int) -> Val:
    x = tr.val(node.args[0])
    kernel, stride, padding, _ = _window_args(tr, node, k, avg=True)
    include_pad = bool(tr.arg(5, "count_include_pad", True))
    override = tr.arg(6, "divisor_override", None)
    out = tr.result()
    dt = out.dtype
    out_sp = out.shape[len(out.shape) - k:]
    o_lps, r_lps, xidx, guards = _windows(x, out_sp, kernel, stride, padding, [1] * k, k)
    oidx = ivars(o_lps)
    tr.emit(out, oidx, "=", c(0, dt), o_lps)
    tr.emit(out, oidx, "+=", cast(x.read(xidx), dt), o_lps + r_lps, guards)
    isp = x.shape[x.ndim - k:]
    p = oidx[len(oidx) - k:]
    divisor = _avg_divisor(p, stride, padding, kernel, isp, out_sp, include_pad, override, dt)
    fin = Read(out.name, tuple(oidx), dt)
    tr.emit(out, oidx, "=", div(fin, _as_expr(divisor, dt)), o_lps)
    return stored(out)


def _avg_divisor(p: Sequence[AffExpr], stride: Sequence[int], padding: Sequence[int], kernel: Sequence[int],
                 isp: Sequence[int], out_sp: Sequence[int], include_pad: bool, override: object,
                 dt: str) -> SExpr | int:
    """avg_pool's divisor at output position `p` (forward and backward divide by the same one): the
    override, else the product over spatial dims of the window's element count (padding counted or
    not), a constant where every window has the same count."""
    if override:
        return int(override)  # type: ignore[call-overload]
    divisor: SExpr | int = 1
    for d in range(len(p)):
        cnt = _count(p[d], stride[d], padding[d], kernel[d], isp[d], out_sp[d], include_pad)
        divisor = cnt * divisor if isinstance(cnt, int) and isinstance(divisor, int) else \
            mul(_as_expr(cnt, dt), _as_expr(divisor, dt))
    return divisor


def _as_expr(v: SExpr | int, dt: str) -> SExpr:
    return c(v, dt) if isinstance(v, int) else cast(v, dt)


def _count(p: AffExpr, s: int, pad: int, k: int, size: int, out: int, include_pad: bool) -> SExpr | int:
    """Number of window elements torch divides by at output position p (one dim)."""
    start = p * s - pad
    last_start = (out - 1) * s - pad
    if include_pad:
        if last_start + k <= size + pad:
            return k
        hi = minimum(index_value(start + k), c(size + pad, "i64"))
        return sub(hi, index_value(start))
    if pad == 0 and last_start + k <= size:
        return k
    hi = minimum(index_value(start + k), c(size, "i64"))
    lo = maximum(index_value(start), c(0, "i64"))
    return sub(hi, lo)


def _adaptive_windows(xshape: Sequence[int], out_sp: Sequence[int], k: int, dt: str):
    """(output loops, window loops, input index, guards, divisor) of adaptive pooling."""
    isp = xshape[len(xshape) - k:]
    lead = xshape[:len(xshape) - k]
    l_lps = [Loop(f"i{d}", 0, s) for d, s in enumerate(lead)]
    p_lps = [Loop(f"p{d}", 0, s) for d, s in enumerate(out_sp)]
    p = ivars(p_lps)
    r_lps, xidx, guards = [], list(ivars(l_lps)), []
    divisor: SExpr | int = 1
    for d in range(k):
        H, O = isp[d], out_sp[d]
        r = AffExpr.var(f"r{d}")
        if H % O == 0:
            kk = H // O
            r_lps.append(Loop(f"r{d}", 0, kk))
            xidx.append(p[d] * kk + r)
            divisor = _mul_div(divisor, kk, dt)
            continue
        start = (p[d] * H) // O
        end = (p[d] * H + H + O - 1) // O
        win = max((((i + 1) * H + O - 1) // O) - (i * H) // O for i in range(O))
        r_lps.append(Loop(f"r{d}", 0, win))
        guards.append(AffCond.compare(start + r, "<", end))
        xidx.append(start + r)
        divisor = _mul_div(divisor, index_value(end - start), dt)
    return l_lps + p_lps, r_lps, xidx, guards, divisor


@template("aten.adaptive_avg_pool1d.default", k=1, kind="avg")
@template("aten.adaptive_avg_pool2d.default", "aten._adaptive_avg_pool2d.default", k=2, kind="avg")
@template("aten.adaptive_avg_pool3d.default", "aten._adaptive_avg_pool3d.default", k=3, kind="avg")
@template("aten.adaptive_max_pool1d.default", k=1, kind="max")
@template("aten.adaptive_max_pool2d.default", k=2, kind="max")
@template("aten.adaptive_max_pool3d.default", k=3, kind="max")
def _adaptive(tr: Translator, node: AtenNode, k: int, kind: str):
    x = tr.val(node.args[0])
    out = tr.result(0)
    dt = out.dtype
    out_sp = out.shape[len(out.shape) - k:]
    o_lps, r_lps, xidx, guards, divisor = _adaptive_windows(x.shape, out_sp, k, dt)
    oidx = ivars(o_lps)
    red = "max=" if kind == "max" else "+="
    tr.emit(out, oidx, "=", c(-INF if kind == "max" else 0, dt), o_lps)
    tr.emit(out, oidx, red, cast(x.read(xidx), dt), o_lps + r_lps, guards)
    if kind == "avg":
        tr.emit(out, oidx, "=", div(Read(out.name, tuple(oidx), dt), _as_expr(divisor, dt)), o_lps)
        return stored(out)
    if len(node.outputs) > 1 and tr.used(1):
        return stored(out), _argmax_index(tr, x, out, k, o_lps, r_lps, xidx, guards)
    return (stored(out),) + (None,) * (len(node.outputs) - 1) if len(node.outputs) > 1 else stored(out)


# ---- backward: each window's gradient share added to the input elements it read ------------------
@template("aten._adaptive_avg_pool2d_backward.default", k=2)
@template("aten._adaptive_avg_pool3d_backward.default", k=3)
def _adaptive_avg_backward(tr: Translator, node: AtenNode, k: int) -> Val:
    """(grad_output, input) -> gx = 0; gx[.., start(p) + r] += g[.., p] / count(p) (the forward's
    windows; a scatter where windows overlap)."""
    g = tr.val(node.args[0])
    out = tr.result()
    dt = out.dtype
    o_lps, r_lps, xidx, guards, divisor = _adaptive_windows(out.shape, g.shape[g.ndim - k:], k, dt)
    init = [Loop(f"i{d}", 0, s) for d, s in enumerate(out.shape)]
    tr.emit(out, ivars(init), "=", c(0, dt), init)
    share = div(cast(g.read(ivars(o_lps)), dt), _as_expr(divisor, dt))
    tr.emit(out, xidx, "+=", share, o_lps + r_lps, guards)
    return stored(out)


@template("aten.avg_pool2d_backward.default", k=2)
@template("aten.avg_pool3d_backward.default", k=3)
def _avg_pool_backward(tr: Translator, node: AtenNode, k: int) -> Val:
    """(grad_output, input, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override)
    -> gx = 0; gx[.., p*s + r - pad] += g[.., p] / divisor(p), guarded to the input like the forward."""
    g, x = tr.val(node.args[0]), tr.val(node.args[1])
    kernel = int_tuple(node.args[2], k)
    stride = node.args[3]
    stride = kernel if stride in (None, [], ()) else int_tuple(stride, k)
    padding = int_tuple(node.args[4], k)
    include_pad = bool(tr.arg(6, "count_include_pad", True))
    override = tr.arg(7, "divisor_override", None)
    out = tr.result()
    dt = out.dtype
    out_sp = g.shape[g.ndim - k:]
    o_lps, r_lps, xidx, guards = _windows(x, out_sp, kernel, stride, padding, [1] * k, k)
    oidx = ivars(o_lps)
    p = oidx[len(oidx) - k:]
    isp = x.shape[x.ndim - k:]
    divisor = _avg_divisor(p, stride, padding, kernel, isp, out_sp, include_pad, override, dt)
    init = [Loop(f"i{d}", 0, s) for d, s in enumerate(out.shape)]
    tr.emit(out, ivars(init), "=", c(0, dt), init)
    tr.emit(out, xidx, "+=", div(cast(g.read(oidx), dt), _as_expr(divisor, dt)), o_lps + r_lps, guards)
    return stored(out)


def _mul_div(acc: SExpr | int, v: SExpr | int, dt: str) -> SExpr | int:
    if isinstance(acc, int) and isinstance(v, int):
        return acc * v
    return mul(_as_expr(acc, dt), _as_expr(v, dt)) if not (isinstance(acc, int) and acc == 1) else v


@template("aten.upsample_nearest1d.vec", k=1)
@template("aten.upsample_nearest2d.vec", "aten.upsample_nearest2d.default", k=2)
@template("aten.upsample_nearest3d.vec", k=3)
@template("aten._upsample_nearest_exact1d.vec", k=1, exact=True)
@template("aten._upsample_nearest_exact2d.vec", k=2, exact=True)
@template("aten._upsample_nearest_exact3d.vec", k=3, exact=True)
def _upsample_nearest(tr: Translator, node: AtenNode, k: int, exact: bool = False) -> Val:
    """Nearest upsampling as a view: src = floor(dst * in / out) (or floor((dst + 0.5) * in / out))."""
    x = tr.val(node.args[0])
    shape = tr.out_meta().shape
    isp, osp = x.shape[x.ndim - k:], shape[len(shape) - k:]
    scales = tr.arg(2, "scale_factors", None)
    if scales and any(float(s) * i != o for s, i, o in zip(scale_list(scales, k), isp, osp, strict=True)):
        raise tr.error("nearest upsampling with a non-exact scale factor has no template")
    lead = x.ndim - k

    def index_map(idx):
        out = list(idx[:lead])
        for d in range(k):
            e = idx[lead + d]
            if not isinstance(e, AffExpr):
                raise ValueError("an indirect index into an upsampled view")
            out.append((e * 2 * isp[d] + isp[d]) // (2 * osp[d]) if exact else (e * isp[d]) // osp[d])
        return out

    return view(x, shape, index_map)


@template("aten.upsample_nearest1d_backward.default", k=1)
@template("aten.upsample_nearest2d_backward.default", k=2)
@template("aten.upsample_nearest3d_backward.default", k=3)
@template("aten._upsample_nearest_exact1d_backward.default", k=1, exact=True)
@template("aten._upsample_nearest_exact2d_backward.default", k=2, exact=True)
@template("aten._upsample_nearest_exact3d_backward.default", k=3, exact=True)
def _upsample_nearest_backward(tr: Translator, node: AtenNode, k: int, exact: bool = False) -> Val:
    """(grad_output, output_size, input_size, scales...) -> gx: each output element's gradient added to
    the input element it copied. Integer factors f: the reduction `gx[.., h] = sum_{a < f} g[.., h*f
    + a]`; otherwise the scatter `gx[.., src(o)] += g[.., o]` with the forward's `src`."""
    g = tr.val(node.args[0])
    out = tr.result()
    dt = out.dtype
    nd = len(out.shape)
    isp, osp = out.shape[nd - k:], g.shape[g.ndim - k:]
    names = {1: ["scales"], 2: ["scales_h", "scales_w"], 3: ["scales_d", "scales_h", "scales_w"]}[k]
    scales = [tr.arg(3 + d, n, None) for d, n in enumerate(names)]
    if any(s is not None and float(s) * i != o for s, i, o in zip(scales, isp, osp, strict=True)):
        raise tr.error("nearest upsampling with a non-exact scale factor has no template")
    lead = nd - k
    l_lps = [Loop(f"i{d}", 0, s) for d, s in enumerate(out.shape[:lead])]
    li = ivars(l_lps)
    if all(o % i == 0 for i, o in zip(isp, osp, strict=True)):
        h_lps = [Loop(f"h{d}", 0, s) for d, s in enumerate(isp)]
        a_lps = [Loop(f"a{d}", 0, o // i) for d, (i, o) in enumerate(zip(isp, osp, strict=True))]
        h, a = ivars(h_lps), ivars(a_lps)
        tidx = [*li, *h]
        tr.emit(out, tidx, "=", c(0, dt), l_lps + h_lps)
        src = [h[d] * (osp[d] // isp[d]) + a[d] for d in range(k)]
        tr.emit(out, tidx, "+=", cast(g.read([*li, *src]), dt), l_lps + h_lps + a_lps)
        return stored(out)
    init = [Loop(f"i{d}", 0, s) for d, s in enumerate(out.shape)]
    tr.emit(out, ivars(init), "=", c(0, dt), init)
    o_lps = [Loop(f"o{d}", 0, s) for d, s in enumerate(osp)]
    o = ivars(o_lps)
    tgt = [(o[d] * 2 * isp[d] + isp[d]) // (2 * osp[d]) if exact else (o[d] * isp[d]) // osp[d]
           for d in range(k)]
    tr.emit(out, [*li, *tgt], "+=", cast(g.read([*li, *o]), dt), l_lps + o_lps)
    return stored(out)


@template("aten.im2col.default")
def _im2col(tr: Translator, node: AtenNode) -> Val:
    """F.unfold: out[n, (c, r, s), (p, q)] = x[n, c, p*sh + r*dh - ph, q*sw + s*dw - pw]. A view
    (quasi-affine in the merged dims) of the input, or of its zero-padded copy when padded."""
    x = tr.val(node.args[0])
    kh, kw = int_tuple(node.args[1], 2)
    dh, dw = int_tuple(node.args[2], 2)
    ph, pw = int_tuple(node.args[3], 2)
    sh, sw = int_tuple(node.args[4], 2)
    shape = tr.out_meta().shape
    if ph or pw:
        x = padded(tr, x, {x.ndim - 2: (ph, ph), x.ndim - 1: (pw, pw)})
    W = x.shape[-1]
    lw = (W - dw * (kw - 1) - 1) // sw + 1
    lead = x.ndim - 3  # batch dims (0 or 1)

    def index_map(idx):
        k, l_ = idx[-2], idx[-1]
        if not (isinstance(k, AffExpr) and isinstance(l_, AffExpr)):
            raise ValueError("an indirect index into an im2col view")
        ch, r, s = k // (kh * kw), (k // kw) % kh, k % kw
        p, q = l_ // lw, l_ % lw
        return [*idx[:lead], ch, p * sh + r * dh, q * sw + s * dw]

    return view(x, shape, index_map)


def _linear_scales(tr: Translator, k: int, vec: bool, first: int) -> list[float | None]:
    """The scale factors of a k-d linear upsampling (or its gradient), from argument `first` on:
    `.vec`'s `scale_factors` list, or `.default`'s one scale per dim (None: `in / out`)."""
    if vec:
        scales = tr.arg(first, "scale_factors", None)
        return list(scale_list(scales, k)) if scales else [None] * k
    names = {1: ["scales"], 2: ["scales_h", "scales_w"], 3: ["scales_d", "scales_h", "scales_w"]}[k]
    return [float(s) if s else None for s in (tr.arg(first + d, n, None) for d, n in enumerate(names))]  # type: ignore[arg-type]


def _linear_coords(idx: Sequence[AffExpr], isp: Sequence[int], osp: Sequence[int], align: bool,
                   sf: Sequence[float | None], dt: str) -> list[tuple[SExpr, SExpr, SExpr]]:
    """Per spatial dim (i0, i1, lambda) (the last len(isp) dims of `idx`): the two source indices of
    output position `idx` and the weight of i1, in f32 as torch computes them. Where a given scale
    factor puts the last source positions past the input (`.default(x, [9], False, 1.3)` of 5
    elements), torch's `guard_index_and_lambda`: i0 = min(floor(src), in - 1), lambda = min(src -
    i0, 1); elsewhere i0 = floor(src) <= in - 1 and 0 <= lambda < 1 need no clamp."""
    k = len(isp)
    coords = []
    for d in range(k):
        n_in, n_out = isp[d], osp[d]
        src = source_index(index_value(idx[len(idx) - k + d], "f32"), n_in, n_out, align, sf[d])
        i0 = cast(src, "i64")  # src >= 0: truncation is floor
        last = (n_out - 0.5) * (1.0 / sf[d] if sf[d] else n_in / n_out) - 0.5
        past = not align and last > n_in - 1e-3  # the last floor(src) may reach n_in (f32 rounding)
        if past:
            i0 = minimum(i0, c(n_in - 1, "i64"))
        i1 = minimum(add(i0, c(1, "i64")), c(n_in - 1, "i64"))
        lam = sub(src, cast(i0, "f32"))
        coords.append((i0, i1, cast(minimum(lam, c(1.0, "f32")) if past else lam, dt)))
    return coords


@template("aten.upsample_linear1d.vec", k=1, vec=True)
@template("aten.upsample_linear1d.default", k=1, vec=False)
@template("aten.upsample_bilinear2d.vec", k=2, vec=True)
@template("aten.upsample_bilinear2d.default", k=2, vec=False)
@template("aten.upsample_trilinear3d.vec", k=3, vec=True)
@template("aten.upsample_trilinear3d.default", k=3, vec=False)
def _upsample_linear(tr: Translator, node: AtenNode, k: int, vec: bool) -> Val:
    """upsample_linear1d / bilinear2d / trilinear3d: each output reads its 2^k neighbours at indices
    computed from the output position (indirect reads), weights from the fractional source position,
    in f32 as torch computes them (align_corners both ways, explicit scale factors honoured), blended
    as the CPU kernel nests them: `(1 - l0) * f(i0) + l0 * f(i1)` along the first spatial dim, f the
    same blend of the remaining dims (the last one innermost)."""
    x = tr.val(node.args[0])
    align = bool(tr.arg(2, "align_corners", False))
    sf = _linear_scales(tr, k, vec, 3)
    out = tr.result()
    dt = out.dtype
    lps = [Loop(f"i{d}", 0, s) for d, s in enumerate(out.shape)]
    idx = ivars(lps)
    lead = list(idx[:len(idx) - k])
    coords = _linear_coords(idx, x.shape[x.ndim - k:], out.shape[len(out.shape) - k:], align, sf, dt)
    one = c(1, dt)

    def blend(d: int, at: list[SExpr]) -> SExpr:
        if d == k:
            return cast(x.read([*lead, *at]), dt)
        i0, i1, lam = coords[d]
        return add(mul(sub(one, lam), blend(d + 1, [*at, i0])), mul(lam, blend(d + 1, [*at, i1])))

    tr.emit(out, idx, "=", blend(0, []), lps)
    return stored(out)


@template("aten.upsample_bilinear2d_backward.default")
def _bilinear_backward(tr: Translator, node: AtenNode) -> Val:
    """(grad_output, output_size, input_size, align_corners, scales_h, scales_w) -> gx: zero fill,
    then each output's gradient scattered to its four source neighbours with the forward's weights
    (four indirect `+=` writes; at the border i1 == i0 and both shares land on one element)."""
    g = tr.val(node.args[0])
    align = bool(tr.arg(3, "align_corners", False))
    sf = _linear_scales(tr, 2, False, 4)
    out = tr.result()
    dt = out.dtype
    isp, osp = out.shape[-2:], g.shape[-2:]
    init = [Loop(f"i{d}", 0, s) for d, s in enumerate(out.shape)]
    tr.emit(out, ivars(init), "=", c(0, dt), init)
    lps = [Loop(f"i{d}", 0, s) for d, s in enumerate(g.shape)]
    idx = ivars(lps)
    lead = list(idx[:-2])
    (h0, h1, lh), (w0, w1, lw) = _linear_coords(idx, isp, osp, align, sf, dt)
    gv = cast(g.read(idx), dt)
    one = c(1, dt)
    for hh, wh in ((h0, sub(one, lh)), (h1, lh)):
        for ww, wv in ((w0, sub(one, lw)), (w1, lw)):
            tr.emit(out, [*lead, hh, ww], "+=", mul(mul(wh, wv), gv), lps)
    return stored(out)
