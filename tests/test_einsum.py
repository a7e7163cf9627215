"""The einsum dialect and `lift-einsum`: structured node contents (maps, domain, body), folding,
verifier, round trips."""

from __future__ import annotations

import io
import re

import pytest
from xdsl.context import Context
from xdsl.dialects.builtin import Builtin, ModuleOp
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException

from solar_compiler.dialects.convert import kernels_to_module
from solar_compiler.dialects.einsum import Einsum, GatherOp, GraphOp, NodeOp
from solar_compiler.dialects.graph_convert import graph_to_kernel, lift_kernel
from solar_compiler.dialects.loop import BinaryOp, KernelOp, Loop, location_text
from solar_compiler.errors import SolarError
from solar_compiler.loopir.affine import AffExpr
from solar_compiler.loopir.affine_map import from_map, from_set
from solar_compiler.loopir.ast import Assign, For, Kernel, Read, TensorDecl, statements
from solar_compiler.loopir.domain import iteration_count
from solar_compiler.passes.lift_einsum import LiftEinsumPass
from solar_compiler.text.equation import equation
from solar_compiler.text.parser import parse_kernel

CONV = """
kernel conv(X: f32[1, 3, 8, 8] input, W: f32[4, 3, 3, 3] weight, Y: f32[1, 4, 4, 4] output):
    for n in range(1):
        for o in range(4):
            for p in range(4):
                for q in range(4):
                    Y[n, o, p, q] = 0.0 @ "conv.py:3"
                    for c in range(3):
                        for r in range(3):
                            for s in range(3):
                                if 2*p + r >= 1 and 2*p + r <= 8 and 2*q + s >= 1 and 2*q + s <= 8:
                                    Y[n, o, p, q] += X[n, c, 2*p + r - 1, 2*q + s - 1] * W[o, c, r, s] \\
                                        @ "conv.py:5"
"""


def ctx() -> Context:
    c = Context()
    for d in (Builtin, Loop, Einsum):
        c.load_dialect(d)
    return c


def lifted(text: str) -> ModuleOp:
    m = kernels_to_module([parse_kernel(text, "t.loop")])
    LiftEinsumPass().apply(ctx(), m)
    m.verify()
    return m


def nodes(m: ModuleOp) -> list[NodeOp]:
    return [n for n in m.walk() if isinstance(n, NodeOp)]


def maps(node: NodeOp) -> list[tuple[str, ...]]:
    ivs = node.iv_names
    return [tuple(str(e) for e in from_map(m.data, ivs, [f"s{i}" for i in range(m.data.num_symbols)]))
            for m in node.indexing_maps.data]


def equations(m: ModuleOp) -> list[str]:
    (graph,) = [g for g in m.walk() if isinstance(g, GraphOp)]
    kernel, groups = graph_to_kernel(graph)
    return [equation(kernel, g.main) for g in groups]


def test_conv_node():
    m = lifted(CONV)
    assert [type(o) for o in m.body.block.ops] == [GraphOp]  # the graph replaced the kernel
    (node,) = nodes(m)
    assert node.sym_name.data == "S1"
    assert node.input_names == ["X", "W"] and node.output_name == "Y"
    assert node.iv_names == ["n", "o", "p", "q", "c", "r", "s"]
    assert [k.data for k in node.iterator_types.data] == ["parallel"] * 4 + ["reduction"] * 3
    assert maps(node) == [("n", "c", "2*p + r - 1", "2*q + s - 1"), ("o", "c", "r", "s"),
                          ("n", "o", "p", "q")]
    ivs = node.iv_names
    assert [str(e) for e in from_map(node.upper_bounds.data, ivs)] == ["1", "4", "4", "4", "3", "3", "3"]
    assert [str(c) for c in from_set(node.guards.data, ivs)] == [
        "2*p + r >= 1", "8 >= 2*p + r", "2*q + s >= 1", "8 >= 2*q + s"]
    assert node.ints(node.guard_depths) == (7, 7, 7, 7)
    assert (node.reduce.data, node.init.value.data, node.ints(node.init_depth)) == ("add", 0.0, (4, 0))
    body = list(node.body.block.ops)
    assert [type(o) for o in body[:-1]] == [BinaryOp] and body[0].fn.data == "mul"
    assert location_text(node.location.locations.data[0]) == "conv.py:3"
    assert location_text(node.location) == "conv.py:3" and location_text(node.location.locations.data[1]) == \
        "conv.py:5"
    assert equations(m) == ["n c (2*p + r - 1) (2*q + s - 1), o c r s -> n o p q"]


