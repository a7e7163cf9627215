"""Issue 21, audit of 2026-12-07: three rewrites a kernel writer makes that the catalogue missed.

* **The arithmetic select** `g * A + (1 - g) * B` (also `~g` of a bool, and gates along any output
  dim) with `g` a bool per output element and A, B contractions: each output element is one
  branch's sum, the other's product being zero, so one contraction per element suffices, as for
  `torch.where` (`distinct.gated_selects`). Two independent gates are no select: both stay.
* **A shared factor through another map**: `x @ w + x @ w.t()` is `x @ (w + w.t())`, one product after
  N^2 additions (`distinct._same_elements_per_point`).
* **Pieces of one source**: `torch.cat([x, x.flip(0)]) @ w` multiplies every product of `x @ w` twice
  (the second half's rows are the first's, reversed): a local that copies write, piece by piece,
  whose pieces read one source with equal sets of (source element, other operand element), isl
  proves it, is one piece's products (`distinct.copied_pieces_products`). Two sources stay two.

Figures: bf16, n = 256 here; at n = 2048 on H100_SXM (BF16 989.4 TFLOP/s dense) each program printed
34.73 us (two matmuls) before and prints 17.36 us (2 n^3 FLOPs) after.
"""

from __future__ import annotations

import pytest
from translated import fused_terms as fused
from translated import roofline_json, translated_programs

BF16 = 989.4e12
N = 256

HEAD = f"""import torch
import torch.nn as nn
N = {N}
def get_init_inputs():
    return []
def get_inputs():
    bf = torch.bfloat16
    return [torch.randn(N), torch.randn(N)] + [torch.randn(N, N, dtype=bf) for _ in range(3)]
"""

PROGRAMS = {
    # the gate cast from a comparison, broadcast along columns; `1 - m` for the other branch
    "rows": HEAD + """class Model(nn.Module):
    def forward(self, s, t, x, w1, w2):
        m = (s > 0).to(x.dtype)[:, None]
        return m * (x @ w1) + (1 - m) * (x @ w2)
""",
    # a bool gate and its negation multiplied in directly
    "bool_not": HEAD + """class Model(nn.Module):
    def forward(self, s, t, x, w1, w2):
        m = (s > 0)[:, None]
        return m * (x @ w1) + (~m) * (x @ w2)
""",
    # a gate per column, the products cast to f32 first
    "columns": HEAD + """class Model(nn.Module):
    def forward(self, s, t, x, w1, w2):
        m = (s > 0).float()
        return (x @ w1).float() * m + (x @ w2).float() * (1.0 - m)
""",
    # two independent gates: an element may need both products
    "two_gates": HEAD + """class Model(nn.Module):
    def forward(self, s, t, x, w1, w2):
        m1 = (s > 0).to(x.dtype)[:, None]
        m2 = (t > 0).to(x.dtype)[:, None]
        return m1 * (x @ w1) + (1 - m2) * (x @ w2)
""",
    "cat_flip": HEAD + """class Model(nn.Module):
    def forward(self, s, t, x, w1, w2):
        return torch.cat([x, x.flip(0)], 0) @ w1
""",
    "cat_flip_columns": HEAD + """class Model(nn.Module):
    def forward(self, s, t, x, w1, w2):
        return x @ torch.cat([w1.flip(1), w1], 1)
""",
    "cat_two_sources": HEAD + """class Model(nn.Module):
    def forward(self, s, t, x, w1, w2):
        return torch.cat([x, w2.flip(0)], 0) @ w1
""",
    "transpose": HEAD + """class Model(nn.Module):
    def forward(self, s, t, x, w1, w2):
        return x @ w1 + x @ w1.t()
""",
}


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    pytest.importorskip("torch")
    with translated_programs(tmp_path_factory.mktemp("gated"), PROGRAMS) as paths:
        yield paths


@pytest.mark.parametrize("name", ["rows", "bool_not", "columns"])
def test_an_arithmetic_select_computes_one_product_per_element(capsys, files, name):
    r = roofline_json(capsys, files[name])
    assert r["validation"]["validated"], r["validation"]
    assert r["totals"]["flops_matrix"] == 2 * N**3
    assert r["classical"]["totals"]["flops_matrix"] == 4 * N**3
    assert "value-dependent select computes one branch" in {w["kind"] for w in r["rewrites"]}
    assert fused(r) >= 2 * N**3 / BF16 * (1 - 1e-9)


def test_two_independent_gates_keep_both_products(capsys, files):
    r = roofline_json(capsys, files["two_gates"])
    assert r["totals"]["flops_matrix"] == 4 * N**3
    assert not any("select" in w["kind"] for w in r["rewrites"])


def test_a_shared_factor_read_through_a_transpose_is_multiplied_once(capsys, files):
    # x @ w + x @ w.t(): one product with w + w.t() (N^2 additions), not two
    r = roofline_json(capsys, files["transpose"])
    assert (r["totals"]["flops_matrix"], r["totals"]["flops_vector"]) == (2 * N**3, N * N)
    assert [w["kind"] for w in r["rewrites"]] == ["shared factor", "shared factor"]
    assert r["classical"]["totals"]["flops_matrix"] == 4 * N**3
    assert r["validation"]["validated"]


@pytest.mark.parametrize("name", ["cat_flip", "cat_flip_columns"])
def test_copies_of_one_source_multiply_its_products_once(capsys, files, name):
    # 2 N x N times N x N as written: 4 N^3 FLOPs; the distinct products are those of x @ w: 2 N^3
    r = roofline_json(capsys, files[name])
    assert r["validation"]["validated"], r["validation"]
    assert r["totals"]["flops_matrix"] == 2 * N**3
    assert [w["kind"] for w in r["rewrites"]] == ["distinct products"]
    assert r["classical"]["totals"]["flops_matrix"] == 4 * N**3
    # eager's matmul kernel reads the concatenated tensor: the unfused bound keeps every product
    assert r["bounds"]["H100_SXM"]["unfused_s"] >= 4 * N**3 / BF16


def test_copies_of_two_sources_keep_every_product(capsys, files):
    r = roofline_json(capsys, files["cat_two_sources"])
    assert r["totals"]["flops_matrix"] == 4 * N**3
    assert r["rewrites"] == []
