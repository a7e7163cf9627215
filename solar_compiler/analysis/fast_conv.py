"""Fast convolution: the catalogue entries of the default model of computation that price a stride-1
convolution at the transform-domain products of an algorithm cuDNN ships for it: Winograd's minimal
filtering for a 3 x 3 filter, FFT for any filter (docs/bounds.md, section 0.0). `costs.py` applies
the fewest to distinct costs (`--algorithms default`), through `fast_conv_flops`.

FFT (Mathieu, Henaff and LeCun, ICLR 2014; cuDNN's CUDNN_CONVOLUTION_FWD_ALGO_FFT, one transform of
the whole padded map of at most 256 per axis, and _FFT_TILING, 32 x 32 transforms, a filter of at
most 32 per axis; FLOAT, PSEUDO_HALF and (tiling) DOUBLE configurations): per transform of t1 x t2
real points and channel pair, the pointwise product takes one real multiply per real bin and three
per conjugate pair of complex bins (`fft_products`), batched over the channels as matrix products;
per tile never more than its direct taps; the transforms themselves are not counted (errs low).

Winograd F(m x m, 3 x 3) (Lavin and Gray, "Fast Algorithms for Convolutional Neural Networks", CVPR
2016) computes an m x m tile of outputs of one (input channel, output channel) pair from an
(m + 2) x (m + 2) input tile with (m + 2)^2 multiplies instead of 9 m^2: after the input and filter
transforms, each of the (m + 2)^2 transform points is one matrix product over the channels (what
cuDNN's WINOGRAD_NONFUSED runs as batched GEMMs). So the matrix work is 2 (m + 2)^2 FLOPs per (tile,
input channel, output channel, other parallel point); per tile we take the fewer of that and the
tile's direct taps (an implementation may compute an edge tile directly), and the fewest over the
tile sizes and the direct convolution. The transforms' additions are not counted (errs low).

3-D convolutions (`Conv3d`): cuDNN's forward and backward-data configurations for 3-D tensors list
FFT_TILING (FLOAT and DOUBLE, NCHW), no Winograd and no whole-map FFT; FFT_TILING's tile per axis
for 3-D is not stated where we can read it, so a 3-D convolution gets the fewer products of 32^3
tiles and of one transform of the whole padded volume (at most 256 per axis): a bigger transform
needs fewer products per output, so the bound errs low, never above what cuDNN's tiles need.

Which algorithms and dtypes (cuDNN API reference, `cudnnConvolutionForward()`, supported
configurations of `CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD` and `..._WINOGRAD_NONFUSED`: a 3 x 3 filter,
stride 1 and dilation 1, in FLOAT_CONFIG, PSEUDO_HALF_CONFIG and TRUE_HALF_CONFIG, i.e. fp32 and fp16
data; no bf16, int8 or fp8 configuration lists them), tile sizes F(2x2,3x3) and F(4x4,3x3), the two
Lavin and Gray evaluate and the tiles cuDNN's fused and non-fused Winograd kernels use.

A convolution is recognised on the einsum view alone: a two-factor contraction whose input factor has
exactly two indices `o +- k + c` (an output variable with coefficient 1, stride 1, plus or minus a
reduced variable of extent 3, dilation 1: cuDNN's cross-correlation and convolution modes) that the
filter factor reads in one index that no output position enters (`k` alone, or a flat view of the
filter, `c * 9 + r * 3 + s`), and never `o`, the output reads `o` as a bare index,
and every domain constraint touches one such (o, k) pair or none of them (a box, guards of zero
padding included). A stride-1 transposed convolution, written as a scatter `y[p + r + c] += x[p]
w[r]`, is seen with its output positions as variables (`_View.gathered`): the same convolution. A
window read through a floor division, `x[(o + k + c) // s]`, is a convolution over a nearest
upsampling of x (`_window`). A convolution written as `F.unfold` and a product, its output positions
and taps flattened (`x[l // 36, k // 9, (l % 36) // 6 + (k // 3) % 3, ...]`), is seen with each
flat variable split into the digits its divisors take apart (`_View.unflattened`). Where unfold
pads with zeros, narrowing drops the products with the padding and cuts the product into pieces
that are not each a convolution: those keep their (narrowed) direct products.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

from solar_compiler.analysis.polyhedral import (
    Constraint,
    contraction_reads,
    count_points,
    node_domain,
    node_indices,
    node_loop_ranges,
)
from solar_compiler.dialects.einsum import NodeOp
from solar_compiler.loopir.affine import AffCond, AffExpr, FloorDiv, Mod

#: value dtypes of contractions cuDNN ships Winograd for (module docstring)
WINOGRAD_DTYPES = frozenset({"f32", "f16"})
#: value dtypes cuDNN ships its FFT convolutions for (module docstring)
FFT_DTYPES = frozenset({"f32", "f16", "f64"})
#: value dtypes of 3-D convolutions cuDNN ships FFT_TILING for (module docstring)
FFT_3D_DTYPES = frozenset({"f32", "f64"})
FFT_TILE = 32  # FFT_TILING's transform size per axis
FFT_WHOLE_MAX = 256  # FFT: the padded feature map's size per axis, at most
#: output tile sizes m of F(m x m, 3 x 3)
WINOGRAD_TILES = (2, 4)
TAPS = 3
WINOGRAD = "Winograd F("  # how the names of its entries start (`catalogue.Rewrite.words`)
FFT = "FFT "


@dataclass(frozen=True)
class _Axis:
    """One spatial axis of a convolution: the output variable, the filter tap variable, and per
    output position (in order) how many taps the domain holds there."""

    out: str
    tap: str
    taps: tuple[int, ...]
    extent: int = TAPS  # the filter's taps along the axis

    def tile_taps(self, m: int) -> list[int]:
        return [sum(self.taps[i:i + m]) for i in range(0, len(self.taps), m)]


def winograd_name(m: int) -> str:
    return f"Winograd F({m}x{m},3x3)"


def winograd_flops(node: NodeOp, flops: int, dtype: str | None) -> tuple[int, str | None]:
    """The contraction's matrix FLOPs (`flops` as counted) under the cheapest Winograd F(m x m, 3 x 3)
    when it is a 3 x 3 stride-1 convolution of a dtype cuDNN ships it for, with the algorithm's name;
    else (`flops`, None)."""
    if dtype not in WINOGRAD_DTYPES:
        return flops, None
    conv = conv_axes(node)
    if conv is None or len(conv[0]) != 2:
        return flops, None
    axes, rest = conv
    best, how = flops, None
    for m in WINOGRAD_TILES:
        got = 2 * rest * _tile_products(axes, m)
        if got < best:
            best, how = got, winograd_name(m)
    return best, how


def fast_conv_flops(node: NodeOp, flops: int, dtype: str | None) -> tuple[int, str | None]:
    """The contraction's matrix FLOPs under the cheapest fast convolution cuDNN ships for its shape
    and dtype (Winograd for 3 x 3 filters, FFT for any stride-1 filter), with its name; else
    (`flops`, None). The convolution is recognised once for both."""
    if dtype not in FFT_DTYPES and dtype not in WINOGRAD_DTYPES:
        return flops, None
    conv = conv_axes(node, taps=None)
    if conv is None:
        return flops, None
    axes, rest = conv
    best, how = flops, None
    if dtype in WINOGRAD_DTYPES and len(axes) == 2 and all(a.extent == TAPS for a in axes):
        for m in WINOGRAD_TILES:
            got = 2 * rest * _tile_products(axes, m)
            if got < best:
                best, how = got, winograd_name(m)
    if dtype in (FFT_DTYPES if len(axes) == 2 else FFT_3D_DTYPES):
        for sizes, name in _fft_plans(axes):
            got = 2 * rest * _fft_products(axes, sizes)
            if got < best:
                best, how = got, name
    return best, how


def _fft_plans(axes: Sequence[_Axis]) -> list[tuple[tuple[int, ...], str]]:
    """The transform sizes of cuDNN's two FFT algorithms for these axes: FFT_TILING's tiles of 32
    per axis (a filter of at most 32 taps per axis) and FFT's one transform of the whole padded map
    (at most 256 per axis; for a 3-D convolution the lower-bounding stand-in of FFT_TILING's
    unstated tile, module docstring)."""
    plans = []
    if all(a.extent <= FFT_TILE for a in axes):
        tiles = (FFT_TILE,) * len(axes)
        plans.append((tiles, f"{FFT}{'x'.join(map(str, tiles))} tiles"))
    whole = tuple(len(a.taps) + a.extent - 1 for a in axes)
    if all(t <= FFT_WHOLE_MAX for t in whole):
        plans.append((whole, f"{FFT}{'x'.join(map(str, whole))}"))
    return plans


def fft_products(*sizes: int) -> int:
    """Real multiplies of the pointwise product of two real transforms of `sizes` points, per
    channel pair: of the bins, the real ones (the zero and, for an even size, the middle frequency
    of each axis) take one, and the others come in conjugate pairs whose one complex product takes
    three (Gauss; three is the fewest, Winograd 1971)."""
    real = math.prod(1 + (t % 2 == 0) for t in sizes)
    return 3 * (math.prod(sizes) - real) // 2 + real


def _fft_products(axes: Sequence[_Axis], sizes: tuple[int, ...]) -> int:
    """Per (channel pair, other point): the sum over tiles (outputs t - taps + 1 per axis) of the
    fewer of the tile's direct taps and its transform-domain products."""
    per_axis = [ax.tile_taps(t - ax.extent + 1) for ax, t in zip(axes, sizes, strict=True)]
    full = fft_products(*sizes)
    return sum(min(math.prod(taps), full) for taps in itertools.product(*per_axis))


