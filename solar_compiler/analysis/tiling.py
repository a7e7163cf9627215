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
from xdsl.ir.affine import AffineExpr, AffineMap

from solar_compiler.analysis.io_bounds import Contraction
from solar_compiler.analysis.structured import linear_form

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
    return tiled_traffic_levels(c, (capacity,), budget)[0]


def tiled_traffic_levels(c: Contraction, capacities: Sequence[float],
                         budget: int = COMBOS) -> tuple[Tiling | None, ...]:
    """`tiled_traffic` for several capacities (a target's memory levels) in one search: the tilings
    and their traffic do not depend on the capacity, only which of them fit does."""
    if not c.unit_steps or not c.ivs or any(e <= 0 for e in c.extents.values()):
        return (None,) * len(capacities)  # no loop to tile (a product of two scalars) or none of unit step
    ops = tuple((op.map, op.stored) for op in (c.a, c.b, c.c))
    found = _best_tilings(tuple(c.extents[v] for v in c.ivs), ops, c.init_folded,
                          tuple(float(x) for x in capacities), budget)
    return tuple(None if f is None else Tiling(f.bytes, {c.ivs[d]: n for d, n in f.tiles.items()},
                                               tuple(c.ivs[d] for d in f.order)) for f in found)


@lru_cache(maxsize=1024)
def _best_tilings(extents: tuple[int, ...], ops: tuple[tuple[AffineMap, float], ...], init_folded: bool,
                  capacities: tuple[float, ...], budget: int) -> tuple[_DimTiling | None, ...]:
    """The search of `tiled_traffic_levels` over loop dims 0..n-1, once per shape: a network repeats
    the same layer many times. Only the tilings that fit the largest capacity are searched; the first
    best one (in the order of the full grid) is returned per capacity."""
    (ia, sa), (ib, sb), (ic, sc) = ops
    dims = tuple(range(len(extents)))
    cand = [np.array(x, dtype=np.float64) for x in _tile_sizes(list(extents), budget)]
    grid = [g.ravel() for g in np.meshgrid(*cand, indexing="ij")]
    t = dict(zip(dims, grid, strict=True))
    fp = {"a": _tile_footprint(ia, t), "b": _tile_footprint(ib, t), "c": _tile_footprint(ic, t)}
    need = sa * fp["a"] + sb * fp["b"] + sc * fp["c"]
    keep = np.flatnonzero(need <= max(capacities))
    if not keep.size:
        return (None,) * len(capacities)
    t = {v: x[keep] for v, x in t.items()}
    need = need[keep]
    fits = [need <= cap for cap in capacities]
    weight = {"a": sa * fp["a"][keep], "b": sb * fp["b"][keep], "c": sc * fp["c"][keep]}
    trips = {v: np.ceil(e / t[v]) for v, e in zip(dims, extents, strict=True)}
    uses = {k: map_dims(m) for k, m in (("a", ia), ("b", ib), ("c", ic))}
    distinct_c = np.prod([trips[v] for v in dims if v in uses["c"]], axis=0) if uses["c"] else 1.0
    best: list[tuple[float, int, tuple[int, ...]] | None] = [None] * len(capacities)
    for order, visits in _visits_per_order(_orders(list(dims), uses), trips, uses, need):
        c_moves = 2 * visits["c"] - (distinct_c if init_folded else 0)
        q = weight["a"] * visits["a"] + weight["b"] * visits["b"] + weight["c"] * c_moves
        for n, ok in enumerate(fits):
            qn = np.where(ok, q, np.inf)
            i = int(np.argmin(qn))
            if ok[i] and (best[n] is None or qn[i] < best[n][0]):
                best[n] = (float(qn[i]), i, order)
    return tuple(None if b is None else _DimTiling(b[0], {v: int(t[v][b[1]]) for v in dims}, b[2])
                 for b in best)


