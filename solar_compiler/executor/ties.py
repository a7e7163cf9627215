"""Index outputs whose order among tied values the framework leaves unspecified.

`torch.topk`, an unstable `sort` / `argsort`, `kthvalue`, `median` / `nanmedian` along a dim and
`mode` return, among elements of equal value, whichever index their implementation meets first:
the documentation promises no order (only `max` / `min` along a dim and `argmax` / `argmin`
promise the first occurrence, and a stable sort the original order; those are compared exactly).
A translation that computes a valid answer in another tie order is correct, yet an exact comparison
of its indices with the reference's fails it. `check` compares such an output instead.

The rule. Validation compares the op's input as our program computed it (`x_got`, a copy the
validation kernel takes when the op runs) with the reference's (`x_ref`, recorded when the framework
ran the op) as an output of its own, with its own tolerance (executor/compare.py). An index output
then passes when

1. every index is in range, and, for `topk` and `sort`, the indices of one row are distinct; and
2. at every position where our index `g` differs from the reference's `e` (same row), the two
   elements tie: they are equal in `x_got`, or equal in `x_ref`, or (for order statistics, `near`)
   some input between the two elementwise (each element anywhere between its `x_got` and its
   `x_ref` value) makes them equal: their intervals `[x_got, x_ref]` intersect. `mode` counts
   equal values, so only exact equality counts for it.

Why this cannot accept a wrong program. The reference's indices are a valid answer on `x_ref`,
and (2) says ours select, slot by slot, values that are equal to the ones the reference's select,
on our input, on the reference's, or on one between them; with (1), ours are then a valid answer
of the same op on an input within the elementwise distance of `x_got` from `x_ref`, and that
distance is the one the comparison of the input itself bounds (its relative norm tolerance, the
same bound every float output of the program is held to). A program that computes the op's input
wrongly fails that comparison, whatever its indices; one that selects other elements (indices off
by one, the smallest instead of the largest, a repeated index) selects, at some differing position,
values that do not tie, and fails (2) or (1). Nothing else is relaxed: every other output,
including values gathered or routed with the indices downstream, is compared as before, so a
float output that a different tie choice changes beyond its tolerance still fails; one within it
(values gathered at tied positions are equal) is shown to be the same function on that sample.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Tie:
    """How an index output relates to the op that chose it.

    Output element `p` (row-major) is element `p` of the op's index result, of `index_shape`
    (the output is that result, or a copy that keeps its row-major order: a cast, a reshape)."""

    input: str                      # the compared array holding the op's input as the op saw it
    shape: tuple[int, ...]          # the output's shape
    input_shape: tuple[int, ...]
    dim: int                        # the op's dim (in the input)
    index_shape: tuple[int, ...]    # the op's index result
    slots: bool                     # index_shape keeps `dim` (topk, sort, keepdim); else it is dropped
    distinct: bool                  # a row's indices are distinct (topk, sort)
    near: bool                      # a near tie counts (order statistics); else equal values only
    what: str                       # "topk at m.py:13", for messages

    @property
    def row_shape(self) -> tuple[int, ...]:
        return tuple(s for d, s in enumerate(self.input_shape) if d != self.dim)

    @property
    def n(self) -> int:
        return self.input_shape[self.dim]


@dataclass(frozen=True)
class TieVerdict:
    differ: int          # positions where the indices differ
    first: int | None    # the first failing position (flat, into the compared arrays), or None
    why: str             # what fails there


def check(tie: Tie, ref: np.ndarray, got: np.ndarray, x_ref: np.ndarray, x_got: np.ndarray,
          pos: np.ndarray | None = None, xpos: np.ndarray | None = None) -> TieVerdict:
    """The rule of the module doc on one output. Whole arrays (`pos` None): `ref`/`got` of the
    output's shape, `x_ref`/`x_got` of the input's. Sampled ones: 1-d, at `pos` (rows of indices
    into the output) and `xpos` (into the input: whole rows along `dim`, `input_points`)."""
    ref, got = np.asarray(ref).reshape(-1), np.asarray(got).reshape(-1)
    if pos is None:
        flat = np.arange(ref.size)
        xr, xg = _rows_whole(tie, np.asarray(x_ref)), _rows_whole(tie, np.asarray(x_got))
        local = None
    else:
        flat = _flat(pos, tie.shape)
        local, xr, xg = _rows_sampled(tie, xpos, np.ravel(x_ref), np.ravel(x_got))
    row, slot = _index_rows(tie, flat)
    if local is not None:  # global row ids -> rows of the sampled arrays (-1: not sampled whole)
        at = np.minimum(np.searchsorted(local, row), len(local) - 1)
        row = np.where(local[at] == row, at, -1) if len(local) else np.full_like(row, -1)
    first, why = check_rows(xr, xg, row, slot, ref.astype(np.int64), got.astype(np.int64),
                            distinct=tie.distinct, near=tie.near)
    return TieVerdict(int(np.count_nonzero(ref != got)), first, why)


def check_rows(xr: np.ndarray, xg: np.ndarray, row: np.ndarray, slot: np.ndarray, ref: np.ndarray,
               got: np.ndarray, *, distinct: bool, near: bool) -> tuple[int | None, str]:
    """The rule on rows: `xr`, `xg` (R x n) are the reference's and our input, one row per op row;
    position i holds the indices `ref[i]`, `got[i]` of slot `slot[i]` of row `row[i]` (-1: that row
    is not available, a failure where the indices differ). (first failing position, why) or
    (None, "")."""
    n = xr.shape[1] if xr.ndim == 2 else 0
    fails: list[tuple[int, str]] = []
    bad = np.flatnonzero((got < 0) | (got >= n))
    if bad.size:
        fails.append((int(bad[0]), f"index {int(got[bad[0]])} out of range [0, {n})"))
    fails += _untied(xr, xg, row, ref, got, near)
    if distinct:
        fails += _repeated(row, slot, got, n)
    return min(fails) if fails else (None, "")


def _untied(xr, xg, row, ref, got, near: bool) -> list[tuple[int, str]]:
    """The first positions (in range) where the indices differ and the rows show no tie."""
    n = xr.shape[1] if xr.ndim == 2 else 0
    at = np.flatnonzero((got != ref) & (got >= 0) & (got < n))
    r, g, e = row[at], got[at], ref[at]
    have = (r >= 0) & (e >= 0) & (e < n)
    out = []
    if not have.all():
        out.append((int(at[np.flatnonzero(~have)[0]]), "the op's input row is not available to show a tie"))
    r, g, e, at = r[have], g[have], e[have], at[have]
    tied = tied_values(xg[r, g], xg[r, e], xr[r, g], xr[r, e], near=near)
    if not tied.all():
        j = int(np.flatnonzero(~tied)[0])
        r, g, e = r[j], g[j], e[j]
        out.append((int(at[j]), f"no tie: the op's input holds {_num(xg[r, g])} at {int(g)} and "
                                f"{_num(xg[r, e])} at {int(e)} in ours, {_num(xr[r, g])} and "
                                f"{_num(xr[r, e])} in the reference's"))
    return out


def _repeated(row, slot, got, n: int) -> list[tuple[int, str]]:
    """The first position whose index another slot of its row holds too."""
    key = row.astype(np.int64) * max(n, 1) + got
    order = np.lexsort((slot, key))
    k, s = key[order], slot[order]
    dup = np.flatnonzero((k[1:] == k[:-1]) & (s[1:] != s[:-1]) & (row[order][1:] >= 0))
    if not dup.size:
        return []
    j = int(np.argmin(order[dup + 1]))
    i = int(order[dup[j] + 1])
    return [(i, f"index {int(got[i])} repeated in its row (at slot {int(s[dup[j]])} too)")]


def tied_values(ag: np.ndarray, bg: np.ndarray, ar: np.ndarray, br: np.ndarray, *,
                near: bool) -> np.ndarray:
    """Whether elements a and b tie, given their values in our input (`ag`, `bg`) and in the
    reference's (`ar`, `br`): equal in either (NaN equal to NaN: ops that order NaN put NaNs
    together), or, `near`, their intervals [ag, ar] and [bg, br] intersect (an input between the two,
    elementwise, makes them equal)."""
    ag, bg, ar, br = (np.asarray(a, dtype=np.float64) for a in (ag, bg, ar, br))
    with np.errstate(invalid="ignore"):
        tie = (ag == bg) | (ar == br) | (np.isnan(ag) & np.isnan(bg)) | (np.isnan(ar) & np.isnan(br))
        if near:  # NaN bounds compare false: a NaN on either side is no near tie
            lo = np.maximum(np.minimum(ag, ar), np.minimum(bg, br))
            hi = np.minimum(np.maximum(ag, ar), np.maximum(bg, br))
            tie |= lo <= hi
    return tie


def input_points(tie: Tie, pos: np.ndarray, cap: int) -> np.ndarray | None:
    """The input points sampled validation computes for the sampled output points `pos`: every
    element of each op row those points lie in, or None when that is more than `cap` points."""
    rows = np.unique(_index_rows(tie, _flat(pos, tie.shape))[0])
    if len(rows) * tie.n > cap:
        return None
    rest = np.unravel_index(rows, tie.row_shape) if tie.row_shape else ()
    cols = [np.repeat(c, tie.n) for c in rest]
    cols.insert(tie.dim, np.tile(np.arange(tie.n), len(rows)))
    return np.stack(cols, axis=1).astype(np.int64) if cols else np.zeros((0, 0), np.int64)


def _flat(pos: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    return np.ravel_multi_index(tuple(pos.T), shape) if pos.shape[1] else np.zeros(len(pos), np.int64)


def _index_rows(tie: Tie, flat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(row id, slot) of flat positions of the index result: the row id ravels the coordinates
    other than `dim` over the input's row shape."""
    coords = list(np.unravel_index(flat, tie.index_shape)) if tie.index_shape else []
    slot = coords.pop(tie.dim) if tie.slots else np.zeros(len(flat), np.int64)
    row = _ravel(coords, tie.row_shape, len(flat))
    return np.asarray(row, np.int64), np.asarray(slot, np.int64)


def _ravel(coords, shape: tuple[int, ...], size: int) -> np.ndarray:
    return np.ravel_multi_index(tuple(coords), shape) if shape else np.zeros(size, np.int64)


def _rows_whole(tie: Tie, x: np.ndarray) -> np.ndarray:
    return np.moveaxis(x.reshape(tie.input_shape), tie.dim, -1).reshape(math.prod(tie.row_shape), tie.n)


def _rows_sampled(tie: Tie, xpos: np.ndarray, xr: np.ndarray, xg: np.ndarray):
    """(sorted row ids, R x n reference rows, R x n our rows) of sampled input points (distinct
    points, `input_points`); a row not sampled whole is left out."""
    row = _ravel(np.delete(xpos, tie.dim, axis=1).T, tie.row_shape, len(xpos))
    order = np.lexsort((xpos[:, tie.dim], row))
    ids, start, count = np.unique(row[order], return_index=True, return_counts=True)
    whole = count == tie.n
    keep = order[(start[whole][:, None] + np.arange(tie.n)).reshape(-1)]
    shape = (int(whole.sum()), tie.n)
    return ids[whole], xr[keep].reshape(shape), xg[keep].reshape(shape)


def _num(v) -> str:
    return f"{float(v):.9g}"
