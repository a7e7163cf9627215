"""The needed elements of a loop kernel, statement by statement on the loop AST: the fixpoint that
both needed-work narrowing (`transforms/needed_points.py`: which points of each statement reach an
output) and the backward slice of sampled validation (`executor/slicing.py`: which points compute
a sample of output elements) run, with what it reads.

Here, in the executor, because it is statement-level work on the AST the executor runs (the
slice's pieces are what `execute(..., pieces=...)` runs), and the executor imports nothing from
analysis/ (tests/test_layers.py). It holds:

* `_Stmt`, the per-statement record (domain, known values, kills, identity drops, live reads, kept
  points);
* `_Values`, the known constant values of every tensor during a statement-by-statement walk, folded
  with the executor's own arithmetic (`Evaluator`), and `_live`, where each read of a statement is
  needed (a select branch its known condition never takes is not);
* `backward`, the least fixpoint of needed elements from seeds, and `_kept`, narrowing's kept points;
* `_conds`, an isl piece as affine loop guards (the narrowed kernel's `if`s, a slice piece's
  conditions);
* the CPU deadline (`_DEADLINE`, `NarrowingTooCostly`) the fixpoint checks between isl operations.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from functools import lru_cache

import islpy as isl
import numpy as np

from solar_compiler.executor.evaluate import Evaluator
from solar_compiler.loopir.affine import AffCond, AffExpr
from solar_compiler.loopir.ast import (
    Assign,
    Binary,
    Bitcast,
    Cast,
    Cmp,
    Const,
    IndexValue,
    Kernel,
    LoopIRError,
    Read,
    Select,
    SExpr,
    StmtContext,
    Unary,
)
from solar_compiler.loopir.domain import iteration_count, unnamed_access
from solar_compiler.loopir.rules import INT_DTYPES, int_range

Known = dict[object, isl.Set]  # constant value -> region where the expression / tensor holds it
_CMP = {"ge": ">=", "gt": ">", "le": "<=", "lt": "<", "eq": "=="}


@dataclass
class _Stmt:
    ctx: StmtContext
    dom: isl.Set
    root: Known = field(default_factory=dict)     # where the value is a known constant
    drop: isl.Set | None = None                   # identity contributions of a reduction
    kill: isl.Set | None = None                   # `=` writes overwritten before any read
    live: list[tuple[Read, isl.Set]] = field(default_factory=list)  # where each read is needed
    kept: isl.Set | None = None
    values: _Values | None = None                 # known values when the statement runs
    splittable: bool = True                       # an injective `=`: pieces may run separately


class NarrowingTooCostly(Exception):
    """The CPU budget of `narrow(seconds=...)` ran out (checked between isl operations)."""


_DEADLINE: ContextVar[float | None] = ContextVar("narrowing_deadline", default=None)


def _check_deadline() -> None:
    deadline = _DEADLINE.get()
    if deadline is not None and time.process_time() > deadline:
        raise NarrowingTooCostly


# ---- isl helpers ---------------------------------------------------------------------------------------
def _space(ctx: StmtContext) -> str:
    return f"S{ctx.index}[{', '.join(ctx.ivs)}]"


def _tensor_box(k: Kernel, name: str) -> isl.Set:
    return _box(name, tuple(k.tensor(name).shape))


@lru_cache(maxsize=65536)
def _box(name: str, shape: tuple[int, ...]) -> isl.Set:
    dims = [f"x{d}" for d in range(len(shape))]
    body = " and ".join(f"0 <= {x} < {n}" for x, n in zip(dims, shape, strict=True)) or "true"
    return isl.Set(f"{{ T_{name}[{', '.join(dims)}] : {body} }}")


def _access(ctx: StmtContext, tensor: str, indices: Sequence[AffExpr]) -> isl.Map:
    """The access relation, built once per statement context and access (kept on the context, as
    `polyhedral.domain_constraints` keeps its domain): the forward walk, the kills and every round
    of the backward fixpoint ask for the same maps, and parsing them was a third of narrowing's
    time on a large network. islpy objects are immutable values, so sharing one is safe."""
    memo = ctx.__dict__.get("_access_maps")
    if memo is None:
        memo = {}
        object.__setattr__(ctx, "_access_maps", memo)
    key = (tensor, tuple(indices))
    m = memo.get(key)
    if m is None:
        m = memo[key] = unnamed_access(tuple(ctx.ivs), f"T_{tensor}", key[1]).set_tuple_name(
            isl.dim_type.in_, f"S{ctx.index}")
    return m


def _reach(k: Kernel, st: _Stmt) -> isl.Set:
    """Elements an indirect write may touch: its affine dims over the domain, any value (inside
    the tensor) along its dynamic ones."""
    s = st.ctx.stmt
    dims = [f"x{d}" for d in range(len(s.indices))]
    eqs = [f"{x} = {i.to_isl()}" for x, i in zip(dims, s.indices, strict=True) if isinstance(i, AffExpr)]
    body = f" : {' and '.join(eqs)}" if eqs else ""
    m = isl.Map(f"{{ {_space(st.ctx)} -> T_{s.target}[{', '.join(dims)}]{body} }}")
    return m.intersect_domain(st.dom).range().intersect(_tensor_box(k, s.target))


def _empty_like(s: isl.Set) -> isl.Set:
    return isl.Set.empty(s.get_space())


def _cond_set(ctx: StmtContext, cond: AffCond) -> isl.Set:
    return isl.Set(f"{{ {_space(ctx)} : {cond.to_isl()} }}")


# ---- forward: known values ----------------------------------------------------------------------------
class _Values:
    """Known values of every tensor at the current point of a statement-by-statement walk."""

    def __init__(self, k: Kernel, known: dict[str, Known] | None = None):
        self.k = k
        self.known: dict[str, Known] = {t.name: {} for t in k.tensors} if known is None else known
        self.dirty: set[str] = set()  # written inside the enclosing scan loop: unknown there

    def snapshot(self, tensors: Iterable[str]) -> _Values:
        """A copy for one statement that reads `tensors`: their tables only (a copy of every
        tensor's table per statement was quadratic: 8 s of a 15,000-statement network's
        narrowing). Shallow: a tensor's table of known values is replaced, never updated in place,
        when a statement writes it."""
        out = _Values(self.k, {t: self.known[t] for t in tensors})
        out.dirty = self.dirty & out.known.keys()
        return out

    def of(self, e: SExpr, ctx: StmtContext, region: isl.Set) -> Known:
        if region.is_empty():
            return {}
        if isinstance(e, Const):
            return {} if isinstance(e.value, float) and math.isnan(e.value) else {e.value: region}
        if isinstance(e, Read):
            if e.indirect or e.tensor in self.dirty:
                return {}
            acc = _access(ctx, e.tensor, e.indices)  # type: ignore[arg-type]
            out: Known = {}
            for v, elems in self.known[e.tensor].items():
                r = acc.intersect_range(elems).domain().intersect(region)
                if not r.is_empty():
                    out[v] = r
            return out
        if isinstance(e, Cmp):
            cond = _affine_cmp(e)
            if cond is not None:
                fits, holds = cond(ctx)
                known = region.intersect(fits)
                true = known.intersect(holds)
                return _nonempty({True: true, False: known.subtract(true)})
        if isinstance(e, Select):
            c = self.of(e.cond, ctx, region)
            t, f = c.get(True, _empty_like(region)), c.get(False, _empty_like(region))
            out = _merge(self.of(e.a, ctx, t), self.of(e.b, ctx, f))
            rest = region.subtract(t).subtract(f)
            ka, kb = self.of(e.a, ctx, rest), self.of(e.b, ctx, rest)
            return _merge(out, {v: ka[v].intersect(kb[v]) for v in ka if v in kb})
        if isinstance(e, Unary | Cast | Bitcast):
            return _fold_each(e, [self.of(e.x, ctx, region)])
        if isinstance(e, Binary | Cmp):
            ka, kb = self.of(e.a, ctx, region), self.of(e.b, ctx, region)
            out = _fold_each(e, [ka, kb])
            for side, mine, other in ((0, ka, kb), (1, kb, ka)):
                cover = _union(other.values(), region)
                for v, r in mine.items():
                    got = _absorb(e, side, v)
                    if got is not None:
                        out = _merge(out, {got: r.subtract(cover)})
            return out
        return {}  # IndexValue and anything else: unknown


def _affine_cmp(e: Cmp):  # noqa: ANN202 - returns a region builder or None
    """(where the comparison's operands are their affine values, where it holds) as a builder of
    isl sets in a statement's space, when both operands are index values or integer literals, or
    index values cast to an integer dtype (`torch.eye`'s uint16 aranges): the cast keeps the value
    where it is in the dtype's range, and only there is the comparison known."""
    fits: list[AffCond] = []

    def aff(x: SExpr) -> AffExpr | None:
        if isinstance(x, Cast) and isinstance(x.x, IndexValue) and x.dtype in INT_DTYPES:
            lo, hi = int_range(x.dtype)
            fits.extend((AffCond.compare(x.x.expr, ">=", AffExpr.lit(lo)),
                         AffCond.compare(x.x.expr, "<=", AffExpr.lit(hi))))
            return x.x.expr
        if isinstance(x, IndexValue):
            return x.expr
        if isinstance(x, Const) and isinstance(x.value, int) and not isinstance(x.value, bool):
            return AffExpr.lit(x.value)
        return None

    a, b = aff(e.a), aff(e.b)
    if a is None or b is None:
        return None

    def fit(ctx: StmtContext) -> isl.Set:
        out = isl.Set(f"{{ {_space(ctx)} }}")
        for f in fits:
            out = out.intersect(_cond_set(ctx, f))
        return out

    if e.pred == "ne":
        return lambda ctx: (fit(ctx), _cond_set(ctx, AffCond.compare(a, "==", b)).complement())
    cond = AffCond.compare(a, _CMP[e.pred], b)
    return lambda ctx: (fit(ctx), _cond_set(ctx, cond))


def _fold(e: SExpr, args: Sequence[object]) -> object | None:
    """The executor's value of node `e` with constant operands (None if not a usable constant)."""
    kids = [Const(v, c.dtype) for v, c in zip(args, e.children, strict=True)]
    if isinstance(e, Unary):
        node: SExpr = Unary(e.fn, kids[0], e.dtype)
    elif isinstance(e, Cast | Bitcast):
        node = type(e)(kids[0], e.dtype)
    elif isinstance(e, Binary):
        node = Binary(e.fn, kids[0], kids[1], e.dtype)
    elif isinstance(e, Cmp):
        node = Cmp(e.pred, kids[0], kids[1], e.dtype)
    else:
        return None
    try:
        with np.errstate(all="ignore"):
            v = Evaluator(None, {}, {}, Assign("_", (), "=", node))(node).item()  # type: ignore[arg-type]
    except (ArithmeticError, ValueError):
        return None
    return None if isinstance(v, float) and math.isnan(v) else v


def _fold_each(e: SExpr, knowns: Sequence[Known]) -> Known:
    out: Known = {}
    if len(knowns) == 1:
        for v, r in knowns[0].items():
            got = _fold(e, [v])
            if got is not None:
                out = _merge(out, {got: r})
        return out
    for va, ra in knowns[0].items():
        for vb, rb in knowns[1].items():
            r = ra.intersect(rb)
            got = None if r.is_empty() else _fold(e, [va, vb])
            if got is not None:
                out = _merge(out, {got: r})
    return out


def _absorb(e: SExpr, side: int, v: object) -> object | None:
    """Value of `e` when operand `side` is the constant `v` and the other is any FINITE value."""
    if not isinstance(e, Binary) or isinstance(v, bool) and e.fn not in ("and", "or"):
        return None
    inf = isinstance(v, float) and math.isinf(v)
    f = e.fn
    if f == "mul" and v == 0 and not inf:
        return _fold(e, [v, v])
    if f == "div" and side == 0 and v == 0 and not isinstance(v, bool):
        return _fold(e, [v, 1.0 if isinstance(v, float) else 1])  # 0 / x = 0 for a non-zero divisor
    if f == "add" and inf:
        return v
    if f == "sub" and inf:
        return v if side == 0 else -v  # type: ignore[operator]
    if (f == "max" and v == math.inf) or (f == "min" and v == -math.inf):
        return v
    if (f == "and" and v is False) or (f == "or" and v is True):
        return v
    return None


def _merge(a: Known, b: Known) -> Known:
    out = dict(a)
    for v, r in b.items():
        if r.is_empty():
            continue
        out[v] = out[v].union(r).coalesce() if v in out else r
    return out


def _nonempty(k: Known) -> Known:
    return {v: r for v, r in k.items() if not r.is_empty()}


def _union(sets: object, like: isl.Set) -> isl.Set:
    out = _empty_like(like)
    for s in sets:  # type: ignore[attr-defined]
        out = out.union(s)
    return out


def _live(vals: _Values, e: SExpr, ctx: StmtContext, region: isl.Set) -> list[tuple[Read, isl.Set]]:
    out: list[tuple[Read, isl.Set]] = []

    def go(x: SExpr, r: isl.Set) -> None:
        if r.is_empty():
            return
        if isinstance(x, Read):
            out.append((x, r))
        if isinstance(x, Select):
            c = vals.of(x.cond, ctx, r)
            go(x.cond, r)
            # a branch never taken need not be computed; a gather in it still needs valid indices
            skip_a = c.get(False) if c.get(False) is not None and not _gathers(x.a) else None
            skip_b = c.get(True) if c.get(True) is not None and not _gathers(x.b) else None
            go(x.a, r.subtract(skip_a) if skip_a is not None else r)
            go(x.b, r.subtract(skip_b) if skip_b is not None else r)
            return
        for child in x.children:
            go(child, r)

    go(e, region)
    return out


def _gathers(e: SExpr) -> bool:
    return any(isinstance(n, Read) and n.indirect for n in e.walk())


# ---- kills and the backward fixpoint --------------------------------------------------------------------
def backward(k: Kernel, stmts: list[_Stmt], seeds: dict[str, isl.Set], kept_of=None) -> dict[str, isl.Set]:
    """The least fixpoint of needed elements from `seeds` (tensor -> elements needed at the end):
    sets every statement's `kept` points (`kept_of(st, needed elements of its target)`, default
    `_kept`) and returns the needed elements of every tensor. Also the backward slice of sampled
    validation (executor/slicing.py), seeded with sampled output elements."""
    kept_of = kept_of or _kept
    needed = {t.name: isl.Set.empty(_tensor_box(k, t.name).get_space()) for t in k.tensors}
    needed.update(seeds)
    # A statement's contributions depend only on the needed elements of its target (its live
    # regions, kills and drops are fixed), and a tensor's set is replaced whenever it grows: a
    # statement that sees the same set object as on its last visit would add nothing again.
    seen: dict[int, isl.Set] = {}
    changed = True
    while changed:
        changed = False
        for st in reversed(stmts):
            _check_deadline()
            s = st.ctx.stmt
            if seen.get(st.ctx.index) is needed[s.target]:
                continue
            seen[st.ctx.index] = needed[s.target]
            if s.indirect:
                st.kept = st.dom
                reach = _reach(k, st)
                # the accumulators a scattered reduction may combine into must hold their values
                if s.kind != "=" and not reach.is_subset(needed[s.target]):
                    needed[s.target] = needed[s.target].union(reach).coalesce()
                    changed = True
            else:
                st.kept = kept_of(st, needed[s.target])
            for r, region in st.live:
                pts = st.kept.intersect(region)
                if pts.is_empty():
                    continue
                add = _tensor_box(k, r.tensor) if r.indirect or _reads_all(k, st, r, pts) else \
                    _separable_image(st, r, pts) or \
                    _access(st.ctx, r.tensor, r.indices).intersect_domain(pts).range()  # type: ignore[arg-type]
                if not add.is_subset(needed[r.tensor]):
                    needed[r.tensor] = needed[r.tensor].union(add).coalesce()
                    changed = True
    return needed


def _reads_all(k: Kernel, st: _Stmt, r: Read, pts: isl.Set) -> bool:
    """The affine read `r` from the points `pts` touches every element of its tensor. Asked only of
    div/mod indices (a view's arithmetic: a window partition, a roll), whose image isl writes with
    existential variables that make every later union and inclusion test slow (one test ran for
    minutes on Swin Transformer V2), while the whole tensor is a plain box: from the whole domain,
    an injective map with as many points as the tensor has elements covers it (accesses are in
    bounds, `check_bounds`)."""
    if not any(i.is_quasi() for i in r.indices):  # type: ignore[union-attr]
        return False
    if iteration_count(st.ctx) != math.prod(k.tensor(r.tensor).shape) or not pts.is_equal(st.dom):
        return False
    return _access(st.ctx, r.tensor, r.indices).intersect_domain(st.dom).is_injective()  # type: ignore[arg-type]


#: the most value combinations `_separable_image` enumerates for one index
_ENUMERATE = 1 << 20


def _separable_image(st: _Stmt, r: Read, pts: isl.Set) -> isl.Set | None:
    """The elements a div/mod read touches from the statement's whole domain, when that domain is the
    box of its loop ranges and the image is a box: the indices fall into groups that share loop
    variables (a window partition's row and column share the window number), each group's index
    tuples are enumerated over its variables' ranges, and the image is their product, a box when
    each group's tuples fill the box of their ranges (a channel shuffle's `40 * ((c + 40 g) % 3) +
    (c + 40 g) // 3` over c < 40, g < 3 is every channel below 120). The same set isl computes,
    without the existential variables that made its image and every later union and comparison of
    it slow (a grouped convolution reading a shuffled input: 34 s of KernelBench L3
    25_ShuffleNetUnit's narrowing). None when it does not apply (isl computes the image then)."""
    idx = list(r.indices)
    if not any(i.is_quasi() for i in idx) or st.ctx.guards:  # type: ignore[union-attr]
        return None
    rng = _box_ranges(st)
    if rng is None or not pts.is_equal(st.dom):
        return None
    groups: list[tuple[list[int], set[str]]] = []  # (index positions, their loop variables)
    for d, e in enumerate(idx):
        dims, vs = [d], set(e.vars())  # type: ignore[union-attr]
        for g in [g for g in groups if g[1] & vs]:
            groups.remove(g)
            dims, vs = g[0] + dims, g[1] | vs
        groups.append((sorted(dims), vs))
    box: dict[int, tuple[int, int]] = {}
    for dims, vs in groups:
        names = sorted(vs)
        if math.prod(rng[v][1] - rng[v][0] + 1 for v in names) > _ENUMERATE:
            return None
        grids = np.meshgrid(*(np.arange(rng[v][0], rng[v][1] + 1) for v in names), indexing="ij")
        env = dict(zip(names, grids, strict=True))
        cols = [np.broadcast_to(np.asarray(idx[d].evaluate(env)), grids[0].shape if grids else ())  # type: ignore[union-attr]
                .ravel() for d in dims]
        lo, hi = [int(c.min()) for c in cols], [int(c.max()) for c in cols]
        if not _fills_box(cols, lo, hi):
            return None  # not a box: isl's image
        for j, d in enumerate(dims):
            box[d] = (lo[j], hi[j])
    dims_ = [f"x{d}" for d in range(len(idx))]
    body = " and ".join(f"{box[d][0]} <= {x} <= {box[d][1]}" for d, x in enumerate(dims_)) or "true"
    return isl.Set(f"{{ T_{r.tensor}[{', '.join(dims_)}] : {body} }}")


def _fills_box(cols: list[np.ndarray], lo: list[int], hi: list[int]) -> bool:
    """Whether the index tuples (one column per index) take every value of the box [lo, hi]: each
    tuple marks its cell of the box (a linear pass; sorting the tuples took 16 s of a BigBird's
    narrowing at batch 256)."""
    shape = tuple(h - lo_ + 1 for lo_, h in zip(lo, hi, strict=True))
    cells = math.prod(shape)
    if cells > (cols[0].size if cols else 1):
        return False  # more cells than tuples
    seen = np.zeros(cells, dtype=bool)
    seen[np.ravel_multi_index(tuple(c - lo_ for c, lo_ in zip(cols, lo, strict=True)), shape)] = True
    return bool(seen.all())


def _box_ranges(st: _Stmt) -> dict[str, tuple[int, int]] | None:
    """Inclusive ranges of the loop variables when the statement's domain is their box: constant
    bounds, unit steps, no guards (the caller checks the guards)."""
    out: dict[str, tuple[int, int]] = {}
    for f in st.ctx.loops:
        if f.step != 1 or f.lb.vars() or f.ub.vars() or f.lb.is_quasi() or f.ub.is_quasi():
            return None
        lo, hi = f.lb.const, f.ub.const - 1
        if hi < lo:
            return None
        out[f.iv] = (lo, hi)
    return out


#: a reduction's kept points in more convex pieces than this stay one piece (their hull): each piece
#: is a copy of the statement, and a region of many pieces is rarely worth its code
MAX_REDUCTION_PIECES = 8


def _kept(st: _Stmt, needed: isl.Set) -> isl.Set:
    """The points of an affine write that store a needed element and are neither killed nor
    identity contributions."""
    s = st.ctx.stmt
    base = st.dom
    for cut in (st.kill, st.drop):
        if cut is not None:
            base = base.subtract(cut)
    acc = _access(st.ctx, s.target, s.indices)
    kept = base.intersect(acc.intersect_range(needed).domain()).coalesce()
    if kept.is_empty():
        return kept
    # one convex piece (see _forward); so is a reduction whose pieces would accumulate into one
    # element (two statements of one loop writing it), or that needs more than a few pieces
    if not st.splittable or (s.kind != "=" and not _apart_pieces(kept, st.dom, acc)):
        kept = isl.Set.from_basic_set(kept.simple_hull()).intersect(st.dom).coalesce()
    return kept


def _apart_pieces(kept: isl.Set, dom: isl.Set, acc: isl.Map) -> bool:
    """Whether the convex pieces the rebuild guards `kept` by (`transforms/narrow._guarded`) write
    pairwise disjoint elements, and are at most `MAX_REDUCTION_PIECES`."""
    if kept.is_equal(dom):
        return True
    pieces = kept.compute_divs().coalesce().make_disjoint().get_basic_sets()
    if len(pieces) > MAX_REDUCTION_PIECES:
        return False
    images = [acc.intersect_domain(isl.Set.from_basic_set(b)).range() for b in pieces]
    return all(a.intersect(b).is_empty() for i, a in enumerate(images) for b in images[i + 1:])


# ---- rebuilding the kernel -------------------------------------------------------------------------------


def _conds(b: isl.BasicSet, ctx: StmtContext) -> tuple[AffCond, ...]:
    ivs = ctx.ivs
    divs = [_div_expr(b.get_div(j), ivs, ctx) for j in range(b.dim(isl.dim_type.div))]
    out: list[AffCond] = []
    for c in b.get_constraints():
        e = AffExpr.lit(_int(c.get_constant_val()))
        for i, v in enumerate(ivs):
            e = e + AffExpr.var(v) * _int(c.get_coefficient_val(isl.dim_type.set, i))
        for j, d in enumerate(divs):
            e = e + d * _int(c.get_coefficient_val(isl.dim_type.div, j))
        out.append(AffCond(e, "==" if c.is_equality() else ">="))
    return tuple(out)


def _div_expr(aff: isl.Aff, ivs: Sequence[str], ctx: StmtContext) -> AffExpr:
    """floor(aff) as an AffExpr; aff has rational coefficients over the loop variables only."""
    den = _int(aff.get_denominator_val())
    num = AffExpr.lit(_int(aff.get_constant_val() * den))
    for i, v in enumerate(ivs):
        num = num + AffExpr.var(v) * _int(aff.get_coefficient_val(isl.dim_type.in_, i) * den)
    for j in range(aff.dim(isl.dim_type.div)):  # a division of divisions: floor((.. + k floor(..)) / d)
        k = aff.get_coefficient_val(isl.dim_type.div, j)
        if not k.is_zero():
            num = num + _div_expr(aff.get_div(j), ivs, ctx) * _int(k * den)
    return num // den


def _int(v: isl.Val) -> int:
    x = v.to_python()
    if isinstance(x, int):
        return x
    raise LoopIRError(f"narrow-needed: non-integer coefficient {v} in a guard")
