"""Contractions: mm (and `_int_mm`), bmm, addmm, baddbmm, linear, matmul (all its broadcasting
cases), dot, mv, einsum. All go through `contract`: an init statement (0, or the scaled bias) and one `+=`
statement whose value is the product of the operands, reduction loops innermost. Weights are read
through their index maps (`linear` reads W[n, k], no transposed copy)."""

from __future__ import annotations

from solar_compiler.frontends.builder.contract import contract
from solar_compiler.frontends.builder.exprs import add, cast, mul
from solar_compiler.frontends.builder.index_maps import bcast_index
from solar_compiler.frontends.builder.translator import Translator
from solar_compiler.frontends.builder.values import Val, ivars, loops, stored
from solar_compiler.frontends.captured_program import AtenNode
from solar_compiler.loopir.ast import Read

from ..registry import template


def _names(prefix: str, n: int) -> list[str]:
    return [f"{prefix}{d}" for d in range(n)]


def _operands(tr: Translator, node: AtenNode, with_bias: bool) -> tuple[Val | None, Val, Val, float, float]:
    """(bias, a, b, beta, alpha) of `mm`/`bmm(a, b)` (no bias) or `addmm`/`baddbmm(bias, a, b,
    beta, alpha)`."""
    if not with_bias:
        return None, tr.val(node.args[0]), tr.val(node.args[1]), 1.0, 1.0
    bias, a, b = tr.val(node.args[0]), tr.val(node.args[1]), tr.val(node.args[2])
    return bias, a, b, float(tr.arg(3, "beta", 1)), float(tr.arg(4, "alpha", 1))


@template("aten.mm.default", with_bias=False)
@template("aten._int_mm.default", with_bias=False)  # int8 x int8 -> int32
@template("aten.addmm.default", with_bias=True)
def _mm(tr: Translator, node: AtenNode, with_bias: bool) -> Val:
    bias, a, b, beta, alpha = _operands(tr, node, with_bias)
    out = tr.result()
    ext = {"i0": a.shape[0], "i1": b.shape[1], "k0": a.shape[1]}
    return contract(tr, out, ["i0", "i1"], ext, [(a, ["i0", "k0"]), (b, ["k0", "i1"])], bias, beta, alpha)


@template("aten.bmm.default", with_bias=False)
@template("aten.baddbmm.default", with_bias=True)
def _bmm(tr: Translator, node: AtenNode, with_bias: bool) -> Val:
    bias, a, b, beta, alpha = _operands(tr, node, with_bias)
    out = tr.result()
    ext = {"i0": a.shape[0], "i1": a.shape[1], "i2": b.shape[2], "k0": a.shape[2]}
    return contract(tr, out, ["i0", "i1", "i2"], ext, [(a, ["i0", "i1", "k0"]), (b, ["i0", "k0", "i2"])],
                    bias, beta, alpha)


@template("aten.linear.default")
def _linear(tr: Translator, node: AtenNode) -> Val:
    x, w = tr.val(node.args[0]), tr.val(node.args[1])
    b = tr.opt_val(tr.arg(2, "bias", None))
    out = tr.result()
    lead = _names("i", x.ndim - 1)
    n_var = f"i{x.ndim - 1}"
    ext = {v: x.shape[d] for d, v in enumerate(lead)} | {n_var: w.shape[0], "k0": x.shape[-1]}
    if w.ndim == 1:  # linear with a vector weight: a dot product over the last dim
        ext.pop(n_var)
        return contract(tr, out, lead, ext, [(x, [*lead, "k0"]), (w, ["k0"])], b)
    return contract(tr, out, [*lead, n_var], ext, [(x, [*lead, "k0"]), (w, [n_var, "k0"])], b)


@template("aten.matmul.default")
def _matmul(tr: Translator, node: AtenNode) -> Val:
    a, b = tr.val(node.args[0]), tr.val(node.args[1])
    out = tr.result()
    meta = tr.out_meta()
    if a.ndim == 1 and b.ndim == 1:
        return contract(tr, out, [], {"k0": a.shape[0]}, [(a, ["k0"]), (b, ["k0"])])
    nb = len(meta.shape) - (a.ndim > 1) - (b.ndim > 1)
    batch = _names("b", nb)
    ext = {v: meta.shape[d] for d, v in enumerate(batch)}
    ovars = list(batch)
    k = a.shape[-1]
    ext["k0"] = k
    if a.ndim > 1:
        ext["m0"] = a.shape[-2]
        ovars.append("m0")
    if b.ndim > 1:
        ext["n0"] = b.shape[-1]
        ovars.append("n0")
    av = (batch[nb - (a.ndim - 2):] if a.ndim > 2 else []) + (["m0", "k0"] if a.ndim > 1 else ["k0"])
    bv = (batch[nb - (b.ndim - 2):] if b.ndim > 2 else []) + (["k0", "n0"] if b.ndim > 1 else ["k0"])
    return contract(tr, out, ovars, ext, [(a, av), (b, bv)])


@template("aten.dot.default", "aten.vdot.default")
def _dot(tr: Translator, node: AtenNode) -> Val:
    a, b = tr.val(node.args[0]), tr.val(node.args[1])
    out = tr.result()
    return contract(tr, out, [], {"k0": a.shape[0]}, [(a, ["k0"]), (b, ["k0"])])


