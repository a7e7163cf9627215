"""Issue 21: the model of computation and the catalogue of rewrites (`analysis/catalogue.py`). Each
program is a row of the issue's table; each test failed before the catalogue (the printed fused bound
was the classical one) and asserts the default bound at or below the issue's hand-derived lower bound,
with exact FLOPs and bytes where they are derivable, and `--algorithms classical` unchanged.

Figures on H100_SXM: BF16 989.4 TFLOP/s dense, DRAM 3.35 TB/s. A MAC is 2 FLOPs.
"""

from __future__ import annotations

import pytest
from translated import cached_translations, roofline_json

from solar_compiler.report import render_text

BW = 3.35e12
BF16 = 989.4e12
N = 4096

HEAD = """import torch
import torch.nn as nn
N = 4096
def get_init_inputs():
    return []
"""

CHAIN = HEAD + """class Model(nn.Module):
    def forward(self, a, b, v):
        return (a @ b) @ v
def get_inputs():
    bf = torch.bfloat16
    return [torch.randn(N, N, dtype=bf), torch.randn(N, N, dtype=bf), torch.randn(N, 1, dtype=bf)]
"""

SUM = HEAD + """class Model(nn.Module):
    def forward(self, x, w):
        return (x @ w).sum(-1)
def get_inputs():
    return [torch.randn(N, N, dtype=torch.bfloat16), torch.randn(N, N, dtype=torch.bfloat16)]
"""

PROGRAMS = {"chain": CHAIN, "sum": SUM}


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    pytest.importorskip("torch")
    tmp = tmp_path_factory.mktemp("catalogue")
    paths = {}
    for name, text in PROGRAMS.items():
        (tmp / f"{name}.py").write_text(text)
        paths[name] = str(tmp / f"{name}.py")
    with cached_translations(tmp / "xdg", paths):
        yield paths


def fused(r: dict) -> float:
    return r["bounds"]["H100_SXM"]["fused_s"]


# ---- association of contraction trees ------------------------------------------------------------------
def test_a_chain_is_priced_in_its_cheapest_association(capsys, files):
    # (a @ b) @ v, bf16, a, b 4096 x 4096, v 4096 x 1: printed 138.9 us (2 N^3 + 2 N^2 FLOPs at BF16);
    # a @ (b @ v) needs 2 x 2 N^2 FLOPs, and the bound is the compulsory traffic: a, b, v read, out written
    r = roofline_json(capsys, files["chain"])
    compulsory = (2 * N * N + 2 * N) * 2
    assert r["totals"]["bytes_fused"] == compulsory
    assert r["totals"]["flops_matrix"] == 2 * 2 * N * N
    assert fused(r) == pytest.approx(compulsory / BW) and fused(r) <= 20.04e-6
    assert r["bounds"]["H100_SXM"]["fused_bottleneck"] == "memory"
    assert r["algorithms"] == "default"
    assert [(w["kind"], w["what"]) for w in r["rewrites"]] == [("reassociated", "(a * (b * v))")]
    # the figure as written is carried beside it, and is the classical report's
    as_written = (2 * N**3 + 2 * N * N) / BF16
    assert r["classical"]["bounds"]["H100_SXM"]["fused_s"] == pytest.approx(as_written)
    c = roofline_json(capsys, files["chain"], "--algorithms", "classical")
    assert fused(c) == pytest.approx(as_written) and c["rewrites"] == [] and c["algorithms"] == "classical"
    assert c["bounds"] == c["classical"]["bounds"] == r["classical"]["bounds"]
    text = render_text(r)
    assert "model:      default: any order, fusion and tiling, and the catalogue of rewrites" in text
    assert "priced as reassociated: (a * (b * v))" in " ".join(text.split())
    assert "model:      classical: the products as written" in render_text(c)


def test_a_sum_of_a_product_is_a_contraction_with_ones(capsys, files):
    # (x @ w).sum(-1): printed 138.9 us; x @ w.sum(-1) needs N^2 additions and 2 N^2 matrix FLOPs
    r = roofline_json(capsys, files["sum"])
    compulsory = 2 * N * N * 2 + N * 2
    assert r["totals"]["bytes_fused"] == compulsory
    assert fused(r) == pytest.approx(compulsory / BW) and fused(r) <= 20.04e-6
    assert [w["kind"] for w in r["rewrites"]] == ["reassociated"]
    assert r["classical"]["bounds"]["H100_SXM"]["fused_s"] == pytest.approx(2 * N**3 / BF16, rel=1e-3)
