"""Issue 21: a contraction with a one-hot (indicator) factor is a gather (`transforms/indicator_gather.py`,
an entry of the default model's catalogue). Each program failed before the entry: the printed fused
bound priced every product of the one-hot matrix.

Figures on H100_SXM: DRAM 3.35 TB/s. A gather whose trace never ran counts its rows at their fewest (one
row per loaded index), so the bytes are: the output, the index tensor, one row of the gathered tensor.
"""

from __future__ import annotations

import textwrap

import numpy as np
import pytest
from translated import roofline_json, translated_programs
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp

from solar_compiler.analysis.graphs import module_graphs
from solar_compiler.dialects.convert import kernels_to_module
from solar_compiler.dialects.graph_convert import graph_to_kernel
from solar_compiler.executor import execute
from solar_compiler.passes.lift_einsum import LiftEinsumPass
from solar_compiler.records import ProgramInfo
from solar_compiler.report import render_text
from solar_compiler.text.parser import parse_kernels
from solar_compiler.transforms.catalogue import catalogue_module
from solar_compiler.transforms.gather_hoist import HOISTED
from solar_compiler.transforms.indicator_gather import GATHERED

BW = 3.35e12
V, D, B = 64, 32, 16

TORCH = """import torch
import torch.nn.functional as F
V, D, B = {V}, {D}, {B}
class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.W = torch.nn.Parameter(torch.randn(V, D))
    def forward(self, idx):
        return {expr}
def get_inputs():
    return [torch.randint(0, V, ({idx_shape}))]
def get_init_inputs():
    return []
"""


def program(expr: str, v: int = V, d: int = D, b: int = B, idx_shape: str = "B,") -> str:
    return TORCH.format(V=v, D=d, B=b, expr=expr, idx_shape=idx_shape)


EYE_ROWS = f"""import torch
V, D, B = {V}, {D}, {B}
class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.W = torch.nn.Parameter(torch.randn(V, D))
        self.register_buffer("E", torch.eye(V))
    def forward(self, idx):
        return self.E[idx] @ self.W  # the one-hot idiom: rows of an identity buffer
def get_inputs():
    return [torch.randint(0, V, (B,))]
def get_init_inputs():
    return []
"""
GATHERS = {
    "one_hot": program("F.one_hot(idx, V).float() @ self.W"),
    "arange_eq": program("(idx[:, None] == torch.arange(V)).float() @ self.W"),
    "scatter": program("torch.zeros(B, V).scatter_(1, idx[:, None], 1.0) @ self.W"),
    "einsum": program("torch.einsum('bv,vd->bd', F.one_hot(idx, V).float(), self.W)"),
    "transposed": program("self.W.t() @ F.one_hot(idx, V).float().t()"),
    "reshaped": program("F.one_hot(idx.view(4, 4), V).float() @ self.W"),
    "where": program("torch.where(idx[:, None] == torch.arange(V), 1.0, 0.0) @ self.W"),
    "eye_rows": EYE_ROWS,
}
KEPT = {  # not indicators: a prefix mask, two ones per row, a scaled one-hot
    "prefix": program("(idx[:, None] <= torch.arange(V)).float() @ self.W"),
    "two_per_row": program("torch.zeros(B, V).scatter_(1, torch.stack([idx, (idx + 1) % V], 1), 1.0) "
                           "@ self.W"),
    "scaled": program("(F.one_hot(idx, V).float() * 2.0) @ self.W"),
}
ISSUE = program("F.one_hot(idx, V).float() @ self.W", v=4096, d=1024, b=512)  # the issue's figure
CHAIN = """import torch
import torch.nn.functional as F
class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.W1 = torch.nn.Parameter(torch.randn(256, 64))
        self.W2 = torch.nn.Parameter(torch.randn(64, 256))
    def forward(self, idx):
        return F.one_hot(idx, 256).float() @ self.W1 @ self.W2
def get_inputs():
    return [torch.randint(0, 256, (32,))]
def get_init_inputs():
    return []
"""


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    pytest.importorskip("torch")
    programs = {**GATHERS, **KEPT, "issue": ISSUE, "chain": CHAIN}
    with translated_programs(tmp_path_factory.mktemp("onehot"), programs) as paths:
        yield paths


