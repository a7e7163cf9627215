"""`lift-einsum`: every `loop.kernel` becomes an `einsum.graph` (`dialects/einsum.py`), one
structured node per statement (an identity init folded into the reduction after it). The graph
replaces the kernel: from here on the analyses read the graph (`analysis/graphs.py`), so a pass
that rewrites it changes every figure computed after it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter

from solar_compiler.analysis.graphs import program_ops
from solar_compiler.analysis.manager import invalidate_analyses
from solar_compiler.dialects.graph_convert import lift_kernel
from solar_compiler.dialects.loop import KernelOp
from solar_compiler.transforms.kernels import module_kernels


@dataclass(frozen=True)
class LiftEinsumPass(ModulePass):
    name = "lift-einsum"
    verifies_output: ClassVar[bool] = True  # lift_kernel verifies every graph it builds

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        ops = program_ops(op)
        if any(isinstance(o, KernelOp) for o in ops):
            for o, k in zip(ops, module_kernels(op), strict=True):  # the kernels a pass left, if any
                if isinstance(o, KernelOp):
                    Rewriter.replace_op(o, lift_kernel(k))
        invalidate_analyses(op)  # the analyses read the graphs in place from here on
