"""`reorder-chains`: every contraction tree of the einsum graph that has an association order with
strictly fewer FLOPs is rewritten to it (docs/reorder-chains.md).

The analysis finds the trees and prices their orders (`analysis/chains.py`, `chain_order.py`); this
pass only rewrites, through the `ReorderChains` pattern (`transforms/reorder_chain.py`): per tree,
the new intermediates are declared as `einsum.tensor`s, the new steps become `einsum.node`s (fresh
scope numbers; the root step keeps the root node's name, origin and position, the other steps come
just before it), and the tree's nodes, the zero fills of its intermediates and those intermediates
are erased. Every later pass, the bounds and `-t mlir` see the reordered program. With `validate`
(the default) the original and the rewritten graphs are executed on the same random inputs and
compared (`transforms/chain_check.py`); the record `solar.chains` keeps every tree's figures as written
and in the best order, and the outcome of that check.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from solar_compiler.analysis.chain_order import listed, module_chain_plans
from solar_compiler.analysis.manager import invalidate_analyses
from solar_compiler.dialects.einsum import GraphOp
from solar_compiler.dialects.graph_convert import graph_to_kernel
from solar_compiler.dialects.loop import KernelOp
from solar_compiler.errors import PassError
from solar_compiler.records import ChainsRecord
from solar_compiler.transforms.chain_check import validate_reorder
from solar_compiler.transforms.reorder_chain import reorder_chains


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
        # the touched graphs as written, converted before the rewrite changes them (the check runs them)
        lowered = {k: graph_to_kernel(graphs[k]) for k in touched}
        before = [kernel for kernel, _ in lowered.values()]
        new_nodes = reorder_chains(op, todo)
        for k in touched:
            graphs[k].verify()
        invalidate_analyses(op)
        check = None
        if todo and self.validate:
            after = [graph_to_kernel(graphs[k])[0] for k in touched]
            check = validate_reorder(before, after, todo, lowered)
        rows = [p.row(p.better, new_nodes.get(id(p), ())) for p in plans if listed(p)]
        ChainsRecord(applied=True, trees=rows, validation=check).store(op)
