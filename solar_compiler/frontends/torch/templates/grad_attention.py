"""Backward of scaled_dot_product_attention, one template for the variants the dispatcher picks:
`_scaled_dot_product_flash_attention_for_cpu_backward` (what a CPU capture produces) and the CUDA
`_scaled_dot_product_flash_attention_backward` and `_scaled_dot_product_efficient_attention_backward`
(same math, arguments in other places). From the forward's output `O` and row log-sum-exp `lse`:

    S[b, l, m]   = sum_e q[b, l, e] * k[b, m, e]                (matrix: the scores recomputed)
    P[b, l, m]   = exp(scale * S (+ mask) - lse[b, l])
    dV[b, m, d]  = sum_l P[b, l, m] * dO[b, l, d]               (matrix)
    dP[b, l, m]  = sum_d dO[b, l, d] * v[b, m, d]               (matrix)
    D[b, l]      = sum_d dO[b, l, d] * O[b, l, d]
    dS[b, l, m]  = P * (dP - D) * scale
    dQ[b, l, e]  = sum_m dS[b, l, m] * k[b, m, e]               (matrix)
    dK[b, m, e]  = sum_l dS[b, l, m] * q[b, l, e]               (matrix)

as a flash-attention backward kernel computes it: five contractions of the forward's size (its two
plus the recomputed scores and the two of the other operands). The causal mask is the guard
`m <= l` on every statement over (l, m). Dropout has no template (torch's random mask is internal),
nor a gradient of the attention bias (the efficient variant's fourth output)."""

from __future__ import annotations

from solar_compiler.frontends.builder.exprs import INF, add, c, cast, mul, scale, select, sub, un
from solar_compiler.frontends.builder.index_maps import bcast_index
from solar_compiler.frontends.builder.translator import Translator
from solar_compiler.frontends.builder.values import Loop, Val, stored
from solar_compiler.frontends.captured_program import AtenNode
from solar_compiler.loopir.affine import AffCond, AffExpr
from solar_compiler.loopir.ast import Read, SExpr, TensorDecl

from ..registry import template

# per variant: positions of (grad_out, q, k, v, out, logsumexp, dropout_p, is_causal), the attention
# bias (positional index or keyword), and the gradient mask's position (None: all three)
_ARGS = {
    "cpu": ((0, 1, 2, 3, 4, 5, 6, 7), "attn_mask", None),
    "flash": ((0, 1, 2, 3, 4, 5, 10, 11), None, None),
    "efficient": ((0, 1, 2, 3, 5, 6, 9, 11), 4, 10),
}


