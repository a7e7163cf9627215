"""The einsum dialect and `lift-einsum`: node contents, folding, verifier, round trips."""

from __future__ import annotations

import io
import re

import islpy as isl
import pytest
from xdsl.context import Context
from xdsl.dialects.builtin import Builtin, ModuleOp
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException

from solar_compiler.dialects.einsum import Einsum, GraphOp, NodeOp
from solar_compiler.dialects.loop import KernelOp, Loop
from solar_compiler.errors import SolarError
from solar_compiler.loopir.affine import AffExpr
from solar_compiler.loopir.ast import Assign, For, Kernel, Read, TensorDecl, statements
from solar_compiler.loopir.convert import kernels_to_module
from solar_compiler.passes.lift_einsum import LiftEinsumPass, lift_kernel
from solar_compiler.polyhedral import iteration_count
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


def test_conv_node():
    m = lifted(CONV)
    ops = list(m.body.block.ops)
    assert [type(o) for o in ops] == [KernelOp, GraphOp]  # the kernel stays, the graph follows it
    (node,) = nodes(m)
    assert node.sym_name.data == "S1"
    assert node.equation.data == "n c (2*p + r - 1) (2*q + s - 1), o c r s -> n o p q"
    assert node.input_names == ["X", "W"] and node.output.data == "Y"
    assert (node.combine.data, node.reduce.data, node.init.data) == ("mul", "add", "0.0")
    assert node.expr.data == "X[n, c, 2*p + r - 1, 2*q + s - 1] * W[o, c, r, s]"
    assert node.statement_indices == (0, 1)
    assert [x.data for x in node.locs.data] == ["conv.py:3", "conv.py:5"]
    assert node.indirect is None and node.sequential is None
    assert node.domain.data == (
        "{ S1[n, o, p, q, c, r, s] : 0 <= n < 1 and 0 <= o < 4 and 0 <= p < 4 and 0 <= q < 4 and "
        "0 <= c < 3 and 0 <= r < 3 and 0 <= s < 3 and 2*p + r >= 1 and 8 >= 2*p + r and 2*q + s >= 1 "
        "and 8 >= 2*q + s }")


def test_domain_text_is_the_exact_islpy_domain():
    # p, r pairs with 1 <= 2p + r <= 8: p=0 -> r in {1,2}, p=1..3 -> 3 each: 11; so 4*3*11*11 = 1452
    m = lifted(CONV)
    (node,) = nodes(m)
    k = parse_kernel(CONV)
    assert isl.Set(node.domain.data).count_val().to_python() == iteration_count(statements(k)[1]) == 1452


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


def test_every_lifted_domain_reads_in_islpy_to_the_exact_count():
    # Triangular bounds, a quasi-affine lower bound with a step, an equality guard, a modulo guard,
    # an offset range and a statement outside every loop (1 point).
    m = lifted(DOMAINS)
    stmts = statements(parse_kernel(DOMAINS))
    counts = [isl.Set(n.domain.data).count_val().to_python() for n in nodes(m)]
    assert counts == [iteration_count(s) for s in stmts]
    assert counts[0] == 136 and counts[3:] == [8, 1]  # 1 + 2 + ... + 16; i in 2..9; one point
    assert nodes(m)[-1].domain.data == "{ S4[] }"


def test_steps_and_quasi_affine_domains_parse_in_islpy():
    text = """
kernel pool(x: f32[16] input, y: f32[8] output):
    for i in range(1, 16, 2):
        y[i // 2] = x[i] + x[i - 1]
"""
    (node,) = nodes(lifted(text))
    assert node.equation.data == "i, (i - 1) -> (i // 2)"
    assert isl.Set(node.domain.data).count_val().to_python() == 8   # i = 1, 3, ..., 15


def test_softmax_folding_and_combines():
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
    got = [(n.sym_name.data, n.equation.data, n.combine.data, n.reduce.data,
            n.init.data if n.init else None, n.statement_indices) for n in nodes(m)]
    assert got == [
        ("S1", "i j -> i", "copy", "max", "-inf", (0, 1)),     # -inf is the identity of max=: folded
        ("S2", "-> i", "fill", "none", None, (2,)),            # S = 0.0 is not followed by its +=
        ("S3", "i j, i -> i j", "expr", "none", None, (3,)),
        ("S4", "i j -> i", "copy", "add", None, (4,)),
        ("S5", "i j, i -> i j", "div", "none", None, (5,)),
    ]


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
    assert [n.statement_indices for n in nodes(m)] == ([(0, 1)] if folds else [(0,), (1,)])


