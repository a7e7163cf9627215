"""Random draws inside forward (rand/randn/bernoulli/dropout masks, ...).

The kernel computes the draw: one statement writes the random tensor from a counter-based hash
of the element's linear index (`frac(sin(n * 12.9898 + k) * 43758.5453)`, frac as `mod 1.0`;
Box-Muller for normals), so drawing costs vector work (and transcendentals) that writes the
values and reads nothing, as a GPU Philox kernel does. The values differ from torch's; validation
therefore runs a copy of the kernel in which these tensors are inputs fed with the values torch
drew (`TorchTranslation.validation_kernel`).

`exponential` (the Gumbel-max sampling of vLLM and FlashInfer: `probs / q.exponential_()`, then an
argmax) is `-log(1 - u) / lambd`. `multinomial` is an inverse-CDF draw: the row's cumulative mass
(a scan), then the count of categories whose cumulative mass is below a hashed share of the total.
Its values are torch's in validation too, and the nest stands in for a sampling kernel (a
stand-in, `Translator.stand_in`: its reads of the probabilities and its writes are priced, its
arithmetic is not).
"""

from __future__ import annotations

import math

from solar_compiler.frontends.builder.exprs import (
    add,
    bin_,
    c,
    cast,
    cmp,
    div,
    index_value,
    mul,
    scale,
    select,
    sub,
    un,
)
from solar_compiler.frontends.builder.statements import map_op, scan_along
from solar_compiler.frontends.builder.translator import Translator
from solar_compiler.frontends.builder.values import Loop, Val, ivars, loops, stored
from solar_compiler.frontends.captured_program import AtenNode, TensorRef
from solar_compiler.loopir.affine import AffExpr
from solar_compiler.loopir.ast import Read, SExpr

from ..registry import template


def _uniform01(lin: AffExpr, salt: float) -> SExpr:
    """A hash of the linear index in [0, 1), in f32."""
    arg = mul(index_value(lin, "f32"), c(12.9898, "f32"))
    arg = add(arg, c(salt, "f32")) if salt else arg
    return bin_("mod", mul(un("sin", arg), c(43758.5453, "f32")), c(1.0, "f32"))  # frac(), as h - floor(h)


def _normal01(lin: AffExpr) -> SExpr:
    u1 = sub(c(1.0, "f32"), _uniform01(lin, 0.0))  # in (0, 1]: log is finite
    u2 = _uniform01(lin, 78.233)
    r = un("sqrt", mul(c(-2.0, "f32"), un("log", u1)))
    return mul(r, un("cos", mul(c(2 * math.pi, "f32"), u2)))


@template("aten.rand.default", "aten.rand_like.default", "aten.uniform.default", kind="uniform")
@template("aten.randn.default", "aten.randn_like.default", "aten.normal_functional.default", kind="normal")
@template("aten.bernoulli.default", "aten.bernoulli.p", "aten.bernoulli.Tensor", kind="bernoulli")
@template("aten.randint.low", "aten.randint.default", "aten.randint_like.low_dtype",
          "aten.randint_like.default", kind="randint")
@template("aten.exponential.default", kind="exponential")
def _draw(tr: Translator, node: AtenNode, kind: str) -> Val:
    out = tr.result()
    tr.random[tr.out_meta().name] = out.name
    lps = loops("i", out.shape)
    idx = ivars(lps)
    lin = AffExpr.lit(0)
    for e, n in zip(idx, out.shape, strict=True):
        lin = lin * n + e
    if kind == "normal":
        value = _normal01(lin)
        mean, std = _params(tr, node, 0.0, 1.0)
        value = add(mul(value, c(std, "f32")), c(mean, "f32")) if (mean, std) != (0.0, 1.0) else value
    elif kind == "bernoulli":
        p = tr.arg(1, "p", 0.5)
        if isinstance(p, TensorRef):
            pv = tr.val(p)
            prob = cast(pv.read(idx if pv.ndim == len(idx) else []), "f32")
        else:
            prob = c(float(p), "f32")
        value = cast(cmp("lt", _uniform01(lin, 0.0), prob), "f32")
    elif kind == "exponential":
        lambd = float(tr.arg(1, "lambd", 1.0))
        value = div(un("neg", un("log1p", un("neg", _uniform01(lin, 0.0)))), c(lambd, "f32"))
    elif kind == "randint":
        lo, hi = _int_range(tr, node)
        value = un("floor", add(mul(_uniform01(lin, 0.0), c(hi - lo, "f32")), c(lo, "f32")))
    else:
        value = _uniform01(lin, 0.0)
        lo, hi = _params(tr, node, 0.0, 1.0)
        if (lo, hi) != (0.0, 1.0):
            value = add(mul(value, c(hi - lo, "f32")), c(lo, "f32"))
    tr.emit(out, idx, "=", cast(value, out.dtype), lps)
    return stored(out)


