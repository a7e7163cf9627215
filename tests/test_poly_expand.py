"""Issue 21 row: the polynomial (norm) expansion of a summed body (`analysis/poly_expand.py`).

`((x[:, None] - y[None]) ** 2).sum(-1).min(-1)` printed 3.03 us fused on H100_SXM (three vector ops
per (i, j, k) at FP32 vector 66.9 TFLOP/s); torch.cdist computes it as ||x_i||^2 - 2 x_i . y_j +
||y_j||^2, one GEMM. Figures on H100_SXM: TF32 494.7, BF16 989.4 TFLOP/s dense, FP32 vector 66.9,
BF16 vector 133.8 TFLOP/s. A MAC is 2 FLOPs.
"""

from __future__ import annotations

import pytest
from translated import fused_terms as fused
from translated import roofline_json, translated_programs

from solar_compiler.analysis.costs import program_costs
from solar_compiler.dialects.graph_convert import lift_kernel
from solar_compiler.report import render_text
from solar_compiler.text.parser import parse_kernel

TF32, BF16, VEC32 = 494.7e12, 989.4e12, 66.9e12
N = M = 1024
K = 64

SQDIST = """import torch
import torch.nn as nn
class Model(nn.Module):
    def forward(self, x, y):
        return ((x[:, None] - y[None]) ** 2).sum(-1).min(-1).values
def get_inputs():
    return [torch.randn(1024, 64), torch.randn(1024, 64)]
def get_init_inputs():
    return []
"""

PROGRAMS = {
    "sqdist": SQDIST,
    "sqdist_bf16": SQDIST.replace("torch.randn(1024, 64)", "torch.randn(1024, 64, dtype=torch.bfloat16)"),
    "l1": SQDIST.replace("((x[:, None] - y[None]) ** 2)", "(x[:, None] - y[None]).abs()"),
}

# per (i, j, k) as written: sub, square, add: 3 N M K; then min over j: N M compares
WRITTEN = 3 * N * M * K + N * M  # 202,375,168
# expanded: the norms, each a square and a sum over the row's own (i, k): K N + (K - 1) N (the same
# for y); the -2 applied to the smaller operand (x, N K); per output element two adds between the three
# monomials, none into the accumulator (a zero fill: the sum starts from the first monomial): 2 N M;
# the min as before, N M
VECTOR = 2 * (K * N + (K - 1) * N) + N * K + 2 * N * M + N * M
MATRIX = 2 * N * M * K


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    pytest.importorskip("torch")
    with translated_programs(tmp_path_factory.mktemp("poly_expand"), PROGRAMS) as paths:
        yield paths


def test_squared_distances_are_one_gemm_and_two_norms(capsys, files):
    # matrix 2 N M K = 134,217,728 at TF32 = 271.3 ns (the 0.27 us, rounded); vector 3,471,360 at
    # 66.9 TFLOP/s = 51.9 ns; compulsory 2 x 1024 x 64 x 4 + 1024 x 4 = 528,384 B = 157.7 ns
    r = roofline_json(capsys, files["sqdist"])
    assert r["totals"]["flops_matrix"] == MATRIX == 134_217_728
    assert r["totals"]["flops_vector"] == VECTOR == 3_471_360
    assert fused(r) == pytest.approx(MATRIX / TF32, rel=1e-9) and fused(r) <= 0.2714e-6
    assert r["bounds"]["H100_SXM"]["fused_bottleneck"] == "matrix"
    kinds = [(w["kind"], w["what"]) for w in r["rewrites"]]
    assert kinds == [("polynomial expansion (into sum)", "sub"), ("polynomial expansion (into sum)", "pow"),
                     ("polynomial expansion (3 monomials, 1 on the matrix unit, 2 vector)", "sum")]
    assert all(w["loc"].endswith("sqdist.py:5") for w in r["rewrites"])
    text = " ".join(render_text(r).split())
    assert "polynomial expansion (3 monomials, 1 on the matrix unit, 2 vector) for sum" in text
    # classical: the products as written, 3.03 us as the issue printed
    assert r["classical"]["bounds"]["H100_SXM"]["fused_s"] == pytest.approx(WRITTEN / VEC32, rel=1e-9)
    c = roofline_json(capsys, files["sqdist"], "--algorithms", "classical")
    assert c["totals"]["flops_vector"] == WRITTEN and c["totals"]["flops_matrix"] == 0 and c["rewrites"] == []
    assert c["bounds"]["H100_SXM"]["fused_s"] == pytest.approx(3.025e-6, rel=1e-3)


def test_bf16_squared_distances_run_at_the_bf16_tensor_rate(capsys, files):
    # the same FLOPs; the GEMM of two bf16 operands at BF16 989.4 TFLOP/s: 135.7 ns; vector at 133.8;
    # compulsory 264,192 B = 78.9 ns
    r = roofline_json(capsys, files["sqdist_bf16"])
    assert (r["totals"]["flops_matrix"], r["totals"]["flops_vector"]) == (MATRIX, VECTOR)
    assert fused(r) == pytest.approx(MATRIX / BF16, rel=1e-9)
    assert r["classical"]["bounds"]["H100_SXM"]["fused_s"] == pytest.approx(WRITTEN / 133.8e12, rel=1e-9)


