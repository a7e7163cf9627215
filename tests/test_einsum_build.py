"""`dialects/einsum_build.py` builds the einsum graph that lifting the same loop nests builds, and
`chain_order` states each association order with it: the orders' graphs lower to the loop IR derived
by hand (docs/reorder-chains.md), and equal what lifting that loop IR gives, attribute for attribute."""

from __future__ import annotations

import re
import textwrap
from io import StringIO

import pytest
from xdsl.printer import Printer

from solar_compiler.analysis.chain_order import plan_program
from solar_compiler.analysis.chains import Factor
from solar_compiler.analysis.costs import program_costs
from solar_compiler.dialects.einsum import GraphOp
from solar_compiler.dialects.einsum_build import IfBlock, ProductNest, product_graph
from solar_compiler.dialects.graph_convert import graph_to_kernel, kernel_to_graph, lift_kernel
from solar_compiler.errors import LoopIRError
from solar_compiler.loopir.affine import AffCond, AffExpr
from solar_compiler.loopir.ast import (
    Assign,
    Binary,
    Const,
    For,
    If,
    Kernel,
    Origin,
    Read,
    TensorDecl,
    typecheck,
)
from solar_compiler.text.parser import parse_kernels
from solar_compiler.text.printer import print_kernel


def v(name: str) -> AffExpr:
    return AffExpr.var(name)


def printed(g: GraphOp) -> str:
    """The graph's MLIR text with the ops' locations (the nodes' source positions)."""
    out = StringIO()
    Printer(stream=out, print_debuginfo=True).print_op(g)
    return out.getvalue()


def canonical(g: GraphOp) -> tuple[list[str], list[str]]:
    """The printed graph, its declarations as a set: the text form lists parameters before
    locals, an order's graph declares its leaves, its new locals, then its output."""
    lines = printed(g).splitlines()
    return sorted(x for x in lines if "einsum.tensor" in x), [x for x in lines if "einsum.tensor" not in x]


def best_graph(text: str) -> GraphOp:
    (k,) = parse_kernels(textwrap.dedent(text), "t.loop")
    g = lift_kernel(k)
    (plan,) = plan_program(g, program_costs(g))
    assert plan.best is not None
    return plan.best.graph


def check_order(text: str, want: str) -> None:
    """The best order's graph lowers to `want` exactly, and is what lifting `want` gives."""
    got = best_graph(text)
    want = textwrap.dedent(want)
    assert print_kernel(graph_to_kernel(got)[0]) == want
    (k,) = parse_kernels(want, "w.loop")
    assert canonical(got) == canonical(kernel_to_graph(k))


# ---- the builder alone ----------------------------------------------------------------------------------
def test_a_product_nest_is_the_lifted_loop_nest():
    """Y[i] = 0 under i >= 1, then Y[i] += A[i, k] * A[i, k] * 2 / B[k] over k under k <= i, the
    loop nest written as an AST with its position and origins: the same graph, printed, attribute
    for attribute (the repeated read is one block argument, the literal takes f32 from its partner)."""
    origin, init_origin = Origin(7, "aten.mm", "proj"), Origin(6, "aten.zeros")
    mask, tri = AffCond(v("i") - 1), AffCond(v("i") - v("k"))
    a = Read("A", (v("i"), v("k")))
    value = Binary("div", Binary("mul", Binary("mul", a, Read("A", (v("i"), v("k")))), Const(2.0)),
                   Read("B", (v("k"),)))
    tensors = [TensorDecl("A", (4, 8), "f32", "input"), TensorDecl("B", (8,), "f32", "weight"),
               TensorDecl("Y", (4,), "f32", "output")]
    red = For("k", AffExpr.lit(0), AffExpr.lit(8), body=[If((tri,), [Assign("Y", (v("i"),), "+=", value,
                                                                             "m.py:3", origin=origin)])])
    body = [For("i", AffExpr.lit(0), AffExpr.lit(4), body=[
        If((mask,), [Assign("Y", (v("i"),), "=", Const(0.0), "m.py:3", origin=init_origin), red])])]
    lifted = kernel_to_graph(typecheck(Kernel("k", tensors, body)))
    nest = ProductNest("Y", (v("i"),), "+=",
                       (Factor("A", (v("i"), v("k"))), Factor("A", (v("i"), v("k"))), Factor(None, value=2.0),
                        Factor("B", (v("k"),), divide=True)),
                       (("i", 0, 4), ("k", 0, 8)), (IfBlock(1, (mask,)), IfBlock(2, (tri,))), (1, 1),
                       "m.py:3", origin, init_origin)
    built = product_graph("k", [(t.name, t.shape, t.dtype, t.role) for t in tensors], [nest])
    built.verify()
    assert printed(built) == printed(lifted) and 'loc(fused["m.py":3:0, "m.py":3:0])' in printed(built)


