"""Issue 21: sums over nested ranges are priced as scans (`analysis/prefix_sums.py`), an association of
sums in the default model's catalogue. `tril(ones(N, N)) @ x` is `cumsum(x, 0)`: as written (after
narrowing) it is priced at one addition per point of the triangle, N^2 D / 2 = 8.6 G on the vector
unit, 128.5 us on H100, above what cuBLAS needs for the whole dense product on TF32 tensor cores
(2 N^2 D / 494.7 TFLOP/s = 69.5 us). A scan needs one addition per summand.
"""

from __future__ import annotations

import textwrap

import pytest
from translated import roofline_json, translated_programs

from solar_compiler.analysis.prefix_sums import SCAN, prefix_sum_adds
from solar_compiler.dialects.graph_convert import lift_kernel
from solar_compiler.text.parser import parse_kernels

BW = 3.35e12

TRIL = """import torch
N, D = 4096, 1024
class Model(torch.nn.Module):
    def forward(self, x):
        return torch.tril(torch.ones(N, N)) @ x
def get_inputs():
    return [torch.randn(N, D)]
def get_init_inputs():
    return []
"""


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    pytest.importorskip("torch")
    with translated_programs(tmp_path_factory.mktemp("scan"), {"tril": TRIL}) as paths:
        yield paths


def test_a_product_with_a_triangle_of_ones_is_a_cumsum(capsys, files):
    n, d = 4096, 1024
    r = roofline_json(capsys, files["tril"])
    assert [(w["kind"], w["what"]) for w in r["rewrites"]] == [(SCAN, "mm")]
    # a scan: (N - 1) D additions (the multiplication by the literal 1.0 that narrowing leaves is no
    # operation); as written, N (N + 1) / 2 D additions
    assert r["totals"]["flops_vector"] == (n - 1) * d == 4_193_280
    assert r["classical"]["totals"]["flops_vector"] == n * (n + 1) // 2 * d
    h = r["bounds"]["H100_SXM"]
    assert h["fused_bottleneck"] == "memory" and h["fused_s"] == pytest.approx(2 * n * d * 4 / BW)
    assert h["fused_s"] <= 10.02e-6
    assert r["classical"]["bounds"]["H100_SXM"]["fused_s"] == pytest.approx(128.5e-6, rel=1e-3)
    # inside one source op: eager's matmul kernel may compute its own output as a scan
    assert h["unfused_s"] == pytest.approx(h["fused_s"])


def node_of(text: str):
    (k,) = parse_kernels(textwrap.dedent(text), "t.loop")
    nodes = lift_kernel(k).nodes()
    return next(n for n in nodes if n.reduce.data == "add")


HEAD = "kernel k(x: f32[64, 32] input, w: f32[64] input, Y: f32[64, 32] output):\n"


@pytest.mark.parametrize(("loops", "adds"), [
    # a prefix: k <= i; each column d is one scan of 64 summands
    ("for i in range(64):\n  for d in range(32):\n    for k in range(i + 1):\n      Y[i, d] += x[k, d]",
     63 * 32),
    # a suffix: k >= i, the ranges shrink as i grows
    ("for i in range(64):\n  for d in range(32):\n    for k in range(i, 64):\n      Y[i, d] += x[k, d]",
     63 * 32),
    # a guard in place of the bound, the reduced loop outside the column loop
    ("for i in range(64):\n  for k in range(64):\n    for d in range(32):\n      if k <= i:\n"
     "        Y[i, d] += x[k, d]", 63 * 32),
    # the same sum for every i (a range that does not move): computed once per column
    ("for i in range(64):\n  for d in range(32):\n    for k in range(16):\n      Y[i, d] += x[k, d]",
     15 * 32),
])
def test_nested_ranges_need_one_addition_per_summand(loops, adds):
    assert prefix_sum_adds(node_of(HEAD + textwrap.indent(loops, "    ").replace("  ", "    "))) == adds


@pytest.mark.parametrize("loops", [
    # a window of 4: the ranges slide, none holds the next
    "for i in range(64):\n  for d in range(32):\n    for k in range(4):\n      if i + k < 64:\n"
    "        Y[i, d] += x[i + k, d]",
    # the summand depends on i
    "for i in range(64):\n  for d in range(32):\n    for k in range(i + 1):\n      Y[i, d] += x[k, d] * w[i]",
    # a constraint couples the reduced variable to the other output variable (k <= d)
    "for i in range(64):\n  for d in range(32):\n    for k in range(i + 1):\n      if k <= d:\n"
    "        Y[i, d] += x[k, d]",
])
def test_other_sums_are_counted_as_written(loops):
    assert prefix_sum_adds(node_of(HEAD + textwrap.indent(loops, "    ").replace("  ", "    "))) is None
