"""`annotate-costs`: exact FLOPs and bytes on every einsum node (`solar_compiler.analysis.costs`).

Discardable attributes, i64: `cost.flops_matrix`, `cost.flops_vector`, `cost.bytes` and the string
`cost.unit` on each `einsum.node`; `cost.compulsory_bytes` on each `einsum.graph`. The IR is
otherwise unchanged. Needs `lift-einsum` first.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, StringAttr, i64
from xdsl.passes import ModulePass

from solar_compiler.analysis.costs import program_costs
from solar_compiler.dialects.einsum import GraphOp
from solar_compiler.errors import PassError


@dataclass(frozen=True)
class AnnotateCostsPass(ModulePass):
    name = "annotate-costs"
    preserves_analyses: ClassVar[bool] = True

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        graphs = [g for g in op.walk() if isinstance(g, GraphOp)]
        if not graphs:
            raise PassError("annotate-costs: no einsum.graph in the module (run lift-einsum first)")
        for g in graphs:
            costs = program_costs(g)
            for node, c in zip(g.nodes(), costs.ops, strict=True):
                node.attributes["cost.flops_matrix"] = IntegerAttr(c.flops_matrix, i64)
                node.attributes["cost.flops_vector"] = IntegerAttr(c.flops_vector, i64)
                node.attributes["cost.bytes"] = IntegerAttr(c.bytes, i64)
                node.attributes["cost.unit"] = StringAttr(c.unit)
            g.attributes["cost.compulsory_bytes"] = IntegerAttr(costs.compulsory_bytes, i64)