DOMAINS = """
kernel d(x: f32[16, 16] input, y: f32[16, 16] output, z: f32[8] output):
    for i in range(16):
        for j in range(i + 1):
            y[i, j] = x[i, j]
        for j in range(i // 2, 16, 3):
            if i + j == 15:
                y[i, j] = x[j, i]
            if j % 2 >= 1 and 2*j - i <= 7:
                y[i, j] = 0.0
    for i in range(2, 10):
        z[i - 2] = x[i, i]
    z[0] = 1.0
"""


@pytest.mark.parametrize("text", [CONV, DOMAINS], ids=["conv", "domains"])
def test_every_lifted_domain_counts_exactly(text):
    # Padding guards; triangular bounds, a quasi-affine lower bound with a step, an equality guard,
    # a modulo guard, an offset range and a statement outside every loop (1 point).
    m = lifted(text)
    (graph,) = [g for g in m.walk() if isinstance(g, GraphOp)]
    got = [iteration_count(c) for c in statements(graph_to_kernel(graph)[0])]
    assert got == [iteration_count(s) for s in statements(parse_kernel(text))]
    if text is DOMAINS:
        assert got[0] == 136 and got[3:] == [8, 1]  # 1 + 2 + ... + 16; i in 2..9; one point
    else:
        assert got == [64, 1452]  # p, r with 1 <= 2p + r <= 8: 11 pairs; 4 * 3 * 11 * 11


def test_steps_and_quasi_affine_maps():
    m = lifted("""
kernel pool(x: f32[16] input, y: f32[8] output):
    for i in range(1, 16, 2):
        y[i // 2] = x[i] + x[i - 1]
""")
    (node,) = nodes(m)
    assert maps(node) == [("i",), ("i - 1",), ("i // 2",)]
    assert node.ints(node.steps) == (2,)
    assert equations(m) == ["i, (i - 1) -> (i // 2)"]


def test_softmax_folding():
    m = lifted("""
kernel softmax(X: f32[8, 16] input, Y: f32[8, 16] output):
    local M: f32[8]
    local S: f32[8]
    for i in range(8):
        M[i] = -inf
        for j in range(16):
            M[i] max= X[i, j]
        S[i] = 0.0
        for j in range(16):
            Y[i, j] = exp(X[i, j] - M[i])
            S[i] += Y[i, j]
        for j in range(16):
            Y[i, j] = Y[i, j] / S[i]
""")
    got = [(n.sym_name.data, n.reduce.data, n.init.value.data if n.init else None) for n in nodes(m)]
    assert got == [("S1", "max", float("-inf")),   # -inf is the identity of max=: folded
                   ("S2", "none", None),             # S = 0.0 is not followed by its +=
                   ("S3", "none", None), ("S4", "add", None), ("S5", "none", None)]
    assert equations(m) == ["i j -> i", "-> i", "i j, i -> i j", "i j -> i", "i j, i -> i j"]
    # S3 and S4 shared the second j loop, S5 has its own: the scope numbers say so
    s3, s4, s5 = nodes(m)[2:]
    assert s3.ints(s3.scopes) == s4.ints(s4.scopes) != s5.ints(s5.scopes)


