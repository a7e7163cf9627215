"""Loop-IR statements as islpy objects: access relations and footprints, on the domains and counts
of `loopir/domain.py`.

The statement-level domain code (constraints, the isl domain, exact counts, loop ranges) lives in
`solar_compiler/loopir/domain.py`, beside the AST it reads, where the frontends, the executor and
the `einsum.node` verifier reach it too; the names below re-export it for the analyses that still
read statements (issue 20: each goes with its last caller as the analyses move to
`analysis/structured.py`). Footprints split the dimensions into groups no constraint or index
couples, as the counts do (`count_val()` of a 7-deep convolution domain does not finish).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache

import islpy as isl
from xdsl.ir import BlockArgument

from solar_compiler.analysis import structured as st
from solar_compiler.dialects.einsum import NodeOp
from solar_compiler.loopir.affine import AffCond, AffExpr
from solar_compiler.loopir.affine_map import from_map, from_set
from solar_compiler.loopir.ast import StmtContext
from solar_compiler.loopir.domain import (
    Constraint,
    count_group,
    count_points,
    domain,
    domain_constraints,
    groups,
    isl_set,
    iteration_count,
    loop_conds,
    loop_ranges,
    partition,
    unnamed_access,
)

__all__ = ["Constraint", "access_map", "contraction_reads", "count_points", "domain", "domain_constraints",
           "footprint", "iteration_count", "loop_ranges", "node_domain", "node_indices", "node_loop_ranges",
           "partition", "unnamed_access"]


def node_domain(n: NodeOp, init: bool = False) -> tuple[tuple[str, ...], tuple[Constraint, ...]]:
    """(loop variables, constraints) of one statement of an `einsum.node`, over its `iv_names`: its
    loops' bounds and steps, then its guards (the folded init's: its outer `init_depth` loops and
    first guards), in the form the statement-level counts take (`loopir/domain.py`)."""
    ivs = n.iv_names
    if init:
        nloops, _ = NodeOp.ints(n.init_depth)
        nguards = len(NodeOp.ints(n.init_guard_scopes))
    else:
        nloops, nguards = len(ivs), len(NodeOp.ints(n.guard_scopes))
    lbs, ubs = from_map(n.lower_bounds.data, ivs), from_map(n.upper_bounds.data, ivs)
    steps = NodeOp.ints(n.steps)
    cons = [Constraint(c, frozenset(c.vars())) for d in range(nloops)
            for c in loop_conds(ivs[d], lbs[d], ubs[d], steps[d])]
    guards = from_set(n.guards.data, ivs)[:nguards] if n.guards is not None else ()
    cons += [Constraint(c, frozenset(c.vars())) for c in guards]
    return tuple(ivs[:nloops]), tuple(cons)


def node_indices(node: NodeOp, i: int) -> tuple[AffExpr, ...]:
    """The indices of the node's `i`-th indexing map over its loop variables (a loaded position, a
    symbol of the map, reads as a variable of its own: `_s<k>`)."""
    m = node.get_indexing_maps().data[i].data
    return tuple(from_map(m, node.iv_names, [f"_s{k}" for k in range(m.num_symbols)]))


def contraction_reads(node: NodeOp) -> list[tuple[str, tuple[AffExpr, ...], int]] | None:
    """(tensor, indices, block argument) of each distinct factor of an `add` reduction's product
    (through casts) that varies along a reduced dim, in order of first occurrence; None when one is
    not a direct read (a gather, an expression) or the node is no `add` reduction."""
    if node.reduce.data != "add":
        return None
    reduced = st.reduced_dims(node)
    memo: dict = {}
    seen: dict[tuple, tuple[str, tuple[AffExpr, ...], int]] = {}
    for f in st.product_factors(st.stored_value(node)):
        if not node.value_dims(f, memo) & reduced:
            continue
        if not isinstance(f, BlockArgument):
            return None
        t, m = node.input_names[f.index], node.get_indexing_maps().data[f.index]
        seen.setdefault((t, m), (t, node_indices(node, f.index), f.index))
    return list(seen.values())


def node_loop_ranges(n: NodeOp) -> dict[str, tuple[int, int]]:
    """Interval of every loop variable of the node from its bounds (guards ignored), as
    `loop_ranges` gives a statement's."""
    ivs = n.iv_names
    out: dict[str, tuple[int, int]] = {}
    for iv, lb, ub in zip(ivs, from_map(n.lower_bounds.data, ivs), from_map(n.upper_bounds.data, ivs),
                          strict=True):
        out[iv] = (lb.bounds(out)[0], ub.bounds(out)[1] - 1)
    return out


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
