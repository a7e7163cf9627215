"""Resampling arithmetic shared by the interpolation families (bilinear and bicubic upsampling, grid
sampling): torch's scale factors, source coordinates and cubic-convolution weights, as scalar
expressions in the dtype torch computes them in (its `area_pixel_compute_source_index` and
`get_cubic_upsample_coefficients`, aten/src/ATen/native/UpSample.h)."""

from __future__ import annotations

from solar_compiler.loopir.ast import SExpr

from .exprs import add, c, maximum, mul, sub

#: The cubic-convolution constant of torch's bicubic modes (Keys' a).
CUBIC_A = -0.75


def scale_list(v: object, k: int) -> list[float]:
    """A `scale_factors` argument (one number or one per spatial dim) as k floats."""
    return [float(s) for s in v] if isinstance(v, (list, tuple)) else [float(v)] * k  # type: ignore[arg-type]


def source_index(pos: SExpr, n_in: int, n_out: int, align: bool, sf: float | None,
                 cubic: bool = False) -> SExpr:
    """The fractional source position of output position `pos` (a float expression) along one dim:
    `pos * (in - 1) / (out - 1)` with aligned corners, else `(pos + 0.5) / scale - 0.5` (`in / out`
    when no scale factor is given), clamped at 0 except for the cubic mode, whose taps below 0 are
    clamped to the edge instead."""
    if align:
        return mul(pos, c((n_in - 1) / (n_out - 1) if n_out > 1 else 0.0, pos))
    ratio = 1.0 / sf if sf else n_in / n_out
    src = sub(mul(add(pos, c(0.5, pos)), c(ratio, pos)), c(0.5, pos))
    return src if cubic else maximum(src, c(0.0, pos))


def cubic_weights(t: SExpr, last_from_two: bool = False) -> list[SExpr]:
    """The weights of the four taps at offsets -1, 0, 1, 2 of a sample at fraction `t` past its
    floor: `conv2(t + 1)`, `conv1(t)`, `conv1(1 - t)`, `conv2(2 - t)`, with conv1(x) = ((a + 2) x -
    (a + 3)) x x + 1 and conv2(x) = ((a x - 5 a) x + 8 a) x - 4 a. The last argument is `(1 - t) + 1`
    as upsampling computes it, or `2 - t` (`last_from_two`) as grid sampling does."""
    a = CUBIC_A

    def conv1(x: SExpr) -> SExpr:
        return add(mul(mul(sub(mul(c(a + 2, x), x), c(a + 3, x)), x), x), c(1.0, x))

    def conv2(x: SExpr) -> SExpr:
        return sub(mul(add(mul(sub(mul(c(a, x), x), c(5 * a, x)), x), c(8 * a, x)), x), c(4 * a, x))

    one_minus = sub(c(1.0, t), t)
    last = sub(c(2.0, t), t) if last_from_two else add(one_minus, c(1.0, t))
    return [conv2(add(t, c(1.0, t))), conv1(t), conv1(one_minus), conv2(last)]

