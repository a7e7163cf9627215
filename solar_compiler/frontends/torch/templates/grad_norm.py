"""Backward of layer norm, group norm and batch norm (`output_mask` picks the gradients computed), from the
statistics the forward saved: row (channel) sums into small locals, then one statement per
gradient, as the eager kernels do (`layer_norm_backward_cpu`, `batch_norm_backward_cpu`).

Layer norm over the last dims (N elements each), `xhat = (x - mean) * rstd`, `gw_ = g * w`:
`gx = rstd * (gw_ - (sum gw_ + xhat * sum gw_ * xhat) / N)`; `gw = sum_rows g * xhat`;
`gb = sum_rows g`; group norm is the same per (sample, group) of `M = C/G * HxW` elements, its
weight and bias gradients per channel. Batch norm over every dim but the channel (M elements
each): training mode
`gx = (g - (x - mean) * dot * invstd^2 / M - sum g / M) * invstd * w` with `dot = sum g * (x -
mean)`; eval mode (running statistics, constants of the step) `gx = g * invstd * w`; both
`gw = dot * invstd`, `gb = sum g`."""

from __future__ import annotations

import math
from collections.abc import Sequence

from solar_compiler.frontends.builder.exprs import add, c, cast, div, mul, sub, un
from solar_compiler.frontends.builder.translator import Translator
from solar_compiler.frontends.builder.values import Loop, Val, ivars, stored
from solar_compiler.frontends.captured_program import AtenNode
from solar_compiler.loopir.affine import AffExpr
from solar_compiler.loopir.ast import Read, SExpr, TensorDecl

from ..registry import template


def _stat(v: Val, o: Sequence[AffExpr]) -> list[AffExpr]:
    """Indices of a saved statistic (outer dims, then size-1 keepdim dims) at outer index `o`."""
    return [*o, *[AffExpr.lit(0)] * (v.ndim - len(o))]


def _sum(tr: Translator, target: TensorDecl | str, shape: Sequence[int], lps: list[Loop],
         tidx: list[AffExpr], value: SExpr, dt: str) -> TensorDecl:
    """`target` (a new local when a name is given) of `shape` = 0, then `+= value` over `lps`, whose
    first loops are the target's own (indexed by `tidx`)."""
    t = tr.declare(target, shape, dt) if isinstance(target, str) else target
    own = lps[:len(shape)]
    tr.emit(t, tidx, "=", c(0, t.dtype), own)
    tr.emit(t, tidx, "+=", cast(value, t.dtype), lps)
    return t


def _rd(t: TensorDecl, idx: Sequence[AffExpr]) -> SExpr:
    return Read(t.name, tuple(idx), t.dtype)


@template("aten.native_layer_norm_backward.default")
def _layer_norm_backward(tr: Translator, node: AtenNode) -> tuple:
    """(grad_out, input, normalized_shape, mean, rstd, weight, bias, output_mask)."""
    g, x = tr.val(node.args[0]), tr.val(node.args[1])
    k = len(node.args[2])
    mean, rstd = tr.val(node.args[3]), tr.val(node.args[4])
    w = tr.opt_val(node.args[5])
    mask = [bool(m) for m in node.args[7]]
    outer, inner = list(x.shape[:x.ndim - k]), list(x.shape[x.ndim - k:])
    n = math.prod(inner)
    dt = x.dtype if x.dtype in ("f32", "f64") else "f32"  # half inputs: statistics in f32, as eager
    o_lps, r_lps = [Loop(f"i{d}", 0, s) for d, s in enumerate(outer)], [Loop(f"k{d}", 0, s) for d, s in
                                                                          enumerate(inner)]
    o, r = ivars(o_lps), ivars(r_lps)
    idx = o + r
    gv, xv = cast(g.read(idx), dt), cast(x.read(idx), dt)
    rs = cast(rstd.read(_stat(rstd, o)), dt)
    xhat = mul(sub(xv, cast(mean.read(_stat(mean, o)), dt)), rs)
    gw_ = mul(gv, cast(w.read(r), dt)) if w is not None else gv
    gx = gw = gb = None
    if mask[0]:
        out = tr.result(0)
        s1 = _sum(tr, f"{out.name}_sum", outer, o_lps + r_lps, o, gw_, dt)
        s2 = _sum(tr, f"{out.name}_dot", outer, o_lps + r_lps, o, mul(gw_, xhat), dt)
        corr = div(add(_rd(s1, o), mul(xhat, _rd(s2, o))), c(n, dt))
        tr.emit(out, idx, "=", cast(mul(rs, sub(gw_, corr)), out.dtype), o_lps + r_lps)
        gx = stored(out)
    rows = r_lps + o_lps  # the weight's gradients reduce over the outer dims
    if mask[1] and w is not None:
        out = tr.result(1)
        tr.emit(out, r, "=", c(0, out.dtype), r_lps)
        tr.emit(out, r, "+=", cast(mul(gv, xhat), out.dtype), rows)
        gw = stored(out)
    if mask[2] and tr.opt_val(node.args[6]) is not None:
        out = tr.result(2)
        tr.emit(out, r, "=", c(0, out.dtype), r_lps)
        tr.emit(out, r, "+=", cast(gv, out.dtype), rows)
        gb = stored(out)
    return gx, gw, gb


