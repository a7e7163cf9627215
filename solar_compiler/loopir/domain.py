"""A statement's iteration domain (loop bounds, steps, guards): its affine constraints, its isl set,
its exact point count, and the check that its affine accesses stay inside their tensors. The common
ground of the polyhedral counts (`analysis/polyhedral.py`), the executor's legality check
(`executor/legality.py`), the frontends' checks of what they built (`check_bounds`,
`iteration_count`) and the `einsum.node` verifier (`index_in_range`). It lives below all of them so
that neither the executor nor the dialects need anything from analysis/ (the package import graph
is a DAG: tests/test_layers.py).

`count_val()` enumerates in the worst case: a 7-deep conv domain did not finish in 120 s, the
same count split into independent groups of dimensions took 2 ms. So every count here first
splits the dimensions into groups that no constraint couples (xDSL's `DisjointSet` over the
variables of each constraint), counts each group alone, and multiplies. A group whose only
constraints are constant bounds of one variable is counted arithmetically.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TypeVar

import islpy as isl
from xdsl.utils.disjoint_set import DisjointSet

from solar_compiler.loopir.affine import AffCond, AffExpr, _fields_only, _kept_hash
from solar_compiler.loopir.ast import Kernel, LoopIRError, StmtContext, statements, stmt_reads

T = TypeVar("T")


@dataclass(frozen=True)
class Constraint:
    """One affine constraint of a domain, with the variables it couples."""

    cond: AffCond
    vars: frozenset[str]

    # kept once asked, as AffExpr's: a `costs.Site` (a cache key) hashes its domain's constraints
    __hash__ = _kept_hash
    __getstate__ = _fields_only


def domain_constraints(ctx: StmtContext) -> tuple[tuple[str, ...], list[Constraint], dict[str, int]]:
    """(ivs, constraints, steps) of a statement's iteration domain: loop bounds and guards. Computed
    once per statement context (kept on it: a context is immutable) since every count, footprint
    and reuse bound of the statement starts from it."""
    memo = ctx.__dict__.get("_domain")
    if memo is None:
        memo = _domain_constraints(ctx)
        object.__setattr__(ctx, "_domain", memo)
    ivs, cons, steps = memo
    return ivs, list(cons), dict(steps)


def loop_conds(iv: str, lb: AffExpr, ub: AffExpr, step: int) -> list[AffCond]:
    """The constraints one loop puts on its variable: `lb <= iv < ub`, and `(iv - lb) % step == 0`
    for a step other than 1 (a statement's loops, or an `einsum.node`'s bounds and steps)."""
    v = AffExpr.var(iv)
    out = [AffCond.compare(v, ">=", lb), AffCond.compare(v, "<", ub)]
    if step != 1:
        out.append(AffCond((v - lb) % step, "=="))
    return out


def _domain_constraints(ctx: StmtContext) -> tuple[tuple[str, ...], tuple[Constraint, ...], dict[str, int]]:
    cons: list[Constraint] = []
    steps: dict[str, int] = {}
    for f in ctx.loops:
        if f.step != 1:
            steps[f.iv] = f.step
        cons += [Constraint(c, frozenset(c.vars())) for c in loop_conds(f.iv, f.lb, f.ub, f.step)]
    for g in ctx.guards:
        cons.append(Constraint(g, frozenset(g.vars())))
    return ctx.ivs, tuple(cons), steps


def loop_ranges(ctx: StmtContext) -> dict[str, tuple[int, int]] | None:
    """Interval of every loop variable from constant-evaluable bounds (guards ignored)."""
    out: dict[str, tuple[int, int]] = {}
    for f in ctx.loops:
        try:
            lo = f.lb.bounds(out)[0]
            hi = f.ub.bounds(out)[1] - 1
        except KeyError:
            return None
        out[f.iv] = (lo, hi)
    return out


# ---- the domain as an isl set ----------------------------------------------------------------------
def isl_set(name: str, ivs: Sequence[str], conds: Sequence[AffCond]) -> isl.Set:
    body = " and ".join(c.to_isl() for c in conds) or "true"
    return isl.Set(f"{{ {name}[{', '.join(ivs)}] : {body} }}")


def domain(ctx: StmtContext) -> isl.Set:
    """The statement's iteration domain as an isl set named `S<index>` (built once per context)."""
    memo = ctx.__dict__.get("_isl_domain")
    if memo is None:
        ivs, cons, _ = domain_constraints(ctx)
        memo = unnamed_domain(ivs, tuple(c.cond for c in cons)).set_tuple_name(f"S{ctx.index}")
        object.__setattr__(ctx, "_isl_domain", memo)
    return memo


# isl parses a set in ~100 us and renames one in ~1 us; a network's statements share few domains and
# accesses (DenseNet201: 400 distinct domains among 3,487), so each is parsed once and renamed.
@lru_cache(maxsize=16384)
def unnamed_domain(ivs: tuple[str, ...], conds: tuple[AffCond, ...]) -> isl.Set:
    """`{ S[ivs] : conds }`, parsed once per distinct domain (name it with `set_tuple_name`)."""
    return isl_set("S", ivs, conds)


