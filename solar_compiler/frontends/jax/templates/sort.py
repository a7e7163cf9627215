"""`sort` along one dimension of static size (any number of operands sorted together by the first
`num_keys`, as `jnp.sort`, `jnp.argsort` and `lax.sort` give): a bitonic sorting network.

The sorted dim is padded to the next power of two n' (keys past the end are the dtype's largest
value, so they sort last). Each of the log2(n')*(log2(n')+1)/2 stages compare-exchanges the pairs
(i, i + j) of blocks of size k, ascending or descending by block, reading one buffer and writing the
other (ping-pong: every element written once per stage): two statements per operand and stage, the
pairs enumerated by affine loops. Its work is a sorting network's, O(n' log^2 n') comparisons, not a
data-dependent comparison sort's. Equal keys are ordered by their original position (a stable sort)."""

from __future__ import annotations

import numpy as np

from solar_compiler.executor.numeric import STORAGE
from solar_compiler.frontends.builder.exprs import INF, c, cast, cmp, index_value, select
from solar_compiler.frontends.builder.values import Loop, Val, ivars, loops, stored, view
from solar_compiler.frontends.captured_program import AtenNode
from solar_compiler.loopir.affine import AffExpr
from solar_compiler.loopir.ast import FLOAT_DTYPES, Read, SExpr, TensorDecl

from ..registry import template
from ..translator import JaxTranslator


def _largest(dtype: str) -> float | int:
    return INF if dtype in FLOAT_DTYPES else int(np.iinfo(STORAGE[dtype]).max)


@template("jax.sort")
def _sort(tr: JaxTranslator, node: AtenNode) -> tuple[Val, ...] | Val:
    vals = [tr.val(a) for a in node.args]
    dim = int(node.kwargs["dimension"]) % vals[0].ndim
    num_keys = int(node.kwargs.get("num_keys", 1))
    shape = vals[0].shape
    n = shape[dim]
    size = 1
    while size < n:
        size *= 2
    # the original position breaks ties (stability), unless one key alone is sorted
    pos = len(vals) > 1 or num_keys > 1
    ops = [*vals, None] if pos else list(vals)
    dts = [v.dtype for v in vals] + (["i32"] if pos else [])
    pshape = tuple(size if d == dim else s for d, s in enumerate(shape))
    bufs = [[tr.declare(f"{tr.out_meta(0).name}_sort{k}_{b}", pshape, dt) for b in (0, 1)]
            for k, dt in enumerate(dts)]
    # copy in, padding past the end with the largest key (payloads with 0, positions with n..)
    lps = loops("i", pshape)
    idx = ivars(lps)
    for k, (v, dt) in enumerate(zip(ops, dts, strict=True)):
        inside = [Loop(lp.iv, 0, n) if d == dim else lp for d, lp in enumerate(lps)]
        value = index_value(idx[dim], dt) if v is None else cast(v.read(idx), dt)
        tr.emit(bufs[k][0], idx, "=", value, inside)
        if size > n:
            pad = [Loop(lp.iv, n, size) if d == dim else lp for d, lp in enumerate(lps)]
            fill = index_value(idx[dim], dt) if v is None else c(_largest(dt) if k < num_keys else 0, dt)
            tr.emit(bufs[k][0], idx, "=", fill, pad)
    cur = 0
    k = 2
    while k <= size:
        j = k // 2
        while j >= 1:
            _stage(tr, bufs, cur, dim, pshape, size, k, j, num_keys, pos)
            cur = 1 - cur
            j //= 2
        k *= 2
    results = []
    for i, v in enumerate(vals):
        out = stored(bufs[i][cur])
        results.append(out if size == n else view(out, v.shape, lambda ix: list(ix)))
    return tuple(results) if len(results) > 1 else results[0]


def _stage(tr: JaxTranslator, bufs: list[list[TensorDecl]], cur: int, dim: int, shape: tuple[int, ...],
           size: int, k: int, j: int, num_keys: int, pos: bool) -> None:
    """One compare-exchange stage: pairs (i, i + j), i = blk*k + h*2j + r, ascending in even blocks
    of size k (blk = 2*g) and descending in odd ones; the last merge (k = size) is all ascending."""
    q = k // (2 * j)
    directions = (0,) if k == size else (0, 1)
    others = [Loop(f"i{e}", 0, s) for e, s in enumerate(shape) if e != dim]

    def at(i: AffExpr) -> list[AffExpr]:
        it = iter(AffExpr.var(lp.iv) for lp in others)
        return [i if e == dim else next(it) for e in range(len(shape))]

    for d in directions:
        g_n = size // k if k == size else size // (2 * k)
        pair_lps = [Loop("g", 0, g_n), Loop("h", 0, q), Loop("r", 0, j)]
        g, h, r = (AffExpr.var(n) for n in ("g", "h", "r"))
        blk = g if k == size else g * 2 + d
        lo = blk * k + h * (2 * j) + r
        hi = lo + j
        def key(b: int, i: AffExpr) -> list[SExpr]:
            n_keys = num_keys + (1 if pos else 0)
            cols = list(range(num_keys)) + ([len(bufs) - 1] if pos else [])
            return [Read(bufs[col][b].name, tuple(at(i)), bufs[col][b].dtype) for col in cols[:n_keys]]

        a, bk = key(cur, lo), key(cur, hi)
        # out of order: b < a lexicographically (descending blocks: a < b)
        first, second = (bk, a) if d == 0 else (a, bk)
        swap = _less(first, second)
        for pair in bufs:
            src, dst = pair[cur], pair[1 - cur]
            va = Read(src.name, tuple(at(lo)), src.dtype)
            vb = Read(src.name, tuple(at(hi)), src.dtype)
            tr.emit(dst, at(lo), "=", select(swap, vb, va), [*others, *pair_lps])
            tr.emit(dst, at(hi), "=", select(swap, va, vb), [*others, *pair_lps])


def _less(a: list[SExpr], b: list[SExpr]) -> SExpr:
    """a < b lexicographically."""
    e = cmp("lt", a[-1], b[-1])
    for x, y in zip(reversed(a[:-1]), reversed(b[:-1]), strict=True):
        e = select(cmp("lt", x, y), c(True, "bool"), select(cmp("eq", x, y), e, c(False, "bool")))
    return e