@dataclass(frozen=True)
class _DimTiling:
    """A `Tiling` over loop dims (positions), before they are named."""

    bytes: float
    tiles: dict[int, int]
    order: tuple[int, ...]


def map_dims(m: AffineMap) -> set[int]:
    """The loop dims an access map's (linear) indices use."""
    return {d for r in m.results for d in _form(r)[0]}


def _form(r: AffineExpr) -> tuple[dict[int, int], int]:
    f = linear_form(r)
    if f is None:
        raise ValueError(f"tiling: index {r} is not linear in the loop dims (a contraction's accesses are)")
    return f


def _visits_per_order(orders: Sequence[tuple[int, ...]], trips: dict[int, np.ndarray],
                      uses: dict[str, set[int]], like: np.ndarray):
    """(order, `_visits(order, ...)`) for each order, sharing the work of a common prefix with the
    previous order (the orders come sorted, so neighbours share most of their loops)."""
    more = {v: trips[v] > 1 for v in trips}
    ones = np.ones_like(like)
    stack: list[tuple[np.ndarray, dict[str, np.ndarray]]] = []
    prev: tuple[int, ...] = ()
    for order in orders:
        same = 0
        while same < min(len(prev), len(order)) and prev[same] == order[same]:
            same += 1
        del stack[same:]
        for v in order[same:]:
            upto, out = stack[-1] if stack else (ones, {k: ones for k in uses})
            upto = upto * trips[v]
            out = {k: np.where(more[v], upto, x) if v in uses[k] else x for k, x in out.items()}
            stack.append((upto, out))
        prev = order
        yield order, stack[-1][1] if stack else {k: ones for k in uses}


def _visits(order: Sequence[int], trips: dict[int, np.ndarray], uses: dict[str, set[int]],
            like: np.ndarray) -> dict[str, np.ndarray]:
    """Loads of each operand's tile: the tile-loop iterations up to the innermost loop that indexes
    it and has more than one trip (a loop of one trip never advances)."""
    return next(_visits_per_order([tuple(order)], trips, uses, like))[1]


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


def _tile_footprint(m: AffineMap, t: dict[int, np.ndarray]) -> np.ndarray:
    """Distinct elements of one access over one tile (product over the map's results of the distinct
    values of that result, from its linear coefficients; exact for one dim, or two with one
    unit-reduced coefficient)."""
    out = np.ones_like(next(iter(t.values())))
    for r in m.results:
        coeffs = _form(r)[0]
        vs = sorted(coeffs)
        if not vs:
            continue
        if len(vs) == 1:
            out = out * t[vs[0]]
            continue
        span = 1 + sum(abs(coeffs[v]) * (t[v] - 1) for v in vs)
        prod = np.prod([t[v] for v in vs], axis=0)
        if len(vs) == 2:
            (p, r2), (cp, cr) = vs, (abs(coeffs[vs[0]]), abs(coeffs[vs[1]]))
            g = math.gcd(cp, cr)
            cp, cr = cp // g, cr // g
            if cr == 1 or cp == 1:
                if cp == 1:  # make `p` the dim with the larger step
                    p, r2, cp, cr = r2, p, cr, cp
                exact = np.where(t[r2] >= cp, cp * (t[p] - 1) + t[r2], t[p] * t[r2])
                out = out * exact
                continue
        out = out * np.minimum(span, prod)
    return out


def _orders(names: list[int], uses: dict[str, set[int]]) -> list[tuple[int, ...]]:
    if len(names) <= 5:
        return list(itertools.permutations(names))
    out: set[tuple[int, ...]] = set()
    for k in ("a", "b", "c"):
        outer = [v for v in names if v in uses[k]]
        inner = [v for v in names if v not in uses[k]]
        outs = itertools.permutations(outer) if len(outer) <= 3 else [tuple(outer)]
        for o in outs:
            ins = itertools.permutations(inner) if len(inner) <= 4 else [tuple(inner)]
            for i in ins:
                out.add(tuple(o) + tuple(i))
    return sorted(out)