def _tile_products(axes: Sequence[_Axis], m: int) -> int:
    """Per (channel pair, other point): the sum over 2-D tiles of the fewer of the tile's direct taps
    and its (m + 2)^2 transform-domain products."""
    a, b = (ax.tile_taps(m) for ax in axes)
    full = (m + TAPS - 1) ** 2
    return sum(min(x * y, full) for x in a for y in b)


def conv_axes(node: NodeOp, taps: int | None = TAPS) -> tuple[list[_Axis], int] | None:
    """The spatial axes (two, or three for a 3-D convolution) of a stride-1 convolution with filters
    of `taps` per axis (None: at least 2 per axis) and the points of the other variables (channels,
    batch), or None when the node is not one (module docstring)."""
    reads = contraction_reads(node)
    if reads is None or len(reads) != 2:
        return None
    if any(st != 1 for st in NodeOp.ints(node.steps)):
        return None
    view = _View(*node_domain(node), node_loop_ranges(node), [idx for _, idx, _ in reads],
                 node_indices(node, len(node.get_indexing_maps().data) - 1))
    for v in (view, view.gathered(), view.unflattened()):
        got = v.match(taps) if v is not None else None
        if got is not None:
            return got
    return None


@dataclass(frozen=True)
class _View:
    """A contraction's loop variables, domain constraints, variable ranges, operand indices and
    output indices: as written, or with the output positions of a scatter as variables."""

    ivs: tuple[str, ...]
    cons: tuple[Constraint, ...]
    ranges: dict[str, tuple[int, int]]
    dep: list[tuple[AffExpr, ...]]
    outs: tuple[AffExpr, ...]

    def match(self, taps: int | None) -> tuple[list[_Axis], int] | None:
        out_vars = {i.terms[0][0] for i in self.outs if i.is_var()}
        reduced = set(self.ivs) - set().union(*(i.vars() for i in self.outs))
        for x, w in ((self.dep[0], self.dep[1]), (self.dep[1], self.dep[0])):
            pairs = _pairs(x, w, out_vars, reduced, self.ranges, taps)
            if pairs is None or len(pairs) not in (2, 3):
                continue
            got = _separable(self.ivs, self.cons, pairs, self.ranges)
            if got is not None:
                return got
        return None

    def gathered(self) -> _View | None:
        """A stride-1 transposed convolution (cuDNN's backward data, which has the same Winograd
        and FFT algorithms) writes `y[p + r + c] += x[p] w[r]`: each output index `p +- r + c` whose
        `p` one operand reads bare and `r` the other, becomes a variable q, with `p = q -+ r - c`
        substituted everywhere (p's bounds become constraints on (q, r)): the convolution
        `y[q] += x[q -+ r - c] w[r]` summing the same products. None when no index is such."""
        env: dict[str, AffExpr] = {}
        ranges = dict(self.ranges)
        outs = list(self.outs)
        cons = list(self.cons)
        for d, e in enumerate(self.outs):
            if e.is_quasi() or len(e.terms) != 2 or any(abs(c) != 1 for _, c in e.terms):
                continue
            for (p, cp), (r, cr) in (e.terms, e.terms[::-1]):
                if cp != 1 or not all(isinstance(v, str) for v in (p, r)) or p in env:
                    continue
                bare = [any(i.is_var() and i.terms[0][0] == p for i in idx) for idx in self.dep]
                has_r = [any(r in i.vars() for i in idx) for idx in self.dep]
                if sorted(bare) != [False, True] or has_r != [not b for b in bare]:
                    continue
                q = _fresh(f"{p}_out", self.ivs)
                env[str(p)] = AffExpr.var(q) - e + AffExpr.var(str(p))
                (plo, phi), (rlo, rhi) = ranges.pop(str(p)), ranges[str(r)]
                shift = [cr * rlo, cr * rhi]
                ranges[q] = (plo + min(shift) + e.const, phi + max(shift) + e.const)
                outs[d] = AffExpr.var(q)
                break
        if not env:
            return None
        sub = [Constraint(c.cond.substitute(env), frozenset(c.cond.substitute(env).vars())) for c in cons]
        for q in {str(o) for o in outs} & set(ranges) - set(self.ranges):
            alone = [c for c in sub if c.vars == {q}]  # the output's own bounds (padding's guards)
            held = [v for v in range(ranges[q][0], ranges[q][1] + 1)
                    if all(c.cond.evaluate({q: v}) for c in alone)]
            if not held:
                return None
            ranges[q] = (held[0], held[-1])
        ivs = tuple(_fresh(f"{v}_out", self.ivs) if v in env else v for v in self.ivs)
        dep = [tuple(i.substitute(env) for i in idx) for idx in self.dep]
        return _View(ivs, tuple(sub), ranges, dep, tuple(outs))

    def unflattened(self) -> _View | None:
        """A convolution whose output positions and taps are flattened (`F.unfold` then a product:
        `cols[c*9 + r*3 + s, p*W + q]`, read as `x[k // 9, (l // W) + (k // 3) % 3, l % W + k % 3]`):
        each variable read through `//` and `%` is split into the digits those divisors take apart
        (`_digits`), the reads resolved over the digits' ranges (`_in_box`), and the output's
        variables kept as bare indices (a flat output index is one-to-one on its digits). None when
        no variable is such, or an index stays quasi-affine."""
        exprs = [e for idx in self.dep for e in idx] + list(self.outs)
        env: dict[str, AffExpr] = {}
        ranges = dict(self.ranges)
        ivs: list[str] = []
        for v in self.ivs:
            lo, hi = self.ranges[v]
            strides = _digits(v, exprs, hi - lo + 1) if lo == 0 else None
            if strides is None:
                ivs.append(v)
                continue
            ends = [*strides[1:], hi + 1]
            names = [_fresh(f"{v}_{j}", [*self.ivs, *ivs]) for j in range(len(strides))]
            for name, st, end in zip(names, strides, ends, strict=True):
                ranges[name] = (0, end // st - 1)
            env[v] = sum((st * AffExpr.var(n) for n, st in zip(names, strides, strict=True)), AffExpr.lit(0))
            del ranges[v]
            ivs += names[::-1]
        if not env:
            return None
        dep = [tuple(_in_box(i.substitute(env), ranges) for i in idx) for idx in self.dep]
        if any(i.is_quasi() for idx in dep for i in idx):
            return None
        out_vars = set().union(*(_in_box(o.substitute(env), ranges).vars() for o in self.outs))
        cons = []
        for c in self.cons:
            if len(c.vars) == 1 and (v := next(iter(c.vars))) in env and \
                    all(c.cond.evaluate({v: x}) for x in self.ranges[v]):
                continue  # a bound of a split variable's own range: its digits' ranges replace it
            cond = _in_box_cond(c.cond.substitute(env), ranges)
            cons.append(Constraint(cond, frozenset(cond.vars())))
        for v in set(ranges) - set(self.ranges):
            hi = ranges[v][1]
            cons += [Constraint(AffCond(AffExpr.var(v)), frozenset({v})),
                     Constraint(AffCond(hi - AffExpr.var(v)), frozenset({v}))]
        outs = tuple(AffExpr.var(v) for v in ivs if v in out_vars)
        return _View(tuple(ivs), tuple(cons), ranges, dep, outs)


def _digits(v: str, exprs: Sequence[AffExpr], extent: int) -> list[int] | None:
    """The strides of a mixed-radix split of `v` (over 0 .. extent - 1) that its reads through `//`
    and `%` take apart: the divisors of the floor divisions and remainders whose numerator holds v,
    each dividing the next and the extent; None when v is read through none, or not so."""
    dens: set[int] = set()

    def walk(e: AffExpr) -> None:
        for a, _ in e.terms:
            if isinstance(a, FloorDiv | Mod):
                if v in a.num.vars():
                    dens.add(a.den)
                walk(a.num)

    for e in exprs:
        walk(e)
    strides = [1, *sorted(dens)]
    if len(strides) == 1 or any(b % a for a, b in itertools.pairwise(strides)) or extent % strides[-1]:
        return None
    return strides


def _in_box(e: AffExpr, ranges: dict[str, tuple[int, int]]) -> AffExpr:
    """`e` with every `n // d` and `n % d` resolved where the variables' ranges decide it: the part of
    n whose coefficients d divides goes to the quotient, and the rest, when it stays within
    0 .. d - 1 over the ranges, is the remainder (`(8 p + q) // 8` is p for q in 0 .. 7)."""
    out = AffExpr.lit(e.const)
    for a, c in e.terms:
        if isinstance(a, str):
            out = out + c * AffExpr.var(a)
            continue
        num = _in_box(a.num, ranges)
        whole = [(t, k) for t, k in num.terms if k % a.den == 0]
        rest = [(t, k) for t, k in num.terms if k % a.den]
        lo = hi = num.const % a.den
        quot = AffExpr.lit(num.const // a.den)
        for t, k in rest:
            if not isinstance(t, str):
                lo, hi = -1, a.den  # an atom's range is not followed: left as it is
                break
            tl, th = ranges[t]
            lo, hi = lo + min(k * tl, k * th), hi + max(k * tl, k * th)
        if not 0 <= lo <= hi < a.den or any(not isinstance(t, str) for t, _ in whole):
            out = out + c * (num // a.den if isinstance(a, FloorDiv) else num % a.den)
            continue
        quot = quot + sum((k // a.den * AffExpr.var(t) for t, k in whole), AffExpr.lit(0))
        rem = sum((k * AffExpr.var(t) for t, k in rest), AffExpr.lit(num.const % a.den))
        out = out + c * (quot if isinstance(a, FloorDiv) else rem)
    return out


def _in_box_cond(c: AffCond, ranges: dict[str, tuple[int, int]]) -> AffCond:
    return AffCond(_in_box(c.expr, ranges), c.op)


def _fresh(base: str, taken: Sequence[str]) -> str:
    name, k = base, 1
    while name in taken:
        name, k = f"{base}{k}", k + 1
    return name


def _pairs(x: tuple[AffExpr, ...], w: tuple[AffExpr, ...], out_vars: set[str], reduced: set[str],
           ranges: dict[str, tuple[int, int]], taps: int | None = TAPS) -> list[tuple[str, str]] | None:
    """(output variable, tap variable) of every index `o +- k + c` of `x` that is a stride-1 window
    of `taps` taps (None: at least 2); None when `x` or `w` reads a window variable any other way."""
    pairs = []
    for e in x:
        e = _window(e)
        if e.is_quasi() or len(e.terms) != 2:
            continue
        (u, _), (v, _) = e.terms
        o, k = (u, v) if u in out_vars else (v, u)
        if o in out_vars and k in reduced and e.coeff(str(o)) == 1 and abs(e.coeff(str(k))) == 1 \
                and (ranges[k][1] - ranges[k][0] + 1 == taps if taps is not None
                     else ranges[k][1] - ranges[k][0] + 1 >= 2):
            pairs.append((str(o), str(k)))
    used = {v for p in pairs for v in p}
    if len(used) != 2 * len(pairs):
        return None
    for e in x:
        vs = e.vars()
        if vs & used and not any(vs == set(p) for p in pairs):
            return None
    if any(sum(e.vars() == set(p) for e in x) != 1 for p in pairs):
        return None
    outs = {o for o, _ in pairs}
    for o, k in pairs:
        w_k = [e for e in w if k in e.vars()]
        if any(o in e.vars() for e in w) or len(w_k) != 1 or w_k[0].is_quasi() or w_k[0].coeff(k) == 0 \
                or w_k[0].vars() & outs:
            return None  # the filter: a function of the taps (and channels), never of an output position
    return pairs


def _window(e: AffExpr) -> AffExpr:
    """The window `o +- k + c` of an input index that reads it through a floor division by a
    constant, `(o +- k + c) // s`: a convolution over a nearest-neighbour upsampling of its input
    (`conv(interpolate(x, scale_factor=s))`, the read folded into the convolution). An implementation
    materialises the upsampled map and runs its fast convolution on that (its traffic not counted:
    errs low); `e` itself otherwise."""
    if e.const == 0 and len(e.terms) == 1 and e.terms[0][1] == 1 and isinstance(e.terms[0][0], FloorDiv):
        return e.terms[0][0].num
    return e


def _separable(ivs: Sequence[str], cons: Sequence[Constraint], pairs: list[tuple[str, str]],
               ranges: dict[str, tuple[int, int]]) -> tuple[list[_Axis], int] | None:
    """The axes' tap counts per output position and the other variables' points, when every
    constraint touches one (o, k) pair or none of them; else None."""
    pair_vars = [set(p) for p in pairs]
    used = set().union(*pair_vars)
    own: list[list[Constraint]] = [[] for _ in pairs]
    rest = []
    for c in cons:
        if not c.vars & used:
            rest.append(c)
            continue
        hit = [i for i, pv in enumerate(pair_vars) if c.vars <= pv]
        if not hit:
            return None
        own[hit[0]].append(c)
    axes = []
    for (o, k), cs in zip(pairs, own, strict=True):
        (olo, ohi), (klo, khi) = ranges[o], ranges[k]
        taps = tuple(sum(all(c.cond.evaluate({o: ov, k: kv}) for c in cs) for kv in range(klo, khi + 1))
                     for ov in range(olo, ohi + 1))
        axes.append(_Axis(o, k, taps, khi - klo + 1))
    others = [v for v in ivs if v not in used]
    points = count_points(others, rest) if others else int(all(c.cond.evaluate({}) for c in rest))
    return axes, points if math.prod(len(a.taps) for a in axes) else 0
