"""Needed-work narrowing: shrink each statement's domain to the points whose result reaches an output.

Kernels run statement by statement (non-scan loops carry no dependence: executor/legality.py), so
two islpy analyses at statement granularity are exact enough to be useful and sound:

1. Forward, known values: regions of every tensor whose elements hold a known constant, from
   literal fills, selects whose condition is an affine comparison of loop variables (a causal mask,
   also through a bool mask tensor filled that way), and constant folding with the executor's own
   arithmetic (exp(-inf) = 0, -inf - x = -inf, 0 * x = 0, 0 / x = 0, max(x, inf) = inf). Rules that
   absorb an unknown operand assume it is finite (and a divisor non-zero, as a softmax row sum with
   one unmasked entry is): masked positions are then exact whenever the data is. A
   statement's reads of a tensor written in the same scan loop are unknown.
2. Backward, needed elements (least fixpoint): every output element is needed; a point of a
   statement is kept iff it writes a needed element, is not a reduction contribution known to be
   the identity (x += 0, m max= -inf), and is not an `=` write overwritten in a later loop nest with
   no read of the tensor in between; the reads of kept points are needed, except a select branch its
   known condition never takes.

A kept point whose value is a known constant becomes a constant store (`T[..] = c`, no reads), so no
kept point ever reads an element that the narrowed kernel no longer computes. An indirect write (a
scatter: a dynamic target index) is never narrowed, its reads are needed on its whole domain, and it
is taken to touch every element along its dynamic dimensions: it ends every known value there,
neither kills nor is killed, and a scattered reduction needs all those elements (its accumulators).
Value-dependent masks (a mask tensor that is an input) are not narrowed. Regions become `if` guards
(one copy of the statement per disjoint convex piece); an empty loop or `if` is removed.
"""

from __future__ import annotations

import bisect
import math
import time
from collections.abc import Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from functools import lru_cache

import islpy as isl
import numpy as np

from solar_compiler.analysis.polyhedral import domain, footprint, iteration_count, loop_ranges, unnamed_access
from solar_compiler.executor.evaluate import Evaluator
from solar_compiler.executor.numeric import identity
from solar_compiler.loopir.affine import AffCond, AffExpr, solo_vars
from solar_compiler.loopir.ast import (
    Assign,
    Binary,
    Cast,
    Cmp,
    Const,
    For,
    IndexValue,
    Kernel,
    LoopIRError,
    Node,
    Read,
    Select,
    SExpr,
    StmtContext,
    Unary,
    statements,
    stmt_reads,
)

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


def needed_points(k: Kernel) -> list[_Stmt]:
    """One round of the analysis on a typechecked kernel: per statement (program order), its kept
    points (`kept`), the regions where its value is a known constant (`root`) and the known values
    when it runs (`values`). Plain records: the rewrite that applies them is
    `transforms/narrow.py`."""
    stmts = [_Stmt(c, domain(c)) for c in statements(k)]
    _forward(k, stmts)
    _kills(k, stmts)
    _backward(k, stmts)
    return stmts


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

    def snapshot(self) -> _Values:
        """A copy for one statement. Shallow: a tensor's table of known values is replaced, never
        updated in place, when a statement writes it (a deep copy per statement was quadratic)."""
        out = _Values(self.k, dict(self.known))
        out.dirty = set(self.dirty)
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
                true = region.intersect(cond(ctx))
                return _nonempty({True: true, False: region.subtract(true)})
        if isinstance(e, Select):
            c = self.of(e.cond, ctx, region)
            t, f = c.get(True, _empty_like(region)), c.get(False, _empty_like(region))
            out = _merge(self.of(e.a, ctx, t), self.of(e.b, ctx, f))
            rest = region.subtract(t).subtract(f)
            ka, kb = self.of(e.a, ctx, rest), self.of(e.b, ctx, rest)
            return _merge(out, {v: ka[v].intersect(kb[v]) for v in ka if v in kb})
        if isinstance(e, Unary | Cast):
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
    def aff(x: SExpr) -> AffExpr | None:
        if isinstance(x, IndexValue):
            return x.expr
        if isinstance(x, Const) and isinstance(x.value, int) and not isinstance(x.value, bool):
            return AffExpr.lit(x.value)
        return None

    a, b = aff(e.a), aff(e.b)
    if a is None or b is None:
        return None
    if e.pred == "ne":
        return lambda ctx: _cond_set(ctx, AffCond.compare(a, "==", b)).complement()
    cond = AffCond.compare(a, _CMP[e.pred], b)
    return lambda ctx: _cond_set(ctx, cond)


