"""The iteration domain of one statement as broadcastable NumPy index grids.

Axis k of every array belongs to the k-th vectorised loop (outermost first), so C order is the
lexicographic order of the iterations. A loop whose bounds depend on an outer vectorised variable
(a triangular loop) gets the rectangular hull of its bounds plus mask conditions; guards become mask
conditions too. Conditions are grouped by the axes they couple and each group is combined into one
boolean array: groups share no axis, so the domain is empty exactly when some group is all-false,
and "does an in-domain point satisfy X" only needs the groups touching X's axes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from solar_compiler.loopir.affine import AffCond, AffExpr
from solar_compiler.loopir.ast import For


@dataclass(frozen=True)
class Axis:
    """The values start, start + step, ... (count of them) of one vectorised loop variable."""

    var: str
    start: int
    step: int
    count: int

    @property
    def last(self) -> int:
        return self.start + self.step * (self.count - 1)


class Grid:
    """Axes, bound scalar variables (scan loops) and mask conditions of one statement instance set."""

    def __init__(self, axes: Sequence[Axis], scalars: Mapping[str, int], conds: Sequence[AffCond]):
        self.axes = tuple(axes)
        self.scalars = dict(scalars)
        self.conds = tuple(conds)
        self.pos = {a.var: k for k, a in enumerate(self.axes)}
        self.shape = tuple(a.count for a in self.axes)
        g = len(self.axes)
        self.env: dict[str, int | np.ndarray] = dict(self.scalars)
        for k, a in enumerate(self.axes):
            shape = [1] * g
            shape[k] = a.count
            self.env[a.var] = np.arange(a.start, a.start + a.step * a.count, a.step, dtype=np.int64) \
                .reshape(shape)
        self.ranges = {v: (x, x) for v, x in self.scalars.items()}
        self.ranges.update({a.var: (a.start, a.last) for a in self.axes})
        self.empty = any(a.count <= 0 for a in self.axes)
        self.masks: list[tuple[frozenset[int], np.ndarray]] = [] if self.empty else self._masks()

    # ---- masks ---------------------------------------------------------------------------
    def _masks(self) -> list[tuple[frozenset[int], np.ndarray]]:
        groups: list[tuple[frozenset[int], np.ndarray]] = []
        for c in self.conds:
            val = c.evaluate(self.env)
            if np.ndim(val) == 0:
                if not bool(val):
                    self.empty = True
                    return []
                continue
            axes = frozenset(k for k, n in enumerate(np.shape(val)) if n > 1)
            merged = [gr for gr in groups if gr[0] & axes]
            groups = [gr for gr in groups if not gr[0] & axes]
            for ax, m in merged:
                axes, val = axes | ax, val & m
            groups.append((axes, val))
        for _, m in groups:
            if not m.any():
                self.empty = True
                return []
        return [(ax, m) for ax, m in groups if not m.all()]  # a group every point satisfies masks nothing

    def mask(self) -> np.ndarray | None:
        """The full domain mask (broadcastable over the grid), or None when the grid is a box."""
        out = None
        for _, m in self.masks:
            out = m if out is None else out & m
        return out

    def in_domain(self, pred: np.ndarray) -> np.ndarray:
        """`pred` restricted to in-domain points (only the mask groups sharing its axes matter)."""
        axes = {k for k, n in enumerate(np.shape(pred)) if n > 1}
        out = pred
        for ax, m in self.masks:
            if ax & axes:
                out = out & m
        return out

    def point(self, flags: np.ndarray) -> str:
        """`i=3, j=5`: the first point where `flags` (a broadcastable bool array) holds."""
        full = np.broadcast_shapes(np.shape(flags), (1,) * len(self.axes))
        where = np.argwhere(np.broadcast_to(flags, full))
        if not len(where):
            return ""
        idx = where[0]
        parts = [f"{a.var}={a.start + a.step * int(idx[k])}" for k, a in enumerate(self.axes)
                 if np.shape(flags)[k] > 1 or a.count == 1]
        parts += [f"{v}={x}" for v, x in self.scalars.items()]
        return ", ".join(parts)

    # ---- pieces ----------------------------------------------------------------------------
    def window(self, ranges: Mapping[int, tuple[int, int]]) -> Grid:
        """The points at positions first .. first + count - 1 of each axis k in `ranges` (k -> (first,
        count)): a sub-box whose masks are this grid's, sliced (no condition is evaluated again, so
        cutting a grid into many pieces stays cheap)."""
        g = object.__new__(Grid)
        axes = list(self.axes)
        g.env = dict(self.env)
        g.ranges = dict(self.ranges)
        for k, (first, count) in ranges.items():
            a = self.axes[k]
            a = axes[k] = replace(a, start=a.start + a.step * first, count=count)
            g.env[a.var] = self.env[a.var][(slice(None),) * k + (slice(first, first + count),)]
            g.ranges[a.var] = (a.start, a.last)
        g.axes, g.scalars, g.conds, g.pos = tuple(axes), self.scalars, self.conds, self.pos
        g.shape = tuple(a.count for a in axes)
        g.empty = self.empty or any(a.count <= 0 for a in axes)
        g.masks = []
        for group, m in [] if g.empty else self.masks:
            cut = {k: slice(first, first + count) for k, (first, count) in ranges.items() if m.shape[k] > 1}
            sub = m[tuple(cut.get(k, slice(None)) for k in range(m.ndim))]
            if not sub.any():
                g.empty, g.masks = True, []
                break
            if not sub.all():
                g.masks.append((frozenset(k for k in group if sub.shape[k] > 1), sub))
        return g

    def fix(self, values: Mapping[int, int]) -> Grid:
        """The points whose axis k is at position values[k] (that axis keeps count 1)."""
        return self.window({k: (i, 1) for k, i in values.items()})

    def tight(self) -> Grid:
        """The same points on the smallest box of axis ranges holding them: the guards of a scatter's
        piece (`out[p*s + r - pad]` at one r) leave an interval of p, on which the write stays inside
        the target. Groups share no axis, so the box of the domain is the product of their boxes."""
        if self.empty or not self.masks:
            return self
        box: dict[int, tuple[int, int]] = {}
        for group, m in self.masks:
            for k in group:
                hits = np.flatnonzero(np.logical_or.reduce(m, axis=tuple(j for j in range(m.ndim) if j != k)))
                if hits[0] > 0 or hits[-1] < self.axes[k].count - 1:
                    box[k] = (int(hits[0]), int(hits[-1] - hits[0]) + 1)
        return self.window(box) if box else self

    # ---- chunking --------------------------------------------------------------------------
    def split(self, k: int, pieces: int) -> list[Grid]:
        """Axis k cut into `pieces` consecutive runs: the pieces in order cover the grid in order."""
        a = self.axes[k]
        size = math.ceil(a.count / pieces)
        out = []
        for first in range(0, a.count, size):
            axes = list(self.axes)
            axes[k] = replace(a, start=a.start + a.step * first, count=min(size, a.count - first))
            g = Grid(axes, self.scalars, self.conds)
            if not g.empty:
                out.append(g)
        return out


def build_grid(loops: Sequence[For], scalars: Mapping[str, int], guards: Sequence[AffCond],
               box: Mapping[str, tuple[int, int]] | None = None) -> Grid:
    """The grid of a statement nested in `loops` (vectorised, outermost first) under `guards`,
    clipped to `box` (loop variable -> inclusive (lo, hi)) when given: a piece of a backward slice."""
    axes: list[Axis] = []
    conds = list(guards)
    ranges = {v: (x, x) for v, x in scalars.items()}
    for f in loops:
        vector_vars = (f.lb.vars() | f.ub.vars()) - set(scalars)
        v = AffExpr.var(f.iv)
        if not vector_vars:
            lb, ub = f.lb.evaluate(scalars), f.ub.evaluate(scalars)
            ax = Axis(f.iv, lb, f.step, max(0, -(-(ub - lb) // f.step)))
        else:
            lo, hi = f.lb.bounds(ranges)[0], f.ub.bounds(ranges)[1]
            ax = Axis(f.iv, lo, 1, max(0, hi - lo))
            conds += [AffCond.compare(v, ">=", f.lb), AffCond.compare(v, "<", f.ub)]
            if f.step != 1:
                conds.append(AffCond((v - f.lb) % f.step, "=="))
        if box is not None and f.iv in box:
            ax = _clip(ax, *box[f.iv])
        axes.append(ax)
        if ax.count <= 0:
            break
        ranges[f.iv] = (ax.start, ax.last)
    return Grid(axes, scalars, conds)


def _clip(ax: Axis, lo: int, hi: int) -> Axis:
    """The values of `ax` within [lo, hi]."""
    first = ax.start if lo <= ax.start else ax.start + -(-(lo - ax.start) // ax.step) * ax.step
    last = min(ax.last, hi)
    return replace(ax, start=first, count=max(0, (last - first) // ax.step + 1) if last >= first else 0)
