"""`reorder-chains`: every contraction tree of the einsum graph that has an association order with
strictly fewer FLOPs is rewritten to it (docs/reorder-chains.md).

The analysis finds the trees and prices their orders (`analysis/chains.py`, `chain_order.py`); this
pass only rewrites: per tree, the new intermediates are declared as `einsum.tensor`s, the new steps
become `einsum.node`s (fresh scope numbers; the root step keeps the root node's name, origin and
position, the other steps come just before it), and the tree's nodes, the zero fills of its
intermediates and those intermediates are erased. Every later pass, the bounds and `-t mlir` see the
reordered program. With `validate` (the default) the original and the rewritten graphs are executed
on the same random inputs and compared (`analysis/chain_check.py`); the record `solar.chains` keeps
every tree's figures as written and in the best order, and the outcome of that check.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import DenseArrayBase, ModuleOp, StringAttr, i64
from xdsl.passes import ModulePass

from solar_compiler.analysis.chain_check import validate_reorder
from solar_compiler.analysis.chain_order import ChainPlan, listed, module_chain_plans
from solar_compiler.analysis.manager import invalidate_analyses
from solar_compiler.analysis.program import module_programs
from solar_compiler.dialects.einsum import GraphOp, NodeOp
from solar_compiler.dialects.loop import KernelOp
from solar_compiler.errors import PassError
from solar_compiler.loopir.graph_convert import fresh_scope_number, graph_to_kernel, kernel_to_graph
from solar_compiler.records import ChainsRecord

_SCOPE_KEYS = ("scopes", "guard_scopes", "init_guard_scopes")


@dataclass(frozen=True)
class ReorderChainsPass(ModulePass):
    name = "reorder-chains"
    verifies_output: ClassVar[bool] = True  # every graph it rewrites is verified here

    validate: bool = True   # execute the original and the rewritten graphs and compare them

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if any(isinstance(o, KernelOp) for o in op.body.block.ops) or \
                not any(isinstance(o, GraphOp) for o in op.body.block.ops):
            raise PassError("reorder-chains rewrites einsum graphs: run lift-einsum first "
                            "(-p lift-einsum,reorder-chains)")
        if ChainsRecord.load(op) is not None:
            raise PassError("reorder-chains ran twice on this module")
        plans = module_chain_plans(op)
        todo = [p for p in plans if p.better]
        graphs = {g.kernel_name: g for g in op.body.block.ops if isinstance(g, GraphOp)}
        touched = list(dict.fromkeys(p.tree.kernel for p in todo))
        before = [graph_to_kernel(graphs[k])[0] for k in touched]
        programs = module_programs(op)
        new_nodes = {id(p): rewrite_tree(graphs[p.tree.kernel], p) for p in todo}
        for k in touched:
            graphs[k].verify()
        invalidate_analyses(op)
        check = None
        if todo and self.validate:
            after = [graph_to_kernel(graphs[k])[0] for k in touched]
            check = validate_reorder(before, after, todo, programs)
        rows = [p.row(p.better, new_nodes.get(id(p), ())) for p in plans if listed(p)]
        ChainsRecord(applied=True, trees=rows, validation=check).store(op)


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