@template("aten.native_batch_norm_backward.default")
def _batch_norm_backward(tr: Translator, node: AtenNode) -> tuple:
    """(grad_out, input, weight, running_mean, running_var, save_mean, save_invstd, train, eps,
    output_mask)."""
    a = list(node.args)
    g, x = tr.val(a[0]), tr.val(a[1])
    w = tr.opt_val(a[2])
    train, eps = bool(a[7]), float(a[8])
    mask = [bool(m) for m in a[9]]
    mean_v, var_v = (tr.opt_val(a[5]), tr.opt_val(a[6])) if train else (tr.opt_val(a[3]), tr.opt_val(a[4]))
    if mean_v is None or var_v is None:
        raise tr.error("native_batch_norm_backward without the " +
                       ("saved batch statistics" if train else "running statistics"))
    C = x.shape[1]
    M = math.prod(x.shape) // C
    dt = x.dtype if x.dtype in ("f32", "f64") else "f32"
    ch = [Loop("ch", 0, C)]
    (ci,) = ivars(ch)
    hint = tr.out_meta(next((i for i in range(3) if mask[i]), 0)).name
    if train:
        invstd = lambda i: cast(var_v.read([i]), dt)  # noqa: E731
    else:
        inv_t = tr.declare(f"{hint}_invstd", (C,), dt)
        tr.emit(inv_t, [ci], "=", un("rsqrt", add(cast(var_v.read([ci]), dt), c(eps, dt))), ch)
        invstd = lambda i: _rd(inv_t, [i])  # noqa: E731
    # the channel loop outermost, the reduced dims inside it
    lps = [Loop("ch", 0, C), *[Loop(f"i{d}", 0, s) for d, s in enumerate(x.shape) if d != 1]]
    full = [AffExpr.var("ch") if d == 1 else AffExpr.var(f"i{d}") for d in range(x.ndim)]
    gv = cast(g.read(full), dt)
    xc = sub(cast(x.read(full), dt), cast(mean_v.read([ci]), dt))
    need_sum = mask[2] or (mask[0] and train)
    need_dot = mask[1] or (mask[0] and train)
    # the bias gradient is the sum itself
    sum_t: TensorDecl | str = tr.result(2) if mask[2] else f"{hint}_sum"
    sum_g = _sum(tr, sum_t, (C,), lps, [ci], gv, dt) if need_sum else None
    dot = _sum(tr, f"{hint}_dot", (C,), lps, [ci], mul(gv, xc), dt) if need_dot else None
    gx = gw = gb = None
    if mask[0]:
        out = tr.result(0)
        scale = tr.declare(f"{out.name}_scale", (C,), dt)
        inv = invstd(ci)
        tr.emit(scale, [ci], "=", mul(inv, cast(w.read([ci]), dt)) if w is not None else inv, ch)
        if train:
            assert sum_g is not None and dot is not None
            proj = tr.declare(f"{out.name}_proj", (C,), dt)
            tr.emit(proj, [ci], "=", div(mul(_rd(dot, [ci]), mul(inv, inv)), c(M, dt)), ch)
            gmean = tr.declare(f"{out.name}_gmean", (C,), dt)
            tr.emit(gmean, [ci], "=", div(cast(_rd(sum_g, [ci]), dt), c(M, dt)), ch)
            value = mul(sub(sub(gv, mul(xc, _rd(proj, [ci]))), _rd(gmean, [ci])), _rd(scale, [ci]))
        else:
            value = mul(gv, _rd(scale, [ci]))
        tr.emit(out, full, "=", cast(value, out.dtype), lps)
        gx = stored(out)
    if mask[1]:
        assert dot is not None
        out = tr.result(1)
        tr.emit(out, [ci], "=", cast(mul(_rd(dot, [ci]), invstd(ci)), out.dtype), ch)
        gw = stored(out)
    if mask[2]:
        assert sum_g is not None
        gb = stored(sum_g)
    return gx, gw, gb


