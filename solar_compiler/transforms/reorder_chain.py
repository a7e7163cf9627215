"""Chain reordering as an xDSL `RewritePattern`: the contraction trees an analysis decided to
reassociate (`analysis/chain_order.py`: `ChainPlan.best`, a plain record with the new steps as a
small einsum graph) are rewritten in an `einsum.graph`. Shared by the pass that rewrites the IR
(`reorder-chains`) and the roofline's catalogue of rewrites (`transforms/catalogue.py`), which
applies it to a copy of the module and leaves the IR as it is.

Per tree, the new intermediates are declared as `einsum.tensor`s, the new steps become
`einsum.node`s (fresh scope numbers; the root step replaces the root node, keeping its name, origin
and position, the other steps come just before it, with the root's origin where they have none),
and the tree's other nodes, the zero fills of its intermediates and those intermediates are erased;
the edges are then relinked by name (`link_edges`, after the walk).
Every change goes through the `PatternRewriter`, so a listener (the walker's worklist) sees it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from xdsl.dialects.builtin import DenseArrayBase, ModuleOp, StringAttr, i64
from xdsl.pattern_rewriter import (
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)
from xdsl.rewriter import InsertPoint

from solar_compiler.analysis.chain_order import ChainPlan
from solar_compiler.dialects.einsum import GraphOp, NodeOp, link_edges
from solar_compiler.dialects.graph_convert import fresh_scope_number
from solar_compiler.errors import SolarError

_SCOPE_KEYS = ("scopes", "guard_scopes", "init_guard_scopes")


@dataclass
class ReorderChains(RewritePattern):
    """Rewrite, in each `einsum.graph`, the trees of `plans` that belong to its kernel into their
    best order. `new_nodes` collects, per plan (by `id`), the names of the nodes that replaced it."""

    plans: Sequence[ChainPlan]
    new_nodes: dict[int, list[str]] = field(default_factory=dict)

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: GraphOp, rewriter: PatternRewriter) -> None:
        for plan in self.plans:
            if plan.tree.kernel == op.kernel_name and id(plan) not in self.new_nodes:
                self.new_nodes[id(plan)] = rewrite_tree(op, plan, rewriter)


def reorder_chains(module: ModuleOp, plans: Sequence[ChainPlan]) -> dict[int, list[str]]:
    """Apply `ReorderChains` to every graph of `module` (once: a rewritten tree is not re-planned
    here); returns the new node names per plan (`id(plan)`)."""
    for p in plans:
        if p.best is None:
            raise SolarError(f"reorder-chains: tree {p.tree.root} of kernel '{p.tree.kernel}' has no "
                             "better order to rewrite to")
    pattern = ReorderChains(plans)
    PatternRewriteWalker(pattern, apply_recursively=False).rewrite_module(module)
    for g in module.body.block.ops:  # the edges by name, once the walker is done with the graph's ops
        if isinstance(g, GraphOp):
            link_edges(g)
    return pattern.new_nodes


def rewrite_tree(graph: GraphOp, plan: ChainPlan, rewriter: PatternRewriter) -> list[str]:
    """Replace the tree's nodes by the nodes of its best order; returns their names."""
    t, best = plan.tree, plan.best
    assert best is not None
    mini = best.graph.clone()  # the plan is an analysis result: its graph stays as it is
    nodes = {n.sym_name.data: n for n in graph.nodes()}
    symbols = set(nodes) | set(graph.tensor_ops()) | set(best.new_tensors)
    root = nodes[t.root]
    anchor = _separate_init(root, t.output) or root
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
        if n.init is not None and "init_origin" not in n.properties and root.origin is not None:
            n.properties["init_origin"] = root.origin  # and so is its folded init (one unfused kernel)
        for key in _SCOPE_KEYS:
            if key in n.properties:
                shifted = [x + base for x in NodeOp.ints(n.properties[key])]  # type: ignore[arg-type]
                n.properties[key] = DenseArrayBase.from_list(i64, shifted)
        if last:
            rewriter.replace(root, n)
        else:
            rewriter.insert(n, InsertPoint.before(anchor))
    decls = mini.tensor_ops()
    last_decl = list(graph.tensor_ops().values())[-1]
    for d in reversed(best.new_tensors):
        new = decls[d]
        new.detach()
        rewriter.insert(new, InsertPoint.after(last_decl))
    for name in (*t.nodes, *t.fills):  # their uses are relinked below
        if name != t.root:
            rewriter.erase(nodes[name], safe_erase=False)
    tensors = graph.tensor_ops()
    for name in t.intermediates:
        rewriter.erase(tensors[name], safe_erase=False)
    return names  # the new steps still use the scratch graph's values: `reorder_chains` relinks


def _separate_init(root: NodeOp, output: str) -> NodeOp | None:
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
