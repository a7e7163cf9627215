"""Sampling at computed positions: bicubic upsampling (`F.interpolate(mode="bicubic")`) and grid
sampling (`F.grid_sample`, 4-D), with torch's CPU arithmetic (aten/src/ATen/native/UpSample.h,
cpu/UpSampleKernel.cpp, cpu/GridSamplerKernel.cpp).

Both read the input through computed indices (indirect reads, counted at the elements the traced
sample touched) and sum weighted taps separably, `out = sum_j wy[j] * (sum_i wx[i] * x[.., iy[j],
ix[i]])`, as the CPU kernels do. Source coordinates, tap indices and weights are written inline
from the output position (upsampling) or from the grid values (grid sampling: its tap indices are
i64 tables per output position, `[N, Ho, Wo]`, shared by every channel); the vector-work count
prices each such value once per row, column or position it depends on (docs/bounds.md section 8),
as a kernel computes its coordinates once per position. A tap outside the input under zeros
padding reads the clamped element with weight 0 (a select on the in-bounds test of the weight), so
the read itself is unconditional and its traced footprint counts."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from solar_compiler.frontends.builder.exprs import (
    add,
    bin_,
    c,
    cast,
    cmp,
    div,
    index_read,
    index_value,
    maximum,
    minimum,
    mul,
    select,
    sub,
    un,
)
from solar_compiler.frontends.builder.resample import cubic_weights, scale_list, source_index
from solar_compiler.frontends.builder.translator import Translator
from solar_compiler.frontends.builder.values import Val, ivars, loops, stored
from solar_compiler.frontends.captured_program import AtenNode
from solar_compiler.loopir.affine import AffExpr
from solar_compiler.loopir.ast import Index, SExpr

from ..registry import template

_LIT = AffExpr.lit


def _work_dtype(dt: str) -> str:
    """The dtype torch computes in (its opmath type): f64 for f64, else f32."""
    return "f64" if dt == "f64" else "f32"


def _dot(weights: Sequence[SExpr], values: Sequence[SExpr]) -> SExpr:
    """`w0 * v0 + w1 * v1 + ...`, summed left to right as torch's kernels do."""
    acc = mul(weights[0], values[0])
    for w, v in zip(weights[1:], values[1:], strict=True):
        acc = add(acc, mul(w, v))
    return acc


def _separable(x: Val, lead: Sequence[Index], ys: Sequence[tuple[SExpr, SExpr]],
               xs: Sequence[tuple[SExpr, SExpr]], wt: str) -> SExpr:
    """sum_j wy[j] * (sum_i wx[i] * x[.., iy[j], ix[i]]) of taps given as (index, weight) pairs."""
    rows = [_dot([w for _, w in xs], [cast(x.read([*lead, iy, ix]), wt) for ix, _ in xs]) for iy, _ in ys]
    return _dot([w for _, w in ys], rows)


def _clamp_index(i: SExpr, size: int) -> SExpr:
    return minimum(maximum(i, c(0, i)), c(size - 1, i))


# ---- bicubic upsampling ----------------------------------------------------------------------------
@template("aten.upsample_bicubic2d.vec", vec=True)
@template("aten.upsample_bicubic2d.default", vec=False)
def _bicubic(tr: Translator, node: AtenNode, vec: bool) -> Val:
    """upsample_bicubic2d (align_corners both ways, output size or scale factors; antialiasing is
    `_upsample_bicubic2d_aa`, which has no template): per output row and column torch's
    `guard_index_and_lambda`, base = min(floor(src), in - 1) and t = clamp(src - base, 0, 1), the
    four taps base - 1 .. base + 2 clamped into the input and their cubic-convolution weights (a =
    -0.75); 16 reads per output, weighted along the width first, then along the height."""
    x = tr.val(node.args[0])
    align = bool(tr.arg(2, "align_corners", False))
    if vec:
        scales = tr.arg(3, "scale_factors", None)
        sf: list[float | None] = list(scale_list(scales, 2)) if scales else [None, None]
    else:
        given = (tr.arg(3, "scales_h"), tr.arg(4, "scales_w"))
        sf = [float(s) if s else None for s in given]  # type: ignore[arg-type]
    out = tr.result()
    wt = _work_dtype(out.dtype)
    lps = loops("i", out.shape)
    idx = ivars(lps)
    isp, osp = x.shape[-2:], out.shape[-2:]
    ys, xs = (_cubic_taps(idx[-2 + d], isp[d], osp[d], align, sf[d], wt) for d in range(2))
    tr.emit(out, idx, "=", cast(_separable(x, idx[:-2], ys, xs, wt), out.dtype), lps)
    return stored(out)


