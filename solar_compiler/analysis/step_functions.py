"""Step functions of one value: element-wise work that compares one element against literals.

A quantiser written as PyTorch code assigns each code under a comparison mask (SOL-ExecBench's own
e2m1 encoder: sixteen `result[(x > a) & (x < b)] = code` statements); bucketing by thresholds and
nested `torch.where(x > a, c1, torch.where(x > b, c2, c3))` are the same shape. Every value such a
cascade computes is a *step function* of one element `x` of one tensor: a piecewise-constant
function whose pieces are cut at the literals it is compared with. As written it costs several
operations per element and per piece (56 per element for the e2m1 encoder); a kernel computes it
in one: a conversion instruction where it rounds to a number format (PTX
`cvt.rn.satfinite.e2m1x2.f32` converts two values to e2m1 codes at once, as vLLM's NVFP4 quantiser
does), a table lookup after a conversion, or a search over the thresholds.

`step_regions` finds the element-wise nodes whose stored values are step functions of one source
element (comparisons of a read of it with literals; `and`, `or`, `xor`, `not`; selects between
literals or other such values; casts), linked through locals read at the element they were written
(the same output map and domain). A region's nodes whose results nothing outside the region reads
(and that are no outputs) need no work of their own; each other node (an *exit*) costs one
operation per distinct value of the source element's loop variables. One operation per element is
at most what any implementation does for a non-constant function of one value; the count errs low
for step functions no single instruction computes, as a lower bound may.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.ir import BlockArgument, SSAValue

from solar_compiler.analysis import structured as st
from solar_compiler.dialects.einsum import NodeOp
from solar_compiler.dialects.loop import BinaryOp, CastOp, CmpOp, ConstOp, SelectOp, UnaryOp

STEP = "step function of one value"
_LOGICAL = ("and", "or", "xor")

#: a source element: the SSA value of the tensor read and its index expressions
Source = tuple[SSAValue, tuple[object, ...]]


@dataclass(frozen=True)
class StepRegion:
    nodes: tuple[int, ...]  # positions of the region's nodes
    exits: tuple[int, ...]  # those whose results are read outside the region (or are outputs)
    source_dims: frozenset[int]  # the loop variables the source element is indexed by


def step_regions(nodes: Sequence[NodeOp]) -> list[StepRegion]:
    """The step-function regions of the graph with at least two nodes (module doc)."""
    source_of: dict[int, Source] = {}  # node position -> its source element
    parent: dict[int, int] = {}  # union-find over step nodes linked at one element

    def find(p: int) -> int:
        while parent[p] != p:
            parent[p] = parent[parent[p]]
            p = parent[p]
        return p

    by_value = {n.results[0]: p for p, n in enumerate(nodes) if n.results}
    for p, n in enumerate(nodes):
        found = _node_source(n, nodes, by_value, source_of)
        if found is None:
            continue
        source_of[p], parent[p] = found[0], p
        for q in found[1]:
            parent[find(p)] = find(q)
    groups: dict[int, list[int]] = {}
    for p in source_of:
        groups.setdefault(find(p), []).append(p)
    readers: dict[SSAValue, set[int]] = {}
    for p, n in enumerate(nodes):
        for v in n.ins:
            readers.setdefault(v, set()).add(p)
    out = []
    for members in groups.values():
        if len(members) < 2:
            continue
        inside = set(members)
        # the values needed beyond the region: read outside it, or final (an output's last version)
        exits = tuple(p for p in sorted(members)
                      if not readers.get(nodes[p].results[0]) or readers[nodes[p].results[0]] - inside)
        src = source_of[members[0]]
        out.append(StepRegion(tuple(sorted(members)), exits, _dims_of(src[1])))
    return out


def _dims_of(results: tuple[object, ...]) -> frozenset[int]:
    return frozenset().union(*(st.dims_of(r) for r in results)) if results else frozenset()


def _node_source(n: NodeOp, nodes: Sequence[NodeOp], by_value: dict[SSAValue, int],
                 source_of: dict[int, Source]) -> tuple[Source, set[int]] | None:
    """The one source element `n`'s stored value is a step function of, and the earlier step nodes
    whose results it reads at that element; None when it is no step function of one element."""
    if n.reduce.data != "none" or n.dynamic_positions or n.init is not None or not n.results:
        return None
    maps = n.get_indexing_maps().data
    out_map = maps[-1].data
    if not all(st.linear_form(r) is not None and len(st.dims_of(r)) == 1 for r in out_map.results):
        return None
    found: set[Source] = set()
    linked: set[int] = set()

    def link(x: BlockArgument) -> bool:
        """A read, at this element, of a local an earlier step node wrote (its source is ours)."""
        q = by_value.get(n.ins[x.index])
        if q is None or q not in source_of or maps[x.index].data != out_map or \
                nodes[q].get_indexing_maps().data[-1].data != out_map or \
                nodes[q].get_static_loop_ranges() != n.get_static_loop_ranges():
            return False
        found.add(source_of[q])
        linked.add(q)
        return True

    def step(v: SSAValue) -> bool:
        """Whether `v` is a step function of one element (recording it)."""
        o = v.owner
        if isinstance(o, ConstOp):
            return True
        if isinstance(v, BlockArgument):
            return link(v)
        if isinstance(o, CmpOp):
            for x, y in ((o.lhs, o.rhs), (o.rhs, o.lhs)):
                if isinstance(y.owner, ConstOp) and isinstance(x, BlockArgument):
                    if not link(x):  # the source itself, compared with a literal
                        found.add((n.ins[x.index], tuple(maps[x.index].data.results)))
                    return True
            return step(o.lhs) and step(o.rhs)
        if isinstance(o, BinaryOp) and o.fn.data in _LOGICAL:
            return step(o.lhs) and step(o.rhs)
        if isinstance(o, UnaryOp) and o.fn.data == "not":
            return step(o.x)
        if isinstance(o, CastOp):
            return step(o.x)
        if isinstance(o, SelectOp):
            return step(o.cond) and step(o.a) and step(o.b)
        return False

    if not step(st.stored_value(n)) or len(found) != 1:
        return None
    return next(iter(found)), linked
