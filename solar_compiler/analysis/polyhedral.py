"""The statement view of an `einsum.node`, for the analyses that count with canonical affine
expressions (`loopir/affine.py`): a node's statements' domains as constraints over its `iv_names`
(`node_domain`: its main statement's, or its folded init's), its maps' indices (`node_indices`), its
loop ranges, and a contraction's direct operands (`contraction_reads`). The counts themselves
(`count_points`, `partition`) and the statement-level code of the loop AST (isl domains, access maps,
footprints, `check_bounds`) live in `solar_compiler/loopir/domain.py`, beside the AST, where the
frontends, the executor and narrowing reach them.
"""

from __future__ import annotations

import math

from xdsl.ir import BlockArgument

from solar_compiler.analysis import structured as st
from solar_compiler.analysis.manager import identity_table
from solar_compiler.dialects.einsum import NodeOp
from solar_compiler.loopir.affine import AffExpr
from solar_compiler.loopir.affine_map import from_map, from_set
from solar_compiler.loopir.domain import Constraint, count_points, loop_conds, partition

__all__ = ["Constraint", "contraction_reads", "count_points", "node_domain", "node_indices",
           "node_loop_ranges", "partition"]


# node_domain's results by the node's domain attributes (`_DOMAIN_PROPS`), held by identity: attributes
# are immutable and a clone of a node (the default model's catalogue copy of a graph) shares them, so
# the copy's unchanged nodes reuse the original's domains. An entry keeps its attributes alive, so
# their ids are not reused while it stands; the table is emptied when it outgrows `_DOMAINS_MAX`.
_DOMAIN_PROPS = ("ivs", "lower_bounds", "upper_bounds", "steps", "guards", "guard_scopes", "init_depth",
                 "init_guard_scopes")
_DOMAINS: dict[tuple, tuple[tuple, tuple[tuple[str, ...], tuple[Constraint, ...]]]] = identity_table()
_DOMAINS_MAX = 1 << 16


def node_domain(n: NodeOp, init: bool = False) -> tuple[tuple[str, ...], tuple[Constraint, ...]]:
    """(loop variables, constraints) of one statement of an `einsum.node`, over its `iv_names`: its
    loops' bounds and steps, then its guards (the folded init's: its outer `init_depth` loops and
    first guards), in the form the statement-level counts take (`loopir/domain.py`)."""
    props = n.properties
    attrs = tuple(props.get(k) for k in _DOMAIN_PROPS)
    key = (*map(id, attrs), init)
    hit = _DOMAINS.get(key)
    if hit is not None and all(a is b for a, b in zip(hit[0], attrs, strict=True)):
        return hit[1]
    out = _node_domain(n, init)
    if len(_DOMAINS) >= _DOMAINS_MAX:
        _DOMAINS.clear()
    _DOMAINS[key] = (attrs, out)
    return out


def _node_domain(n: NodeOp, init: bool) -> tuple[tuple[str, ...], tuple[Constraint, ...]]:
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


def writes_whole(w: NodeOp, shape: tuple[int, ...]) -> bool:
    """Whether `w` is element-wise (no reduction, init, guard or loaded position) and writes every
    element of its tensor, of `shape`, exactly once: its output indices are its loop variables, in
    some order, each from 0 over the tensor's extent. Its value at an element is then its body with
    the loop variables read off the element's indices."""
    if w.reduce.data != "none" or w.init is not None or w.dynamic_positions or NodeOp.ints(w.guard_scopes):
        return False
    outs = node_indices(w, len(w.get_indexing_maps().data) - 1)
    names = [str(o.terms[0][0]) if o.is_var() else None for o in outs]
    if None in names or sorted(names) != sorted(w.iv_names):  # type: ignore[type-var]
        return False
    ranges = node_loop_ranges(w)
    box = tuple(ranges[v][1] + 1 for v in names)  # type: ignore[index]
    return all(ranges[v][0] == 0 for v in w.iv_names) and box == shape and st.points(w) == math.prod(box)
