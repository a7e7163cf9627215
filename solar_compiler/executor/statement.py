"""One assignment executed over all points of its grid at once.

`=` writes through a strided view of the target when the target map is injective (each loop
variable of extent > 1 in exactly one index, alone there) and stays inside the tensor on the hull of
the domain; otherwise it scatters the in-domain points in lexicographic order, keeping the last write
to each element (program order). An indirect write (a dynamic target index) always scatters: `=`
with that last-writer rule, a reduction through `ufunc.at` (np.add.at, np.maximum.at, ...), which
combines repeated indices; a dynamic index outside the tensor on an in-domain point is an error.
A reduction (`+=` `*=` `max=` `min=`) first reduces the loop variables the target does not use
(a dynamic index uses those it depends on), with masked-out points contributing the identity, then
combines with the current value. A `+=` over a product is contracted with einsum from factors evaluated only
over their own variables, so a matmul or conv never materialises its iteration space. Grids whose
working set exceeds the memory budget are cut into chunks along one axis (the outermost for `=`, so
that chunks run in program order; any axis of the largest factor for reductions, which commute).

A reduction whose affine target index mixes loop variables (a transposed convolution's
`y[i*s + r*d - pad] += x[i] * w[r]`, guarded) would scatter every point through `_flatten` and
`ufunc.at`. It runs instead as one piece per tap combination (`tap_pieces`: r fixed, the guards
tightened to a box of i), on which the target map is a strided view inside the target: a
contraction per tap, then an in-place strided update. The taps go in the order the loop nest adds
them to any one element (`tap_order`), so the per-element summation order is the program's;
narrow-float targets are rounded once, after every tap.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Any

import numpy as np

from solar_compiler.executor.contract import contract
from solar_compiler.executor.evaluate import Evaluator
from solar_compiler.executor.grid import Grid
from solar_compiler.executor.numeric import NARROW_FLOATS, STORAGE, identity, quantize
from solar_compiler.executor.trace import IndirectTrace
from solar_compiler.loopir.affine import AffExpr
from solar_compiler.loopir.ast import Assign, Binary, Index, SExpr, TensorDecl, expr_vars

REDUCE = {"+=": np.add, "*=": np.multiply, "max=": np.maximum, "min=": np.minimum}


@dataclass
class State:
    tensors: dict[str, np.ndarray]
    decls: dict[str, TensorDecl]
    budget: int  # bytes a statement's working set may take before it is chunked
    pieces: Mapping[int, Sequence[Any]] | None = None  # statement index -> slice pieces (execute)
    order: dict[int, int] | None = None                # id(statement) -> its index
    trace: IndirectTrace | None = None   # records what indirect accesses touch (executor/trace.py)
    index_of: dict[int, int] = field(default_factory=dict)  # id(statement) -> index in program order

    def evaluator(self, grid: Grid, stmt: Assign) -> Evaluator:
        ev = Evaluator(grid, self.tensors, self.decls, stmt)
        if self.trace is not None:
            shapes = {n: a.shape for n, a in self.tensors.items()}
            ev.tracer = self.trace.bind(self.index_of[id(stmt)], shapes)
        return ev


def mul_factors(e: SExpr) -> list[SExpr]:
    if isinstance(e, Binary) and e.fn == "mul":
        return mul_factors(e.a) + mul_factors(e.b)
    return [e]


@dataclass
class Plan:
    """What a statement needs to know about itself, independent of the grid."""

    stmt: Assign
    target_vars: set[str]
    factors: list[SExpr] = field(default_factory=list)
    factor_vars: list[set[str]] = field(default_factory=list)
    item: int = 4

    @staticmethod
    def of(stmt: Assign, dtype: str) -> Plan:
        # a dynamic target index keeps the variables it depends on: `H[idx[k]] += x[k]` reduces no k
        p = Plan(stmt, stmt.target_vars, item=max(STORAGE[dtype].itemsize, 4))
        if stmt.kind == "+=":
            p.factors = mul_factors(stmt.value)
            p.factor_vars = [expr_vars(f) for f in p.factors]
        return p

    def reduced(self, grid: Grid) -> list[int]:
        return [k for k, a in enumerate(grid.axes) if a.count > 1 and a.var not in self.target_vars]

    def contracts(self, grid: Grid) -> bool:
        return bool(self.factors) and bool(self.reduced(grid))

    def _size(self, grid: Grid, vars_: set[str]) -> int:
        return math.prod(grid.axes[grid.pos[v]].count for v in vars_ if v in grid.pos)

    def cost(self, grid: Grid) -> int:
        if self.contracts(grid):
            return self.item * (sum(self._size(grid, fv) for fv in self.factor_vars)
                                + self._size(grid, self.target_vars))
        return (2 * self.item + 8) * math.prod(grid.shape)

    def split_axis(self, grid: Grid) -> int | None:
        big = [k for k, a in enumerate(grid.axes) if a.count > 1]
        if not big:
            return None
        if self.contracts(grid):
            fv = max(self.factor_vars, key=lambda s: self._size(grid, s))
            ks = [k for k in big if grid.axes[k].var in fv]
            if ks:
                return max(ks, key=lambda k: grid.axes[k].count)
        return big[0]


def chunks(grid: Grid, plan: Plan, budget: int) -> Iterator[Grid]:
    est = plan.cost(grid)
    k = plan.split_axis(grid) if est > budget else None
    if k is None:
        yield grid
        return
    for g in grid.split(k, min(grid.axes[k].count, math.ceil(est / budget))):
        yield from chunks(g, plan, budget)


def run_on_grid(stmt: Assign, grid: Grid, state: State) -> None:
    decl = state.decls[stmt.target]
    plan = Plan.of(stmt, decl.dtype)
    if stmt.kind != "=":
        pieces = tap_pieces(stmt, grid, state.tensors[stmt.target])
        if pieces is not None:
            touched: list[np.ndarray] = []
            for piece in pieces:
                _reduction(stmt, piece, plan, state, touched)
            if decl.dtype in NARROW_FLOATS:
                for view in touched:  # rounded once, after every tap (idempotent where pieces overlap)
                    np.copyto(view, quantize(view, decl.dtype))
            return
        _reduction(stmt, grid, plan, state, None)
        return
    for g in chunks(grid, plan, state.budget):
        ev = state.evaluator(g, stmt)
        _assign(stmt, g, ev, to_store(ev(stmt.value), decl.dtype), state)


def _reduction(stmt: Assign, grid: Grid, plan: Plan, state: State, touched: list[np.ndarray] | None) -> None:
    """A reduction statement over `grid`, chunked to the memory budget. `touched` (a tap piece, whose
    target map is one-to-one): the strided views written, left unrounded for the caller."""
    dtype = state.decls[stmt.target].dtype
    for g in chunks(grid, plan, state.budget):
        ev = state.evaluator(g, stmt)
        red = plan.reduced(g)
        res = _contract(plan, g, ev, red, dtype) if plan.contracts(g) else None
        if res is not None:
            _accumulate(stmt, g, ev, res, red, state, touched)
            continue
        # The materialised product needs the whole (chunk) grid: chunk again for that.
        for g2 in chunks(g, replace(plan, factors=[], factor_vars=[]), state.budget):
            ev2 = state.evaluator(g2, stmt)
            red2 = plan.reduced(g2)
            _accumulate(stmt, g2, ev2, _reduce(ev2(stmt.value), red2, g2, stmt.kind, dtype), red2, state,
                        touched)


# ---- scatters by taps -----------------------------------------------------------------------------
MAX_TAPS = 4096  # tap combinations a scatter may be cut into (one vectorised piece each)


def tap_vars(indices: Sequence[Index], counts: Mapping[str, int]) -> list[str] | None:
    """The loop variables to enumerate so that the target map is one-to-one on the others, or None
    when there are none or the target is not such a map. `counts`: the extent of every vectorised
    loop variable, outermost first. In every target index that mixes several variables of extent > 1
    (`out[i*s + r*d - pad]`: a transposed convolution, strided and dilated) all but the one of largest
    extent are taps; every other variable must be alone in one index. Cut only into at most MAX_TAPS
    combinations, each with at least as many points as there are combinations."""
    order = {v: k for k, v in enumerate(counts)}
    kept: list[str] = []
    taps: set[str] = set()
    for e in indices:
        if not isinstance(e, AffExpr) or e.is_quasi():
            return None
        big = [v for v in e.vars() if counts.get(v, 1) > 1]
        if not big:
            continue
        keep = max(big, key=lambda v: (counts[v], -order[v]))
        kept.append(keep)
        taps.update(v for v in big if v != keep)
    if not taps or len(set(kept)) < len(kept) or taps & set(kept):
        return None
    combos = math.prod(counts[v] for v in taps)
    if combos > MAX_TAPS or combos * combos > math.prod(counts.values()):
        return None
    return sorted(taps, key=order.__getitem__)


def scatter_form(indices: Sequence[Index], counts: Mapping[str, int]) -> str | None:
    """How a reduction into `target[indices]` over loops of these extents (`tap_vars`) is executed
    when several of its points write one element through an affine map: "taps" (one vectorised piece
    per tap combination) or "points" (per-point offsets and `ufunc.at`); None when the map is
    one-to-one or not affine (an indirect write)."""
    if not all(isinstance(e, AffExpr) for e in indices):
        return None
    seen: set[str] = set()
    for e in indices:
        assert isinstance(e, AffExpr)
        big = {v for v in e.vars() if counts.get(v, 1) > 1}
        if (e.is_quasi() and big) or len(big) > 1 or big & seen:
            return "taps" if tap_vars(indices, counts) is not None else "points"
        seen |= big
    return None


def tap_axes(stmt: Assign, grid: Grid) -> list[int] | None:
    """`tap_vars` of `stmt` on `grid`, as grid axes."""
    taps = tap_vars(stmt.indices, {a.var: a.count for a in grid.axes})
    return None if taps is None else [grid.pos[v] for v in taps]


def tap_order(stmt: Assign, grid: Grid, taps: Sequence[int]) -> list[dict[int, int]]:
    """Every combination of tap positions, in the order in which the whole grid, traversed
    lexicographically, adds their contributions to any one target element: summing the pieces in this
    order repeats the summation order of the unsplit statement. Two points writing the same element
    differ in the taps and in the variables sharing an index with them (`i = (q - r*d + pad) / s`):
    compared axis by axis in loop order, a tap compares by its value, a variable sharing an index with
    taps by minus their contribution over its own coefficient, and any other variable is equal."""
    coef = {k: dict.fromkeys(range(len(stmt.indices)), 0) for k in range(len(grid.axes))}
    for d, e in enumerate(stmt.indices):
        for v, c in e.terms:
            if v in grid.pos:
                coef[grid.pos[v]][d] = c
    partner = {}  # a non-tap axis sharing an index with taps -> (that index, its coefficient)
    for d in range(len(stmt.indices)):
        for k, cs in coef.items():
            if k not in taps and cs[d] and grid.axes[k].count > 1 and any(coef[t][d] for t in taps):
                partner[k] = (d, cs[d])

    def key(pos: dict[int, int]) -> tuple[Fraction, ...]:
        value = {t: grid.axes[t].start + grid.axes[t].step * i for t, i in pos.items()}
        out = []
        for k in range(len(grid.axes)):
            if k in value:
                out.append(Fraction(value[k]))
            elif k in partner:
                d, c = partner[k]
                out.append(Fraction(-sum(coef[t][d] * value[t] for t in taps), c))
            else:
                out.append(Fraction(0))
        return tuple(out)

    combos = [dict(zip(taps, pos, strict=True))
              for pos in itertools.product(*(range(grid.axes[t].count) for t in taps))]
    return sorted(combos, key=key)


def tap_pieces(stmt: Assign, grid: Grid, target: np.ndarray) -> list[Grid] | None:
    """A scatter-form reduction (`out[i*s + r*d - pad] += x[i] * w[r]`) as one piece per tap
    combination (`tap_axes`), in summation order (`tap_order`), each cut to the box of its guards
    (`Grid.tight`) so that its target map is a strided view inside the target: the contraction and
    the accumulation then run vectorised per piece instead of through per-point offsets. None when
    the statement is not of that form or some piece would write outside the target (the general
    path reports that as an error with its point)."""
    taps = tap_axes(stmt, grid)
    if taps is None:
        return None
    out = []
    for pos in tap_order(stmt, grid, taps):
        g = grid.fix(pos).tight()
        if g.empty:
            continue
        for d, e in enumerate(stmt.indices):
            lo, hi = e.bounds(g.ranges)
            if lo < 0 or hi >= target.shape[d]:
                return None
        if _injective_axes(stmt.indices, g) is None:
            return None
        out.append(g)
    return out


def to_store(x: np.ndarray, dtype: str) -> np.ndarray:
    return quantize(np.asarray(x, dtype=STORAGE[dtype]), dtype)


# ---- reductions ---------------------------------------------------------------------------------
def _finite(ev: Evaluator, v: np.ndarray) -> bool:
    view, src, _ = ev.sources.get(id(v), (v, v, []))
    src = src if view is v else v
    return src.dtype.kind != "f" or bool(np.isfinite(src).all())


def _padding_covers(ev: Evaluator, v: np.ndarray, m: np.ndarray) -> bool:
    """Every point `m` masks out reads zero padding in `v` (a conv's padding guard)."""
    view, _, outside = ev.sources.get(id(v), (None, None, []))
    return view is v and any(bool((m | o).all()) for o in outside)


def _axes(v: np.ndarray) -> set[int]:
    return {k for k, n in enumerate(v.shape) if n > 1}


def _contract(plan: Plan, grid: Grid, ev: Evaluator, red: list[int], dtype: str) -> np.ndarray | None:
    """The product of the factors summed over `red`, contracted from factors evaluated over their own
    variables. A mask group on result axes only is applied to the result. Any other group must zero
    the product at the points it masks out, which is exact only where every factor is finite there
    (0 * inf is NaN): a group that only masks out reads of zero padding is dropped when all factors
    are finite; otherwise it zeroes every factor spanning its axes (which also clears values never
    written there, like the upper triangle of causal scores), or else joins as a 0/1 factor. When a
    factor is still non-finite after that, this returns None and the caller reduces the
    materialised product instead."""
    scalar = np.asarray(1, dtype=STORAGE[dtype])
    ops: list[np.ndarray] = []
    for f in plan.factors:
        v = ev(f)
        if v.ndim == 0:
            scalar = scalar * v
        else:
            ops.append(v)
    if not ops or not np.isfinite(scalar).all():
        return None
    keep = [k for k, a in enumerate(grid.axes) if k not in red and a.count > 1]
    post = [m for ax, m in grid.masks if ax <= set(keep)]
    pre = [(ax, m) for ax, m in grid.masks if not ax <= set(keep)]
    finite = [_finite(ev, v) for v in ops] if pre else []
    extra: list[np.ndarray] = []
    for ax, m in pre:
        if all(finite) and any(_padding_covers(ev, v, m) for v in ops):
            continue
        holders = [i for i, v in enumerate(ops) if ax <= _axes(v)]
        for i in holders:
            ops[i] = np.where(m, ops[i], 0)
        if not holders:
            extra.append(m.astype(STORAGE[dtype]))
    if pre and not all(ok or _finite(ev, v) for ok, v in zip(finite, ops, strict=True)):
        return None
    labelled = []
    for v in ops + extra:
        axes = sorted(_axes(v))
        labelled.append((v.reshape([v.shape[k] for k in axes]), axes))
    used = {k for _, axes in labelled for k in axes}
    out = [k for k in keep if k in used]
    res = contract(labelled, out)
    for k in red:
        if k not in used:
            res = res * grid.axes[k].count
    if len(ops) < len(plan.factors):  # a 0-d factor (a product with 1 is the identity: skipped)
        res = res * scalar
    res = res.reshape([grid.axes[k].count if k in out else 1 for k in range(len(grid.axes))])
    for m in post:
        res = np.where(m, res, 0)
    return res


def _reduce(value: np.ndarray, red: Sequence[int], grid: Grid, kind: str, dtype: str) -> np.ndarray:
    m = grid.mask()
    if m is not None:
        value = np.where(m, value, identity(kind, dtype)).astype(value.dtype, copy=False)
    acc = np.float64 if (kind == "+=" and value.dtype == np.float32) else None
    for k in red:
        n = grid.axes[k].count
        if value.ndim == 0 or value.shape[k] == 1:
            value = value * n if kind == "+=" else value ** n if kind == "*=" else value
        else:
            value = REDUCE[kind].reduce(value, axis=k, keepdims=True, dtype=acc)
    return np.asarray(value)


# ---- stores -------------------------------------------------------------------------------------
def _injective_axes(indices: Sequence[Index], grid: Grid) -> set[int] | None:
    """Axes the target map covers one-to-one, or None when it is not such a map (a dynamic index,
    a scatter, never is: its stores go through `_flatten`, in program order)."""
    cover: set[int] = set()
    for e in indices:
        if not isinstance(e, AffExpr):
            return None
        big = [grid.pos[v] for v in e.vars() if v in grid.pos and grid.axes[grid.pos[v]].count > 1]
        if not big:
            continue
        if e.is_quasi() or len(big) > 1 or big[0] in cover:
            return None
        cover.add(big[0])
    return cover


def _assign(stmt: Assign, grid: Grid, ev: Evaluator, new: np.ndarray, state: State) -> None:
    arr = state.tensors[stmt.target]
    if ev.tracer is not None and stmt.kept_when is not None:
        _trace_changed(stmt, grid, ev, arr.shape)
    cover = _injective_axes(stmt.indices, grid)
    injective = cover is not None and all(k in cover for k, a in enumerate(grid.axes) if a.count > 1)
    if injective or (cover is None and _plain_affine(stmt.indices)):
        view = ev.strided(stmt.target, arr, stmt.indices, writeable=True)
        if view is not None and (injective or _non_overlapping(view)):
            m = grid.mask()
            np.copyto(view, new, where=True if m is None else m)
            return
    flat, vals = _flatten(stmt, grid, ev, new, arr.shape, grid.shape, grid.mask())
    if not injective and flat.size and not _increasing(flat):
        _, first = np.unique(flat[::-1], return_index=True)  # last write in program order wins
        keep = flat.size - 1 - first
        flat, vals = flat[keep], vals[keep]
    arr.reshape(-1)[flat] = vals


def _trace_changed(stmt: Assign, grid: Grid, ev: Evaluator, tshape: tuple[int, ...]) -> None:
    """Record, as the write of a scatter, the elements a conditional store changes (`Assign.kept_when`):
    the in-domain points whose condition stores the new value."""
    assert stmt.kept_when is not None
    cond, keep = stmt.kept_when
    changed = np.broadcast_to(np.asarray(ev(cond)) != keep, grid.shape)
    valid = grid.mask()
    if valid is not None:
        changed = changed & np.broadcast_to(valid, grid.shape)
    idx = tuple(np.broadcast_to(ev.index_values(stmt.target, d, e), grid.shape)
                for d, e in enumerate(stmt.indices))
    flat = np.ravel_multi_index(idx, tshape)[changed] if idx else np.zeros(int(changed.any()), np.int64)
    ev.tracer.scatter(stmt.target, flat)  # type: ignore[union-attr]


def _accumulate(stmt: Assign, grid: Grid, ev: Evaluator, res: np.ndarray, red: list[int],
                state: State, touched: list[np.ndarray] | None = None) -> None:
    arr = state.tensors[stmt.target]
    dtype = state.decls[stmt.target].dtype
    uf = REDUCE[stmt.kind]
    if _injective_axes(stmt.indices, grid) is not None:
        view = ev.strided(stmt.target, arr, stmt.indices, writeable=True)
        if view is not None and touched is not None:
            uf(view, res, out=view, casting="unsafe")
            touched.append(view)
            return
        if view is not None:
            np.copyto(view, to_store(uf(view, res), dtype))
            return
    assert touched is None, "a tap piece writes through a strided view (checked by tap_pieces)"
    shape = tuple(1 if k in red else n for k, n in enumerate(grid.shape))
    m = grid.mask()
    valid = None if m is None else np.logical_or.reduce(m, axis=tuple(red), keepdims=True) if red else m
    flat, vals = _flatten(stmt, grid, ev, res.astype(arr.dtype, copy=False), arr.shape, shape, valid)
    target = arr.reshape(-1)
    uf.at(target, flat, vals)
    if dtype != "f32" and dtype != "f64" and STORAGE[dtype].kind == "f":
        touched = np.unique(flat)
        target[touched] = quantize(target[touched], dtype)


def _plain_affine(indices: Sequence[Index]) -> bool:
    return all(isinstance(e, AffExpr) and not e.is_quasi() for e in indices)


def _non_overlapping(view: np.ndarray) -> bool:
    """Whether no two points of the strided `view` address one element: with its axes ordered by
    stride, each stride exceeds the span of the smaller ones (mixed radix). A write such as
    `group_norm[n, 3*g + k, ...]` (a group and its channel in one index) mixes two loop variables in
    one index, so `_injective_axes` cannot call it one-to-one, but its view is: 3 x stride for g and
    1 x stride for k over k < 3. Such writes otherwise go through `_flatten`, point by point."""
    span = 0
    for stride, n in sorted((abs(st), n) for st, n in zip(view.strides, view.shape, strict=True) if n > 1):
        if stride <= span:
            return False
        span += stride * (n - 1)
    return True


def _increasing(flat: np.ndarray) -> bool:
    """Whether the offsets, in program order, strictly increase: then no element is written twice.
    A view's write through quasi-affine indices (`x[i // 8, i % 8]`) is not provably one-to-one by
    `_injective_axes`, but is usually in order; this O(n) check spares the O(n log n) `np.unique`
    (4.4 s of a KernelBench GroupNorm problem's 18 s of validation)."""
    return flat.size < 2 or bool(np.all(flat[1:] > flat[:-1]))


def _flatten(stmt: Assign, grid: Grid, ev: Evaluator, values: np.ndarray, tshape: tuple[int, ...],
             shape: tuple[int, ...], valid: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """Flat target offsets and values of the in-domain points, in lexicographic order."""
    idx = tuple(np.broadcast_to(ev.index_values(stmt.target, d, e), shape)
                for d, e in enumerate(stmt.indices))
    flat = np.broadcast_to(np.ravel_multi_index(idx, tshape) if idx else np.zeros((), np.int64), shape)
    vals = np.broadcast_to(values, shape)
    if valid is None:
        flat, vals = flat.reshape(-1), vals.reshape(-1)
    else:
        sel = np.broadcast_to(valid, shape)
        flat, vals = flat[sel], vals[sel]
    if ev.tracer is not None and stmt.indirect:
        ev.tracer.scatter(stmt.target, flat)
    return flat, vals
