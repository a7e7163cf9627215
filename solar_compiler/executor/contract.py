"""Sum of products of labelled arrays, routed to BLAS.

Two operands become one batched matrix product. The operand copied in (batch, free, summed) order
and the one copied in (batch, summed, free) order are chosen so that the larger copy walks its
innermost axis at unit stride: for a conv the input window (a strided view, never materialised
before this point) is laid out as im2col columns (c, r, s | n, p, q) with q innermost, which is a
fast copy, while the (n, p, q | c, r, s) order np.tensordot picks is several times slower. More
operands go through np.einsum's greedy path.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

Labelled = tuple[np.ndarray, list[int]]  # array, one axis label per dimension


def contract(ops: Sequence[Labelled], out: Sequence[int]) -> np.ndarray:
    """sum over labels not in `out` of the product of `ops`; result axes ordered as `out`."""
    ops = [_presum(i, out, ops) for i in range(len(ops))]
    if len(ops) == 1:
        a, ax = ops[0]
        return np.transpose(a, [ax.index(k) for k in out]) if list(ax) != list(out) else a
    if len(ops) == 2:
        return _pair(ops[0], ops[1], out)
    args: list = []
    for a, ax in ops:
        args += [a, ax]
    return np.einsum(*args, list(out), optimize="greedy")


def _presum(i: int, out: Sequence[int], ops: Sequence[Labelled]) -> Labelled:
    """Sum away labels only operand i carries and the result does not keep."""
    a, ax = ops[i]
    others = {k for j, (_, bx) in enumerate(ops) if j != i for k in bx}
    own = [d for d, k in enumerate(ax) if k not in out and k not in others]
    if not own:
        return a, ax
    acc = np.float64 if a.dtype == np.float32 else None
    s = np.add.reduce(a, axis=tuple(own), dtype=acc).astype(a.dtype, copy=False)
    return s, [k for d, k in enumerate(ax) if d not in own]


def _pair(x: Labelled, y: Labelled, out: Sequence[int]) -> np.ndarray:
    (a, ax), (b, bx) = x, y
    batch = [k for k in out if k in ax and k in bx]
    summed = [k for k in ax if k in bx and k not in out]
    fa = [k for k in ax if k not in bx]
    fb = [k for k in bx if k not in ax]
    if _copy_cost(a, ax, batch + fa + summed) + _copy_cost(b, bx, batch + summed + fb) > \
            _copy_cost(b, bx, batch + fb + summed) + _copy_cost(a, ax, batch + summed + fa):
        (a, ax, fa), (b, bx, fb) = (b, bx, fb), (a, ax, fa)
    n = [_extent(a, ax, b, bx, k) for k in batch]
    ma = [_extent(a, ax, b, bx, k) for k in fa]
    mb = [_extent(a, ax, b, bx, k) for k in fb]
    ks = [_extent(a, ax, b, bx, k) for k in summed]
    am = _lay(a, ax, batch + fa + summed).reshape(math.prod(n), math.prod(ma), math.prod(ks))
    bm = _lay(b, bx, batch + summed + fb).reshape(math.prod(n), math.prod(ks), math.prod(mb))
    res = np.matmul(am, bm).reshape(n + ma + mb)
    labels = batch + fa + fb
    return np.transpose(res, [labels.index(k) for k in out])


def _extent(a: np.ndarray, ax: list[int], b: np.ndarray, bx: list[int], k: int) -> int:
    return a.shape[ax.index(k)] if k in ax else b.shape[bx.index(k)]


def _lay(a: np.ndarray, ax: list[int], order: list[int]) -> np.ndarray:
    return np.ascontiguousarray(np.transpose(a, [ax.index(k) for k in order]))


def _copy_cost(a: np.ndarray, ax: list[int], order: list[int]) -> float:
    """Elements copied to lay `a` out in `order`, weighted 4x when the innermost axis is not unit-stride."""
    t = np.transpose(a, [ax.index(k) for k in order])
    if t.flags.c_contiguous:
        return 0.0
    inner = [i for i, n in enumerate(t.shape) if n > 1]
    unit = bool(inner) and abs(t.strides[inner[-1]]) == t.itemsize and t.shape[inner[-1]] >= 8
    return float(t.size) * (1 if unit else 4)