def _cubic_taps(pos: AffExpr, n_in: int, n_out: int, align: bool, sf: float | None,
                wt: str) -> list[tuple[SExpr, SExpr]]:
    """(index, weight) of the four taps of output position `pos` along one dim."""
    src = source_index(index_value(pos, wt), n_in, n_out, align, sf, cubic=True)
    base = minimum(un("floor", src), c(n_in - 1, wt))
    t = minimum(maximum(sub(src, base), c(0.0, wt)), c(1.0, wt))
    ib = cast(base, "i64")
    taps = [_clamp_index(ib if k == 1 else add(ib, c(k - 1, "i64")), n_in) for k in range(4)]
    return list(zip(taps, cubic_weights(t), strict=True))


# ---- grid sampling -----------------------------------------------------------------------------------
_MODES = {0: "bilinear", 1: "nearest", 2: "bicubic"}
_PADDINGS = {0: "zeros", 1: "border", 2: "reflection"}
_OFFSETS = {"nearest": (0,), "bilinear": (0, 1), "bicubic": (-1, 0, 1, 2)}


@template("aten.grid_sampler_2d.default")
def _grid_sample(tr: Translator, node: AtenNode) -> Val:
    """grid_sampler_2d (modes bilinear, nearest, bicubic; padding zeros, border, reflection;
    align_corners both ways), as torch's CPU kernel: per output position and dim (x: grid[.., 0]
    along the width, y: grid[.., 1] along the height) the source coordinate `(g + 1) * size / 2 -
    0.5` (aligned: `(g + 1) * (size - 1) / 2`), padded (border: clipped; reflection: reflected about
    the borders, then clipped; bicubic pads each tap's coordinate instead), then the taps: nearest
    rounds half to even (nearbyint), bilinear takes floor and floor + 1 with weights 1 - t and t,
    bicubic floor - 1 .. floor + 2 with cubic-convolution weights. Each dim's tap indices are an
    i64 table `[N, Ho, Wo, taps]` (clamped into the input); the output reads x through them:
    bilinear as four corner weights `wy * wx` per position and four products per output, bicubic
    separably (rows along the width first), nearest as a plain gather (times the in-bounds flag under
    zeros padding)."""
    x, grid = tr.val(node.args[0]), tr.val(node.args[1])
    if x.ndim != 4 or grid.ndim != 4:
        raise tr.error(f"no loop-IR template for grid_sampler_2d of a rank-{x.ndim} input")
    mode = _MODES[int(tr.arg(2, "interpolation_mode", 0))]  # type: ignore[call-overload]
    padding = _PADDINGS[int(tr.arg(3, "padding_mode", 0))]  # type: ignore[call-overload]
    align = bool(tr.arg(4, "align_corners", False))
    out = tr.result()
    wt = _work_dtype(out.dtype)
    name = tr.out_meta().name
    sizes = (x.shape[3], x.shape[2])  # x along the width, y along the height
    offsets = _OFFSETS[mode]
    p_lps = loops("p", grid.shape[:3])
    p = ivars(p_lps)
    tables = []
    for d in range(2):
        ind = tr.declare(f"{name}_{'xy'[d]}", (*grid.shape[:3], len(offsets)), "i64")
        for k, tap in enumerate(_grid_taps(grid, p, d, sizes[d], mode, padding, align, wt)):
            tr.emit(ind, [*p, _LIT(k)], "=", tap.index, p_lps)
        tables.append(stored(ind))
    lps = loops("i", out.shape)
    n, ch, h, w = ivars(lps)
    at = [n, h, w]
    # the taps at the output's position: indices read from the tables, weights computed inline
    xs, ys = ([(index_read(tables[d], [*at, _LIT(k)]), tap) for k, tap
               in enumerate(_grid_taps(grid, at, d, sizes[d], mode, padding, align, wt))] for d in range(2))
    if mode == "nearest":
        (iy, ty), (ix, tx) = ys[0], xs[0]
        value = cast(x.read([n, ch, iy, ix]), wt)
        if ty.inside is not None and tx.inside is not None:  # zeros padding: torch's masked gather
            value = mul(cast(bin_("and", ty.inside, tx.inside), wt), value)
    else:
        wxs, wys = ([(i, tap.masked_weight()) for i, tap in taps] for taps in (xs, ys))
        if mode == "bicubic":
            value = _separable(x, [n, ch], wys, wxs, wt)
        else:  # nw, ne, sw, se: (wy * wx) * x
            value = _dot([mul(wy, wx) for _, wy in wys for _, wx in wxs],
                         [cast(x.read([n, ch, iy, ix]), wt) for iy, _ in wys for ix, _ in wxs])
    tr.emit(out, [n, ch, h, w], "=", cast(value, out.dtype), lps)
    return stored(out)


