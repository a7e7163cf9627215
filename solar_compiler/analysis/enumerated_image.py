"""Distinct values of affine index expressions over a small box, counted by enumerating the box.

isl counts the image of a quasi-affine map (div and mod in its results) by eliminating the
existential variables those introduce, which can take a minute for one access: a window partition
of SwinMLP (`81*d0 + ((d1 mod 56) + 4)/7 + ...`, three results over 3 million points) took 64 s.
Over a box of at most `MAX_POINTS` points, evaluating the results at every point with numpy and
counting the distinct tuples gives the same number in well under a second. Exact, not an estimate:
the count is the size of the set of result tuples, as isl's would be. Anything else (a non-box
domain, a symbol, too many points) is left to isl (`None`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from xdsl.ir.affine import (
    AffineBinaryOpExpr,
    AffineBinaryOpKind,
    AffineConstantExpr,
    AffineDimExpr,
    AffineExpr,
)

MAX_POINTS = 1 << 23  # about 8 million points: a few int64 arrays of 64 MB


def quasi_affine(e: AffineExpr) -> bool:
    """Whether `e` has a div or mod (where isl's image count may be slow; a plain affine one is fast)."""
    if isinstance(e, AffineBinaryOpExpr):
        return e.kind not in (AffineBinaryOpKind.Add, AffineBinaryOpKind.Mul) or quasi_affine(e.lhs) \
            or quasi_affine(e.rhs)
    return False


def enumerated_image(lows: Sequence[int], highs: Sequence[int], dims: Sequence[int],
                     results: Sequence[AffineExpr]) -> int | None:
    """Distinct tuples of `results` over the box `lows[i] <= d_dims[i] <= highs[i]`, or None when
    the box is too large or a result is not a plain quasi-affine expression of those dims."""
    sizes = [h - lo + 1 for lo, h in zip(lows, highs, strict=True)]
    if any(s <= 0 for s in sizes):
        return 0
    if math.prod(sizes) > MAX_POINTS:
        return None
    grids = dict(zip(dims, np.meshgrid(*(np.arange(lo, h + 1, dtype=np.int64)
                                         for lo, h in zip(lows, highs, strict=True)),
                                       indexing="ij", sparse=True), strict=True))
    shape = tuple(sizes)
    columns = []
    for r in results:
        v = _evaluate(r, grids)
        if v is None:
            return None
        columns.append(np.broadcast_to(v, shape).ravel())
    if not columns:
        return 1
    key = np.zeros(math.prod(shape), dtype=np.int64)
    span = 1
    for col in columns:
        lo, hi = int(col.min()), int(col.max())
        width = hi - lo + 1
        if span * width >= 1 << 62:
            return None
        key += (col - lo) * span
        span *= width
    if span <= 4 * key.size:
        seen = np.zeros(span, dtype=bool)
        seen[key] = True
        return int(np.count_nonzero(seen))
    return int(np.unique(key).size)


def _evaluate(e: AffineExpr, grids: dict[int, np.ndarray]) -> np.ndarray | int | None:
    if isinstance(e, AffineConstantExpr):
        return e.value
    if isinstance(e, AffineDimExpr):
        return grids.get(e.position)
    if not isinstance(e, AffineBinaryOpExpr):
        return None
    a, b = _evaluate(e.lhs, grids), _evaluate(e.rhs, grids)
    if a is None or b is None:
        return None
    if e.kind == AffineBinaryOpKind.Add:
        return a + b
    if e.kind == AffineBinaryOpKind.Mul:
        return a * b
    if not isinstance(b, int) or b <= 0:  # affine div and mod take a positive constant
        return None
    if e.kind == AffineBinaryOpKind.Mod:
        return a % b
    if e.kind == AffineBinaryOpKind.FloorDiv:
        return a // b
    return -((-a) // b)  # CeilDiv