@template("aten._scaled_dot_product_flash_attention_for_cpu_backward.default", variant="cpu")
@template("aten._scaled_dot_product_flash_attention_backward.default", variant="flash")
@template("aten._scaled_dot_product_efficient_attention_backward.default", variant="efficient")
def _sdpa_backward(tr: Translator, node: AtenNode, variant: str) -> tuple:
    pos, bias_at, mask_at = _ARGS[variant]
    go, q, k, v, o, lse = (tr.val(tr.arg(i, "")) for i in pos[:6])
    dropout = float(tr.arg(pos[6], "dropout_p", 0.0) or 0.0)
    causal = bool(tr.arg(pos[7], "is_causal", False))
    bias_ref = node.kwargs.get(bias_at) if isinstance(bias_at, str) else \
        tr.arg(bias_at, "attn_bias") if bias_at is not None else None
    bias = tr.opt_val(bias_ref)
    want = [bool(x) for x in tr.arg(mask_at, "grad_input_mask")] if mask_at is not None else [True] * 3
    if dropout > 0:
        raise tr.error("no loop-IR template for dropout inside a scaled_dot_product_attention backward")
    if len(want) > 3 and want[3]:
        raise tr.error("no loop-IR template for the attention-bias gradient of an SDPA backward")
    batch = list(q.shape[:-2])
    if list(k.shape[:-2]) != batch or list(v.shape[:-2]) != batch:
        raise tr.error("an SDPA backward whose query, key and value batch dims differ has no template")
    L, E = q.shape[-2], q.shape[-1]
    M, Ev = k.shape[-2], v.shape[-1]
    sc = node.kwargs.get("scale")
    sc = E ** -0.5 if sc is None else float(sc)
    dt = tr.out_meta(next(i for i in range(3) if want[i])).dtype
    hint = tr.out_meta(next(i for i in range(3) if want[i])).name
    b_lps = [Loop(f"b{d}", 0, n) for d, n in enumerate(batch)]
    bv = [AffExpr.var(lp.iv) for lp in b_lps]
    l, m, e, d = (AffExpr.var(n) for n in ("l", "m", "e", "d"))
    L_l, M_l, E_l, D_l = Loop("l", 0, L), Loop("m", 0, M), Loop("e", 0, E), Loop("d", 0, Ev)
    guards = [AffCond.compare(m, "<=", l)] if causal else []
    blm, bl = [*bv, l, m], [*bv, l]
    rd = lambda t, idx: Read(t.name, tuple(idx), dt)  # noqa: E731
    val = lambda t, idx: cast(t.read(idx), dt)  # noqa: E731

    def local(name: str, shape: list[int]) -> TensorDecl:
        return tr.declare(f"{hint}_{name}", [*batch, *shape], dt)

    S, P, dP, dS = (local(n, [L, M]) for n in ("scores", "probs", "dprobs", "dscores"))
    D = local("rowdot", [L])
    tr.emit(S, blm, "=", c(0, dt), b_lps + [L_l, M_l], guards)
    tr.emit(S, blm, "+=", mul(val(q, [*bv, l, e]), val(k, [*bv, m, e])), b_lps + [L_l, M_l, E_l], guards)
    z: SExpr = scale(rd(S, blm), sc)
    if bias is not None:
        bvv = bias.read(bcast_index(blm, bias.shape, [*batch, L, M]))
        z = select(bvv, z, c(-INF, dt)) if bias.dtype == "bool" else add(z, cast(bvv, dt))
    tr.emit(P, blm, "=", un("exp", sub(z, val(lse, bl))), b_lps + [L_l, M_l], guards)
    grads: list[Val | None] = [None, None, None]
    if want[2]:
        dv = tr.result(2)
        bmd = [*bv, m, d]
        tr.emit(dv, bmd, "=", c(0, dv.dtype), b_lps + [M_l, D_l])
        tr.emit(dv, bmd, "+=", cast(mul(rd(P, blm), val(go, [*bv, l, d])), dv.dtype), b_lps + [M_l, D_l, L_l],
                guards)
        grads[2] = stored(dv)
    if want[0] or want[1]:
        tr.emit(dP, blm, "=", c(0, dt), b_lps + [L_l, M_l], guards)
        tr.emit(dP, blm, "+=", mul(val(go, [*bv, l, d]), val(v, [*bv, m, d])), b_lps + [L_l, M_l, D_l],
                guards)
        tr.emit(D, bl, "=", c(0, dt), b_lps + [L_l])
        tr.emit(D, bl, "+=", mul(val(go, [*bv, l, d]), val(o, [*bv, l, d])), b_lps + [L_l, D_l])
        tr.emit(dS, blm, "=", scale(mul(rd(P, blm), sub(rd(dP, blm), rd(D, bl))), sc), b_lps + [L_l, M_l],
                guards)
    for i, (row, other, n_l, r_l) in enumerate(((l, k, L_l, M_l), (m, q, M_l, L_l))):
        if not want[i]:
            continue
        out = tr.result(i)
        tgt = [*bv, row, e]
        red = m if row is l else l
        tr.emit(out, tgt, "=", c(0, out.dtype), b_lps + [n_l, E_l])
        tr.emit(out, tgt, "+=", cast(mul(rd(dS, blm), val(other, [*bv, red, e])), out.dtype),
                b_lps + [n_l, E_l, r_l], guards)
        grads[i] = stored(out)
    return tuple(grads) + ((None,) if variant == "efficient" else ())