def fused(r: dict) -> float:
    return r["bounds"]["H100_SXM"]["fused_s"]


def test_the_issue_one_hot_product_is_priced_as_an_embedding_lookup(capsys, files):
    # F.one_hot(idx, 4096).float() @ W, W 4096 x 1024 f32, 512 indices: printed 8.68 us as written (TF32);
    # a gather reads idx (4 KB), at least one row of W (4 KB) and writes the output (2 MB): 0.63 us
    r = roofline_json(capsys, files["issue"])
    nbytes = 512 * 1024 * 4 + 512 * 8 + 1024 * 4
    assert r["totals"]["bytes_fused"] == nbytes == 2_105_344
    assert r["totals"]["flops_matrix"] == 0
    assert fused(r) == pytest.approx(nbytes / BW) and fused(r) <= 0.63e-6
    assert [w["kind"] for w in r["rewrites"]] == [GATHERED]
    assert r["rewrites"][0]["what"] == "mm[i0, i1] += W[idx[i0], i1]"
    assert r["rewrites"][0]["flops_before"] == 2 * 512 * 1024 * 4096
    assert r["classical"]["bounds"]["H100_SXM"]["fused_s"] == pytest.approx(8.68e-6, rel=1e-3)
    assert "priced as one-hot contraction as a gather: mm[i0, i1] += W[idx[i0], i1]" in \
        " ".join(render_text(r).split())
    c = roofline_json(capsys, files["issue"], "--algorithms", "classical")
    assert c["rewrites"] == [] and c["bounds"] == r["classical"]["bounds"]
    # eager runs one_hot, the cast and the GEMM as written: the unfused bound is unchanged
    assert r["bounds"]["H100_SXM"]["unfused_s"] == c["bounds"]["H100_SXM"]["unfused_s"]


@pytest.mark.parametrize("name", sorted(GATHERS))
def test_every_form_of_a_one_hot_product_is_a_gather(capsys, files, name):
    r = roofline_json(capsys, files[name])
    assert [w["kind"] for w in r["rewrites"]] == [GATHERED]
    assert r["totals"]["flops_matrix"] == 0
    # output 16 x 32 f32, the 16 i64 indices, one row of W (32 f32)
    assert r["totals"]["bytes_fused"] == B * D * 4 + B * 8 + D * 4 == 2_304
    assert r["classical"]["totals"]["flops_matrix"] == 2 * B * D * V


@pytest.mark.parametrize("name", sorted(KEPT))
def test_a_product_with_a_factor_that_is_no_indicator_is_kept(capsys, files, name):
    r = roofline_json(capsys, files[name])
    assert GATHERED not in [w["kind"] for w in r["rewrites"]]
    assert r["totals"]["flops_matrix"] == 2 * B * D * V


def test_the_gather_comes_before_the_association_of_the_chain(capsys, files):
    # one_hot @ W1 @ W2: the rows of W1 are gathered (no products), then 32 x 64 x 256 products remain;
    # associating first (one_hot @ (W1 @ W2)) would need 256 x 64 x 256 of them
    r = roofline_json(capsys, files["chain"])
    assert [w["kind"] for w in r["rewrites"]] == [GATHERED]
    assert r["totals"]["flops_matrix"] == 2 * 32 * 64 * 256


# ---- the rewritten graph computes what the program computes ---------------------------------------------
CTX = Context()

