"""The backward slice of sampled output elements: the points of each statement that compute them.

Sampled validation checks a program too large to execute whole: the framework runs at full size
(natively, fast), and the loop IR computes only a random sample of output elements. Which points
of which statements those elements need is the needed-set fixpoint that narrowing runs too
(`executor/needed.py`: `backward`), seeded with the sampled elements instead of whole outputs: a
point is kept iff it writes a needed element (every contribution of a reduction into a needed element, the
initialisation it accumulates into, every iteration of a scan that leads to it), and the reads of
kept points are needed. The result is a set of pieces per statement, each a box of loop values plus
the affine conditions that carve the piece out of its box, which the executor runs instead of the
whole domain (`executor.execute(..., pieces=...)`).

Over-approximation is always sound here: computing an element that no sample needs costs time,
never correctness, as long as everything a kept point reads is computed too, which the fixpoint
guarantees because it propagates from the (possibly enlarged) kept sets. So a kept set with more
than `max_pieces` disjoint pieces is coarsened to the boxes of a k-d partition of its pieces
(spatially compact groups), which keeps islpy's work and the executor's per-piece overhead bounded.
Pieces are made disjoint (a point run twice would add twice, or apply `x = f(x)` twice); a
non-injective `=` (last writer wins) keeps one convex piece, run in lexicographic order, as
narrowing does.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import islpy as isl
import numpy as np

from solar_compiler.executor.needed import _conds, _live, _Stmt, _tensor_box, _Values, backward
from solar_compiler.executor.pieces import Piece
from solar_compiler.loopir.affine import solo_vars
from solar_compiler.loopir.ast import Kernel, statements, typecheck
from solar_compiler.loopir.domain import domain

MAX_PIECES = 512   # disjoint pieces per statement before a kept set is coarsened


class SliceTooCostly(Exception):
    """The slice was not computed within the time allowed (`backward_slice(deadline=...)`)."""


@dataclass(frozen=True)
class Slice:
    pieces: dict[int, tuple[Piece, ...]]   # statement index -> pieces (a statement absent: not run)
    tensors: frozenset[str]                # tensors a kept statement reads or writes
    points: dict[int, int]                 # statement index -> iteration points of its pieces' boxes


def sample_points(shape: Sequence[int], n: int, rng: np.random.Generator) -> np.ndarray:
    """Distinct points of a tensor of `shape` (rows of indices): every corner, one random point on
    every edge (a 1-dimensional face: all coordinates but one at their extremes), and `n` uniform
    random points; every element when the tensor has fewer than that many."""
    shape = tuple(int(s) for s in shape)
    size = math.prod(shape)
    if size == 0:
        return np.zeros((0, len(shape)), dtype=np.int64)
    if not shape:
        return np.zeros((1, 0), dtype=np.int64)
    d = len(shape)
    budget = n + 2 ** min(d, 6) + d * 2 ** min(d - 1, 6)
    if size <= budget:
        return np.stack(np.unravel_index(np.arange(size), shape), axis=1).astype(np.int64)
    rows: list[np.ndarray] = []
    ext = np.array([[0, s - 1] for s in shape])
    corners = np.array(np.meshgrid(*[np.unique(e) for e in ext], indexing="ij")).reshape(d, -1).T
    rows.append(corners[rng.permutation(len(corners))[:64]])
    for axis in range(d):
        others = [np.unique(ext[k]) for k in range(d) if k != axis]
        grid = np.array(np.meshgrid(*others, indexing="ij")).reshape(d - 1, -1).T if others else \
            np.zeros((1, 0), dtype=np.int64)
        grid = grid[rng.permutation(len(grid))[:32]]
        pts = np.insert(grid, axis, rng.integers(0, shape[axis], len(grid)), axis=1)
        rows.append(pts)
    rows.append(np.stack([rng.integers(0, s, n) for s in shape], axis=1))
    pts = np.concatenate(rows).astype(np.int64)
    flat = np.unique(np.ravel_multi_index(tuple(pts.T), shape))
    return np.stack(np.unravel_index(flat, shape), axis=1).astype(np.int64)


def _points_set(tensor: str, pts: np.ndarray) -> isl.Set:
    """The set of the points `pts`, written as runs of consecutive points along the axis that has
    the fewest (whole rows of a tensor are one run each, not one disjunct per point)."""
    dims = [f"x{d}" for d in range(pts.shape[1])]
    space = f"T_{tensor}[{', '.join(dims)}]"
    if not dims:
        return isl.Set(f"{{ {space} }}")
    axis, runs = min(((a, _runs(pts, a)) for a in range(len(dims))), key=lambda r: len(r[1]))
    terms = []
    for first, last in runs:
        conds = [f"{x} = {int(v)}" for d, (x, v) in enumerate(zip(dims, first, strict=True)) if d != axis]
        conds.append(f"{int(first[axis])} <= {dims[axis]} <= {int(last[axis])}")
        terms.append("(" + " and ".join(conds) + ")")
    return isl.Set(f"{{ {space} : {' or '.join(terms)} }}").coalesce()


def _runs(pts: np.ndarray, axis: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """(first, last) point of each run of points that differ only in `axis`, by consecutive values."""
    if not len(pts):
        return []
    keys = [pts[:, d] for d in range(pts.shape[1]) if d != axis]
    p = pts[np.lexsort((pts[:, axis], *reversed(keys)))] if keys else pts[np.argsort(pts[:, axis])]
    other = np.delete(p, axis, axis=1)
    new = np.ones(len(p), bool)
    new[1:] = (other[1:] != other[:-1]).any(axis=1) | (p[1:, axis] != p[:-1, axis] + 1)
    starts = np.flatnonzero(new)
    ends = np.append(starts[1:], len(p)) - 1
    return [(p[a], p[b]) for a, b in zip(starts, ends, strict=True)]


def _box(b: isl.BasicSet) -> list[tuple[int, int]]:
    s = isl.Set.from_basic_set(b)
    n = s.dim(isl.dim_type.set)
    return [(s.dim_min_val(i).to_python(), s.dim_max_val(i).to_python()) for i in range(n)]


def _box_set(space: isl.Space, box: Sequence[tuple[int, int]]) -> isl.Set:
    s = isl.Set.universe(space)
    for i, (lo, hi) in enumerate(box):
        s = s.lower_bound_val(isl.dim_type.set, i, isl.Val(int(lo))).upper_bound_val(isl.dim_type.set, i,
                                                                                   isl.Val(int(hi)))
    return s


def _kd_groups(boxes: list[list[tuple[int, int]]], leaf: int) -> list[list[list[tuple[int, int]]]]:
    """Boxes split at the median of the dimension of widest spread until groups hold <= leaf."""
    if len(boxes) <= leaf:
        return [boxes]
    centres = np.array([[(lo + hi) / 2 for lo, hi in b] for b in boxes])
    dim = int(np.argmax(centres.max(axis=0) - centres.min(axis=0)))
    order = np.argsort(centres[:, dim], kind="stable")
    half = len(boxes) // 2
    return _kd_groups([boxes[i] for i in order[:half]], leaf) + \
        _kd_groups([boxes[i] for i in order[half:]], leaf)


def _coarsen(s: isl.Set, dom: isl.Set, limit: int) -> isl.Set:
    """A superset of `s` within `dom` of at most about `limit` convex pieces."""
    s = s.coalesce()
    if s.n_basic_set() <= limit:
        return s
    boxes = [_box(b) for b in s.get_basic_sets()]
    out = isl.Set.empty(s.get_space())
    for g in _kd_groups(boxes, math.ceil(len(boxes) / limit)):
        hull = [(min(b[i][0] for b in g), max(b[i][1] for b in g)) for i in range(len(g[0]))]
        out = out.union(_box_set(s.get_space(), hull))
    return out.intersect(dom).coalesce()


def backward_slice(kernel: Kernel, samples: Mapping[str, np.ndarray], max_pieces: int = MAX_PIECES,
                   deadline: float | None = None) -> Slice:
    """The pieces of every statement that the sampled output elements (`samples[name]`: rows of
    indices) need; outputs not in `samples` need nothing. Raises SliceTooCostly once
    `time.process_time()` (CPU seconds of this process) passes `deadline`."""
    k = typecheck(kernel)
    stmts = [_Stmt(c, domain(c)) for c in statements(k)]
    vals = _Values(k)  # no known values: every read is live, except select branches an affine
    for st in stmts:   # condition of the loop variables rules out
        s = st.ctx.stmt
        exprs = (s.value, *s.dynamic_indices) if s.indirect else (s.value,)
        st.live = [x for e in exprs for x in _live(vals, e, st.ctx, st.dom)]
        st.splittable = s.kind != "=" or solo_vars(s.indices) >= set(st.ctx.ivs)  # injective

    def kept_of(st: _Stmt, needed: isl.Set) -> isl.Set:
        if deadline is not None and time.process_time() > deadline:
            raise SliceTooCostly(f"the backward slice took longer than allowed (at statement {st.ctx.index})")
        s = st.ctx.stmt
        acc = isl.Map(f"{{ S{st.ctx.index}[{', '.join(st.ctx.ivs)}] -> "
                      f"T_{s.target}[{', '.join(i.to_isl() for i in s.indices)}] }}")
        kept = st.dom.intersect(acc.intersect_range(needed).domain()).coalesce()
        if kept.is_empty():
            return kept
        if not st.splittable:
            return isl.Set.from_basic_set(kept.simple_hull()).intersect(st.dom).coalesce()
        return _coarsen(kept, st.dom, max_pieces)

    seeds = {name: _points_set(name, np.asarray(pts)).intersect(_tensor_box(k, name))
             for name, pts in samples.items()}
    backward(k, stmts, seeds, kept_of)
    pieces: dict[int, tuple[Piece, ...]] = {}
    points: dict[int, int] = {}
    tensors: set[str] = set()
    for st in stmts:
        kept = st.kept
        if kept is None or kept.is_empty():
            continue
        s = st.ctx.stmt
        kept = kept.make_disjoint()  # a point run twice adds twice, or applies `x = f(x)` twice
        ps = []
        for b in kept.get_basic_sets():
            box = _box(b)
            bs = isl.Set.from_basic_set(b)
            exact = _box_set(bs.get_space(), box).intersect(st.dom).is_subset(bs)
            conds = () if exact else _conds(b, st.ctx)
            ps.append(Piece(tuple((v, lo, hi) for v, (lo, hi) in zip(st.ctx.ivs, box, strict=True)), conds))
        pieces[st.ctx.index] = tuple(ps)
        points[st.ctx.index] = sum(p.volume() for p in ps)
        tensors.add(s.target)
        tensors.update(r.tensor for r, _ in st.live)
    return Slice(pieces, frozenset(tensors), points)