@template("aten.mv.default")
def _mv(tr: Translator, node: AtenNode) -> Val:
    a, v = tr.val(node.args[0]), tr.val(node.args[1])
    out = tr.result()
    return contract(tr, out, ["i0"], {"i0": a.shape[0], "k0": a.shape[1]}, [(a, ["i0", "k0"]), (v, ["k0"])])


@template("aten.einsum.default")
def _einsum(tr: Translator, node: AtenNode) -> Val:
    eq = str(node.args[0]).replace(" ", "")
    vals = [tr.val(r) for r in node.args[1]]
    lhs, _, rhs = eq.partition("->")
    specs = lhs.split(",")
    if len(specs) != len(vals):
        raise tr.error(f"einsum '{eq}' names {len(specs)} operands, got {len(vals)}")
    ell = 0
    for s, v in zip(specs, vals, strict=True):
        if "..." in s:
            ell = max(ell, v.ndim - (len(s) - 3))
    ell_vars = _names("e", ell)

    def expand(s: str, ndim: int) -> list[str]:
        if "..." not in s:
            return [f"x{ch}" for ch in s]
        pre, post = s.split("...")
        k = ndim - len(pre) - len(post)
        return [f"x{ch}" for ch in pre] + ell_vars[ell - k:] + [f"x{ch}" for ch in post]

    op_vars = [expand(s, v.ndim) for s, v in zip(specs, vals, strict=True)]
    ext: dict[str, int] = {}
    for v, vs in zip(vals, op_vars, strict=True):
        for n, size in zip(vs, v.shape, strict=True):
            ext[n] = max(ext.get(n, 1), size)
    if "->" in eq:
        out_vars = expand(rhs, len(tr.out_meta().shape))
    else:
        letters = sorted(ch for ch in set(lhs) - {",", "."} if lhs.count(ch) == 1)
        out_vars = ell_vars + [f"x{ch}" for ch in letters]
    out = tr.result()
    return contract(tr, out, out_vars, ext, list(zip(vals, op_vars, strict=True)))



@template("aten._trilinear.default")
def _trilinear(tr: Translator, node: AtenNode) -> Val:
    """`_trilinear(i1, i2, i3, expand1, expand2, expand3, sumdim)`: each operand unsqueezed at its
    expand dims to one common rank, the three multiplied and summed over `sumdim` (`nn.Bilinear`:
    `y[b, o] = sum_ij x1[b, i] W[o, i, j] x2[b, j]`): one contraction of three factors."""
    vals = [tr.val(node.args[k]) for k in range(3)]
    expands = [{int(d) for d in node.args[3 + k]} for k in range(3)]
    summed = {int(d) for d in node.args[6]}
    rank = vals[0].ndim + len(expands[0])
    ext: dict[str, int] = {}
    operands = []
    for v, ex in zip(vals, expands, strict=True):
        kept = [d for d in range(rank) if d not in ex]
        if len(kept) != v.ndim:
            raise tr.error(f"_trilinear: an operand of rank {v.ndim} expanded at {sorted(ex)} is not of "
                           f"rank {rank}")
        names = [f"t{d}" for d in kept]
        for n, size in zip(names, v.shape, strict=True):
            ext[n] = max(ext.get(n, 1), size)
        operands.append((v, names))
    out_vars = [f"t{d}" for d in range(rank) if d not in summed]
    return contract(tr, tr.result(), out_vars, ext, operands)


@template("aten._scaled_mm.default")
def _scaled_mm(tr: Translator, node: AtenNode) -> Val:
    """`torch._scaled_mm(a, b, scale_a, scale_b, bias, scale_result, out_dtype)`: the fp8 product
    accumulated in f32, then scaled per tensor, row (`scale_a` [M, 1]) or column (`scale_b` [1, N]),
    plus the bias, in `out_dtype`. The contraction reads the fp8 operands through widening casts, so
    it is priced at the FP8 rate; the scales apply to the accumulator, as the GPU kernel's epilogue
    applies them."""
    a, b = tr.val(node.args[0]), tr.val(node.args[1])
    sa, sb = tr.val(tr.arg(2, "scale_a")), tr.val(tr.arg(3, "scale_b"))
    bias = tr.opt_val(tr.arg(4, "bias", None))
    if tr.opt_val(tr.arg(5, "scale_result", None)) is not None:
        raise tr.error("no loop-IR template for _scaled_mm with scale_result")
    m, n = a.shape[0], b.shape[1]
    acc = tr.declare(f"{tr.out_meta().name}_acc", (m, n), "f32")
    contract(tr, acc, ["i0", "i1"], {"i0": m, "i1": n, "k0": a.shape[1]},
             [(a, ["i0", "k0"]), (b, ["k0", "i1"])])
    out = tr.result()
    lps = loops("i", (m, n))
    idx = ivars(lps)
    v = Read(acc.name, tuple(idx), "f32")
    for s in (sa, sb):
        v = mul(v, cast(s.read(bcast_index(idx, s.shape, (m, n))), "f32"))
    if bias is not None:
        v = add(v, cast(bias.read(bcast_index(idx, bias.shape, (m, n))), "f32"))
    tr.emit(out, idx, "=", cast(v, out.dtype), lps)
    return stored(out)
