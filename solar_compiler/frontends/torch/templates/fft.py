"""The 1-D discrete Fourier transform along one dim (`solar.dft`, what `capture/complex_pairs.py`
makes of torch's `_fft_r2c`, `_fft_c2c` and `_fft_c2r`), on complex values held as (real, imaginary)
pairs in a trailing dim of 2.

The nest is the direct DFT, `X[k] = sum_n x[n] e^(s 2 pi i k n / N)`, its twiddle computed from the
indices (`k n mod N` exactly in integers, the angle and its cosine and sine in f64). It computes the
transform's values, so validation compares them with torch's; but cuFFT computes them in O(N log N)
operations, not this nest's O(N^2), so the nest is a *stand-in* (`Translator.stand_in`): its
arithmetic is not priced, its traffic is (docs/llm-frontend.md, "Pricing").

`kind`: "r2c" (real input, the n // 2 + 1 bins of the onesided output), "c2c-1" / "c2c+1" (complex to
complex, forward or inverse, unnormalized), "c2r" (onesided bins to a real signal of the output's
length: bin 0 and, for an even length, bin n / 2 once, the others twice, their imaginary parts as
torch ignores them).
"""

from __future__ import annotations

import math

from solar_compiler.frontends.builder.exprs import add, c, cast, mul, sub, un
from solar_compiler.frontends.builder.translator import Translator
from solar_compiler.frontends.builder.values import Loop, Val, stored
from solar_compiler.frontends.captured_program import AtenNode
from solar_compiler.loopir.affine import AffExpr
from solar_compiler.loopir.ast import Binary, IndexValue, SExpr

from ..registry import template


def _twiddle(k: AffExpr, n: AffExpr, length: int, sign: int, dtype: str) -> tuple[SExpr, SExpr]:
    """(cos, sin) of `sign 2 pi (k n mod length) / length`, computed in f64, as `dtype`."""
    kn = Binary("mod", Binary("mul", IndexValue(k, "i64"), IndexValue(n, "i64"), "i64"), c(length, "i64"),
                "i64")
    angle = mul(cast(kn, "f64"), c(sign * 2 * math.pi / length, "f64"))
    return cast(un("cos", angle), dtype), cast(un("sin", angle), dtype)


@template("solar.dft")
def _dft(tr: Translator, node: AtenNode) -> Val:
    x = tr.val(node.args[0])
    dim, kind = int(node.args[1]), str(node.args[2])
    out = tr.result()
    dt = out.dtype
    real_in, real_out = kind == "r2c", kind == "c2r"
    rank = x.ndim - (0 if real_in else 1)  # the complex rank
    size = out.shape[:rank]
    length = x.shape[dim] if kind != "c2r" else out.shape[dim]  # the transform's length (the signal's)
    outer = [Loop(f"i{d}", 0, s) for d, s in enumerate(size)]
    iv = [AffExpr.var(lp.iv) for lp in outer]

    def at(pos: list[AffExpr], part: int | None) -> list[AffExpr]:
        return pos if part is None else [*pos, AffExpr.lit(part)]

    def read(pos: list[AffExpr], part: int) -> SExpr:
        return cast(x.read(at(pos, None if real_in else part)), dt)

    tr.mark_stand_in()
    if real_out:
        _inverse_real(tr, x, out, dim, length, outer, iv)
        return stored(out)
    sign = 1 if kind == "c2c+1" else -1
    k = iv[dim]
    m = AffExpr.var("n")
    src = [m if d == dim else e for d, e in enumerate(iv)]
    cos, sin = _twiddle(k, m, length, sign, dt)
    if real_in:
        parts = (mul(read(src, 0), cos), mul(read(src, 0), sin))
    else:  # (xr + i xi)(cos + i sin)
        xr, xi = read(src, 0), read(src, 1)
        parts = (sub(mul(xr, cos), mul(xi, sin)), add(mul(xr, sin), mul(xi, cos)))
    for p, value in enumerate(parts):
        tr.emit(out, at(iv, p), "=", c(0, dt), outer)
        tr.emit(out, at(iv, p), "+=", value, [*outer, Loop("n", 0, x.shape[dim])])
    return stored(out)


def _inverse_real(tr: Translator, x: Val, out, dim: int, length: int, outer: list[Loop],
                  iv: list[AffExpr]) -> None:
    """y[n] = Re X[0] + 2 sum_{0<k<L/2} Re(X[k] e^(2 pi i k n / L)) + [L even] Re X[L/2] (-1)^n, over
    the bins the input has (torch reads no more than L // 2 + 1 of them)."""
    dt = out.dtype
    bins = min(x.shape[dim], length // 2 + 1)
    n = iv[dim]

    def src(k: AffExpr, part: int) -> list[AffExpr]:
        return [*(k if d == dim else e for d, e in enumerate(iv)), AffExpr.lit(part)]

    def term(k: AffExpr) -> SExpr:
        cos, sin = _twiddle(k, n, length, 1, dt)
        return sub(mul(cast(x.read(src(k, 0)), dt), cos), mul(cast(x.read(src(k, 1)), dt), sin))

    tr.emit(out, iv, "=", cast(x.read(src(AffExpr.lit(0), 0)), dt), outer)
    middle = min(bins - 1, (length - 1) // 2)
    if middle >= 1:
        k = AffExpr.var("k")
        tr.emit(out, iv, "+=", mul(c(2, dt), term(k)), [*outer, Loop("k", 1, middle + 1)])
    if length % 2 == 0 and bins > length // 2:
        tr.emit(out, iv, "+=", term(AffExpr.lit(length // 2)), outer)
