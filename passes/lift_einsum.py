"""`lift-einsum`: every `loop.kernel` becomes an `einsum.graph` (`dialects/einsum.py`), one
structured node per statement (an identity init folded into the reduction after it). The graph
replaces the kernel: from here on the analyses read the graph (`analysis/program.py`), so a pass
that rewrites it changes every figure computed after it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter

from solar_compiler.analysis.manager import invalidate_analyses
from solar_compiler.dialects.loop import KernelOp
from solar_compiler.loopir.convert import op_to_kernel
from solar_compiler.loopir.graph_convert import lift_kernel


@dataclass(frozen=True)
class LiftEinsumPass(ModulePass):
    name = "lift-einsum"
    verifies_output: ClassVar[bool] = True  # lift_kernel verifies every graph it builds

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for k in [o for o in op.body.block.ops if isinstance(o, KernelOp)]:
            Rewriter.replace_op(k, lift_kernel(op_to_kernel(k)))
        invalidate_analyses(op)
