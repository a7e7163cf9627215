"""scaled_dot_product_attention, with and without a causal mask, one template.

    S[b, l, m]  = sum_e q[b, l, e] * k[b, m, e]                 (matrix)
    mx[b, l]    = max_m  z(b, l, m)          z = scale * S (+ mask)
    den[b, l]   = sum_m  exp(z - mx)
    P[b, l, m]  = exp(z - mx) / den
    out[b, l, d] = sum_m P[b, l, m] * v[b, m, d]                (matrix)

The causal mask is the guard `m <= l` on every statement (torch's top-left aligned tril), so
masked scores are neither computed nor read. A boolean mask selects -inf; a float mask is added.
Grouped-query attention reads key/value head `h // (Hq / Hkv)`. Dropout inside attention has no
template (it would need the random mask torch draws internally).

`_scaled_dot_product_flash_attention_for_cpu` (the forward of a CPU training step's joint graph,
which saves the row log-sum-exp for the backward) is the same template with a second output,
`lse[b, l] = mx + log(den)`."""

from __future__ import annotations

import math

from solar_compiler.frontends.builder.exprs import INF, add, c, cast, div, mul, scale, select, sub, un
from solar_compiler.frontends.builder.index_maps import bcast_index
from solar_compiler.frontends.builder.translator import Translator
from solar_compiler.frontends.builder.values import Loop, Val, stored
from solar_compiler.frontends.captured_program import AtenNode
from solar_compiler.loopir.affine import AffCond, AffExpr
from solar_compiler.loopir.ast import Read, SExpr

from ..registry import template


@template("aten.scaled_dot_product_attention.default", with_lse=False)
@template("aten._scaled_dot_product_flash_attention_for_cpu.default", with_lse=True)
def _sdpa(tr: Translator, node: AtenNode, with_lse: bool) -> Val | tuple[Val, Val | None]:
    q, k, v = (tr.val(a) for a in node.args[:3])
    if with_lse:  # (q, k, v, dropout_p, is_causal, *, attn_mask, scale)
        mask = tr.opt_val(node.kwargs.get("attn_mask"))
        dropout = float(tr.arg(3, "dropout_p", 0.0) or 0.0)
        causal = bool(tr.arg(4, "is_causal", False))
        sc, gqa = node.kwargs.get("scale"), False
    else:
        mask = tr.opt_val(tr.arg(3, "attn_mask", None))
        dropout = float(tr.arg(4, "dropout_p", 0.0) or 0.0)
        causal = bool(tr.arg(5, "is_causal", False))
        sc = tr.arg(6, "scale", None)
        gqa = bool(node.kwargs.get("enable_gqa", tr.arg(7, "enable_gqa", False)))
    if dropout > 0:  # the functional op drops whenever dropout_p > 0, in eval mode too
        raise tr.error("no loop-IR template for dropout inside scaled_dot_product_attention")
    out = tr.result()
    dt = out.dtype
    L, E = q.shape[-2], q.shape[-1]
    Sn, Ev = k.shape[-2], v.shape[-1]
    batch = list(out.shape[:-2])
    nb = len(batch)
    sc = 1.0 / math.sqrt(E) if sc is None else float(sc)
    b_lps = [Loop(f"b{d}", 0, n) for d, n in enumerate(batch)]
    bv = [AffExpr.var(lp.iv) for lp in b_lps]
    l, m, e, d = (AffExpr.var(n) for n in ("l", "m", "e", "d"))
    L_l, M_l, E_l, D_l = Loop("l", 0, L), Loop("m", 0, Sn), Loop("e", 0, E), Loop("d", 0, Ev)
    guards = [AffCond.compare(m, "<=", l)] if causal else []

    def bidx(t: Val) -> list[AffExpr]:
        """Batch indices of q/k/v (broadcast; grouped heads read head // group)."""
        tb = list(t.shape[:-2])
        idx = bcast_index(bv, tb, batch)
        if gqa and nb >= 1 and tb and tb[-1] != batch[-1] and tb[-1] != 1:
            idx[-1] = bv[-1] // (batch[-1] // tb[-1])
        return idx

    qb, kb, vb = bidx(q), bidx(k), bidx(v)
    hint = out.name
    S = tr.declare(f"{hint}_scores", [*batch, L, Sn], dt)
    P = tr.declare(f"{hint}_probs", [*batch, L, Sn], dt)
    mx = tr.declare(f"{hint}_max", [*batch, L], dt)
    den = tr.declare(f"{hint}_den", [*batch, L], dt)
    blm = [*bv, l, m]
    bl = [*bv, l]
    tr.emit(S, blm, "=", c(0, dt), b_lps + [L_l, M_l], guards)
    tr.emit(S, blm, "+=", mul(cast(q.read([*qb, l, e]), dt), cast(k.read([*kb, m, e]), dt)),
            b_lps + [L_l, M_l, E_l], guards)

    def z() -> SExpr:
        s = scale(Read(S.name, tuple(blm), dt), sc)
        if mask is None:
            return s
        mv = mask.read(bcast_index(blm, mask.shape, [*batch, L, Sn]))
        return select(mv, s, c(-INF, dt)) if mask.dtype == "bool" else add(s, cast(mv, dt))

    rd = lambda t: Read(t.name, tuple(bl), dt)  # noqa: E731
    tr.emit(mx, bl, "=", c(-INF, dt), b_lps + [L_l])
    tr.emit(mx, bl, "max=", z(), b_lps + [L_l, M_l], guards)
    tr.emit(den, bl, "=", c(0, dt), b_lps + [L_l])
    tr.emit(den, bl, "+=", un("exp", sub(z(), rd(mx))), b_lps + [L_l, M_l], guards)
    tr.emit(P, blm, "=", div(un("exp", sub(z(), rd(mx))), rd(den)), b_lps + [L_l, M_l], guards)
    bld = [*bv, l, d]
    tr.emit(out, bld, "=", c(0, dt), b_lps + [L_l, D_l])
    tr.emit(out, bld, "+=", mul(Read(P.name, tuple(blm), dt), cast(v.read([*vb, m, d]), dt)),
            b_lps + [L_l, D_l, M_l], guards)
    if not with_lse:
        return stored(out)
    if not tr.used(1):
        return stored(out), None
    lse = tr.result(1)
    tr.emit(lse, bl, "=", cast(add(rd(mx), un("log", rd(den))), lse.dtype), b_lps + [L_l])
    return stored(out), stored(lse)

