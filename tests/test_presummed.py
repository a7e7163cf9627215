"""An operand repeated along the reduced variables (docs/bounds.md section 0.0, `distinct.presummed`):
`x.repeat(1, 2) @ w` is `x @ (w[:n] + w[n:])`, half the products and n^2 additions.

Figures on H100_SXM: TF32 494.7 TFLOP/s dense. A MAC is 2 FLOPs.
"""

from __future__ import annotations

import textwrap

import pytest
from translated import roofline_json, translated_programs

from solar_compiler.analysis.costs import program_costs
from solar_compiler.analysis.distinct import PRESUMMED, presummed
from solar_compiler.dialects.graph_convert import lift_kernel
from solar_compiler.text.parser import parse_kernels

TF32 = 494.7e12


def _node_and_costs(index: str, guard: str = "", distinct: bool = True):
    text = textwrap.dedent(f"""\
        kernel k(x: f32[8, 16] input, w: f32[32, 4] input, y: f32[8, 4] output):
            for i in range(8):
                for j in range(4):
                    y[i, j] = 0.0
                    for k in range(32):
                        {guard}y[i, j] += x[i, {index}] * w[k, j]
        """)
    (kern,) = parse_kernels(text, "t.loop")
    g = lift_kernel(kern)
    (n,) = [n for n in g.nodes() if n.reduce.data == "add"]
    return n, program_costs(g, distinct=distinct)


@pytest.mark.parametrize("index", ["k % 16", "k // 2"])
def test_a_repeated_operand_halves_the_products(index):
    # as written 2 * 8 * 4 * 32 = 2,048 FLOPs. x's reduced index takes 16 values: one MAC per (i, j,
    # m), 8 * 4 * 16 = 512; w' = the sum of w's two rows that meet x[:, m]: per (m, j) one addition,
    # 32 * 4 - 16 * 4 = 64 (flexible: a matrix unit may take them too)
    n, g = _node_and_costs(index)
    assert presummed(n) == (512, 64, "f32")
    (o,) = [o for o in g.ops if o.flops_matrix]
    assert (o.flops_matrix, o.flops_sum, o.sum_dtype, o.algorithm) == (1024, 64, "f32", PRESUMMED)
    assert o.flops_vector == 64
    (c,) = [o for o in _node_and_costs(index, distinct=False)[1].ops if o.flops_matrix]
    assert (c.flops_matrix, c.flops_vector, c.algorithm) == (2048, 0, None)  # classical: as written


def test_a_guard_or_no_repeat_leaves_it_as_written():
    n, _ = _node_and_costs("k // 2", guard="if k <= 2 * i + 8:\n                            ")
    assert presummed(n) is None  # the fibers of k // 2 would depend on i
    text = textwrap.dedent("""\
        kernel k(x: f32[8, 32] input, w: f32[32, 4] input, y: f32[8, 4] output):
            for i in range(8):
                for j in range(4):
                    y[i, j] = 0.0
                    for k in range(32):
                        y[i, j] += x[i, k] * w[k, j]
        """)
    (kern,) = parse_kernels(text, "t.loop")
    (n,) = [n for n in lift_kernel(kern).nodes() if n.reduce.data == "add"]
    assert presummed(n) is None  # no repeat


def test_a_recurrence_is_not_summed_first():
    # an Euler step x <- x + x @ w inside a scan loop: w's reads ignore the step t, but x changes from
    # step to step, so the steps' products are not the same products (jax's lax.fori_loop gives this)
    text = textwrap.dedent("""\
        kernel r(w: f32[16, 16] input, x: f32[8, 16] output):
            for t in scan(0, 4):
                for i in range(8):
                    for j in range(16):
                        for k in range(16):
                            x[i, j] += x[i, k] * w[k, j]
        """)
    (kern,) = parse_kernels(text, "t.loop")
    (n,) = [n for n in lift_kernel(kern).nodes() if n.reduce.data == "add"]
    assert presummed(n) is None


REPEAT = """import torch
N = 2048
class Model(torch.nn.Module):
    def forward(self, x, w):
        return EXPR
def get_inputs():
    return [torch.randn(N, N), torch.randn(2 * N, N)]
def get_init_inputs():
    return []
"""
FORMS = {
    "repeat": "x.repeat(1, 2) @ w",
    "cat": "torch.cat([x, x], dim=1) @ w",
    "interleaved": "x.unsqueeze(2).expand(-1, -1, 2).reshape(N, 2 * N) @ w",
    "left": "w.t() @ x.repeat(2, 1)",
}
CONV = """import torch
import torch.nn.functional as F
class Model(torch.nn.Module):
    def forward(self, x, w):
        return F.conv2d(x.repeat(1, 2, 1, 1), w, padding=1)
def get_inputs():
    bf16 = torch.bfloat16
    return [torch.randn(8, 128, 32, 32, dtype=bf16), torch.randn(256, 256, 3, 3, dtype=bf16)]
def get_init_inputs():
    return []
"""


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    pytest.importorskip("torch")
    programs = {name: REPEAT.replace("EXPR", e) for name, e in FORMS.items()} | {"conv": CONV}
    with translated_programs(tmp_path_factory.mktemp("presummed"), programs) as paths:
        yield paths


@pytest.mark.parametrize("name", sorted(FORMS))
def test_a_product_with_a_repeated_operand_is_priced_at_half(capsys, files, name):
    # as written 2 * N^2 * 2N = 34.36 G TF32 FLOPs, 69.46 us; summed first: 2 N^3 (34.73 us) and N^2
    # additions of w's halves (4,194,304, which the matrix unit may take: vector term below)
    n = 2048
    r = roofline_json(capsys, files[name])
    assert r["validation"]["validated"]
    assert [w["kind"] for w in r["rewrites"]] == [PRESUMMED]
    assert r["totals"]["flops_matrix"] == 2 * n**3 and r["totals"]["flops_sum"] == n * n
    h = r["bounds"]["H100_SXM"]
    assert h["fused_s"] == pytest.approx(2 * n**3 / TF32, rel=1e-9)
    assert h["unfused_s"] == pytest.approx(h["fused_s"])  # inside one source op: eager may do it too
    assert r["classical"]["bounds"]["H100_SXM"]["fused_s"] == pytest.approx(4 * n**3 / TF32, rel=1e-9)


def test_a_convolution_of_repeated_channels_sums_its_filter_first(capsys, files):
    # conv2d of x.repeat(1, 2, 1, 1) (the input channels c read as c % 128), bf16, padding 1: the two
    # filter halves are summed first, 256 * 128 * 9 additions, and each tap of each output runs over
    # 128 channels, not 256: half the products as written. The padding guards use the output and tap
    # variables only, so they cut both copies alike
    r = roofline_json(capsys, files["conv"])
    assert r["validation"]["validated"]
    assert [w["kind"] for w in r["rewrites"]] == [PRESUMMED]
    written = r["classical"]["totals"]["flops_matrix"]
    assert r["totals"]["flops_matrix"] * 2 == written and r["totals"]["flops_sum"] == 256 * 128 * 9
    assert r["bounds"]["H100_SXM"]["fused_s"] == pytest.approx(written / 2 / 989.4e12, rel=1e-9)  # 4.682 us