LOOP_FORMS = {
    "cmp": """\
        kernel k(idx: i64[16] input, W: f32[64, 32] weight, Y: f32[16, 32] output):
            local H: bool[16, 64]
            local F: f32[16, 64]
            for i in range(16):
                for v in range(64):
                    H[i, v] = idx[i] == v
            for i in range(16):
                for v in range(64):
                    F[i, v] = f32(H[i, v])
            for i in range(16):
                for d in range(32):
                    Y[i, d] = 0.0
                    for v in range(64):
                        Y[i, d] += F[i, v] * W[v, d]
        """,
    # the key is arithmetic on the index, the indicator is transposed, the product has three factors
    "select": """\
        kernel k(idx: i64[16] input, W: f32[64, 32] weight, s: f32[32] weight, Y: f32[32, 16] output):
            local F: f32[64, 16]
            for v in range(64):
                for i in range(16):
                    F[v, i] = select((idx[i] + 3) % 64 == v, 1.0, 0.0)
            for d in range(32):
                for i in range(16):
                    Y[d, i] = 0.0
                    for v in range(64):
                        Y[d, i] += s[d] * (W[v, d] * F[v, i])
        """,
    # inline: the indicator is computed in the product's own body, against a table of keys (a
    # selection buffer, frontends/torch/masks.py), as a select or a cast of the comparison
    "inline_select": """\
        kernel k(idx: i64[32] weight, W: f32[16, 64] input, Y: f32[16, 32] output):
            for i in range(16):
                for d in range(32):
                    Y[i, d] = 0.0
                    for v in range(64):
                        Y[i, d] += W[i, v] * select(v == idx[d], 1.0, 0.0)
        """,
    "inline_cast": """\
        kernel k(idx: i64[32] weight, W: f32[64, 16] input, Y: f32[32, 16] output):
            for d in range(32):
                for i in range(16):
                    Y[d, i] = 0.0
                    for v in range(64):
                        Y[d, i] += f32(idx[d] == v) * W[v, i]
        """,
    "scatter": """\
        kernel k(idx: i64[16, 1] input, W: f32[64, 32] weight, Y: f32[16, 32] output):
            local F: f32[16, 64]
            for i in range(16):
                for v in range(64):
                    F[i, v] = 0.0
            for i in range(16):
                for j in range(1):
                    F[i, idx[i, j]] = 1.0
            for i in range(16):
                for d in range(32):
                    Y[i, d] = 0.0
                    for v in range(64):
                        Y[i, d] += F[i, v] * W[v, d]
        """,
}


def lifted(text: str) -> ModuleOp:
    (k,) = parse_kernels(textwrap.dedent(text), "t.loop")
    m = kernels_to_module([k])
    ProgramInfo("t.loop", "loop-text").store(m)
    LiftEinsumPass().apply(CTX, m)
    return m


@pytest.mark.parametrize("name", sorted(LOOP_FORMS))
def test_the_gather_computes_the_contraction(name):
    m = lifted(LOOP_FORMS[name])
    priced, rewrites = catalogue_module(m)
    assert [r.kind for r in rewrites] == [GATHERED]
    (before,), (after,) = module_graphs(m), module_graphs(priced)
    kb, ka = graph_to_kernel(before)[0], graph_to_kernel(after)[0]
    # the indicator's nodes are gone with their locals; the contraction has lost its reduced loop
    assert {t.name for t in ka.tensors} == {t.name for t in kb.tensors if t.role != "local"}
    rng = np.random.default_rng(0)
    for _ in range(3):
        feed = {t.name: rng.standard_normal(t.shape).astype(np.float32) for t in kb.tensors
                if t.role in ("input", "weight") and t.dtype == "f32"}
        idx = next(t for t in kb.tensors if t.name == "idx")
        feed["idx"] = rng.integers(0, 64, idx.shape)
        want, got = execute(kb, feed), execute(ka, feed)
        np.testing.assert_array_equal(got["Y"], want["Y"])  # one nonzero term per sum: exact
    # statements without a source op are no eager kernel: the unfused fidelity keeps them as written
    assert catalogue_module(m, within_source_ops=True)[1] == []


def test_a_loop_that_bounds_by_the_reduced_variable_is_kept():
    # a triangle: the indicator's variable bounds the next loop, so it cannot leave the node
    m = lifted("""\
        kernel k(idx: i64[16] input, W: f32[64, 64] weight, Y: f32[16] output):
            local F: f32[16, 64]
            for i in range(16):
                for v in range(64):
                    F[i, v] = f32(idx[i] == v)
            for i in range(16):
                Y[i] = 0.0
                for v in range(64):
                    for u in range(v + 1):
                        Y[i] += F[i, v] * W[v, u]
        """)
    # no gather; the association still sums W's triangle rows first (u is W's alone): F @ rowsum
    assert [r.kind for r in catalogue_module(m)[1]] == ["reassociated"]


