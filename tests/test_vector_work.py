"""The minimal vector work (`analysis/vector_work.py`) read from `einsum.node` bodies, node by node,
against counts derived by hand in the comments (one operation per distinct value of the loop
variables a subexpression depends on)."""

from __future__ import annotations

import pytest

from solar_compiler.analysis.vector_work import VectorWork
from solar_compiler.dialects.einsum import GraphOp
from solar_compiler.dialects.graph_convert import lift_kernel
from solar_compiler.text.parser import parse_kernel


def graph(text: str) -> GraphOp:
    return lift_kernel(parse_kernel(text, "t.loop"))


def counts(g: GraphOp, fold: bool = False) -> dict[str, tuple[int, int]]:
    work = VectorWork(g, fold=fold)
    return {n.sym_name.data: work.node(n) for n in g.nodes()}


HEADER = "kernel k(x: f32[4, 8] input, m: f32[4] input, y: f32[4, 8] output, z: f32[4, 8] output):\n"


def test_an_expression_an_earlier_node_computed_costs_nothing_even_with_renamed_loops():
    # S0: exp(x - m) = sub + exp at 32 points (32 transcendental). S1 writes the same expression with
    # its loops named and nested the other way (j outer): the same values, already computed -> 0,
    # only its own add by 1.0 is new (32).
    g = graph(HEADER + "    for i in range(4):\n        for j in range(8):\n"
              "            y[i, j] = exp(x[i, j] - m[i])\n"
              "    for b in range(8):\n        for a in range(4):\n"
              "            z[a, b] = exp(x[a, b] - m[a]) + 1.0\n")
    assert counts(g) == {"S0": (64, 32), "S1": (32, 0)}


def test_a_write_in_between_makes_the_expression_new():
    # S0: u = m * 2 (4). S2 overwrites u (a new SSA value of u): S3's exp(x - u) reads that value, not
    # the one S1 computed with, so it costs its sub + exp again (64, 32 transcendental); S2 is one
    # add per row (4).
    g = graph(HEADER + "    local u: f32[4]\n    for i in range(4):\n        u[i] = m[i] * 2.0\n"
              "    for i in range(4):\n        for j in range(8):\n"
              "            y[i, j] = exp(x[i, j] - u[i])\n"
              "    for i in range(4):\n        u[i] = u[i] + 1.0\n"
              "    for i in range(4):\n        for j in range(8):\n"
              "            z[i, j] = exp(x[i, j] - u[i])\n")
    assert counts(g) == {"S0": (4, 0), "S1": (64, 32), "S2": (4, 0), "S3": (64, 32)}


def test_loop_invariant_terms_and_a_reduction_accumulation():
    # y[t, j] = x[t, j] + (b[j] + c[j]): the inner add depends on j only (8), the outer on (t, j) (32).
    # The row sum s[t] += x[t, j] + 1.0 (node S2: its zero init S1 folded in) is an add (32) plus its
    # accumulation (32).
    g = graph("kernel k(x: f32[4, 8] input, b: f32[8] input, c: f32[8] input, y: f32[4, 8] output,"
              " s: f32[4] output):\n"
              "    for t in range(4):\n        for j in range(8):\n"
              "            y[t, j] = x[t, j] + (b[j] + c[j])\n"
              "    for t in range(4):\n        s[t] = 0.0\n        for j in range(8):\n"
              "            s[t] += x[t, j] + 1.0\n")
    assert counts(g) == {"S0": (40, 0), "S2": (64, 0)}


def test_a_product_chain_takes_its_cheapest_association_order():
    # (x[i, j] - m[i]) / sqrt(v[i] + 1e-5) * w[i]: sub 32; add + sqrt per row (4 + 4, 4 transcendental);
    # the division and the multiplication: 1/sqrt(...) * w[i] per row (4), then one multiplication
    # per element (32) -> 32 + 8 + 4 + 32 = 76.
    g = graph("kernel k(x: f32[4, 8] input, m: f32[4] input, v: f32[4] input, w: f32[4] input,"
              " y: f32[4, 8] output):\n"
              "    for i in range(4):\n        for j in range(8):\n"
              "            y[i, j] = (x[i, j] - m[i]) / sqrt(v[i] + 1e-5) * w[i]\n")
    assert counts(g) == {"S0": (76, 4)}


def test_nodes_must_be_visited_in_program_order():
    g = graph(HEADER + "    for i in range(4):\n        for j in range(8):\n"
              "            y[i, j] = x[i, j] + 1.0\n"
              "    for i in range(4):\n        for j in range(8):\n"
              "            z[i, j] = x[i, j] * 2.0\n")
    a, b = g.nodes()
    work = VectorWork(g)
    work.node(b)
    with pytest.raises(ValueError, match="program order"):
        work.skip(a)


def test_a_scale_folds_through_the_contraction_that_writes_its_operand():
    # s = q k^T (a contraction over d, skipped: its own rules), y = s * 0.5. As written the scale
    # costs one multiplication per score (4*6 = 24); folded (default model) it multiplies the smaller
    # operand of the contraction instead, q (4*2 = 8): `(q k) c = (q c) k`.
    g = graph("kernel k(q: f32[4, 2] input, kk: f32[6, 2] input, y: f32[4, 6] output):\n"
              "    local s: f32[4, 6]\n"
              "    for i in range(4):\n        for j in range(6):\n            s[i, j] = 0.0\n"
              "            for d in range(2):\n                s[i, j] += q[i, d] * kk[j, d]\n"
              "    for i in range(4):\n        for j in range(6):\n            y[i, j] = s[i, j] * 0.5\n")
    contraction, scale = g.nodes()
    for fold, want in ((False, (24, 0)), (True, (8, 0))):
        work = VectorWork(g, fold=fold)
        work.skip(contraction)
        assert (work.node(scale), work.folded) == (want, fold)


@pytest.mark.parametrize(("body", "ops"), [
    # identities cost nothing: a scale of 1, a division by 1, an addition or subtraction of 0
    ("x[i, j] * 1.0", 0),
    ("1.0 * x[i, j] / 1.0", 0),
    ("x[i, j] + 0.0", 0),
    ("0.0 + x[i, j] - 0.0", 0),
    ("(x[i, j] * 1.0) * m[i]", 32),      # one multiply left, per (i, j)
    ("x[i, j] * 2.0 + 0.0", 32),         # a scale of 2 is an operation
    ("x[i, j] - 1.0", 32),
])
def test_identities_are_no_operations(body, ops):
    g = graph(HEADER + f"    for i in range(4):\n        for j in range(8):\n            y[i, j] = {body}\n")
    assert counts(g) == {"S0": (ops, 0)}


def test_a_band_product_narrowed_to_ones_costs_its_additions_only():
    # what narrowing leaves of (tril(ones) @ x): Y[i, d] += x[k, d] * 1.0 for k <= i; the 1.0 is no
    # operation, the accumulation one per point: 8 * 9 / 2 * 8 = 288 points (the zero init folded into
    # the node, statement S1)
    g = graph("kernel k(x: f32[8, 8] input, Y: f32[8, 8] output):\n"
              "    for i in range(8):\n        for d in range(8):\n            Y[i, d] = 0.0\n"
              "            for k in range(i + 1):\n                Y[i, d] += x[k, d] * 1.0\n")
    assert counts(g) == {"S1": (288, 0)}
