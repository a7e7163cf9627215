"""Common subexpressions up to a renaming of loops (`distinct.duplicates`), and what they give the
association of contraction trees: `x @ x @ x @ x` as `(x x)(x x)` is two products, as repeated
squaring (`torch.linalg.matrix_power`) computes it. Figures on H100_SXM: TF32 494.7 TFLOP/s dense."""

from __future__ import annotations

import textwrap

import pytest
from translated import roofline_json, translated_programs

from solar_compiler.analysis.distinct import duplicates
from solar_compiler.dialects.graph_convert import lift_kernel
from solar_compiler.text.parser import parse_kernels

TF32 = 494.7e12


def _nodes(second: str):
    text = textwrap.dedent(f"""\
        kernel k(x: f32[8, 8] input, y: f32[8, 8] output):
            local t1: f32[8, 8]
            local t2: f32[8, 8]
            for a in range(8):
                for c in range(8):
                    t1[a, c] = 0.0
                    for b in range(8):
                        t1[a, c] += x[a, b] * x[b, c]
            {second}
            for i in range(8):
                for j in range(8):
                    y[i, j] = t1[i, j] + t2[i, j]
        """)
    (k,) = parse_kernels(text, "t.loop")
    return lift_kernel(k).nodes()


SAME = """for d in range(8):
                for f in range(8):
                    t2[d, f] = 0.0
                    for e in range(8):
                        t2[d, f] += x[d, e] * x[e, f]"""
TRANSPOSED = SAME.replace("t2[d, f]", "t2[f, d]").replace("for d in range(8):\n                for f in",
                                                           "for f in range(8):\n                for d in")


def test_renamed_loops_are_the_same_products():
    nodes = _nodes(SAME)
    assert duplicates(nodes) == {1: 0} == duplicates(nodes, layouts=True)


def test_a_transposed_result_is_the_same_arithmetic_but_not_the_same_tensor():
    nodes = _nodes(TRANSPOSED)
    assert duplicates(nodes) == {}             # t2 holds t1's transpose, not its values
    assert duplicates(nodes, layouts=True) == {1: 0}  # but needs no arithmetic of its own


def test_other_products_are_no_duplicates():
    nodes = _nodes(SAME.replace("x[d, e] * x[e, f]", "x[e, d] * x[e, f]"))  # x^T x, not x x
    assert duplicates(nodes, layouts=True) == {}


POWER = """import torch
N = 2048
class Model(torch.nn.Module):
    def forward(self, x):
        return EXPR
def get_inputs():
    return [torch.randn(N, N) / 64]
def get_init_inputs():
    return []
"""


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    pytest.importorskip("torch")
    programs = {"power4": POWER.replace("EXPR", "x @ x @ x @ x"),
                "power3": POWER.replace("EXPR", "x @ x @ x")}
    with translated_programs(tmp_path_factory.mktemp("power"), programs) as paths:
        yield paths


def test_a_fourth_power_is_two_products(capsys, files):
    # as written three 2048^3 products (104.2 us at TF32); as (x x)(x x) the two halves are one product,
    # the second computed into a transposed layout: 2 * 2 * 2048^3 = 34.36 G FLOPs, 69.46 us. The last
    # product is x^2 x^2, not x^2 (x^2)^T: no symmetric-product halving
    r = roofline_json(capsys, files["power4"])
    n = 2048
    assert r["validation"]["validated"]
    kinds = [w["kind"] for w in r["rewrites"]]
    assert "reassociated" in kinds and "common subexpression" in kinds and "symmetric product" not in kinds
    assert r["totals"]["flops_matrix"] == 4 * n**3
    assert r["bounds"]["H100_SXM"]["fused_s"] == pytest.approx(4 * n**3 / TF32, rel=1e-9)
    # eager runs the three matmuls it is given
    assert r["bounds"]["H100_SXM"]["unfused_s"] == pytest.approx(6 * n**3 / TF32, rel=1e-3)
    assert r["classical"]["bounds"]["H100_SXM"]["fused_s"] == pytest.approx(6 * n**3 / TF32, rel=1e-9)


def test_a_cube_has_nothing_to_share(capsys, files):
    r = roofline_json(capsys, files["power3"])
    assert r["rewrites"] == [] and r["totals"]["flops_matrix"] == 4 * 2048**3
