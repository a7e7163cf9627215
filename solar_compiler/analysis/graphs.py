"""What every analysis reads: the module's programs as einsum graphs.

After `lift-einsum` a program is its `einsum.graph`, read in place: the nodes, their domains, maps
and bodies are the IR, so a rewrite of the graph (a node deleted, a chain reordered) changes every
figure computed after it. Before `lift-einsum` a `loop.kernel` is read as the graph `lift-einsum`
would make of it (`graph_convert.lift_kernel_op`, an explicit conversion, once per module state),
so the analyses have one entry point whatever stage the module is at. The loop AST is never read
here: the passes and transforms that build or run loop IR reach it through
`solar_compiler/transforms/kernels.py`.
"""

from __future__ import annotations

from xdsl.dialects.builtin import ModuleOp

from solar_compiler.analysis.manager import get_analysis, op_analysis
from solar_compiler.dialects.einsum import GraphOp, NodeOp
from solar_compiler.dialects.graph_convert import lift_kernel_op
from solar_compiler.dialects.loop import KernelOp
from solar_compiler.errors import SolarError


def program_ops(module: ModuleOp) -> list[KernelOp | GraphOp]:
    """The module's programs in order: its einsum graphs and its kernels not yet lifted."""
    return [o for o in module.body.block.ops if isinstance(o, KernelOp | GraphOp)]


def graph_of(op: KernelOp | GraphOp) -> GraphOp:
    """A program op as a graph: itself, or a kernel's lifted form (not inserted anywhere)."""
    return op if isinstance(op, GraphOp) else lift_kernel_op(op)


def node_ops(graph: GraphOp) -> list[NodeOp]:
    """`graph.nodes()`, listed once until a pass changes the IR (every analysis walks them)."""
    return op_analysis(graph, "nodes", graph.nodes)


def _module_graphs(module: ModuleOp) -> list[GraphOp]:
    ops = program_ops(module)
    names = [o.sym_name.data for o in ops]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup is not None:
        raise SolarError(f"two programs named '{dup}' in the module (a loop.kernel and its einsum.graph?)")
    return [graph_of(o) for o in ops]


def module_graphs(module: ModuleOp) -> list[GraphOp]:
    """Every program of the module as a graph, in op order (cached until the module changes)."""
    return get_analysis(module, _module_graphs)