def test_nodes_are_numbered_as_lifting_numbers_them():
    """Two nests, `=` then a folded `+=`: names S0 and S2 (main statements 0 and 2), scopes counted
    over the graph (if blocks first, then loops, node by node), the second reading the first."""
    tensors = [("A", (4, 8), "f32", "input"), ("T", (4, 8), "f32", "local"), ("Y", (4,), "f32", "output")]
    nests = [ProductNest("T", (v("i"), v("k")), "=", (Factor("A", (v("i"), v("k"))), Factor(None, value=3.0)),
                         (("i", 0, 4), ("k", 0, 8)), (IfBlock(2, (AffCond(v("k") - v("i")),)),)),
             ProductNest("Y", (v("i"),), "+=", (Factor("T", (v("i"), v("k"))),), (("i", 0, 4), ("k", 0, 8)),
                         init=(1, 0))]
    want = """\
        kernel k(A: f32[4, 8] input, Y: f32[4] output):
            local T: f32[4, 8]
            for i in range(4):
                for k in range(8):
                    if k >= i:
                        T[i, k] = A[i, k] * 3.0
            for i in range(4):
                Y[i] = 0.0
                for k in range(8):
                    Y[i] += T[i, k]
        """
    built = product_graph("k", tensors, nests)
    (k,) = parse_kernels(textwrap.dedent(want), "w.loop")
    assert canonical(built) == canonical(kernel_to_graph(k))
    assert [n.sym_name.data for n in built.nodes()] == ["S0", "S2"]
    assert [list(n.scopes.get_values()) for n in built.nodes()] == [[1, 2], [3, 4]]


@pytest.mark.parametrize(("tensors", "nest", "message"), [
    ([("A", (4,), "i32", "input"), ("Y", (1,), "i32", "output")],
     ProductNest("Y", (AffExpr.lit(0),), "+=", (Factor("A", (v("i"),)),), (("i", 0, 4),), init=(0, 0)),
     "float literal 0.0 where i32 is expected (write an integer, or cast)"),
    ([("A", (4,), "f32", "input"), ("B", (4,), "f16", "input"), ("Y", (4,), "f32", "output")],
     ProductNest("Y", (v("i"),), "=", (Factor("A", (v("i"),)), Factor("B", (v("i"),))), (("i", 0, 4),)),
     "type mismatch in 'mul': f32 vs f16"),
    ([("A", (4,), "f16", "input"), ("Y", (4,), "f32", "output")],
     ProductNest("Y", (v("i"),), "=", (Factor("A", (v("i"),)), Factor(None, value=2.0)), (("i", 0, 4),)),
     "type mismatch: 'Y' is f32 but the value is f16"),
])
def test_type_errors_are_the_type_checkers(tensors, nest, message):
    """What the loop IR's type checker says of the same statements, word for word."""
    with pytest.raises(LoopIRError, match=f"^{re.escape(message)}$"):
        product_graph("k", tensors, [nest])


def test_a_nest_it_cannot_state_is_refused():
    with pytest.raises(ValueError, match="folded init"):
        ProductNest("Y", (v("i"),), "=", (Factor("A", (v("i"),)),), (("i", 0, 4),), init=(1, 0)).check()


# ---- association orders ---------------------------------------------------------------------------------
def test_masked_chain():
    """S = Q (L W^T)^T under t <= s + 60: Q * W first (4x32), the mask on the root's reduction
    (its zero init stays outside it, as the root node's did)."""
    check_order("""\
        kernel latent(Q: f32[4, 16] input, W: f32[16, 32] weight, L: f32[64, 32] input, S: f32[4, 64] output):
            local K: f32[64, 16]
            for t in range(64):
                for d in range(16):
                    K[t, d] = 0.0
                    for c in range(32):
                        K[t, d] += L[t, c] * W[d, c]
            for s in range(4):
                for t in range(64):
                    S[s, t] = 0.0
                    if t <= s + 60:
                        for d in range(16):
                            S[s, t] += Q[s, d] * K[t, d]
        """, """\
        kernel latent(Q: f32[4, 16] input, L: f32[64, 32] input, W: f32[16, 32] weight, S: f32[4, 64] output):
            local S_r0: f32[4, 32]
            for s in range(4):
                for c in range(32):
                    S_r0[s, c] = 0.0
                    for d in range(16):
                        S_r0[s, c] += Q[s, d] * W[d, c]
            for s in range(4):
                for t in range(64):
                    S[s, t] = 0.0
                    for c in range(32):
                        if s + 60 >= t:
                            S[s, t] += L[t, c] * S_r0[s, c]
        """)


