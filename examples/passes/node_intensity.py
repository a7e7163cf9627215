"""`node-intensity`: the arithmetic intensity of every einsum node, read through the structured-op
interface (`solar_compiler.analysis.structured`). The pass of docs/writing-a-pass.md."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from solar_compiler.analysis import structured
from solar_compiler.dialects.einsum import GraphOp
from solar_compiler.errors import SolarError


@dataclass(frozen=True)
class NodeIntensityPass(ModulePass):
    """One line per node on stderr: FLOPs (literal count), bytes it moves if it runs alone (each
    tensor's distinct elements), their ratio; below `ridge` FLOP/byte a node is memory-bound."""

    name = "node-intensity"
    preserves_analyses: ClassVar[bool] = True  # an analysis: the IR is left as it is
    ridge: float = 0.0

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        graphs = [g for g in op.walk() if isinstance(g, GraphOp)]
        if not graphs:
            raise SolarError("node-intensity: no einsum.graph in the module (run lift-einsum first)")
        for g in graphs:
            for node in g.nodes():
                c = structured.node_counts(node)
                reads, writes = structured.node_bytes(node)
                flops = c.flops_matrix + c.flops_vector_literal
                moved = sum(reads.values()) + sum(writes.values())
                ai = flops / moved if moved else float("inf")
                tag = " memory-bound" if ai < self.ridge else ""
                print(f"// node-intensity: {g.kernel_name} {node.sym_name.data} {c.unit} flops={flops} "
                      f"bytes={moved} intensity={ai:.3f}{tag}", file=sys.stderr)
