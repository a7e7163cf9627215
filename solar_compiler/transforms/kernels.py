"""The module's programs as loop ASTs, for the passes and transforms that build or run loop IR.

The analyses read einsum graphs (`analysis/graphs.py`); what still needs the typed loop AST does:
narrowing (a statement-level rewrite), the executor that validates a rewrite on samples, the
loop-IR text form. They reach it here, by an explicit conversion (`op_to_kernel` for a kernel not
yet lifted, `graph_to_kernel` for a graph), cached per module state like any analysis result. A
pass that builds kernels (`translate`, `narrow-needed`) offers them with `seed_kernels`, so the next
pass does not convert its IR back.
"""

from __future__ import annotations

from xdsl.dialects.builtin import ModuleOp

from solar_compiler.analysis.costs import GraphCosts, program_costs
from solar_compiler.analysis.graphs import program_ops
from solar_compiler.analysis.manager import get_analysis, seed_analysis
from solar_compiler.dialects.convert import op_to_kernel
from solar_compiler.dialects.einsum import GraphOp
from solar_compiler.dialects.graph_convert import graph_to_kernel, lift_kernel
from solar_compiler.loopir.ast import Kernel, typecheck


def kernel_of(op: object) -> Kernel:
    """The typed loop AST of a program op (`loop.kernel` or `einsum.graph`)."""
    if isinstance(op, GraphOp):
        return graph_to_kernel(op)[0]
    return typecheck(op_to_kernel(op))  # type: ignore[arg-type]


def _module_kernels(module: ModuleOp) -> list[Kernel]:
    return [kernel_of(o) for o in program_ops(module)]


def module_kernels(module: ModuleOp) -> list[Kernel]:
    """Every program of the module as a typed kernel, in op order (cached until the module changes)."""
    return get_analysis(module, _module_kernels)


def seed_kernels(module: ModuleOp, kernels: list[Kernel]) -> None:
    """Offer `kernels` (typed) as the module's kernels, in op order, for the IR as the calling pass
    leaves it (a pass that built its ops from them)."""
    seed_analysis(module, _module_kernels, list(kernels))


def kernel_costs(kernel: Kernel, indirect: str = "traced", distinct: bool = False) -> GraphCosts:
    """`costs.program_costs` of a loop AST, lifted as `lift-einsum` lifts it: the entry for callers
    that hold a kernel (tests, benchmarks)."""
    return program_costs(lift_kernel(kernel), indirect, distinct)