def test_attention_with_a_scale_and_a_division():
    """((Q K^T) * 0.125) V / N: K^T V first (4x16), the scale on the contraction with Q, the
    division by N[i] a step of its own on the 8x4 result (cheaper than per (i, l, d))."""
    check_order("""\
        kernel att(Q: f32[8, 16] input, K: f32[32, 16] input, V: f32[32, 4] input, N: f32[8] input,
                   Y: f32[8, 4] output):
            local S: f32[8, 32]
            for i in range(8):
                for j in range(32):
                    S[i, j] = 0.0
                    for d in range(16):
                        S[i, j] += Q[i, d] * K[j, d] * 0.125
            for i in range(8):
                for l in range(4):
                    Y[i, l] = 0.0
                    for j in range(32):
                        Y[i, l] += S[i, j] * V[j, l] / N[i]
        """, """\
        kernel att(Q: f32[8, 16] input, K: f32[32, 16] input, V: f32[32, 4] input, N: f32[8] input, \
Y: f32[8, 4] output):
            local Y_r0: f32[4, 16]
            local Y_r1: f32[8, 4]
            for l in range(4):
                for d in range(16):
                    Y_r0[l, d] = 0.0
                    for j in range(32):
                        Y_r0[l, d] += K[j, d] * V[j, l]
            for i in range(8):
                for l in range(4):
                    Y_r1[i, l] = 0.0
                    for d in range(16):
                        Y_r1[i, l] += Q[i, d] * Y_r0[l, d] * 0.125
            for i in range(8):
                for l in range(4):
                    Y[i, l] = 0.0
                    Y[i, l] += Y_r1[i, l] / N[i]
        """)


def test_pooling_after_a_1x1_conv_sums_the_window_alone():
    """The 2x2 window (r, s) indexes X alone: summed on X first (a one-factor step), then the
    convolution on a quarter of the pixels, the 0.25 folded into it."""
    check_order("""\
        kernel trans(X: f32[1, 16, 8, 8] input, W: f32[8, 16] weight, Y: f32[1, 8, 4, 4] output):
            local C: f32[1, 8, 8, 8]
            for n in range(1):
                for o in range(8):
                    for h in range(8):
                        for w in range(8):
                            C[n, o, h, w] = 0.0
                            for c in range(16):
                                C[n, o, h, w] += X[n, c, h, w] * W[o, c]
            for n in range(1):
                for o in range(8):
                    for p in range(4):
                        for q in range(4):
                            Y[n, o, p, q] = 0.0
                            for r in range(2):
                                for s in range(2):
                                    Y[n, o, p, q] += C[n, o, 2*p + r, 2*q + s] * 0.25
        """, """\
        kernel trans(X: f32[1, 16, 8, 8] input, W: f32[8, 16] weight, Y: f32[1, 8, 4, 4] output):
            local Y_r0: f32[4, 4, 16]
            for p in range(4):
                for q in range(4):
                    for c in range(16):
                        Y_r0[p, q, c] = 0.0
                        for r in range(2):
                            for s in range(2):
                                Y_r0[p, q, c] += X[0, c, 2*p + r, 2*q + s]
            for o in range(8):
                for p in range(4):
                    for q in range(4):
                        Y[0, o, p, q] = 0.0
                        for c in range(16):
                            Y[0, o, p, q] += Y_r0[p, q, c] * W[o, c] * 0.25
        """)


def test_an_assigning_root_stays_an_assignment():
    """Y = (A x) u^T written with `=`: the best order keeps the matrix-vector product first and the
    root an `=` (nothing summed in it, no mask)."""
    check_order("""\
        kernel outer(A: f32[16, 64] input, x: f32[64] input, u: f32[8] input, Y: f32[16, 8] output):
            local T: f32[16]
            for i in range(16):
                T[i] = 0.0
                for k in range(64):
                    T[i] += A[i, k] * x[k]
            for i in range(16):
                for j in range(8):
                    Y[i, j] = T[i] * u[j]
        """, """\
        kernel outer(A: f32[16, 64] input, x: f32[64] input, u: f32[8] input, Y: f32[16, 8] output):
            local Y_r0: f32[16]
            for i in range(16):
                Y_r0[i] = 0.0
                for k in range(64):
                    Y_r0[i] += A[i, k] * x[k]
            for i in range(16):
                for j in range(8):
                    Y[i, j] = u[j] * Y_r0[i]
        """)


def test_a_root_onto_a_separate_init_accumulates():
    """Y = c (a bias), then Y += (A B) C: the order is A (B C), its root `+=` with no zero init
    (the bias node is no part of the tree's graph)."""
    check_order("""\
        kernel b(A: f32[64, 4] input, B: f32[4, 64] input, C: f32[64, 4] input, c: f32[4] weight,
                 Y: f32[64, 4] output):
            local T: f32[64, 64]
            for i in range(64):
                for j in range(64):
                    T[i, j] = 0.0
                    for k in range(4):
                        T[i, j] += A[i, k] * B[k, j]
            for i in range(64):
                for l in range(4):
                    Y[i, l] = c[l]
            for i in range(64):
                for l in range(4):
                    for j in range(64):
                        Y[i, l] += T[i, j] * C[j, l]
        """, """\
        kernel b(A: f32[64, 4] input, B: f32[4, 64] input, C: f32[64, 4] input, Y: f32[64, 4] output):
            local Y_r0: f32[4, 4]
            for l in range(4):
                for k in range(4):
                    Y_r0[l, k] = 0.0
                    for j in range(64):
                        Y_r0[l, k] += B[k, j] * C[j, l]
            for i in range(64):
                for l in range(4):
                    for k in range(4):
                        Y[i, l] += A[i, k] * Y_r0[l, k]
        """)