def _params(tr: Translator, node: AtenNode, d0: float, d1: float) -> tuple[float, float]:
    """(from, to) of uniform or (mean, std) of normal: scalars after the size/tensor argument."""
    name = node.op.split(".")[1]
    if name in ("rand", "randn", "rand_like", "randn_like"):
        return d0, d1
    vals = [a for a in node.args[1:] if isinstance(a, (int, float)) and not isinstance(a, bool)]
    a = float(vals[0]) if len(vals) > 0 else d0
    b = float(vals[1]) if len(vals) > 1 else d1
    return a, b


def _int_range(tr: Translator, node: AtenNode) -> tuple[int, int]:
    a = node.args
    return {"aten.randint.low": lambda: (int(a[0]), int(a[1])),
            "aten.randint.default": lambda: (0, int(a[0])),
            "aten.randint_like.low_dtype": lambda: (int(a[1]), int(a[2])),
            "aten.randint_like.default": lambda: (0, int(a[1]))}[node.op]()



@template("aten.multinomial.default")
def _multinomial(tr: Translator, node: AtenNode) -> Val:
    probs = tr.val(node.args[0])
    out = tr.result()
    tr.random[tr.out_meta().name] = out.name
    tr.mark_stand_in()
    cats = probs.shape[-1]
    cum = tr.declare(f"{out.name}_cdf", probs.shape, "f32")
    scan_along(tr, cum, probs, probs.ndim - 1, add)
    lps = loops("i", out.shape)
    idx = ivars(lps)
    lin = AffExpr.lit(0)
    for e, n in zip(idx, out.shape, strict=True):
        lin = lin * n + e
    row = idx[:-1]
    total = Read(cum.name, (*row, AffExpr.lit(cats - 1)), "f32")
    below = cmp("lt", Read(cum.name, (*row, AffExpr.var("v")), "f32"), mul(_uniform01(lin, 0.0), total))
    tr.emit(out, idx, "=", c(0, out.dtype), lps)
    tr.emit(out, idx, "+=", cast(below, out.dtype), [*lps, Loop("v", 0, cats)])
    return stored(out)


@template("aten.rrelu_with_noise_functional.default")
def _rrelu(tr: Translator, node: AtenNode) -> tuple[Val | None, Val | None]:
    """Randomized leaky ReLU: (output, noise). Eval mode (`training=False`: `F.rrelu`'s default,
    `nn.RReLU` under `model.eval()`) is deterministic, a leaky ReLU with the mean slope `(lower +
    upper) / 2` (`x > 0 ? x : x * slope`, as torch's `leaky_relu`), and the noise comes back unchanged
    (capture records no draw for it, `capture/ops.py`, so validation compares its values). Training
    mode draws, as torch's CPU kernel, a slope `r = lower + u (upper - lower)` for each element
    `x <= 0` (noise 1 elsewhere) and outputs `x <= 0 ? x * r : x`: the noise is drawn from the hash
    as `rand` draws it, and validation feeds it torch's noise (the draw the reference records)."""
    x = tr.val(node.args[0])
    lower, upper = float(tr.arg(2, "lower", 0.125)), float(tr.arg(3, "upper", 1 / 3))
    if not bool(tr.arg(4, "training", False)):
        slope = (lower + upper) / 2
        out = map_op(tr, lambda v: select(cmp("gt", v, c(0, v)), v, scale(v, slope)), [node.args[0]]) \
            if tr.used(0) else None
        return out, (tr.val(node.args[1]) if tr.used(1) else None)
    meta = tr.out_meta(0)
    noise = tr.result(1) if tr.used(1) else tr.declare(f"{meta.name}_noise", x.shape, x.dtype)
    tr.random[meta.name] = noise.name
    lps = loops("i", x.shape)
    idx = ivars(lps)
    lin = AffExpr.lit(0)
    for e, n in zip(idx, x.shape, strict=True):
        lin = lin * n + e
    xv = x.read(idx)
    neg = cmp("le", xv, c(0, xv))
    slope = cast(add(mul(_uniform01(lin, 0.0), c(upper - lower, "f32")), c(lower, "f32")), x.dtype)
    tr.emit(noise, idx, "=", select(neg, slope, c(1, x.dtype)), lps)
    r = Read(noise.name, tuple(idx), x.dtype)
    out = tr.result(0)
    tr.emit(out, idx, "=", select(neg, mul(xv, r), xv), lps)
    return stored(out), (stored(noise) if tr.used(1) else None)