@pytest.mark.parametrize("init, kind, folds", [
    ("0.0", "+=", True), ("1.0", "*=", True), ("-inf", "max=", True), ("inf", "min=", True),
    ("0.0", "max=", False), ("1.0", "+=", False), ("0.0", "*=", False),
])
def test_only_identity_inits_fold(init, kind, folds):
    m = lifted(f"""
kernel r(x: f32[4, 8] input, y: f32[4] output):
    for i in range(4):
        y[i] = {init}
        for j in range(8):
            y[i] {kind} x[i, j]
""")
    assert [n.init is not None for n in nodes(m)] == ([True] if folds else [False, False])


def test_integer_max_identity_folds():
    m = lifted("""
kernel r(x: i32[4, 8] input, y: i32[4] output):
    for i in range(4):
        y[i] = -2147483648
        for j in range(8):
            y[i] max= x[i, j]
""")
    (node,) = nodes(m)
    assert node.init.value.data == -2147483648


def test_no_fold_across_loop_nests_or_different_indices():
    m = lifted("""
kernel r(x: f32[4, 8] input, y: f32[4] output, z: f32[4] output):
    for i in range(4):
        y[i] = 0.0
    for i in range(4):
        for j in range(8):
            y[i] += x[i, j]
    for i in range(3):
        z[i + 1] = 0.0
        for j in range(8):
            z[i] += x[i, j]
    z[0] = 0.0
""")
    assert [n.init is None for n in nodes(m)] == [True] * 5


def test_gather_and_scan():
    m = lifted("""
kernel e(ids: i64[16] input, E: f32[100, 4] weight, Y: f32[16, 4] output):
    for t in range(16):
        for d in range(4):
            Y[t, d] = E[ids[t], d]
    for t in scan(1, 16):
        for d in range(4):
            Y[t, d] = Y[t - 1, d] + Y[t, d]
""")
    gather, scan = nodes(m)
    assert gather.input_names == ["ids"]
    (g,) = [o for o in gather.body.block.ops if isinstance(o, GatherOp)]
    assert g.tensor_name == "E" and str(g.map.data) == "(d0, d1)[s0] -> (s0, d1)"
    assert [k.data for k in scan.iterator_types.data] == ["sequential", "parallel"]
    assert equations(m) == ["[ids[t]] d, t -> t d", "(t - 1) d, t d -> t d"]


def test_custom_and_generic_round_trip():
    m = lifted(CONV)
    text = str(m)
    again = Parser(ctx(), text).parse_module()
    again.verify()
    assert str(again) == text
    assert again.is_structurally_equivalent(m)  # operands, segment sizes and types as built
    buf = io.StringIO()
    Printer(stream=buf, print_generic_format=True).print_op(m)
    generic = buf.getvalue()
    assert '%Y_1 = "einsum.node"(%X, %W, %Y) <{' in generic
    from_generic = Parser(ctx(), generic).parse_module()
    from_generic.verify()
    assert str(from_generic) == text


GOOD = """einsum.graph @k {
  %x = einsum.tensor @x : f32 array<i64: 4> "input" -> tensor<4xf32>
  %y = einsum.tensor @y : f32 array<i64: 4> "output" -> tensor<4xf32>
  %y1 = einsum.node @S0 ins([@x, @x], %x, %x : tensor<4xf32>, tensor<4xf32>) outs(@y, %y : tensor<4xf32>)
      -> tensor<4xf32> reduce "none" attributes {ivs = ["i"],
      iterator_types = ["parallel"], lower_bounds = affine_map<(d0) -> (0)>,
      upper_bounds = affine_map<(d0) -> (4)>, steps = array<i64: 1>,
      indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (3 - d0)>, affine_map<(d0) -> (d0)>],
      scopes = array<i64: 0>} {
  ^bb0(%a: f32, %b: f32):
    %m = loop.binary "mul" %a, %b : f32, f32 -> f32
    einsum.yield %m : f32
  }
  einsum.return %y1 : tensor<4xf32>
}"""


def test_good_node_verifies():
    Parser(ctx(), GOOD).parse_op().verify()