def _fold(e: SExpr, args: Sequence[object]) -> object | None:
    """The executor's value of node `e` with constant operands (None if not a usable constant)."""
    kids = [Const(v, c.dtype) for v, c in zip(args, e.children, strict=True)]
    if isinstance(e, Unary | Cast):
        node: SExpr = type(e)(e.fn, kids[0], e.dtype) if isinstance(e, Unary) else Cast(kids[0], e.dtype)
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


def _forward(k: Kernel, stmts: list[_Stmt]) -> None:
    vals = _Values(k)
    for st in stmts:
        _check_deadline()
        ctx, s = st.ctx, st.ctx.stmt
        scans = [f for f in ctx.loops if f.sequential]
        vals.dirty = _written_in(stmts, scans[0]) if scans else set()
        st.values = vals.snapshot()
        if s.indirect:
            _forward_indirect(k, vals, st)
            continue
        root = vals.of(s.value, ctx, st.dom)
        acc = _access(ctx, s.target, s.indices)
        written = acc.intersect_domain(st.dom).range()
        if s.kind != "=":
            ident = identity(s.kind, k.tensor(s.target).dtype)
            st.drop = root.pop(ident, _empty_like(st.dom))
        injective = (solo_vars(s.indices) >= set(ctx.ivs)
                     or iteration_count(ctx) == footprint(ctx, s.indices))
        # Copies of a statement run one after the other (statement-at-a-time), so only an
        # injective `=` may be split into pieces or constant stores; anything else keeps one copy
        # on a convex region, with its reads live everywhere.
        st.splittable = s.kind == "=" and injective
        st.root = root if st.splittable and not isinstance(s.value, Const) else {}
        stored = _union(st.root.values(), st.dom)
        if st.drop is not None and st.splittable:
            stored = stored.union(st.drop)
        st.live = _live(vals, s.value, ctx, st.dom.subtract(stored))
        # update the known values of the target
        table = vals.known[s.target]
        if s.kind == "=" and not scans:
            new: Known = {}
            for v, r in root.items():
                new[v] = acc.intersect_domain(r).range() if injective else \
                    written.subtract(acc.intersect_domain(st.dom.subtract(r)).range())
            if isinstance(s.value, Const):
                new = {s.value.value: written}
            vals.known[s.target] = _merge({v: e.subtract(written) for v, e in table.items()}, new)
        else:
            live = st.dom if st.drop is None else st.dom.subtract(st.drop)
            touched = written if scans else acc.intersect_domain(live).range()
            vals.known[s.target] = _nonempty({v: e.subtract(touched) for v, e in table.items()})


def _forward_indirect(k: Kernel, vals: _Values, st: _Stmt) -> None:
    """A scatter: kept whole (one copy, no constant stores), every read live on its domain, and
    every element it may touch no longer holds a known value."""
    s = st.ctx.stmt
    st.splittable = False
    st.live = [x for e in (s.value, *s.dynamic_indices) for x in _live(vals, e, st.ctx, st.dom)]
    touched = _reach(k, st)
    vals.known[s.target] = _nonempty({v: e.subtract(touched) for v, e in vals.known[s.target].items()})


def _written_in(stmts: list[_Stmt], loop: For) -> set[str]:
    return {st.ctx.stmt.target for st in stmts if any(f is loop for f in st.ctx.loops)}


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
def _top_level(k: Kernel) -> dict[int, int]:
    """Statement index -> index of the top-level node that contains it."""
    out: dict[int, int] = {}
    ids = {id(c.stmt): c.index for c in statements(k)}

    def go(n: Node, top: int) -> None:
        if isinstance(n, Assign):
            out[ids[id(n)]] = top
        else:
            for c in n.body:
                go(c, top)

    for t, n in enumerate(k.body):
        go(n, t)
    return out