def test_integer_max_identity_folds():
    m = lifted("""
kernel r(x: i32[4, 8] input, y: i32[4] output):
    for i in range(4):
        y[i] = -2147483648
        for j in range(8):
            y[i] max= x[i, j]
""")
    (node,) = nodes(m)
    assert node.init.data == "-2147483648"


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
    assert [n.statement_indices for n in nodes(m)] == [(0,), (1,), (2,), (3,), (4,)]


def test_gather_and_scan_flags():
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
    assert gather.equation.data == "[ids[t]] d, t -> t d" and gather.input_names == ["E", "ids"]
    assert gather.indirect is not None and gather.sequential is None
    assert scan.equation.data == "(t - 1) d, t d -> t d"
    assert scan.sequential is not None and scan.combine.data == "add"


def test_custom_and_generic_round_trip():
    m = lifted(CONV)
    text = str(m)
    again = Parser(ctx(), text).parse_module()
    again.verify()
    assert str(again) == text
    buf = io.StringIO()
    Printer(stream=buf, print_generic_format=True).print_op(m)
    generic = buf.getvalue()
    assert '"einsum.node"() <{' in generic
    from_generic = Parser(ctx(), generic).parse_module()
    from_generic.verify()
    assert str(from_generic) == text


GOOD = ('einsum.node "S0" "i, i -> i" ins(["x", "x"] : [f32, f32]) outs("y" : f32) combine "mul" '
        'reduce "none" expr "x[i] * x[i]" domain "{ S0[i] : 0 <= i < 4 }" stmts array<i64: 0>')


def graph_text(node: str) -> str:
    return ('einsum.graph "k" {\n einsum.tensor "x" : f32 array<i64: 4> "input"\n'
            ' einsum.tensor "y" : f32 array<i64: 4> "output"\n ' + node + "\n}")


def test_good_node_verifies():
    Parser(ctx(), graph_text(GOOD)).parse_module().verify()


@pytest.mark.parametrize("old, new, message", [
    ('"i, i -> i"', '"i -> i"', "equation has 1 operands but the node has 2 inputs"),
    ('"i, i -> i"', '"i, i j -> i"', "'x' has rank 1 but the equation gives 2 indices"),
    ('"i, i -> i"', '"i, (i + k) -> i"', "index '(i + k)' uses 'k', which is not a variable of the domain"),
    ('"i, i -> i"', '"i, i"', "must contain exactly one '->'"),
    ('outs("y"', 'outs("z"', "unknown tensor 'z'"),
    ('outs("y"', 'outs("x"', "cannot write input tensor 'x'"),
    ('[f32, f32]', '[f32, f16]', "'x' is f32, not f16"),
    ('reduce "none"', 'reduce "sum"', "reduce must be one of none, add, mul, max, min"),
    ('combine "mul"', 'combine "matmul"', "unknown combine op 'matmul'"),
    ('expr', 'init "0.0" expr', "an init needs a reduction"),
    ('{ S0[i]', '{ S3[i]', "domain names statement 'S3'"),
    ('{ S0[i] :', '{ S0[i, i] :', "the variables must be distinct names"),
    ('{ S0[i] :', 'S0[i] :', "is not of the form"),
])
def test_verifier(old, new, message):
    assert old in GOOD
    m = Parser(ctx(), graph_text(GOOD.replace(old, new, 1))).parse_module()
    with pytest.raises(VerifyException, match=re.escape(message)):
        m.verify()


def test_unliftable_statement_names_it_and_its_location():
    # A hand-built AST reading a rank-2 tensor with one index: no node can describe it.
    i = AffExpr.var("i")
    k = Kernel("bad", [TensorDecl("x", (4, 4), "f32", "input"), TensorDecl("y", (4,), "f32", "output")],
               [For("i", AffExpr.lit(0), AffExpr.lit(4), body=[
                   Assign("y", (i,), "=", Read("x", (i,), "f32"), loc="model.py:9")])])
    with pytest.raises(SolarError, match=r"^model\.py:9: statement 'y\[i\] = x\[i\] @ \"model\.py:9\"': "
                       r"cannot lift to an einsum node: .*'x' has rank 2 but the equation gives 1"):
        lift_kernel(k)


def test_lifting_twice_is_an_error():
    m = lifted(CONV)
    with pytest.raises(SolarError, match="kernel 'conv' already has an einsum.graph"):
        LiftEinsumPass().apply(ctx(), m)
