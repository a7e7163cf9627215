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
from solar_compiler.analysis.program import as_lifted, module_programs, program_ops, seed_programs
from solar_compiler.dialects.loop import KernelOp


@dataclass(frozen=True)
class LiftEinsumPass(ModulePass):
    name = "lift-einsum"
    verifies_output: ClassVar[bool] = True  # lift_kernel verifies every graph it builds

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        progs = module_programs(op)
        lifted = []
        for o, p in zip(program_ops(op), progs, strict=True):
            if isinstance(o, KernelOp):
                graph = p.graph  # `lift_kernel(p.kernel)`, built once: an analysis may have asked already
                Rewriter.replace_op(o, graph)
                p = as_lifted(p, graph)
            lifted.append(p)
        invalidate_analyses(op)
        seed_programs(op, lifted)  # what the analyses would read back from the graphs
