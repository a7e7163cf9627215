"""The rewrite of one contraction tree of an einsum graph into its best association order
(`chain_order.ChainPlan.best`), shared by the pass that rewrites the IR (`reorder-chains`) and the
roofline's catalogue of rewrites (`catalogue.py`), which prices a rewritten copy of the module and
leaves the IR as it is.

Per tree, the new intermediates are declared as `einsum.tensor`s, the new steps become
`einsum.node`s (fresh scope numbers; the root step keeps the root node's name, origin and position,
the other steps come just before it, with the root's origin where they have none), and the tree's
nodes, the zero fills of its intermediates and those intermediates are erased.
"""

from __future__ import annotations

from xdsl.dialects.builtin import DenseArrayBase, StringAttr, i64

from solar_compiler.analysis.chain_order import ChainPlan
from solar_compiler.dialects.einsum import GraphOp, NodeOp
from solar_compiler.dialects.graph_convert import fresh_scope_number, kernel_to_graph

_SCOPE_KEYS = ("scopes", "guard_scopes", "init_guard_scopes")


def rewrite_tree(graph: GraphOp, plan: ChainPlan) -> list[str]:
    """Replace the tree's nodes by the nodes of its best order; returns their names."""
    t, best = plan.tree, plan.best
    assert best is not None
    mini = kernel_to_graph(best.kernel)
    block = graph.body.block
    nodes = {n.sym_name.data: n for n in graph.nodes()}
    symbols = set(nodes) | set(graph.tensor_ops()) | {d.name for d in best.new_tensors}
    root = nodes[t.root]
    anchor = _separate_init(graph, root, t.output) or root
    base = fresh_scope_number(graph)
    steps = mini.nodes()
    names = []
    for i, n in enumerate(steps):
        n.detach()
        last = i == len(steps) - 1
        name = t.root if last else _fresh(f"{t.root}_r", symbols)
        symbols.add(name)
        names.append(name)
        n.properties["sym_name"] = StringAttr(name)
        if "origin" not in n.properties and root.origin is not None:
            n.properties["origin"] = root.origin  # a new step is part of the tree's source op
        for key in _SCOPE_KEYS:
            if key in n.properties:
                shifted = [x + base for x in NodeOp.ints(n.properties[key])]  # type: ignore[arg-type]
                n.properties[key] = DenseArrayBase.from_list(i64, shifted)
        block.insert_op_before(n, root if last else anchor)
    decls = mini.tensor_ops()
    last_decl = list(graph.tensor_ops().values())[-1]
    for d in reversed(best.new_tensors):
        new = decls[d.name]
        new.detach()
        block.insert_op_after(new, last_decl)
    for name in (*t.nodes, *t.fills):
        nodes[name].detach()
        nodes[name].erase()
    tensors = graph.tensor_ops()
    for name in t.intermediates:
        tensors[name].detach()
        tensors[name].erase()
    return names


def _separate_init(graph: GraphOp, root: NodeOp, output: str) -> NodeOp | None:
    """The node just before the root that initialises its output for the same source op: the new
    steps go before it, so that the init and the root stay one kernel of the unfused bound."""
    prev = root.prev_op
    return prev if isinstance(prev, NodeOp) and prev.output_name == output and prev.origin == root.origin \
        else None


def _fresh(base: str, taken: set[str]) -> str:
    k = 0
    while f"{base}{k}" in taken:
        k += 1
    return f"{base}{k}"
