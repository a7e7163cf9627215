"""Index arithmetic the templates share: dimension normalisation, broadcasting, reshape maps
(view index -> linear offset -> base index, exact under the index ranges), index offsets that also
apply to loaded (indirect) indices, and the guards of windows that may leave their input."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from solar_compiler.loopir.affine import AffCond, AffExpr
from solar_compiler.loopir.ast import Binary, Cast, Const, Index, IndexValue

IndexMap = Callable[[tuple[Index, ...]], Sequence[Index]]
Term = tuple[AffExpr, int, int]  # (expression >= 0, coefficient > 0, max value of the expression)


# ---- dimensions -----------------------------------------------------------------------------------------
def norm_dim(d: int, ndim: int) -> int:
    n = max(ndim, 1)
    if not -n <= d < n:
        raise ValueError(f"dimension {d} out of range for rank {ndim}")
    return d % n


def norm_dims(dims: object, ndim: int) -> list[int]:
    """Reduction dims: None or [] means all dims."""
    if dims is None or (isinstance(dims, (list, tuple)) and len(dims) == 0):
        return list(range(ndim))
    if isinstance(dims, int):
        dims = [dims]
    return sorted({norm_dim(int(d), ndim) for d in dims})


def int_tuple(v: object, n: int) -> list[int]:
    """An int-or-list argument (kernel size, stride, padding) as `n` ints."""
    if isinstance(v, (list, tuple)):
        vals = [int(x) for x in v]
        return vals * n if len(vals) == 1 else vals
    return [int(v)] * n


def count(shape: Sequence[int], dims: Sequence[int]) -> int:
    return math.prod(shape[d] for d in dims)


def kept_shape(shape: Sequence[int], dims: Sequence[int], keepdim: bool) -> tuple[int, ...]:
    return tuple(1 if d in dims else n for d, n in enumerate(shape) if keepdim or d not in dims)


def bcast_index(idx: Sequence[Index], in_shape: Sequence[int], out_shape: Sequence[int]) -> list[Index]:
    """Indices into a tensor of `in_shape` broadcast (right-aligned) to `out_shape`."""
    off = len(out_shape) - len(in_shape)
    return [AffExpr.lit(0) if n == 1 and out_shape[off + d] != 1 else idx[off + d]
            for d, n in enumerate(in_shape)]


def bcast_shape(shapes: Sequence[Sequence[int]]) -> list[int]:
    """The broadcast (right-aligned) shape of `shapes`."""
    nb = max(len(s) for s in shapes)
    out = [1] * nb
    for s in shapes:
        for d, n in enumerate(s):
            k = nb - len(s) + d
            out[k] = max(out[k], n)
    return out


def advanced_position(dims: Sequence[int]) -> int:
    """Where advanced indexing (`x[i0, :, i2]`, tensors at `dims`) puts the broadcast index dims in
    the result: at the first indexed dim when the indexed dims are adjacent, else first (numpy)."""
    return dims[0] if list(dims) == list(range(dims[0], dims[0] + len(dims))) else 0


# ---- reshapes ---------------------------------------------------------------------------------------------
def _sum(terms: Sequence[Term]) -> AffExpr:
    out = AffExpr.lit(0)
    for e, cf, _ in terms:
        out = out + e * cf
    return out


def _quot(terms: Sequence[Term], s: int) -> list[Term]:
    """(sum of terms) // s, exact under the term ranges."""
    if s == 1:
        return list(terms)
    whole = [(e, cf // s, m) for e, cf, m in terms if cf % s == 0]
    rest = [t for t in terms if t[1] % s != 0]
    rmax = sum(cf * m for _, cf, m in rest)
    if rest and rmax >= s:
        whole.append((_sum(rest) // s, 1, rmax // s))
    return whole


def _mod(terms: Sequence[Term], n: int) -> list[Term]:
    """(sum of terms) % n, exact under the term ranges."""
    kept = [(e, cf % n, m) for e, cf, m in terms if cf % n != 0]
    if sum(cf * m for _, cf, m in kept) < n:
        return kept
    return [(_sum(kept) % n, 1, n - 1)]


def unflatten(terms: Sequence[Term], shape: Sequence[int]) -> list[AffExpr]:
    """The indices into a contiguous tensor of `shape` of the linear offset `sum(e * coefficient)`."""
    strides = [math.prod(shape[d + 1:]) for d in range(len(shape))]
    return [AffExpr.lit(0) if n == 1 else _sum(_mod(_quot(terms, st), n))
            for st, n in zip(strides, shape, strict=True)]


def reshape_map(old: Sequence[int], new: Sequence[int]) -> IndexMap:
    """Index map of `base(old).reshape(new)`: view index -> base index."""
    if math.prod(old) != math.prod(new):
        raise ValueError(f"cannot reshape {list(old)} to {list(new)}")
    if list(old) == list(new):
        return lambda idx: idx
    new_strides = [math.prod(new[d + 1:]) for d in range(len(new))]

    def index_map(idx: tuple[Index, ...]) -> list[Index]:
        terms: list[Term] = []
        for e, st, n in zip(idx, new_strides, new, strict=True):
            if n == 1:
                continue
            if not isinstance(e, AffExpr):
                # an indirect index survives only a reshape that keeps its dimension whole
                return indirect_reshape(idx, old, new)
            terms.append((e, st, n - 1))
        return unflatten(terms, old)

    return index_map


def indirect_reshape(idx: tuple[Index, ...], old: Sequence[int], new: Sequence[int]) -> list[Index]:
    """A reshape of a view with a loaded (indirect) index. When it only adds or drops size-1 dims,
    the other indices pass through; otherwise the linear offset is computed as a loaded i64 value
    (`sum idx[d] * stride[d]`) and split into the base dims with `//` and `%` (Swin's relative
    position bias: a table gathered by an index, then reshaped to [heads, N, N])."""
    drop_old = [n for n in old if n != 1]
    drop_new = [(i, n) for i, n in zip(idx, new, strict=True) if n != 1]
    if drop_old == [n for _, n in drop_new]:
        it = iter(i for i, _ in drop_new)
        return [AffExpr.lit(0) if n == 1 else next(it) for n in old]
    flat: Index = AffExpr.lit(0)
    for e, st, n in zip(idx, [math.prod(new[d + 1:]) for d in range(len(new))], new, strict=True):
        if n != 1:
            flat = _iaddx(flat, imul(e, st))
    out: list[Index] = []
    for d, n in enumerate(old):
        st = math.prod(old[d + 1:])
        if n == 1:
            out.append(AffExpr.lit(0))
            continue
        q = flat if st == 1 else _iop("floordiv", flat, st)
        out.append(q if d == 0 else _iop("mod", q, n))
    return out


def _loaded(i: Index) -> Index:
    """An index as an i64 scalar expression."""
    if isinstance(i, AffExpr):
        return IndexValue(i, "i64")
    return i if i.dtype == "i64" else Cast(i, "i64")


def _iaddx(a: Index, b: Index) -> Index:
    if isinstance(a, AffExpr) and isinstance(b, AffExpr):
        return a + b
    return Binary("add", _loaded(a), _loaded(b), "i64")


def _iop(fn: str, a: Index, k: int) -> Index:
    if isinstance(a, AffExpr):
        return a // k if fn == "floordiv" else a % k
    return Binary(fn, _loaded(a), Const(int(k), "i64"), "i64")


# ---- offsets on affine or loaded indices ------------------------------------------------------------------
def iadd(i: Index, k: int) -> Index:
    if k == 0:
        return i
    if isinstance(i, AffExpr):
        return i + k
    return Binary("add", i, Const(int(k), i.dtype), i.dtype)


def imul(i: Index, k: int) -> Index:
    if k == 1:
        return i
    if isinstance(i, AffExpr):
        return i * k
    return Binary("mul", i, Const(int(k), i.dtype), i.dtype)


def imod(i: Index, n: int) -> Index:
    """i mod n (n > 0): affine, or on a loaded index its integer remainder (floored, as `%`)."""
    if isinstance(i, AffExpr):
        return i % n
    return Binary("mod", i, Const(int(n), i.dtype), i.dtype)


def ineg_from(n: int, i: Index) -> Index:
    """n - i."""
    if isinstance(i, AffExpr):
        return AffExpr.lit(n) - i
    return Binary("sub", Const(int(n), i.dtype), i, i.dtype)


# ---- windows ----------------------------------------------------------------------------------------------
def range_guards(e: AffExpr, lo_val: int, hi_val: int, size: int) -> list[AffCond]:
    """Guards 0 <= e < size, only for the sides the index can actually cross."""
    out = []
    if lo_val < 0:
        out.append(AffCond.compare(e, ">=", AffExpr.lit(0)))
    if hi_val > size - 1:
        out.append(AffCond.compare(e, "<=", AffExpr.lit(size - 1)))
    return out


def window_index(p: Sequence[AffExpr], r: Sequence[AffExpr], p_extent: Sequence[int], size: Sequence[int],
                 kernel: Sequence[int], stride: Sequence[int], padding: Sequence[int],
                 dilation: Sequence[int]) -> tuple[list[AffExpr], list[AffCond]]:
    """Per spatial dim the index `p*stride + r*dilation - padding` (`p` below `p_extent`, the tap `r`
    below `kernel`) and the guards keeping it inside `[0, size)`, only where it can leave: the input
    index of a pooling or convolution window, or the output index a transposed convolution
    scatters to."""
    idx: list[AffExpr] = []
    guards: list[AffCond] = []
    for d in range(len(p_extent)):
        e = p[d] * stride[d] + r[d] * dilation[d] - padding[d]
        hi = (p_extent[d] - 1) * stride[d] + (kernel[d] - 1) * dilation[d] - padding[d]
        guards += range_guards(e, -padding[d], hi, size[d])
        idx.append(e)
    return idx, guards


def dilated_window_index(p: Sequence[AffExpr], r: Sequence[AffExpr], p_extent: Sequence[int],
                         size: Sequence[int], kernel: Sequence[int], stride: Sequence[int],
                         padding: Sequence[int], dilation: Sequence[int], ld: Sequence[int]
                         ) -> tuple[list[AffExpr], list[AffCond]]:
    """`window_index` over an input dilated by `ld` (`ld - 1` zeros between elements): the index is
    `q // ld` for `q = p*s + r*d - pad`, guarded to the taps on input elements (`q % ld == 0`,
    inside the input): taps on the inserted zeros are not work."""
    idx: list[AffExpr] = []
    guards: list[AffCond] = []
    for d in range(len(p_extent)):
        q = p[d] * stride[d] + r[d] * dilation[d] - padding[d]
        hi = (p_extent[d] - 1) * stride[d] + (kernel[d] - 1) * dilation[d] - padding[d]
        guards += range_guards(q, -padding[d], hi, (size[d] - 1) * ld[d] + 1)
        if ld[d] != 1:
            guards.append(AffCond.compare(q % ld[d], "==", AffExpr.lit(0)))
            idx.append(q // ld[d])
        else:
            idx.append(q)
    return idx, guards
