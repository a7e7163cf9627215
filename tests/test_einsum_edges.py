"""Graph edges as SSA values (destination-passing style): the use-def chains that `link_edges`
builds from tensor names, asserted node by node on a concatenation (two partial writes), a scatter,
a scan and an LSTM-like pair of statements sharing a scan loop; the text round trip of every lifted
bundled example; relinking after a rewrite."""

from __future__ import annotations

from pathlib import Path

import pytest
from xdsl.context import Context
from xdsl.dialects.builtin import Builtin, ModuleOp
from xdsl.parser import Parser

from solar_compiler.analysis.structured import consumers, init_producer, producer
from solar_compiler.dialects.einsum import Einsum, GraphOp, NodeOp, ReturnOp, TensorOp, link_edges
from solar_compiler.dialects.graph_convert import lift_kernel
from solar_compiler.dialects.loop import Loop
from solar_compiler.text.parser import parse_kernel

REPO = Path(__file__).resolve().parents[1]

CONCAT = """
kernel cat(A: f32[4] input, B: f32[4] input, Y: f32[8] output, Z: f32[8] output):
    for i in range(4):
        Y[i] = A[i]
    for i in range(4):
        Y[i + 4] = B[i]
    for i in range(8):
        Z[i] = Y[i] * 2.0
"""

# An LSTM step in miniature: the cell state C and the output H of step s, both in one scan loop; C
# reads H of the previous step (written by the later node S3 of the same loop, one step before).
CELL = """
kernel cell(X: f32[8, 4] input, C: f32[9, 4] output, H: f32[9, 4] output):
    for j in range(4):
        C[0, j] = 0.0
    for j in range(4):
        H[0, j] = 0.0
    for s in scan(1, 9):
        for j in range(4):
            C[s, j] = C[s - 1, j] + X[s - 1, j] * H[s - 1, j]
        for j in range(4):
            H[s, j] = C[s, j] * C[s, j]
"""


def graph_of(text: str) -> GraphOp:
    return lift_kernel(parse_kernel(text, "t.loop"))


def edges(g: GraphOp) -> dict[str, tuple[list[str | None], str | None, list[str]]]:
    """Per node: the producer of each input (None: the tensor's initial value), the init's producer
    and the consumers, by node name."""
    def name(n: NodeOp | None) -> str | None:
        return None if n is None else n.sym_name.data

    return {n.sym_name.data: ([name(producer(n, i)) for i in range(len(n.ins))], name(init_producer(n)),
                              [c.sym_name.data for c in consumers(n)]) for n in g.nodes()}


def returned(g: GraphOp) -> list[str | None]:
    ret = g.body.block.last_op
    assert isinstance(ret, ReturnOp)
    return [o.sym_name.data if isinstance(o := v.owner, NodeOp) else None for v in ret.values]


def test_concat_second_half_takes_the_first_as_init():
    g = graph_of(CONCAT)
    assert edges(g) == {
        "S0": ([None], None, ["S1"]),        # A; Y's initial value as init
        "S1": ([None], "S0", ["S2"]),        # the untouched half Y[0:4] comes through the init
        "S2": (["S1"], None, []),            # reads the whole concatenation
    }
    assert returned(g) == ["S1", "S2"]  # the final values of Y and Z


def test_scatter_takes_the_fill_as_init():
    g = graph_of((REPO / "examples/loop/scatter_add.loop").read_text())
    (s0, s1) = g.nodes()
    assert s1.input_names == ["dY", "ids"] and s1.dynamic_positions == (0,)
    assert edges(g) == {"S0": ([], None, ["S1"]), "S1": ([None, None], "S0", [])}
    assert returned(g) == ["S1"]


def test_scan_reads_its_own_destination_through_its_init():
    g = graph_of((REPO / "examples/loop/cumsum.loop").read_text())
    (s0, s1) = g.nodes()
    assert s1.input_names == ["Y", "X"]
    assert [k.data for k in s1.iterator_types.data] == ["parallel", "sequential"]
    assert edges(g) == {"S0": ([None], None, ["S1"]), "S1": (["S0", None], "S0", [])}
    assert s1.ins[0] is s1.dest  # Y[b, t - 1] is read from the value being built, as in place


def test_lstm_like_step_edges_in_program_order():
    g = graph_of(CELL)
    s = {n.sym_name.data: n for n in g.nodes()}
    assert s["S2"].input_names == ["C", "X", "H"] and s["S3"].input_names == ["C"]
    assert edges(g) == {
        "S0": ([], None, ["S2"]),
        "S1": ([], None, ["S2", "S3"]),
        # H[s - 1] is the program-order latest value of H (its fill S1); the step-to-step value from
        # S3 flows through the shared scan loop (`scopes`), not an SSA edge: einsum.scan's job
        "S2": (["S0", None, "S1"], "S0", ["S3"]),
        "S3": (["S2"], "S1", []),
    }
    assert list(NodeOp.ints(s["S2"].scopes))[0] == list(NodeOp.ints(s["S3"].scopes))[0]
    assert returned(g) == ["S2", "S3"]


def test_gather_source_is_an_edge():
    g = graph_of((REPO / "examples/loop/embedding.loop").read_text())
    (gather,) = [o for n in g.nodes() for o in n.gathers()]
    table = g.tensor_ops()[gather.tensor_name]
    assert gather.source is table.result
    reader = gather.parent_op()
    assert reader in [u.operation.parent_op() for u in table.result.uses]


def test_relinking_after_an_edit_and_the_stale_operand_it_repairs():
    g = graph_of(CONCAT)
    s0, s1, s2 = g.nodes()
    # S2 made to read Y's first half only (a stale value): the verifier names it ...
    s2.operands = [s0.result, *s2.operands[1:]]
    with pytest.raises(Exception, match=r"node S2: operand 0 is a stale value of 'Y'"):
        g.verify()
    # ... and linking by name repairs it; erasing the second half relinks S2 to the first
    link_edges(g)
    g.verify()
    s1.detach()
    s1.erase(safe_erase=False)
    link_edges(g)
    g.verify()
    assert edges(g) == {"S0": ([None], None, ["S2"]), "S2": (["S0"], None, [])}
    assert len([o for o in g.body.block.ops if isinstance(o, ReturnOp)]) == 1
    assert all(isinstance(o, TensorOp) for o in list(g.body.block.ops)[:4])


def _ctx() -> Context:
    c = Context()
    for d in (Builtin, Loop, Einsum):
        c.load_dialect(d)
    return c


@pytest.mark.parametrize("path", sorted((REPO / "examples/loop").glob("**/*.loop")), ids=lambda p: p.name)
def test_print_parse_print_of_lifted_examples(path: Path):
    m = ModuleOp([lift_kernel(parse_kernel(path.read_text(), str(path)))])
    text = str(m)
    again = Parser(_ctx(), text).parse_module()
    again.verify()
    assert str(again) == text
    assert again.is_structurally_equivalent(m)
