"""Normalisations. Statistics are two-pass over the normalised dims into small locals (mean,
then rstd = rsqrt(sum (x - mean)^2 / N + eps)); the output is one elementwise statement.
Batch norm in eval folds its running statistics into a per-channel scale and shift first, as the
eager kernel does, so the per-element work is one multiply-add. Batch norm in training mode
uses the batch statistics (and, when the graph uses them, updates the running statistics)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from solar_compiler.frontends.builder.exprs import add, c, cast, div, mul, sub, un
from solar_compiler.frontends.builder.translator import Translator
from solar_compiler.frontends.builder.values import Loop, Val, ivars, stored
from solar_compiler.frontends.captured_program import AtenNode
from solar_compiler.loopir.affine import AffExpr
from solar_compiler.loopir.ast import Read, SExpr, TensorDecl

from ..registry import template

Reader = Callable[[list[AffExpr], list[AffExpr]], SExpr]


def norm_stats(tr: Translator, read: Reader, outer: Sequence[int], inner: Sequence[int], eps: float,
               dt: str, hint: str, mean: TensorDecl | None = None, rstd: TensorDecl | None = None,
               keep_ssd: bool = False, rms: bool = False) \
        -> tuple[TensorDecl | None, TensorDecl, TensorDecl | None]:
    """(mean, rstd, ssd) locals over `outer`; `read(o, r)` is the input element. The target
    decls may have extra size-1 dims (torch's keepdim layouts): indices are padded with 0."""
    n = math.prod(inner)
    o_lps = [Loop(f"i{d}", 0, s) for d, s in enumerate(outer)]
    r_lps = [Loop(f"k{d}", 0, s) for d, s in enumerate(inner)]
    o, r = ivars(o_lps), ivars(r_lps)

    def at(t: TensorDecl) -> list[AffExpr]:
        extra = len(t.shape) - len(outer)
        return _pad_idx(t, o, extra)

    def rd(t: TensorDecl) -> SExpr:
        return Read(t.name, tuple(at(t)), t.dtype)

    x = lambda: cast(read(o, r), dt)  # noqa: E731
    m: TensorDecl | None = None
    if not rms:
        m = mean or tr.declare(f"{hint}_mean", outer, dt)
        tr.emit(m, at(m), "=", c(0, dt), o_lps)
        tr.emit(m, at(m), "+=", x(), o_lps + r_lps)
        tr.emit(m, at(m), "=", div(rd(m), c(n, dt)), o_lps)
    rs = rstd or tr.declare(f"{hint}_rstd", outer, dt)
    ssd = tr.declare(f"{hint}_ssd", outer, dt) if keep_ssd else rs
    dev = (lambda: sub(x(), rd(m))) if m is not None else x
    tr.emit(ssd, at(ssd), "=", c(0, dt), o_lps)
    tr.emit(ssd, at(ssd), "+=", mul(dev(), dev()), o_lps + r_lps)
    tr.emit(rs, at(rs), "=", un("rsqrt", add(div(rd(ssd), c(n, dt)), c(eps, dt))), o_lps)
    return m, rs, (ssd if keep_ssd else None)


def _pad_idx(t: TensorDecl, o: list[AffExpr], extra: int) -> list[AffExpr]:
    """Indices of `o` into `t`, whose size-1 dims beyond `o` (keepdim layouts) take index 0: the
    trailing ones where `t` ends in `extra` size-1 dims (torch's `native_layer_norm` statistics,
    `[*outer, 1, ...]`; with a size-1 outer dim, `[1, T, 1]`, the first size-1 dim is `o`'s),
    else the first ones."""
    if extra <= 0:
        return list(o)
    if all(n == 1 for n in t.shape[len(t.shape) - extra:]):
        return [*o, *[AffExpr.lit(0)] * extra]
    out: list[AffExpr] = []
    it = iter(o)
    budget = extra
    for n in t.shape:
        if n == 1 and budget > 0:
            out.append(AffExpr.lit(0))
            budget -= 1
        else:
            out.append(next(it))
    return out


def _affine_out(tr: Translator, out: TensorDecl, x: Val, idx: list[AffExpr], normed: SExpr,
                w: Val | None, b: Val | None, widx: list[AffExpr], lps: list[Loop]) -> None:
    v = normed
    if w is not None:
        v = mul(v, cast(w.read(widx), out.dtype))
    if b is not None:
        v = add(v, cast(b.read(widx), out.dtype))
    tr.emit(out, idx, "=", v, lps)


# ---- layer norm / RMS norm --------------------------------------------------------------------
@template("aten.layer_norm.default", native=False)
@template("aten.native_layer_norm.default", native=True)
@template("aten.rms_norm.default", native=False, rms=True)
def _layer_norm(tr: Translator, node: AtenNode, native: bool, rms: bool = False):
    x = tr.val(node.args[0])
    shape = list(node.args[1])
    k = len(shape)
    w, b = tr.opt_val(tr.arg(2, "weight")), (None if rms else tr.opt_val(tr.arg(3, "bias")))
    eps = tr.arg(3 if rms else 4, "eps", None)
    out = tr.result(0)
    dt = out.dtype
    if eps is None:
        eps = {"f32": 1.1920928955078125e-07, "f64": 2.220446049250313e-16}.get(dt, 0.0009765625)
    outer, inner = x.shape[:x.ndim - k], x.shape[x.ndim - k:]
    mean_t = tr.result(1) if native and tr.used(1) else None
    rstd_t = tr.result(2) if native and tr.used(2) else None
    m, rs, _ = norm_stats(tr, lambda o, r: x.read(o + r), outer, inner, float(eps), dt, out.name,
                          mean_t, rstd_t, rms=rms)
    lps = [Loop(f"i{d}", 0, s) for d, s in enumerate(outer)] + \
        [Loop(f"k{d}", 0, s) for d, s in enumerate(inner)]
    idx = ivars(lps)
    o, r = idx[:len(outer)], idx[len(outer):]
    xv = cast(x.read(idx), dt)
    centred = sub(xv, Read(m.name, tuple(_pad_idx(m, o, len(m.shape) - len(o))), dt)) if m else xv
    normed = mul(centred, Read(rs.name, tuple(_pad_idx(rs, o, len(rs.shape) - len(o))), dt))
    _affine_out(tr, out, x, idx, normed, w, b, r, lps)
    if native:
        return (stored(out), stored(m) if mean_t is not None else None,
                stored(rs) if rstd_t is not None else None)
    return stored(out)


# ---- batch norm -------------------------------------------------------------------------------
def _bn_eval(tr: Translator, x: Val, w: Val | None, b: Val | None, rm: Val, rv: Val,
             eps: float) -> TensorDecl:
    out = tr.result(0)
    dt = out.dtype
    C = x.shape[1]
    ch = [Loop("i0", 0, C)]
    (ci,) = ivars(ch)
    sc = tr.declare(f"{out.name}_scale", (C,), dt)
    sh = tr.declare(f"{out.name}_shift", (C,), dt)
    inv = un("rsqrt", add(cast(rv.read([ci]), dt), c(eps, dt)))
    tr.emit(sc, [ci], "=", mul(cast(w.read([ci]), dt), inv) if w is not None else inv, ch)
    shift = mul(cast(rm.read([ci]), dt), Read(sc.name, (ci,), dt))
    tr.emit(sh, [ci], "=", sub(cast(b.read([ci]), dt), shift) if b is not None else un("neg", shift), ch)
    lps = [Loop(f"i{d}", 0, s) for d, s in enumerate(x.shape)]
    idx = ivars(lps)
    tr.emit(out, idx, "=", add(mul(cast(x.read(idx), dt), Read(sc.name, (idx[1],), dt)),
                               Read(sh.name, (idx[1],), dt)), lps)
    return out


def _bn_train(tr: Translator, node: AtenNode, x: Val, w: Val | None, b: Val | None, rm: Val | None,
              rv: Val | None, momentum: float, eps: float) -> tuple:
    out = tr.result(0)
    dt = out.dtype
    C = x.shape[1]
    inner = [x.shape[0], *x.shape[2:]]
    mean_t = tr.result(1) if tr.used(1) else None
    rstd_t = tr.result(2) if tr.used(2) else None
    need_running = (tr.used(3) or tr.used(4)) and rm is not None
    read = lambda o, r: x.read([r[0], o[0], *r[1:]])  # noqa: E731
    m, rs, ssd = norm_stats(tr, read, [C], inner, eps, dt, out.name, mean_t, rstd_t, keep_ssd=need_running)
    lps = [Loop(f"i{d}", 0, s) for d, s in enumerate(x.shape)]
    idx = ivars(lps)
    normed = mul(sub(cast(x.read(idx), dt), Read(m.name, (idx[1],), dt)), Read(rs.name, (idx[1],), dt))
    _affine_out(tr, out, x, idx, normed, w, b, [idx[1]], lps)
    results: list[Val | None] = [stored(out), stored(m) if mean_t else None, stored(rs) if rstd_t else None]
    if need_running:
        n = math.prod(inner)
        ch = [Loop("i0", 0, C)]
        (ci,) = ivars(ch)
        for k, (run, stat) in enumerate(((rm, lambda: Read(m.name, (ci,), dt)),
                                         (rv, lambda: div(Read(ssd.name, (ci,), dt), c(max(n - 1, 1), dt)))),
                                        start=3):
            if not tr.used(k):
                results.append(None)
                continue
            t = tr.result(k)
            v = add(mul(cast(run.read([ci]), dt), c(1 - momentum, dt)), mul(stat(), c(momentum, dt)))
            tr.emit(t, [ci], "=", v, ch)
            results.append(stored(t))
    return tuple(results)


@template("aten._native_batch_norm_legit_no_training.default", kind="no_training")
@template("aten._native_batch_norm_legit.default", "aten._native_batch_norm_legit_functional.default",
          "aten.native_batch_norm.default", kind="legit")
@template("aten._native_batch_norm_legit.no_stats", kind="no_stats")
def _bn_legit(tr: Translator, node: AtenNode, kind: str):
    """_native_batch_norm_legit{_no_training, , .no_stats, _functional} and native_batch_norm."""
    a = list(node.args)
    x, w, b = tr.val(a[0]), tr.opt_val(a[1]), tr.opt_val(a[2])
    if kind == "no_stats":
        rm = rv = None
        training, momentum, eps = a[3], a[4], a[5]
    elif kind == "no_training":
        rm, rv = tr.val(a[3]), tr.val(a[4])
        training, momentum, eps = False, a[5], a[6]
    else:
        rm, rv = tr.opt_val(a[3]), tr.opt_val(a[4])
        training, momentum, eps = a[5], a[6], a[7]
    if not training:
        if rm is None or rv is None:
            raise tr.error("batch norm in eval mode without running statistics")
        out = _bn_eval(tr, x, w, b, rm, rv, float(eps))
        # eval mode saves no batch statistics: a training step's backward passes the empty saved
        # tensors along (and reads the running ones), so a used one is an empty declaration
        rest = tuple(stored(tr.result(i)) if tr.used(i) and math.prod(tr.out_meta(i).shape) == 0 else None
                     for i in range(1, len(node.outputs)))
        return (stored(out),) + rest
    return _bn_train(tr, node, x, w, b, rm, rv, float(momentum), float(eps))


# ---- group norm -------------------------------------------------------------------------------
@template("aten.group_norm.default", native=False)
@template("aten.native_group_norm.default", native=True)
def _group_norm(tr: Translator, node: AtenNode, native: bool):
    x = tr.val(node.args[0])
    if native:  # native_group_norm(x, w, b, N, C, HxW, group, eps)
        w, b = tr.opt_val(node.args[1]), tr.opt_val(node.args[2])
        G, eps = int(node.args[6]), float(node.args[7])
    else:  # group_norm(x, num_groups, w, b, eps, cudnn)
        G = int(node.args[1])
        w, b = tr.opt_val(tr.arg(2, "weight")), tr.opt_val(tr.arg(3, "bias"))
        eps = float(tr.arg(4, "eps", 1e-5))
    N, C, S = x.shape[0], x.shape[1], list(x.shape[2:])
    Cg = C // G
    out = tr.result(0)
    dt = out.dtype
    mean_t = tr.result(1) if native and tr.used(1) else None
    rstd_t = tr.result(2) if native and tr.used(2) else None
    read = lambda o, r: x.read([o[0], o[1] * Cg + r[0], *r[1:]])  # noqa: E731
    m, rs, _ = norm_stats(tr, read, [N, G], [Cg, *S], eps, dt, out.name, mean_t, rstd_t)
    lps = [Loop("i0", 0, N), Loop("i1", 0, G), Loop("k0", 0, Cg)] + \
        [Loop(f"k{d + 1}", 0, s) for d, s in enumerate(S)]
    n, g, cg, *sp = ivars(lps)
    ch = g * Cg + cg
    idx = [n, ch, *sp]
    normed = mul(sub(cast(x.read(idx), dt), Read(m.name, (n, g), dt)), Read(rs.name, (n, g), dt))
    _affine_out(tr, out, x, idx, normed, w, b, [ch], lps)
    if native:
        return (stored(out), stored(m) if mean_t else None, stored(rs) if rstd_t else None)
    return stored(out)


@template("aten.instance_norm.default")
def _instance_norm(tr: Translator, node: AtenNode) -> Val:
    x = tr.val(node.args[0])
    w, b = tr.opt_val(tr.arg(1, "weight")), tr.opt_val(tr.arg(2, "bias"))
    use_input_stats = tr.arg(5, "use_input_stats", True)
    eps = float(tr.arg(7, "eps", 1e-5))
    if not use_input_stats:
        raise tr.error("instance norm with running statistics has no template")
    N, C, S = x.shape[0], x.shape[1], list(x.shape[2:])
    out = tr.result(0)
    dt = out.dtype
    m, rs, _ = norm_stats(tr, lambda o, r: x.read([o[0], o[1], *r]), [N, C], S, eps, dt, out.name)
    lps = [Loop(f"i{d}", 0, s) for d, s in enumerate(x.shape)]
    idx = ivars(lps)
    normed = mul(sub(cast(x.read(idx), dt), Read(m.name, (idx[0], idx[1]), dt)),
                 Read(rs.name, (idx[0], idx[1]), dt))
    _affine_out(tr, out, x, idx, normed, w, b, [idx[1]], lps)
    return stored(out)


@template("aten.batch_norm.default")
def _batch_norm(tr: Translator, node: AtenNode):
    """aten.batch_norm (x, w, b, rm, rv, training, momentum, eps, cudnn): one output."""
    a = list(node.args)
    x, w, b, rm, rv = tr.val(a[0]), tr.opt_val(a[1]), tr.opt_val(a[2]), tr.opt_val(a[3]), tr.opt_val(a[4])
    training, momentum, eps = a[5], float(a[6]), float(a[7])
    if not training and rm is not None and rv is not None:
        return stored(_bn_eval(tr, x, w, b, rm, rv, eps))
    return _bn_train(tr, node, x, w, b, rm, rv, momentum, eps)[0]