@template("aten.native_group_norm_backward.default")
def _group_norm_backward(tr: Translator, node: AtenNode) -> tuple:
    """(grad_out, input, mean [N, G], rstd [N, G], weight, N, C, HxW, group, output_mask)."""
    a = list(node.args)
    g, x, mean, rstd = (tr.val(a[i]) for i in range(4))
    w = tr.opt_val(a[4])
    G = int(a[8])
    mask = [bool(m) for m in a[9]]
    N, C = x.shape[0], x.shape[1]
    Cg = C // G
    sp = list(x.shape[2:])
    M = Cg * math.prod(sp)
    dt = x.dtype if x.dtype in ("f32", "f64") else "f32"
    n_l, g_l, c_l = Loop("nb", 0, N), Loop("grp", 0, G), Loop("cc", 0, Cg)
    s_lps = [Loop(f"s{d}", 0, n) for d, n in enumerate(sp)]
    n, grp, cc = (AffExpr.var(v) for v in ("nb", "grp", "cc"))
    s_idx = ivars(s_lps)
    ch = grp * Cg + cc
    full = [n, ch, *s_idx]
    gv, xv = cast(g.read(full), dt), cast(x.read(full), dt)
    rs = cast(rstd.read([n, grp]), dt)
    xhat = mul(sub(xv, cast(mean.read([n, grp]), dt)), rs)
    gw_ = mul(gv, cast(w.read([ch]), dt)) if w is not None else gv
    hint = tr.out_meta(next((i for i in range(3) if mask[i]), 0)).name
    gx = gw = gb = None
    if mask[0]:
        out = tr.result(0)
        lps = [n_l, g_l, c_l, *s_lps]
        s1 = _sum(tr, f"{hint}_sum", (N, G), lps, [n, grp], gw_, dt)
        s2 = _sum(tr, f"{hint}_dot", (N, G), lps, [n, grp], mul(gw_, xhat), dt)
        corr = div(add(_rd(s1, [n, grp]), mul(xhat, _rd(s2, [n, grp]))), c(M, dt))
        tr.emit(out, full, "=", cast(mul(rs, sub(gw_, corr)), out.dtype), lps)
        gx = stored(out)
    per_channel = [g_l, c_l, n_l, *s_lps]  # channel loops first, the reduction over samples and space
    if mask[1] and w is not None:
        out = tr.result(1)
        tr.emit(out, [ch], "=", c(0, out.dtype), [g_l, c_l])
        tr.emit(out, [ch], "+=", cast(mul(gv, xhat), out.dtype), per_channel)
        gw = stored(out)
    if mask[2]:
        out = tr.result(2)
        tr.emit(out, [ch], "=", c(0, out.dtype), [g_l, c_l])
        tr.emit(out, [ch], "+=", cast(gv, out.dtype), per_channel)
        gb = stored(out)
    return gx, gw, gb