# ---- exact counts ----------------------------------------------------------------------------------
@lru_cache(maxsize=65536)
def unnamed_access(ivs: tuple[str, ...], tensor: str, indices: tuple[AffExpr, ...]) -> isl.Map:
    """`{ S[ivs] -> tensor[indices] }`, to be named for its statement (`isl.Map.set_tuple_name`)."""
    return isl.Map(f"{{ S[{', '.join(ivs)}] -> {tensor}[{', '.join(i.to_isl() for i in indices)}] }}")


def partition(items: Sequence[T], links: Iterable[Iterable[T]]) -> list[list[T]]:
    """The classes of `items` when the members of every link are joined (xDSL's `DisjointSet`; a
    link's members outside `items` are ignored). Classes in the order of their first member in
    `items`, members in `items` order: counts are products over independent classes, and the
    order keeps the cache keys built from the classes stable."""
    known = list(dict.fromkeys(items))
    sets = DisjointSet(known)
    members_of = set(known)
    for link in links:
        members = [m for m in link if m in members_of]
        for m in members[1:]:
            sets.union(members[0], m)
    classes: dict[T, list[T]] = {}
    for x in items:
        classes.setdefault(sets.find(x), []).append(x)
    return list(classes.values())


def groups(vars_: Sequence[str], cons: Sequence[Constraint], extra: Sequence[frozenset[str]] = ()) \
        -> list[list[str]]:
    """Loop variables in classes that no constraint (nor `extra` set) links: counted independently."""
    return partition(vars_, [c.vars for c in cons] + list(extra))


@lru_cache(maxsize=4096)
def count_group(ivs: tuple[str, ...], conds: tuple[AffCond, ...]) -> int:
    """Points of `{ ivs : conds }` (one class of `groups`): arithmetic for one variable under
    constant bounds, else isl's count."""
    if len(ivs) == 1 and all(not c.expr.is_quasi() for c in conds):
        (v,) = ivs
        lo, hi = -math.inf, math.inf
        for c in conds:
            a, k = c.expr.coeff(v), c.expr.const
            if c.op == "==":
                val = -k / a
                lo, hi = max(lo, math.ceil(val)), min(hi, math.floor(val))
                if val != int(val):
                    return 0
            elif a > 0:
                lo = max(lo, math.ceil(-k / a))
            else:
                hi = min(hi, math.floor(k / -a))
        if math.isinf(lo) or math.isinf(hi):
            raise LoopIRError(f"unbounded loop variable '{v}'")
        return max(0, int(hi - lo + 1))
    return isl_set("G", ivs, conds).count_val().to_python()


def count_points(ivs: Sequence[str], cons: Sequence[Constraint]) -> int:
    """Exact number of integer points, factored into independent groups of variables."""
    total = 1
    for g in groups(ivs, cons):
        gs = set(g)
        conds = tuple(c.cond for c in cons if c.vars and c.vars <= gs)
        total *= count_group(tuple(g), conds)
        if total == 0:
            return 0
    # constraints without variables (constant guards) either hold or empty the domain
    for c in cons:
        if not c.vars and not c.cond.evaluate({}):
            return 0
    return total


def iteration_count(ctx: StmtContext) -> int:
    """Exact number of points of the statement's iteration domain."""
    ivs, cons, _ = domain_constraints(ctx)
    return count_points(ivs, cons)


# ---- accesses inside their tensors -----------------------------------------------------------------
def index_in_range(dom: isl.Set, ivs: Sequence[str], e: AffExpr, n: int) -> bool:
    """Whether the affine index `e` over the domain `dom` (a set over `ivs`, any tuple name) takes
    only values in [0, n): exact, as isl's image of the domain (an empty domain touches nothing)."""
    name = dom.get_tuple_name()
    vals = isl.Map(f"{{ {name}[{', '.join(ivs)}] -> X[{e.to_isl()}] }}").intersect_domain(dom).range()
    return vals.is_subset(isl.Set(f"{{ X[x] : 0 <= x < {n} }}"))