@dataclass(frozen=True)
class _Tap:
    """One tap of a grid sample along one dim: its index into the input (clamped into it), its
    weight (None for nearest) and, under zeros padding, whether it lies inside the input."""

    index: SExpr
    weight: SExpr | None = None
    inside: SExpr | None = None

    def masked_weight(self) -> SExpr:
        """The weight, 0 where the tap is outside the input (a select, so the read stays unconditional)."""
        assert self.weight is not None
        return self.weight if self.inside is None else select(self.inside, self.weight, c(0.0, self.weight))


def _grid_taps(grid: Val, at: Sequence[AffExpr], d: int, size: int, mode: str, padding: str,
               align: bool, wt: str) -> list[_Tap]:
    """The taps of the sample at output position `at` along dim `d` (0: x, the width; 1: y, the
    height) of the input, in the order of `_OFFSETS`."""
    g = cast(grid.read([*at, _LIT(d)]), wt)
    src = _unnormalize(g, size, align)
    zeros = padding == "zeros"
    if mode == "nearest":
        r = un("round", _padded(src, size, align, padding))
        i = cast(r, "i64")
        return [_Tap(_clamp_index(i, size), None, _in_bounds(r, size)) if zeros else _Tap(i)]
    if mode == "bilinear":
        s = _padded(src, size, align, padding)
        fl = un("floor", s)
        t = sub(s, fl)
        taps = []
        for o, wgt in ((0, sub(c(1.0, t), t)), (1, t)):
            at_o = fl if o == 0 else add(fl, c(o, fl))
            i = cast(at_o, "i64")
            if zeros:
                taps.append(_Tap(_clamp_index(i, size), wgt, _in_bounds(at_o, size)))
            else:  # s in [0, size - 1]: only floor + 1 can leave the input (with weight 0)
                taps.append(_Tap(i if o == 0 else minimum(i, c(size - 1, i)), wgt))
        return taps
    fl = un("floor", src)
    taps = []
    for o, wgt in zip(_OFFSETS["bicubic"], cubic_weights(sub(src, fl), last_from_two=True), strict=True):
        at_o = fl if o == 0 else add(fl, c(o, fl))
        if zeros:
            taps.append(_Tap(_clamp_index(cast(at_o, "i64"), size), wgt, _in_bounds(at_o, size)))
        else:
            taps.append(_Tap(cast(_padded(at_o, size, align, padding), "i64"), wgt))
    return taps


def _unnormalize(g: SExpr, size: int, align: bool) -> SExpr:
    """A grid value (-1 .. 1 spans the input) as a source coordinate, as the CPU kernel computes it."""
    if align:
        return mul(add(g, c(1.0, g)), c((size - 1) / 2, g))
    return sub(mul(add(g, c(1.0, g)), c(size / 2, g)), c(0.5, g))


def _padded(v: SExpr, size: int, align: bool, padding: str) -> SExpr:
    """Coordinate `v` under the padding mode: zeros leaves it as it is; border clips it into [0, size
    - 1]; reflection reflects it about the borders (-0.5 and size - 0.5; aligned: 0 and size - 1),
    the remainder of its distance from the low border modulo twice the span mirrored in its upper
    half, then clips it."""
    if padding == "zeros":
        return v
    if padding == "reflection":
        if align and size <= 1:
            v = c(0.0, v)
        else:
            span2 = c(2 * (size - 1) if align else 2 * size, v)
            a = un("abs", v if align else add(v, c(0.5, v)))
            extra = sub(a, mul(un("floor", div(a, span2)), span2))  # a >= 0: floor is trunc
            v = minimum(extra, sub(span2, extra))
            v = v if align else sub(v, c(0.5, v))
    return minimum(maximum(v, c(0.0, v)), c(size - 1, v))


def _in_bounds(v: SExpr, size: int) -> SExpr:
    """`-1 < v < size`, the CPU kernel's mask of a whole-valued coordinate."""
    return bin_("and", cmp("gt", v, c(-1.0, v)), cmp("lt", v, c(float(size), v)))