@pytest.mark.parametrize("old, new, message", [
    ("ins([@x, @x], %x, %x : tensor<4xf32>, tensor<4xf32>)", "ins([@x], %x : tensor<4xf32>)",
     "2 indexing maps (the output's last), got 3"),
    ("affine_map<(d0) -> (3 - d0)>", "affine_map<(d0) -> (d0, d0)>", "'x' has rank 1 but is indexed with 2"),
    ("outs(@y,", "outs(@z,", "unknown tensor 'z'"),
    ("outs(@y,", "outs(@x,", "cannot write to input tensor 'x'"),
    (('@x : f32 array<i64: 4> "input" -> tensor<4xf32>', "%x, %x : tensor<4xf32>, tensor<4xf32>"),
     ('@x : f16 array<i64: 4> "input" -> tensor<4xf16>', "%x, %x : tensor<4xf16>, tensor<4xf16>"),
     "block argument types must be the element types"),
    ("%x, %x : tensor<4xf32>", "%x, %y : tensor<4xf32>",
     "node S0: operand 1 is a stale value of 'x', not its latest value"),
    ("outs(@y, %y : tensor<4xf32>)", "outs(@y)", "node S0: the init (destination) ('y') is missing"),
    ("einsum.return %y1", "einsum.return %y", "einsum.return must give the final value of every output"),
    (("-> tensor<4xf32> reduce", "einsum.return %y1 : tensor<4xf32>"),
     ("-> tensor<2xf32> reduce", "einsum.return %y1 : tensor<2xf32>"),
     "the result must have the type of 'y'"),
    ("%a: f32, %b: f32", "%a: f32, %b: f32, %c: f32", "the body takes one scalar per input (2), got 3"),
    ('reduce "none"', 'reduce "sum"', "reduce must be one of none, add, mul, max, min"),
    ('reduce "none"', 'reduce "none" init 0.0 : f64', "an init needs a reduction"),
    ('ivs = ["i"]', 'ivs = ["i", "j"]', "iterator_types must give one of parallel, reduction, sequential"),
    ('upper_bounds = affine_map<(d0) -> (4)>', 'upper_bounds = affine_map<(d0) -> (d0)>',
     "the bound of 'i' may only use outer loop variables"),
    ("steps = array<i64: 1>", "steps = array<i64: 0>", "steps must give one positive step"),
    ('f32, f32 -> f32\n    einsum.yield %m : f32', 'f32, f32 -> f16\n    einsum.yield %m : f16',
     "'mul' of f32 must give f32"),
])
def test_verifier(old, new, message):
    text = GOOD
    for a, b in zip(*((old, new) if isinstance(old, tuple) else ((old,), (new,))), strict=True):
        assert a in text
        text = text.replace(a, b, 1)
    op = Parser(ctx(), text).parse_op()
    with pytest.raises(VerifyException, match=re.escape(message)):
        op.verify()


def test_unliftable_statement_names_it_and_its_location():
    # A hand-built AST reading a rank-2 tensor with one index: no node can describe it.
    i = AffExpr.var("i")
    k = Kernel("bad", [TensorDecl("x", (4, 4), "f32", "input"), TensorDecl("y", (4,), "f32", "output")],
               [For("i", AffExpr.lit(0), AffExpr.lit(4), body=[
                   Assign("y", (i,), "=", Read("x", (i,), "f32"), loc="model.py:9")])])
    with pytest.raises(SolarError, match=r"^model\.py:9: statement 'y\[i\] = x\[i\] @ \"model\.py:9\"': "
                       r"cannot lift to an einsum node: 'x' has rank 2 but is indexed with 1 indices"):
        lift_kernel(k)


def test_lifting_twice_changes_nothing():
    m = lifted(CONV)
    before = str(m)
    LiftEinsumPass().apply(ctx(), m)
    assert str(m) == before
    assert not [o for o in m.walk() if isinstance(o, KernelOp)]