def check_bounds(kernel: Kernel) -> None:
    """Every affine access stays inside its tensor on the (guarded) iteration domain.
    Raises LoopIRError naming the statement, tensor and dimension otherwise. A dynamic (loaded)
    index position of a read or write is data: the executor checks it on every point it runs.
    Intervals of the loop variables decide most indices; the rest are decided exactly by isl."""
    for ctx in statements(kernel):
        accesses: list[tuple[str, tuple]] = [(ctx.stmt.target, ctx.stmt.indices)]
        accesses += [(r.tensor, r.indices) for r in stmt_reads(ctx.stmt)]
        dom = None
        for tensor, idx in accesses:
            shape = kernel.tensor(tensor).shape
            for d, (e, n) in enumerate(zip(idx, shape, strict=True)):
                if not isinstance(e, AffExpr):
                    continue
                ranges = loop_ranges(ctx)
                lo, hi = e.bounds(ranges) if ranges is not None else (-1, n)
                if 0 <= lo and hi < n:
                    continue
                if dom is None:
                    dom = domain(ctx)
                if dom.is_empty():
                    break
                if not index_in_range(dom, ctx.ivs, e, n):
                    where = f" (from {ctx.stmt.loc})" if ctx.stmt.loc else ""
                    raise LoopIRError(f"index {d} of '{tensor}' ({e}) leaves the range [0, {n}) in the "
                                      f"statement writing '{ctx.stmt.target}'{where}", ctx.stmt.pos)


# ---- access relations and footprints of a statement --------------------------------------------------
def access_map(ctx: StmtContext, tensor: str, indices: Sequence[AffExpr]) -> isl.Map:
    """`{ S[ivs] -> tensor[indices] }` restricted to the statement's domain."""
    m = unnamed_access(tuple(ctx.ivs), tensor, tuple(indices))
    return m.set_tuple_name(isl.dim_type.in_, f"S{ctx.index}").intersect_domain(domain(ctx))


def _box(ctx: StmtContext) -> dict[str, int] | None:
    """Trip count per loop variable when the domain is a box (unguarded unit-step loops with constant
    bounds), else None. Kept on the context, as its domain is."""
    memo = ctx.__dict__.get("_box", False)
    if memo is False:
        memo = None
        if not ctx.guards and all(f.step == 1 and f.lb.is_const() and f.ub.is_const() for f in ctx.loops):
            memo = {f.iv: max(f.ub.const - f.lb.const, 0) for f in ctx.loops}
        object.__setattr__(ctx, "_box", memo)
    return memo


def footprint(ctx: StmtContext, indices: Sequence[AffExpr]) -> int:
    """Distinct elements touched by an access with these (affine) indices over the domain."""
    if all(i.is_var() for i in indices):
        names = [i.terms[0][0] for i in indices]
        if len(set(names)) == len(names):
            return _variables_footprint(ctx, set(names))
    ivs, cons, _ = domain_constraints(ctx)
    idx_vars = [frozenset(i.vars()) for i in indices]
    used = set().union(*idx_vars) if idx_vars else set()
    # Variables no index uses only matter through emptiness and through coupling constraints.
    total = 1
    for g in groups(ivs, cons, idx_vars):
        gs = set(g)
        conds = tuple(c.cond for c in cons if c.vars and c.vars <= gs)
        dims = [i for i, vs in zip(indices, idx_vars, strict=True) if vs and vs <= gs]
        if not gs & used:
            if count_group(tuple(g), conds) == 0:
                return 0
            continue
        total *= _image_count(tuple(g), conds, tuple(dims))
    for c in cons:
        if not c.vars and not c.cond.evaluate({}):
            return 0
    return total


def _variables_footprint(ctx: StmtContext, names: set[str]) -> int:
    """`footprint` of distinct plain variables: plain indices couple no variables, so the domain's
    own groups (kept on the context) are the groups, and the count is a product over them (the reuse
    bounds ask for it once per subset of a convolution's seven loops). Over a box, the product of
    the trip counts."""
    box = _box(ctx)
    if box is not None:
        return 0 if 0 in box.values() else math.prod(box[v] for v in names)
    classes = ctx.__dict__.get("_var_groups")
    if classes is None:
        ivs, cons, _ = domain_constraints(ctx)
        classes = []
        for g in groups(ivs, cons):
            gs = set(g)
            classes.append((tuple(g), gs, tuple(c.cond for c in cons if c.vars and c.vars <= gs)))
        if any(not c.vars and not c.cond.evaluate({}) for c in cons):  # a false constant guard
            classes = False
        object.__setattr__(ctx, "_var_groups", classes)
    if classes is False:
        return 0
    total = 1
    for g, gs, conds in classes:
        if gs & names:
            total *= _image_count(g, conds, tuple(AffExpr.var(v) for v in g if v in names))
        elif count_group(g, conds) == 0:
            return 0
    return total


@lru_cache(maxsize=4096)
def _image_count(ivs: tuple[str, ...], conds: tuple[AffCond, ...], dims: tuple[AffExpr, ...]) -> int:
    if len(ivs) == 1 and len(dims) == 1 and not dims[0].is_quasi() and abs(dims[0].coeff(ivs[0])) == 1:
        return count_group(ivs, conds)  # a unit-stride image of one variable is a bijection
    s = isl_set("G", ivs, conds)
    m = isl.Map(f"{{ G[{', '.join(ivs)}] -> T[{', '.join(d.to_isl() for d in dims)}] }}")
    return m.intersect_domain(s).range().count_val().to_python()