def test_an_l1_distance_is_no_polynomial(capsys, files):
    # |x_ik - y_jk| is no polynomial: sub, abs, add per (i, j, k) as written, 3.025 us classical. The
    # default model runs the N M K additions of the sum on the matrix unit (docs/bounds.md section 0.4:
    # one MAC each at 1978.9 / 3 TFLOP/s for f32 values, 203.5 ns), sub, abs and the min stay vector
    r = roofline_json(capsys, files["l1"])
    assert r["rewrites"] == [] and r["totals"]["flops_matrix"] == 0
    assert r["totals"]["flops_vector"] == WRITTEN and r["totals"]["flops_sum"] == N * M * K
    assert fused(r) == pytest.approx((WRITTEN - N * M * K) / VEC32, rel=1e-9)
    assert r["bounds"]["H100_SXM"]["sum_adds_on_matrix"] == N * M * K
    assert r["classical"]["bounds"]["H100_SXM"]["fused_s"] == pytest.approx(WRITTEN / VEC32, rel=1e-9)


def test_the_unfused_bound_runs_sub_pow_and_sum_as_written(capsys, files):
    # the expansion spans three source ops (sub, pow, sum): eager PyTorch runs each, so the unfused bound
    # (docs/bounds.md section 0.0: rewrites inside one source op only) keeps N M K FLOPs per kernel
    r = roofline_json(capsys, files["sqdist"])
    assert [(k["flops_matrix"], k["flops_vector"]) for k in r["kernels_unfused"]] == \
        [(0, N * M * K)] * 3 + [(0, N * M)]
    assert r["bounds"]["H100_SXM"]["unfused_s"] == r["classical"]["bounds"]["H100_SXM"]["unfused_s"]


def _costs(body: str, init: str = "0.0", dx: str = "f32", dy: str = "f32", distinct: bool = True):
    text = f"""kernel sqd(x: {dx}[128, 32] input, y: {dy}[64, 32] input, d: {dx}[128, 64] output):
    for i in range(128):
        for j in range(64):
            d[i, j] = {init}
            for k in range(32):
                d[i, j] += {body}
"""
    return program_costs(lift_kernel(parse_kernel(text, "t.loop")), distinct=distinct)


def test_one_statement_squared_distance_expands():
    # sum_k (x_ik - y_jk)^2 in one statement, x 128 x 32, y 64 x 32 (a contraction as written: 2 x 128 x
    # 64 x 32 = 524,288 matrix FLOPs and one sub per point, 262,144). Expanded: the x y product, the same
    # 524,288 matrix FLOPs; x^2 and its row sums 4,096 + 3,968; y's 2,048 + 1,984; -2 on y (the smaller,
    # 2,048); two adds per output element (the init is folded): 16,384: 30,528 vector
    g = _costs("(x[i, k] - y[j, k]) * (x[i, k] - y[j, k])")
    s = g.ops[-1]
    assert (s.flops_matrix, s.flops_vector, s.matrix_dtype) == (524_288, 30_528, "f32")
    assert s.algorithm == "polynomial expansion (3 monomials, 1 on the matrix unit, 2 vector)"


def test_a_scaled_sum_of_products_expands_with_a_literal_scale():
    # sum_k (x_ik + 3 y_jk) * x_ik / 2 = (1/2) sum_k x_ik^2 + (3/2) sum_k x_ik y_jk: x^2 4,096 and its
    # row sums 3,968, the 1/2 on the norm (128), the 3/2 on y (2,048); the GEMM 524,288; two adds per
    # output element into a non-zero init (1 + one between the monomials): 16,384: 26,624 vector
    g = _costs("(x[i, k] + 3.0 * y[j, k]) * x[i, k] / 2.0", init="1.0")
    s = g.ops[-1]
    assert (s.flops_matrix, s.flops_vector) == (524_288, 4_096 + 3_968 + 128 + 2_048 + 16_384)


def test_no_expansion_through_exp_or_of_a_single_monomial():
    # exp is no polynomial; x_ik * (y_jk + y_jk) is the single monomial 2 x_ik y_jk: a contraction
    # already, nothing to expand
    for body in ("(x[i, k] - y[j, k]) * exp(x[i, k] - y[j, k])", "x[i, k] * (y[j, k] + y[j, k])"):
        s = _costs(body).ops[-1]
        assert s.algorithm is None, body


def test_vector_work_alone_is_factored_by_distributivity():
    # sum_k (1 - x_ik + y_jk) = 32 - sum_k x_ik + sum_k y_jk: no product for the matrix unit, but the
    # row sums of x (128 x 31 additions) and of y (64 x 31) once each, the 32 once, and two adds per
    # output element (128 x 64): 22,337 vector FLOPs, against 528,384 as written (1 - x_ik once per
    # (i, k), then two adds per point). The additions (22,336) are sums a matrix unit may take, as
    # the node's were.
    s = _costs("1.0 - x[i, k] + y[j, k]").ops[-1]
    assert (s.flops_matrix, s.flops_vector, s.flops_sum) == (0, 1 + 3_968 + 1_984 + 16_384, 22_336)
    assert s.algorithm == "polynomial expansion (3 monomials, 0 on the matrix unit, 3 vector)"
    written = _costs("1.0 - x[i, k] + y[j, k]", distinct=False).ops[-1]
    assert written.flops_vector == 128 * 32 + 2 * 128 * 64 * 32


def test_a_bf16_square_runs_on_the_bf16_matrix_unit():
    # x, y, d bf16: the x y product's operands are bf16 (matrix dtype bf16), the same FLOPs as in f32
    s = _costs("(x[i, k] - y[j, k]) * (x[i, k] - y[j, k])", dx="bf16", dy="bf16").ops[-1]
    assert (s.flops_matrix, s.flops_vector, s.matrix_dtype) == (524_288, 30_528, "bf16")
