"""The attainable upper curve beside the traffic lower bounds: the best tiling found.

For each contraction (`io_bounds.recognise`), tile sizes (divisors, powers of two, ceil(E/k)) and
tile-loop orders are searched, and the traffic of each tiled schedule is computed exactly for
unguarded box domains (an over-count otherwise). The schedules move operands as their tensors
store them (`Operand.stored`), which is a real schedule whatever the precision policy; the bound
may assume narrower operands (`Operand.nbytes`), so it stays below. Reported beside the bound so
that users see the bracket [lower bound, achievable by a tiled schedule]; tests check bound <= tiled
at every S.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from solar_compiler.analysis.io_bounds import Contraction
from solar_compiler.loopir.affine import AffExpr

COMBOS = 300_000  # tile-size combinations searched per contraction (the upper curve's effort)
REPORT_COMBOS = 20_000  # the reports' search: ~3 ms per contraction and level


@dataclass(frozen=True)
class Tiling:
    """A tiled schedule of one contraction on one unit: tile loops in `order` (outermost first),
    every loop tiled by `tiles`; all three tiles resident at once."""

    bytes: float
    tiles: dict[str, int]
    order: tuple[str, ...]


def tiled_traffic(c: Contraction, capacity: float, budget: int = COMBOS) -> Tiling | None:
    """Traffic of the best tiling found for a fast memory of `capacity` bytes (None if no tiling of
    this family fits or the loops are not unit-step). An operand tile is loaded whenever a tile loop
    at or outside the innermost loop that indexes it advances; an output tile is written at the end
    of each visit and read back at the start of each revisit (and of the first visit when the init
    is not part of the op). Footprints are exact for unguarded box domains and over-counts
    otherwise (the tile's bounding box), so this is the traffic of a real schedule or more."""
    if not c.unit_steps or any(e <= 0 for e in c.extents.values()):
        return None
    ops = tuple((op.indices, op.stored) for op in (c.a, c.b, c.c))
    found = _best_tiling(tuple(c.ivs), tuple(c.extents[v] for v in c.ivs), ops, c.init_folded,
                         float(capacity), budget)
    return None if found is None else Tiling(found.bytes, dict(found.tiles), found.order)


@lru_cache(maxsize=1024)
def _best_tiling(names: tuple[str, ...], extents: tuple[int, ...],
                 ops: tuple[tuple[tuple[AffExpr, ...], float], ...], init_folded: bool, capacity: float,
                 budget: int) -> Tiling | None:
    """The search of `tiled_traffic`, once per shape: a network repeats the same layer many times
    (DenseNet201's 98 3x3 convolutions have four shapes)."""
    (ia, sa), (ib, sb), (ic, sc) = ops
    cand = [np.array(x, dtype=np.float64) for x in _tile_sizes(list(extents), budget)]
    grid = [g.ravel() for g in np.meshgrid(*cand, indexing="ij")]
    t = dict(zip(names, grid, strict=True))
    trips = {v: np.ceil(e / t[v]) for v, e in zip(names, extents, strict=True)}
    fp = {"a": _tile_footprint(ia, t), "b": _tile_footprint(ib, t), "c": _tile_footprint(ic, t)}
    fits = sa * fp["a"] + sb * fp["b"] + sc * fp["c"] <= capacity
    if not fits.any():
        return None
    uses = {k: set().union(*(e.vars() for e in idx)) for k, idx in (("a", ia), ("b", ib), ("c", ic))}
    best: tuple[float, int, tuple[str, ...]] | None = None
    for order in _orders(list(names), uses):
        visits = _visits(order, trips, uses, grid[0])
        distinct_c = np.prod([trips[v] for v in names if v in uses["c"]], axis=0) if uses["c"] else 1.0
        c_moves = 2 * visits["c"] - (distinct_c if init_folded else 0)
        q = sa * fp["a"] * visits["a"] + sb * fp["b"] * visits["b"] + sc * fp["c"] * c_moves
        q = np.where(fits, q, np.inf)
        i = int(np.argmin(q))
        if best is None or q[i] < best[0]:
            best = (float(q[i]), i, order)
    assert best is not None
    q, i, order = best
    return Tiling(q, {v: int(t[v][i]) for v in names}, order)


def _visits(order: Sequence[str], trips: dict[str, np.ndarray], uses: dict[str, set[str]],
            like: np.ndarray) -> dict[str, np.ndarray]:
    """Loads of each operand's tile: the tile-loop iterations up to the innermost loop that indexes
    it and has more than one trip (a loop of one trip never advances)."""
    out = {k: np.ones_like(like) for k in uses}
    upto = np.ones_like(like)
    for v in order:
        upto = upto * trips[v]
        for k, vs in uses.items():
            if v in vs:
                out[k] = np.where(trips[v] > 1, upto, out[k])
    return out


def _tile_sizes(extents: Sequence[int], budget: int = COMBOS) -> list[list[int]]:
    """Candidate tile sizes per loop: its divisors first (exact tiles), thinned geometrically while
    the combinations exceed `budget`, then padded with ceil(extent / k) and powers of two while they
    fit. A tile that does not divide its extent leaves a partial last tile, counted as a full one
    (an over-count, never an under-count)."""
    sets = [[d for d in range(1, e + 1) if e % d == 0] if e <= 65536 else [1, e] for e in extents]
    while math.prod(len(x) for x in sets) > budget:
        i = max(range(len(sets)), key=lambda j: len(sets[j]))
        sets[i] = _thin(sets[i], len(sets[i]) - 1)
    for i, e in enumerate(extents):
        extra = sorted(({-(-e // k) for k in range(1, 65)} | {2 ** k for k in range(e.bit_length())})
                       - set(sets[i]) - {0})
        room = budget // max(1, math.prod(len(x) for j, x in enumerate(sets) if j != i)) - len(sets[i])
        if room > 0 and extra:
            sets[i] = sorted(set(sets[i]) | set(_thin(extra, min(room, len(extra)))))
    return sets


def _thin(sizes: list[int], n: int) -> list[int]:
    """`n` of `sizes` (sorted, n >= 2 keeps both ends) spread evenly on a log scale."""
    if n >= len(sizes):
        return sizes
    picks = {sizes[0], sizes[-1]} if n >= 2 else {sizes[-1]}
    for x in np.geomspace(sizes[0], sizes[-1], max(n, 1)):
        if len(picks) >= n:
            break
        picks.add(min(sizes, key=lambda s: abs(math.log(s / x))))
    return sorted(picks)


def _tile_footprint(indices: Sequence[AffExpr], t: dict[str, np.ndarray]) -> np.ndarray:
    """Distinct elements of one access over one tile (product over dimensions of the distinct values
    of that dimension's expression; exact for one variable, or two with one unit-reduced coefficient)."""
    out = np.ones_like(next(iter(t.values())))
    for e in indices:
        vs = sorted(e.vars())
        if not vs:
            continue
        if len(vs) == 1:
            out = out * t[vs[0]]
            continue
        span = 1 + sum(abs(e.coeff(v)) * (t[v] - 1) for v in vs)
        prod = np.prod([t[v] for v in vs], axis=0)
        if len(vs) == 2:
            (p, r), (cp, cr) = vs, (abs(e.coeff(vs[0])), abs(e.coeff(vs[1])))
            g = math.gcd(cp, cr)
            cp, cr = cp // g, cr // g
            if cr == 1 or cp == 1:
                if cp == 1:  # make `p` the variable with the larger step
                    p, r, cp, cr = r, p, cr, cp
                exact = np.where(t[r] >= cp, cp * (t[p] - 1) + t[r], t[p] * t[r])
                out = out * exact
                continue
        out = out * np.minimum(span, prod)
    return out


def _orders(names: list[str], uses: dict[str, set[str]]) -> list[tuple[str, ...]]:
    if len(names) <= 5:
        return list(itertools.permutations(names))
    out: set[tuple[str, ...]] = set()
    for k in ("a", "b", "c"):
        outer = [v for v in names if v in uses[k]]
        inner = [v for v in names if v not in uses[k]]
        outs = itertools.permutations(outer) if len(outer) <= 3 else [tuple(outer)]
        for o in outs:
            ins = itertools.permutations(inner) if len(inner) <= 4 else [tuple(inner)]
            for i in ins:
                out.add(tuple(o) + tuple(i))
    return sorted(out)