@pytest.mark.parametrize("body", [
    "W[i, v] * select(v == idx[d], 1.0, 0.0) * f32(v)",  # the indicator's variable is used elsewhere too
    "W[i, v] * select(v == idx[v], 1.0, 0.0)",           # the key depends on the indicator's variable
    "W[i, v] * select(v == idx[d], 2.0, 0.0)",           # a scaled indicator
    "W[i, v] * select(v <= idx[d], 1.0, 0.0)",           # no equality
])
def test_an_inline_factor_that_is_no_indicator_is_kept(body):
    m = lifted(f"""\
        kernel k(idx: i64[64] weight, W: f32[16, 64] input, Y: f32[16, 64] output):
            for i in range(16):
                for d in range(64):
                    Y[i, d] = 0.0
                    for v in range(64):
                        Y[i, d] += {body}
        """)
    assert catalogue_module(m)[1] == []


# ---- gathers of a computed tensor, hoisted into the node that computes it -----------------------------
ROWS = """\
    kernel r(x: f32[64, 32] input, w: f32[32, 48] input, idx: i64[8] input, Y: f32[8, 48] output):
        local T: f32[64, 48]
        local R: f32[64, 48]
        for i in range(64):
            for j in range(48):
                T[i, j] = 0.0
                for k in range(32):
                    T[i, j] += x[i, k] * w[k, j]
        for i in range(64):
            for j in range(48):
                R[i, j] = max(T[i, j], 0.0)
        for a in range(8):
            for j in range(48):
                Y[a, j] = R[idx[a], j] * 2.0
    """


def run_pair(text: str, idx_hi: int):
    m = lifted(text)
    priced, rewrites = catalogue_module(m)
    (before,), (after,) = module_graphs(m), module_graphs(priced)
    kb, ka = graph_to_kernel(before)[0], graph_to_kernel(after)[0]
    rng = np.random.default_rng(1)
    for _ in range(3):
        feed = {t.name: rng.standard_normal(t.shape).astype(np.float32) for t in kb.tensors
                if t.role in ("input", "weight") and t.dtype == "f32"}
        feed["idx"] = rng.integers(0, idx_hi, next(t for t in kb.tensors if t.name == "idx").shape)
        want, got = execute(kb, feed), execute(ka, feed)
        for name in want:
            # the same products and sums; numpy's BLAS may block a product of 8 rows and one of 64
            # differently (AVX2: the last bits of 24% of the outputs differ), so to float32 rounding
            np.testing.assert_allclose(got[name], want[name], rtol=1e-5, atol=1e-5)
    return rewrites, ka


def test_a_gathered_product_computes_only_the_gathered_rows():
    rewrites, ka = run_pair(ROWS, 64)
    # relu's rows first, then the product's: 8 rows of 48 outputs of 32 products each
    assert [(r.kind, r.what) for r in rewrites] == [
        (HOISTED, "R_rows[a, j] = max(T[idx[a], j], 0.0)"),
        (HOISTED, "T_rows[a, j] += x[idx[a], k] * w[k, j]")]
    assert (rewrites[1].flops_before, rewrites[1].flops_after) == (2 * 64 * 48 * 32, 2 * 8 * 48 * 32)
    assert {t.name for t in ka.tensors if t.role == "local"} == {"T_rows", "R_rows"}


def test_a_product_read_elsewhere_too_is_computed_whole():
    # Y also reads T at its own rows: relu's gathered rows are computed alone, the product is not
    text = ROWS.replace("Y[a, j] = R[idx[a], j] * 2.0", "Y[a, j] = R[idx[a], j] * T[a, j]")
    rewrites, _ = run_pair(text, 64)
    assert [(r.kind, r.what) for r in rewrites] == [(HOISTED, "R_rows[a, j] = max(T[idx[a], j], 0.0)")]


def test_a_gather_of_as_many_rows_as_the_tensor_is_kept():
    text = ROWS.replace("idx: i64[8] input, Y: f32[8, 48]", "idx: i64[64] input, Y: f32[64, 48]") \
        .replace("for a in range(8)", "for a in range(64)")
    rewrites, _ = run_pair(text, 64)
    assert rewrites == []


def test_a_gather_inside_a_scan_is_kept():
    # the reader runs inside a scan loop: a producer of its rows would run in loops of its own,
    # outside the scan's interleaved steps, so nothing is hoisted
    text = ROWS.replace("for a in range(8):", "for a in scan(8):")
    rewrites, _ = run_pair(text, 64)
    assert rewrites == []