def _kills(k: Kernel, stmts: list[_Stmt]) -> None:
    top = _top_level(k)
    readers: dict[str, set[int]] = {}
    for st in stmts:
        s = st.ctx.stmt
        for r in stmt_reads(s):
            readers.setdefault(r.tensor, set()).add(top[st.ctx.index])
        if s.kind != "=":
            readers.setdefault(s.target, set()).add(top[st.ctx.index])
    writes: dict[int, isl.Map] = {}  # statement index -> its write relation over its domain

    def written(st: _Stmt) -> isl.Map:
        if st.ctx.index not in writes:
            s = st.ctx.stmt
            writes[st.ctx.index] = _access(st.ctx, s.target, s.indices).intersect_domain(st.dom)
        return writes[st.ctx.index]

    by_target: dict[str, list[_Stmt]] = {}  # the statements writing each tensor, in program order
    rank: dict[int, int] = {}  # statement index -> its position in its target's list
    for st in stmts:
        writers = by_target.setdefault(st.ctx.stmt.target, [])
        rank[st.ctx.index] = len(writers)
        writers.append(st)
    read_at = {t: sorted(ts) for t, ts in readers.items()}
    ranges: dict[int, isl.Set] = {}
    boxes: dict[int, list[tuple[int, int]] | None] = {}
    for w in stmts:
        sw = w.ctx.stmt
        if sw.kind != "=" or sw.indirect:  # a scatter's elements are unknown: it is never killed
            continue
        apart = False  # a later writer whose elements cannot meet w's (a concatenation's slices)
        for w2 in by_target[sw.target][rank[w.ctx.index] + 1:]:  # the later writers only
            s2 = w2.ctx.stmt
            t1, t2 = top[w.ctx.index], top[w2.ctx.index]
            if s2.kind != "=" or t2 == t1:
                continue
            rs = read_at.get(sw.target, [])
            j = bisect.bisect_left(rs, t1)
            if j < len(rs) and rs[j] <= t2:
                break  # a read in between (or in either nest): nothing later kills
            if s2.indirect:
                continue  # may write fewer elements than it reaches: kills nothing
            if _disjoint(_write_box(w, boxes), _write_box(w2, boxes)):
                apart = True  # kills nothing: the isl intersection would be empty
                continue
            if w2.ctx.index not in ranges:
                ranges[w2.ctx.index] = written(w2).range()
            dead = written(w).intersect_range(ranges[w2.ctx.index]).domain()
            w.kill = dead if w.kill is None else w.kill.union(dead)
        if apart and w.kill is None:
            w.kill = isl.Set.empty(w.dom.get_space())


def _write_box(st: _Stmt, memo: dict[int, list[tuple[int, int]] | None]) -> list[tuple[int, int]] | None:
    """Per target dimension, an interval holding every element the statement writes (its loops'
    ranges through the affine indices, guards ignored); None when a bound is not constant."""
    i = st.ctx.index
    if i not in memo:
        rng = loop_ranges(st.ctx)
        memo[i] = None if rng is None else [e.bounds(rng) for e in st.ctx.stmt.indices]  # type: ignore[union-attr]
    return memo[i]


def _disjoint(a: list[tuple[int, int]] | None, b: list[tuple[int, int]] | None) -> bool:
    return a is not None and b is not None and any(
        hi1 < lo2 or hi2 < lo1 for (lo1, hi1), (lo2, hi2) in zip(a, b, strict=True))


def _backward(k: Kernel, stmts: list[_Stmt]) -> None:
    backward(k, stmts, {t.name: _tensor_box(k, t.name) for t in k.by_role("output")}, _kept)


def backward(k: Kernel, stmts: list[_Stmt], seeds: dict[str, isl.Set], kept_of=None) -> dict[str, isl.Set]:
    """The least fixpoint of needed elements from `seeds` (tensor -> elements needed at the end):
    sets every statement's `kept` points (`kept_of(st, needed elements of its target)`, default
    `_kept`) and returns the needed elements of every tensor. Also the backward slice of sampled
    validation (analysis/slicing.py), seeded with sampled output elements."""
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
    if not st.splittable and not kept.is_empty():  # one convex piece (see _forward)
        kept = isl.Set.from_basic_set(kept.simple_hull()).intersect(st.dom).coalesce()
    return kept


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
    nested = range(aff.dim(isl.dim_type.div))
    if any(not aff.get_coefficient_val(isl.dim_type.div, j).is_zero() for j in nested):
        raise LoopIRError(f"narrow-needed: the needed domain of the statement writing '{ctx.stmt.target}' "
                          "needs nested integer divisions; not expressible as loop guards", ctx.stmt.pos)
    num = AffExpr.lit(_int(aff.get_constant_val() * den))
    for i, v in enumerate(ivs):
        num = num + AffExpr.var(v) * _int(aff.get_coefficient_val(isl.dim_type.in_, i) * den)
    return num // den


def _int(v: isl.Val) -> int:
    x = v.to_python()
    if isinstance(x, int):
        return x
    raise LoopIRError(f"narrow-needed: non-integer coefficient {v} in a guard")
