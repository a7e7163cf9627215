"""What every analysis reads: a program's kernel (typed loop AST) and its einsum nodes.

After `lift-einsum` a module holds `einsum.graph`s and the program is read from the graph
(`graph_to_kernel`): the nodes, their domains, maps and bodies are the IR, so a rewrite of the
graph (a node deleted, a chain reordered) changes every figure computed after it. Before
`lift-einsum` the same view is read from the `loop.kernel`, grouped as `lift-einsum` would group
it, so the analyses have one entry point whatever stage the module is at.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

from xdsl.dialects.builtin import ModuleOp

from solar_compiler.analysis.manager import get_analysis, seed_analysis
from solar_compiler.dialects.convert import op_to_kernel
from solar_compiler.dialects.einsum import GraphOp, NodeOp
from solar_compiler.dialects.graph_convert import graph_to_kernel, lift_kernel
from solar_compiler.dialects.loop import KernelOp
from solar_compiler.errors import SolarError
from solar_compiler.loopir.ast import Kernel, typecheck
from solar_compiler.loopir.grouping import NodeGroup, group_statements

if TYPE_CHECKING:
    from solar_compiler.analysis.costs import GraphCosts

T = TypeVar("T")


@dataclass(frozen=True, eq=False)
class Program:
    """One program: its einsum graph, which the analyses read (`graph`, `node_ops`), and its kernel
    (typed loop AST) with the nodes as statement groups (`kernel`, `nodes`), for what still reads the
    AST (narrowing, the transforms that run the executor). A program read from a graph converts to
    the AST only when something asks for it (`graph_to_kernel`, once); one read from a kernel not yet
    lifted has its kernel and lifts it when an analysis asks for the graph (`lift_kernel`, once)."""

    loop_kernel: Kernel | None = None
    groups: tuple[NodeGroup, ...] | None = None
    memo: dict = field(default_factory=dict, repr=False)  # analyses of this program
    graph_op: GraphOp | None = field(default=None, repr=False)  # the graph it was read from

    def __post_init__(self) -> None:
        if (self.loop_kernel is None) != (self.groups is None) or \
                (self.loop_kernel is None and self.graph_op is None):
            raise SolarError("a program is a kernel and its groups, or a graph")

    def cached(self, key: object, fn: Callable[[], T]) -> T:
        """`fn()` computed once per program (a view several analyses share)."""
        if key not in self.memo:
            self.memo[key] = fn()
        return self.memo[key]

    @property
    def name(self) -> str:
        return self.graph_op.kernel_name if self.graph_op is not None else self.kernel.name

    def _lowered(self) -> tuple[Kernel, tuple[NodeGroup, ...]]:
        if self.loop_kernel is not None:
            return self.loop_kernel, self.groups  # type: ignore[return-value]

        def lower() -> tuple[Kernel, tuple[NodeGroup, ...]]:
            k, groups = graph_to_kernel(self.graph_op)  # type: ignore[arg-type]
            return k, tuple(groups)
        return self.cached("lowered", lower)

    @property
    def kernel(self) -> Kernel:
        """The typed kernel (for a graph: `graph_to_kernel` of it, converted on first use)."""
        return self._lowered()[0]

    @property
    def nodes(self) -> tuple[NodeGroup, ...]:
        """The nodes as statement groups, in program order (aligned with `node_ops`)."""
        return self._lowered()[1]

    @property
    def graph(self) -> GraphOp:
        """The program as einsum nodes: the graph it was read from, or, for a kernel not yet lifted,
        `lift_kernel` of it (built once). Its nodes are `nodes`, one per group, in the same order."""
        if self.graph_op is not None:
            return self.graph_op
        return self.cached("graph", lambda: lift_kernel(self.kernel))

    @property
    def node_ops(self) -> list[NodeOp]:
        """`graph.nodes()`, aligned with `nodes` (the i-th node is the i-th group, lifted)."""
        return self.cached("node_ops", self.graph.nodes)


def program_from_kernel(kernel: Kernel) -> Program:
    k = typecheck(kernel)
    return Program(k, tuple(group_statements(k)))


def program_of(op: KernelOp | GraphOp) -> Program:
    if isinstance(op, GraphOp):  # the graph is the program; its kernel is converted on demand
        return Program(graph_op=op)
    return program_from_kernel(op_to_kernel(op))


def kernel_costs(kernel: Kernel, indirect: str = "traced", distinct: bool = False) -> GraphCosts:
    """`costs.program_costs` of a loop AST (its nodes as `lift-einsum` groups them): the entry for
    callers that hold a kernel (tests, benchmarks, a chain's candidate orders)."""
    from solar_compiler.analysis.costs import program_costs

    return program_costs(program_from_kernel(kernel), indirect, distinct)


def program_ops(module: ModuleOp) -> list[KernelOp | GraphOp]:
    """The module's programs in order: its einsum graphs and its kernels not yet lifted."""
    return [o for o in module.body.block.ops if isinstance(o, KernelOp | GraphOp)]


def _module_programs(module: ModuleOp) -> list[Program]:
    ops = program_ops(module)
    names = [o.sym_name.data for o in ops]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup is not None:
        raise SolarError(f"two programs named '{dup}' in the module (a loop.kernel and its einsum.graph?)")
    return [program_of(o) for o in ops]


def module_programs(module: ModuleOp) -> list[Program]:
    """Every program of the module (cached until the module changes, `manager.py`)."""
    return get_analysis(module, _module_programs)


def seed_programs(module: ModuleOp, programs: list[Program]) -> None:
    """Offer `programs` as the module's programs, in op order, for the IR as the calling pass leaves
    it (a pass that built that IR from these kernels; `manager.seed_analysis`)."""
    seed_analysis(module, _module_programs, list(programs))


def as_lifted(p: Program, graph: GraphOp) -> Program:
    """`p` as `program_of` reads it back from `graph`, its lifted form (`lift_kernel(p.kernel)`, now
    in the module): the graph alone, as any graph's program (not lifted a second time: seconds on a
    network). The loop AST is left behind: after `lift-einsum` the analyses read einsum ops, and
    whatever still asks for the kernel converts the graph explicitly (`tests/test_no_ast_after_lift.py`)."""
    return Program(graph_op=graph)

