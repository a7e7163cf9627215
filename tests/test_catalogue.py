"""Issue 21: the model of computation and the catalogue of rewrites (`transforms/catalogue.py`). Each
program is a row of the issue's table; each test failed before the catalogue (the printed fused bound
was the classical one) and asserts the default bound at or below the issue's hand-derived lower bound,
with exact FLOPs and bytes where they are derivable, and `--algorithms classical` unchanged.

Figures on H100_SXM: BF16 989.4 TFLOP/s dense, DRAM 3.35 TB/s. A MAC is 2 FLOPs.
"""

from __future__ import annotations

import pytest
from translated import fused_terms as fused
from translated import roofline_json, translated_programs

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

BROADCAST = """import torch
import torch.nn as nn
class Model(nn.Module):
    def forward(self, dt, A):
        dA = dt * A
        return dA[..., None, None].expand(-1, -1, -1, 16, 16)
def get_inputs():
    return [torch.rand(2, 64, 8), -torch.rand(8)]
def get_init_inputs():
    return []
"""

BROADCAST_B200 = BROADCAST.replace("torch.rand(2, 64, 8), -torch.rand(8)", "torch.rand(2, 512, 128), "
                                   "-torch.rand(128)").replace("16, 16", "128, 128")

KV_CACHE = """import torch
import torch.nn as nn
S, T, H, D = 1024, 16, 8, 128
class Model(nn.Module):
    def forward(self, key_cache, value_cache, key_rotated, value_states, cache_position):
        key_cache[:, :, cache_position] = key_rotated
        value_cache[:, :, cache_position] = value_states
        return key_cache, value_cache
def get_inputs():
    bf = torch.bfloat16
    return [torch.zeros(1, H, S, D, dtype=bf), torch.zeros(1, H, S, D, dtype=bf),
            torch.randn(1, H, T, D, dtype=bf), torch.randn(1, H, T, D, dtype=bf), torch.arange(100, 100 + T)]
def get_init_inputs():
    return []
"""

KV_CACHE_B200 = KV_CACHE.replace("S, T, H, D = 1024, 16, 8, 128", "S, T, H, D = 262144, 1024, 8, 128")

CSE = HEAD.replace("N = 4096", "N = 2048") + """class Model(nn.Module):
    def forward(self, x, w):
        return (x @ w) + (x @ w)
def get_inputs():
    return [torch.randn(N, N, dtype=torch.bfloat16), torch.randn(N, N, dtype=torch.bfloat16)]
"""

SHARED = HEAD.replace("N = 4096", "N = 2048") + """class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(N, N, bias=False, dtype=torch.bfloat16)
        self.b = nn.Linear(N, N, bias=False, dtype=torch.bfloat16)
    def forward(self, x):
        return self.a(x) - self.b(x)
def get_inputs():
    return [torch.randn(N, N, dtype=torch.bfloat16)]
"""

EXPAND = HEAD.replace("N = 4096", "N = 2048") + """class Model(nn.Module):
    def forward(self, x, w):
        return torch.matmul(x.unsqueeze(0).expand(8, -1, -1), w)
def get_inputs():
    return [torch.randn(N, N, dtype=torch.bfloat16), torch.randn(N, N, dtype=torch.bfloat16)]
"""

REPEAT = HEAD.replace("N = 4096", "N = 2048") + """class Model(nn.Module):
    def forward(self, x, w):
        return x.repeat(8, 1) @ w
def get_inputs():
    return [torch.randn(N // 2, N, dtype=torch.bfloat16), torch.randn(N, N, dtype=torch.bfloat16)]
"""

CAT = HEAD.replace("N = 4096", "N = 2048") + """class Model(nn.Module):
    def forward(self, x, w):
        return torch.cat([x, x, x, x], 0) @ w, torch.stack([x, x]) @ w, x.repeat(2, 1)
def get_inputs():
    return [torch.randn(N // 2, N, dtype=torch.bfloat16), torch.randn(N, N, dtype=torch.bfloat16)]
"""

SLICE_UPDATE = """import torch
import torch.nn as nn
S, D = 4096, 128
class Model(nn.Module):
    def forward(self, cache, new, x):
        cache[100:116] = new
        x[:, :8].mul_(2.0)
        return cache, x
def get_inputs():
    bf = torch.bfloat16
    return [torch.randn(S, D, dtype=bf), torch.randn(16, D, dtype=bf), torch.randn(S, D, dtype=bf)]
def get_init_inputs():
    return []
"""

GRAM = HEAD.replace("N = 4096", "N = 2048") + """class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.l = nn.Linear(N, N, bias=False, dtype=torch.bfloat16)
    def forward(self, x):
        return self.l(x) @ self.l(x).t()
def get_inputs():
    return [torch.randn(N, N, dtype=torch.bfloat16)]
"""

SYRK = HEAD + """class Model(nn.Module):
    def forward(self, x, y):
        return x @ x.t(), y.t() @ y
def get_inputs():
    return [torch.randn(N, N, dtype=torch.bfloat16), torch.randn(N, N, dtype=torch.bfloat16)]
"""

SYRKX = HEAD.replace("N = 4096", "N = 1024") + """class Model(nn.Module):
    def forward(self, x, d, y):
        return (x * d) @ x.t(), (x * d[:, None]) @ x.t(), (x * y) @ x.t()
def get_inputs():
    bf = torch.bfloat16
    return [torch.randn(N, N, dtype=bf), torch.rand(N, dtype=bf), torch.randn(N, N, dtype=bf)]
"""

SUM_PLUS = """import torch
import torch.nn as nn
N = 8192
class Model(nn.Module):
    def forward(self, a, b, s):
        return (a[:, None] + b[None, :]).sum(1), (1 - s).mean(-1)
def get_inputs():
    return [torch.randn(N), torch.randn(N), torch.randn(1024, N)]
def get_init_inputs():
    return []
"""

BSHIFT = """import torch
import torch.nn as nn
N = 512
class Model(nn.Module):
    def forward(self, x, c, w):
        return (x[None] + c[:, None, None]) @ w
def get_inputs():
    bf = torch.bfloat16
    return [torch.randn(N, N, dtype=bf), torch.randn(8, dtype=bf), torch.randn(N, N, dtype=bf)]
def get_init_inputs():
    return []
"""

OUTER_SUM = """import torch
import torch.nn as nn
N = 8192
class Model(nn.Module):
    def forward(self, a, b):
        return (a[:, None] * b[None, :]).sum(1)
def get_inputs():
    return [torch.randn(N), torch.randn(N)]
def get_init_inputs():
    return []
"""

EINSUM_OUTER = OUTER_SUM.replace("N = 8192", "N = 16384").replace(
    "return (a[:, None] * b[None, :]).sum(1)", 'return torch.einsum("i,j->", a, b)')

EYE = """import torch
import torch.nn as nn
N = 2048
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("E", torch.eye(N))
    def forward(self, x):
        return x @ self.E
def get_inputs():
    return [torch.randn(N, N)]
def get_init_inputs():
    return []
"""

BAND = """import torch
import torch.nn as nn
T, K, W = 256, 64, 16
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        ones = torch.ones(T, T)
        self.register_buffer("band", torch.tril(ones) - torch.tril(ones, -W))
    def forward(self, x, y):
        return (x @ y) * self.band
def get_inputs():
    return [torch.randn(T, K), torch.randn(K, T)]
def get_init_inputs():
    return []
"""

CONV = """import torch
import torch.nn as nn
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(256, 256, 3, padding=1)
    def forward(self, x):
        return self.conv(x)
def get_inputs():
    return [torch.randn(8, 256, 32, 32)]
def get_init_inputs():
    return []
"""

SDPA8 = """import torch
import torch.nn as nn
import torch.nn.functional as F
class Model(nn.Module):
    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v)
def get_inputs():
    return [torch.randn(2, 8, 1024, 8), torch.randn(2, 8, 1024, 8), torch.randn(2, 8, 1024, 8)]
def get_init_inputs():
    return []
"""

WHERE = HEAD.replace("N = 4096", "N = 2048") + """class Model(nn.Module):
    def forward(self, m, x, w1, w2):
        return torch.where(m, x @ w1, x @ w2)
def get_inputs():
    bf = torch.bfloat16
    return [torch.rand(N, 1) > 0.5, torch.randn(N, N, dtype=bf), torch.randn(N, N, dtype=bf),
            torch.randn(N, N, dtype=bf)]
"""

WHERE_TAILS = HEAD.replace("N = 4096", "N = 256") + """import torch.nn.functional as F
class Model(nn.Module):
    def forward(self, m, x, w1, w2):
        return torch.where(m[:, None], F.relu(x @ w1), F.relu(x @ w2) * 2.0)
def get_inputs():
    bf = torch.bfloat16
    return [torch.rand(N) > 0.5, torch.randn(N, N, dtype=bf), torch.randn(N, N, dtype=bf),
            torch.randn(N, N, dtype=bf)]
"""

KEEPDIM_VIEW = """import torch
import torch.nn as nn
class Model(nn.Module):
    def forward(self, x):
        return x.sum(-1, keepdim=True).expand(-1, 512)
def get_inputs():
    return [torch.randn(256, 512)]
def get_init_inputs():
    return []
"""

CAUSAL = """import torch
import torch.nn as nn
class Model(nn.Module):
    def forward(self, q, k, v):
        t = q.shape[-2]
        s = (q @ k.transpose(-1, -2)) * 0.125
        s = s.masked_fill(~torch.ones(t, t, dtype=torch.bool).tril(), float("-inf"))
        return torch.softmax(s, dim=-1) @ v
def get_inputs():
    return [torch.randn(1, 4, 2048, 64, dtype=torch.bfloat16) for _ in range(3)]
def get_init_inputs():
    return []
"""

BLOCK_DIAG = HEAD.replace("N = 4096", "N = 2048") + """class Model(nn.Module):
    def forward(self, x, w1, w2):
        return x @ torch.block_diag(w1, w2)
def get_inputs():
    bf = torch.bfloat16
    return [torch.randn(N, N, dtype=bf), torch.randn(N // 2, N // 2, dtype=bf),
            torch.randn(N // 2, N // 2, dtype=bf)]
"""

BCAST_SUM = HEAD.replace("N = 4096", "N = 1024") + """class Model(nn.Module):
    def forward(self, x, w):
        return (x.unsqueeze(2) * w.unsqueeze(0)).sum(1)
def get_inputs():
    return [torch.randn(N, N, dtype=torch.bfloat16), torch.randn(N, N, dtype=torch.bfloat16)]
"""

GATHERED_ROWS = HEAD.replace("N = 4096", "N = 2048") + """class Model(nn.Module):
    def forward(self, x, w, idx):
        return torch.relu(x @ w)[idx]
def get_inputs():
    bf = torch.bfloat16
    return [torch.randn(N, N, dtype=bf), torch.randn(N, N, dtype=bf), torch.randint(0, N, (16,))]
"""

SUM_LOOP = HEAD.replace("N = 4096", "N = 2048") + """class Model(nn.Module):
    def forward(self, x, w):
        y = x @ w[0]
        for i in range(1, 4):
            y = y + x @ w[i]
        return y
def get_inputs():
    return [torch.randn(N, N, dtype=torch.bfloat16), torch.randn(4, N, N, dtype=torch.bfloat16)]
"""

# the same broadcast made contiguous: `.contiguous()` of a stride-0 view is a copy (`aten.clone`), which
# eager writes in full
BROADCAST_COPY = BROADCAST.replace(".expand(-1, -1, -1, 16, 16)",
                                   ".expand(-1, -1, -1, 16, 16).contiguous()")

PROGRAMS = {"sum_loop": SUM_LOOP, "broadcast_copy": BROADCAST_COPY, "block_diag": BLOCK_DIAG,
            "bcast_sum": BCAST_SUM,
            "gathered_rows": GATHERED_ROWS,
            "causal": CAUSAL, "conv": CONV, "sdpa8": SDPA8, "where": WHERE, "where_tails": WHERE_TAILS,
            "keepdim_view": KEEPDIM_VIEW,
            "eye": EYE, "band": BAND, "outer_sum": OUTER_SUM, "cse": CSE, "shared": SHARED, "expand": EXPAND,
            "repeat": REPEAT, "cat": CAT, "gram": GRAM,
            "syrk": SYRK, "syrkx": SYRKX, "sum_plus": SUM_PLUS, "bshift": BSHIFT,
            "einsum_outer": EINSUM_OUTER, "chain": CHAIN, "sum": SUM,
            "broadcast": BROADCAST,
            "broadcast_b200": BROADCAST_B200, "kv_cache": KV_CACHE, "slice_update": SLICE_UPDATE,
            "kv_cache_b200": KV_CACHE_B200}


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    pytest.importorskip("torch")
    with translated_programs(tmp_path_factory.mktemp("catalogue"), PROGRAMS) as paths:
        yield paths


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
    assert "model:      default (any order, fusion and tiling, and the catalogue of rewrites" in text
    assert "priced as reassociated: (a * (b * v))" in " ".join(text.split())
    assert "model:      classical (the products as written" in render_text(c)


def test_a_sum_of_a_product_is_a_contraction_with_ones(capsys, files):
    # (x @ w).sum(-1): printed 138.9 us; x @ w.sum(-1) needs N^2 additions and 2 N^2 matrix FLOPs
    r = roofline_json(capsys, files["sum"])
    compulsory = 2 * N * N * 2 + N * 2
    assert r["totals"]["bytes_fused"] == compulsory
    assert fused(r) == pytest.approx(compulsory / BW) and fused(r) <= 20.04e-6
    assert [w["kind"] for w in r["rewrites"]] == ["reassociated"]
    assert r["classical"]["bounds"]["H100_SXM"]["fused_s"] == pytest.approx(2 * N**3 / BF16, rel=1e-3)


def test_distributivity_sums_a_factor_alone(capsys, files):
    # (a[:, None] * b[None, :]).sum(1), f32 8192: printed 2.01 us (8192^2 products); a * b.sum() needs
    # the compulsory traffic only (a, b read, the output written): 98,304 B = 29.3 ns
    n = 8192
    r = roofline_json(capsys, files["outer_sum"])
    assert r["totals"]["bytes_fused"] == 3 * n * 4
    assert fused(r) == pytest.approx(3 * n * 4 / BW) and fused(r) <= 29.35e-9
    assert [(w["kind"], w["what"]) for w in r["rewrites"]] == [("reassociated", "(a * sum(b))")]
    assert r["classical"]["bounds"]["H100_SXM"]["fused_s"] == pytest.approx(2.006e-6, rel=1e-3)



def test_one_product_summing_a_variable_of_one_factor_sums_it_alone(capsys, files):
    # einsum("i,j->", a, b), f32 16384, one node: 2 x 16384^2 matrix FLOPs as written (1.09 us on
    # H100); sum(a) * sum(b) is 16384 additions each and one product, and the traffic binds
    n = 16384
    r = roofline_json(capsys, files["einsum_outer"])
    assert r["totals"]["flops"] == 2 * n + 2
    assert r["classical"]["totals"]["flops_matrix"] == 2 * n * n
    assert [w["kind"] for w in r["rewrites"]] == ["reassociated"]
    assert fused(r) <= 141e-9 + 1e-12


# ---- deduplication: CSE, broadcast and repeated operands, symmetric products ---------------------------
def test_identical_contractions_are_computed_once(capsys, files):
    # (x @ w) + (x @ w), bf16 2048: printed 34.7 us (two matmuls); one suffices: 2 N^3 at BF16 = 17.4 us
    n = 2048
    r = roofline_json(capsys, files["cse"])
    assert r["totals"]["flops_matrix"] == 2 * n**3
    assert fused(r) == pytest.approx(2 * n**3 / BF16) and fused(r) <= 17.4e-6
    assert [w["kind"] for w in r["rewrites"]] == ["common subexpression"]
    assert r["classical"]["totals"]["flops_matrix"] == 4 * n**3


def test_a_shared_factor_is_multiplied_once(capsys, files):
    # a(x) - b(x), two bias-free bf16 Linear 2048: printed 34.7 us (two matmuls and N^2 subtractions);
    # x @ (A - B)^T needs one matmul, 2 N^3 at BF16 = 17.4 us, after N^2 subtractions of the weights
    n = 2048
    r = roofline_json(capsys, files["shared"])
    assert (r["totals"]["flops_matrix"], r["totals"]["flops_vector"]) == (2 * n**3, n * n)
    assert fused(r) == pytest.approx(2 * n**3 / BF16, rel=1e-3) and fused(r) <= 17.4e-6
    assert [(w["kind"], w["what"]) for w in r["rewrites"]] == \
        [("shared factor", "b"), ("shared factor", "sub")]
    assert r["classical"]["totals"]["flops_matrix"] == 4 * n**3
    # eager runs the two linears and the subtraction as three kernels: the unfused bound keeps both
    assert r["bounds"]["H100_SXM"]["unfused_s"] >= 4 * n**3 / BF16


def test_a_broadcast_operand_repeats_the_same_products(capsys, files):
    # matmul(x.unsqueeze(0).expand(8, -1, -1), w), bf16 2048: printed 138.9 us (8 matmuls); one matmul
    # (17.4 us) and the compulsory traffic: x, w read, the 8 x 2048 x 2048 output written = 25.0 us
    n = 2048
    r = roofline_json(capsys, files["expand"])
    assert r["totals"]["flops_matrix"] == 2 * n**3
    compulsory = (2 * n * n + 8 * n * n) * 2
    assert r["totals"]["bytes_fused"] == compulsory
    assert fused(r) == pytest.approx(compulsory / BW) and fused(r) <= 25.05e-6
    assert [w["kind"] for w in r["rewrites"]] == ["distinct products"]


def test_a_repeated_operand_repeats_the_same_products(capsys, files):
    # x.repeat(8, 1) @ w, x 1024 x 2048, bf16: printed 69.5 us; x @ w is 2 x 1024 x 2048^2 FLOPs (8.7 us),
    # and the compulsory traffic (x, w, the 8192 x 2048 output) 13.8 us binds
    r = roofline_json(capsys, files["repeat"])
    assert r["totals"]["flops_matrix"] == 2 * 1024 * 2048 * 2048
    compulsory = (1024 * 2048 + 2048 * 2048 + 8192 * 2048) * 2
    assert r["totals"]["bytes_fused"] == compulsory
    assert fused(r) == pytest.approx(compulsory / BW) and fused(r) <= 13.8e-6


def test_a_concatenation_of_one_tensor_repeats_the_same_products(capsys, files):
    # cat([x] * 4) @ w and stack([x, x]) @ w, x 1024 x 2048, w 2048 x 2048, bf16: each is x @ w once
    # (2 x 1024 x 2048^2 FLOPs); and x.repeat(2, 1) returned is a new tensor eager writes, not a view
    r = roofline_json(capsys, files["cat"])
    assert r["totals"]["flops_matrix"] == 2 * (2 * 1024 * 2048 * 2048)
    assert r["classical"]["totals"]["flops_matrix"] == (4 + 2) * 2 * 1024 * 2048 * 2048
    assert r["aliases"] == []
    outputs = (4096 * 2048 + 2 * 1024 * 2048 + 2048 * 2048) * 2
    assert r["totals"]["bytes_fused"] == (1024 * 2048 + 2048 * 2048) * 2 + outputs


def test_a_product_of_a_recomputed_tensor_with_its_transpose_is_symmetric(capsys, files):
    # l(x) @ l(x).t(), bf16 2048: the second l(x) is the first (CSE), so the product is y @ y.t():
    # 2 N^3 for y, then N (N + 1) / 2 output pairs of N MACs (26.1 us at BF16; 34.7 us before)
    n = 2048
    r = roofline_json(capsys, files["gram"])
    assert r["totals"]["flops_matrix"] == 2 * n**3 + n * (n + 1) * n
    assert [w["kind"] for w in r["rewrites"]] == ["common subexpression", "symmetric product"]
    assert fused(r) == pytest.approx((2 * n**3 + n * (n + 1) * n) / BF16, rel=1e-3)
    # eager's matmul kernel reads two tensors: its unfused bound keeps the full product
    assert r["bounds"]["H100_SXM"]["unfused_s"] >= 2 * 2 * n**3 / BF16


def test_a_symmetric_product_computes_half(capsys, files):
    # x @ x.t() and y.t() @ y, bf16 4096: each printed 138.9 us; SYRK computes the pairs i <= j:
    # 2 N^3 (N + 1) / (2 N) FLOPs each = 69.5 us
    r = roofline_json(capsys, files["syrk"])
    each = 2 * N**3 * (N + 1) // (2 * N)
    assert r["totals"]["flops_matrix"] == 2 * each
    assert r["bounds"]["H100_SXM"]["fused_terms_s"]["matrix"] == pytest.approx(2 * each / BF16)
    assert each / BF16 <= 69.5e-6
    assert [w["kind"] for w in r["rewrites"]] == ["symmetric product"] * 2



def test_a_product_symmetric_through_an_element_wise_scale_computes_half(capsys, files):
    # (x * d) @ x.t() is sum_k x_ik d_k x_jk: symmetric (cuBLAS syrkx); (x * d[:, None]) @ x.t() is
    # d_i (x @ x.t())_ij: the products of a symmetric matrix, then a row scale. bf16 1024: each
    # N^2 (N + 1) MACs, not N^3. (x * y) @ x.t() is no symmetric product: 2 N^3.
    n = 1024
    r = roofline_json(capsys, files["syrkx"])
    half = 2 * n**3 * (n + 1) // (2 * n)
    assert r["totals"]["flops_matrix"] == 2 * half + 2 * n**3
    assert [w["kind"] for w in r["rewrites"]].count("symmetric product") == 2
    assert r["classical"]["totals"]["flops_matrix"] == 3 * 2 * n**3
    # eager's matmul kernel reads the scaled tensor and x: no symmetry it could see
    assert r["bounds"]["H100_SXM"]["unfused_s"] >= 3 * 2 * n**3 / BF16


def test_distributivity_factors_a_sum_of_vector_work(capsys, files):
    # (a[:, None] + b[None, :]).sum(1), f32 8192: n a_i + sum_j b_j, 8192 scalings, 8191 additions of
    # b and 8192 of the two terms, against 2 x 8192^2 as written (1.00 us on the vector unit);
    # (1 - s).mean(-1), 1024 x 8192: 1 - mean(s), the row sums of s (1024 x 8191 additions), then per
    # row the scaling, the subtraction and the division: the traffic binds
    n = 8192
    r = roofline_json(capsys, files["sum_plus"])
    vector = sorted(o["flops_vector"] for o in r["ops"] if o["flops_vector"])
    # the division of the mean, per row; the first sum; the second: 1 - s is a constant monomial
    # (one scaling by 8192) and -s, summed alone, and the two combined per row
    assert vector == [1024, n + (n - 1) + n, 1024 * (n - 1) + 1 + 1024]
    assert r["totals"]["flops_matrix"] == 0
    words = [w["words"] for w in r["rewrites"]]
    assert words.count("polynomial expansion (2 monomials, 0 on the matrix unit, 2 vector) for sum") == 1
    assert fused(r) == pytest.approx((3 * n + 1024 * n + 1024) * 4 / BW, rel=1e-3)
    assert r["classical"]["totals"]["flops_vector"] >= 2 * n * n + 2 * 1024 * n

def test_a_shift_constant_along_the_reduced_variable_is_factored_out(capsys, files):
    # (x[None] + c[:, None, None]) @ w, 8 shifts of x, bf16 512: x @ w once (broadcast over the 8) plus
    # c_b (sum_k w_kj): 2 N^3 matrix FLOPs, against 8 x 2 N^3 as written. Vector: the column sums of
    # w (N (N - 1)), c_b times them (8 N), one addition per output element (8 N^2); the add of x and c
    # as written (8 N^2) is gone. More vector work than as written, so each target may compute any
    # share of the output as written instead (revert_*), and no fused bound exceeds the classical one.
    n, b = 512, 8
    r = roofline_json(capsys, files["bshift"], "--hw", "H100_SXM,B200,A100_SXM")
    assert r["totals"]["flops_matrix"] == 2 * n**3
    assert r["totals"]["flops_vector"] == n * (n - 1) + b * n + b * n * n
    op = next(o for o in r["ops"] if o["flops_matrix"])
    assert (op["revert_matrix"], op["revert_vector"]) == ((b - 1) * 2 * n**3, n * (n - 1) + b * n)
    for hw, bound in r["bounds"].items():
        assert bound["fused_s"] <= r["classical"]["bounds"][hw]["fused_s"]
    assert fused(r) == pytest.approx(max(2 * n**3 / BF16, (2 * n * n + b + b * n * n) * 2 / BW), rel=1e-3)

# ---- constant buffers: bands and identities, beyond triangles -------------------------------------------
def test_an_identity_buffer_is_computed_from_indices(capsys, files):
    # x @ self.E, E = eye(2048) a buffer, f32: printed 34.7 us (2 N^3 at TF32); E is the band i == j,
    # so only the diagonal products are needed, and x read and the output written bind: 10.0 us
    n = 2048
    r = roofline_json(capsys, files["eye"])
    assert r["totals"]["bytes_fused"] == 2 * n * n * 4
    assert fused(r) == pytest.approx(2 * n * n * 4 / BW) and fused(r) <= 10.02e-6
    note = "mask buffer 'E' [2048, 2048] recognised as affine region i >= j and i <= j"
    assert note in r["validation"]["notes"][0]


def test_a_banded_mask_buffer_narrows_to_its_band(capsys, files):
    # (x @ y) * band, band = tril(ones) - tril(ones, -16), T = 256, K = 64: the products outside the
    # band are not needed; the band holds 16 x 256 - 16 x 15 / 2 = 3,976 elements, each 2 K FLOPs
    r = roofline_json(capsys, files["band"])
    assert r["totals"]["flops_matrix"] == 2 * 64 * 3_976 == 508_928
    assert r["totals"]["flops_matrix_as_written"] == 2 * 64 * 256 * 256
    assert "recognised as affine region i >= j and i <= j + 15" in r["validation"]["notes"][0]


# ---- B200 case (i): an output that is a broadcast view of an intermediate ------------------------------
def test_a_broadcast_view_of_an_intermediate_writes_only_its_base(capsys, files):
    # Mamba2's dA[..., None, None].expand(-1, -1, -1, 128, 128), here at 2 x 64 x 8 -> x 16 x 16: eager
    # returns the view, so only dA (2 x 64 x 8 f32) is written; read dt (same) and A (8 f32). Before:
    # the expanded 2 x 64 x 8 x 16 x 16 f32 (1 MiB) was priced as written. At the shape (2 x 512
    # x 128 -> x 128 x 128) the same rule gives 1,049,088 B: 131.1 ns on B200, against 0.060 ms measured
    # (was 2.152 ms: the 17.2 GB expanded output).
    for algorithms in ("default", "classical"):
        r = roofline_json(capsys, files["broadcast"], "--algorithms", algorithms)
        assert r["totals"]["bytes_fused"] == 2 * 64 * 8 * 4 * 2 + 8 * 4 == 8_224
        assert r["totals"]["flops"] == 2 * 64 * 8
        assert fused(r) == pytest.approx(8_224 / BW)
        assert r["aliases"] == [{"position": 0, "output": "expand", "of": "mul", "role": "intermediate",
                                 "how": "a view"}]
        assert r["validation"]["validated"]
    assert "output 0 ('expand') is a view of intermediate 'mul': no work" in render_text(r)


def test_a_contiguous_copy_of_a_broadcast_is_written_in_full(capsys, files):
    # `.contiguous()` allocates and writes every element: 2 x 64 x 8 x 16 x 16 f32 (1,048,576 B), plus
    # dt and A read (4,096 + 32 B); the view rule above does not apply (it priced the base alone, 8,224 B:
    # an audit's `(x @ w).unsqueeze(0).expand(8, -1, -1).contiguous()` bf16 2048 on H100 printed 17.36 us,
    # below the 67 MB it writes, 20.03 us)
    r = roofline_json(capsys, files["broadcast_copy"])
    assert r["totals"]["bytes_fused"] == 2 * 64 * 8 * 16 * 16 * 4 + 2 * 64 * 8 * 4 + 8 * 4 == 1_052_704
    assert r["aliases"] == [] and r["validation"]["validated"]


def test_a_broadcast_view_of_a_keepdim_reduction_writes_only_its_base(capsys, files):
    # x.sum(-1, keepdim=True).expand(-1, 512) on 256 x 512 f32: the view reads its 256 x 1 base at
    # index 0 of the kept dim; eager writes the 256 sums only. Before: the 256 x 512 expansion was
    # written (an audit of stop 44: 20.03 us at 4096 x 4096 bf16, now 10.02 us)
    r = roofline_json(capsys, files["keepdim_view"])
    assert r["totals"]["bytes_fused"] == 256 * 512 * 4 + 256 * 4 == 525_312
    assert r["aliases"] == [{"position": 0, "output": "expand", "of": "sum_1", "role": "intermediate",
                             "how": "a view"}]
    assert r["validation"]["validated"]


def test_the_mamba2_broadcast_output_on_b200_is_below_its_measured_time(capsys, files):
    # the shape (validation skips it: 8 GB per sample); bound only
    r = roofline_json(capsys, files["broadcast_b200"], "--hw", "B200")
    assert r["totals"]["bytes_fused"] == 2 * 512 * 128 * 4 * 2 + 128 * 4 == 1_049_088
    assert r["bounds"]["B200"]["fused_s"] == pytest.approx(1_049_088 / 8e12) and \
        r["bounds"]["B200"]["fused_s"] <= 0.060e-3


# ---- B200 case (ii): an in-place update of an input buffer ---------------------------------------------
def test_an_in_place_update_of_an_input_moves_only_the_written_rows(capsys, files):
    # key_cache[:, :, pos] = k and the same for values, both caches returned: eager writes the 16 new
    # rows into the caller's buffers. Moved: k and v read (2 x 8 x 16 x 128 bf16), the 16 int64
    # positions read, the 2 x 8 x 16 x 128 rows written. Before: both 1 x 8 x 1024 x 128 caches read
    # and written whole (8,454,272 B); at the 262,144-row caches that was 0.272 ms on B200
    # against 0.038 ms measured.
    rows = 8 * 16 * 128 * 2
    r = roofline_json(capsys, files["kv_cache"])
    assert r["totals"]["bytes_fused"] == 2 * rows + 16 * 8 + 2 * rows == 131_200
    assert fused(r) == pytest.approx(131_200 / BW)
    assert r["validation"]["validated"]  # the outputs are checked whole: the copy is in the validation kernel
    assert any("updates input 'key_cache' in place" in n for n in r["validation"]["notes"])


def test_an_in_place_update_through_a_slice_moves_only_the_slice(capsys, files):
    # cache[100:116] = new and x[:, :8].mul_(2.0) on 4096 x 128 bf16 inputs, both returned: was the
    # whole of both read and written (2 x 2 x 1 MiB); only the 16 new rows (read, written) and the
    # 4096 x 8 slice of x (read, written) move, and the 32,768 products by 2
    r = roofline_json(capsys, files["slice_update"])
    assert r["totals"]["bytes_fused"] == 2 * 16 * 128 * 2 + 2 * 4096 * 8 * 2 == 139_264
    assert r["totals"]["flops"] == 4096 * 8
    assert r["validation"]["validated"]
    assert [n.split(": ", 1)[1] for n in r["validation"]["notes"] if "in place" in n] == [
        "aten.slice_scatter.default updates input 'cache' in place: only the written elements move",
        "aten.slice_scatter.default updates input 'x' in place: only the written elements move"]


def test_the_kv_cache_update_on_b200_is_below_its_measured_time(capsys, files):
    # the 1 x 8 x 262,144 x 128 bf16 caches, 1,024 new rows: at most the rows read and written
    # and the positions (8,396,800 B; validation runs size-reduced, so the scatter's writes are
    # counted at their minimum over index values); before, both 537 MB caches moved
    r = roofline_json(capsys, files["kv_cache_b200"], "--hw", "B200")
    rows = 8 * 1024 * 128 * 2
    assert 2 * rows < r["totals"]["bytes_fused"] <= 4 * rows + 1024 * 8
    assert r["bounds"]["B200"]["fused_s"] <= (4 * rows + 1024 * 8) / 8e12 < 0.038e-3


# ---- the unfused fidelity: eager execution, one kernel per source op as written ----------------------------
def test_the_unfused_bound_runs_every_source_op_as_written(capsys, files):
    # (a @ b) @ v: eager runs two matmuls, the first one 2 N^3 FLOPs (138.9 us at BF16), whatever the
    # fused bound's association; (x @ w) + (x @ w): eager runs both matmuls (no CSE across source ops).
    # Before: the unfused bound took the rewrites (one merged kernel of 4 N^2 FLOPs; one matmul free).
    r = roofline_json(capsys, files["chain"])
    assert [k["flops_matrix"] for k in r["kernels_unfused"]] == [2 * N**3, 2 * N * N]
    assert r["bounds"]["H100_SXM"]["unfused_s"] == r["classical"]["bounds"]["H100_SXM"]["unfused_s"]
    assert r["bounds"]["H100_SXM"]["unfused_s"] >= 2 * N**3 / BF16
    assert r["totals"]["bytes_unfused"] == r["classical"]["totals"]["bytes_unfused"]
    assert fused(r) <= 20.04e-6  # the fused bound keeps the reassociation
    n = 2048
    c = roofline_json(capsys, files["cse"])
    assert [k["flops_matrix"] for k in c["kernels_unfused"]] == [2 * n**3, 2 * n**3, 0]
    assert c["bounds"]["H100_SXM"]["unfused_s"] >= 2 * (2 * n**3 / BF16)
    assert c["totals"]["flops_matrix"] == 2 * n**3  # the fused bound keeps the CSE


# ---- fast convolution: Winograd where cuDNN ships it ----------------------------------------------------
def test_a_3x3_conv_is_priced_at_fast_convolution_products(capsys, files):
    # Conv2d 256 -> 256, 3 x 3, padding 1, 8 x 256 x 32 x 32 f32: printed 18.73 us (9,265,217,536 direct
    # FLOPs, taps on the padding excluded, at TF32 494.7 TFLOP/s). Winograd F(4x4,3x3): 8 x 8 tiles of
    # 36 products per (image, in, out channel): 2 x 8 x 256^2 x 64 x 36 = 2,415,919,104 FLOPs = 4.88 us.
    # FFT of the whole padded 34 x 34 map (cuDNN's FFT: at most 256 per axis): 3 x (34^2 - 4) / 2 + 4
    # = 1,732 real products per (image, in, out channel): 1,816,133,632 FLOPs = 3.67 us, the fewest.
    # Then the compulsory traffic binds: x, the weights, the bias and the output, 19,137,536 B =
    # 5.71 us <= 8.3 us
    r = roofline_json(capsys, files["conv"])
    assert r["totals"]["flops_matrix"] == 2 * 8 * 256**2 * 1732 == 1_816_133_632
    compulsory = (2 * 8 * 256 * 32 * 32 + 256 * 256 * 9 + 256) * 4
    assert r["totals"]["bytes_fused"] == compulsory == 19_137_536
    assert fused(r) == pytest.approx(compulsory / BW) and fused(r) <= 8.3e-6
    assert [(w["kind"], w["words"]) for w in r["rewrites"]] == [("FFT 34x34", "FFT 34x34 for conv")]
    assert "priced as FFT 34x34 for conv" in " ".join(render_text(r).split())
    as_written = 9_265_217_536 / 494.7e12
    assert r["classical"]["bounds"]["H100_SXM"]["fused_s"] == pytest.approx(as_written, rel=1e-4)
    c = roofline_json(capsys, files["conv"], "--algorithms", "classical")
    assert c["totals"]["flops_matrix"] == 9_265_217_536 and c["rewrites"] == []


# ---- factors folded through contractions: SDPA with a small head dimension ------------------------------
def test_sdpa_head_dim_8_needs_4_vector_ops_per_score(capsys, files):
    # F.scaled_dot_product_attention, f32, 2 x 8 heads, 1024 x 1024 scores each (2^24), head dim 8: printed
    # 1.51 us, the vector term at 6 ops per score (scale, max, subtract, exp, sum, divide) at 66.9
    # TFLOP/s. The scale folds into q (one op per element of q: 2 x 8 x 1024 x 8) and the division
    # moves to O (one per output element, as many): 4 ops per score + 2 x 131,072 = 67,371,008 FLOPs
    # = 1.007 us; the matrix term binds: 2 x 2 x 2^24 x 8 FLOPs at TF32 = 1.085 us <= 1.09 us
    scores, small = 2**24, 2 * 8 * 1024 * 8
    r = roofline_json(capsys, files["sdpa8"])
    assert r["totals"]["flops_vector"] == 4 * scores + 2 * small == 67_371_008
    b = r["bounds"]["H100_SXM"]
    assert b["fused_terms_s"]["vector"] == pytest.approx(67_371_008 / 66.9e12, rel=1e-3)
    assert fused(r) == pytest.approx(4 * scores * 8 / 494.7e12, rel=1e-3) and fused(r) <= 1.09e-6
    assert b["fused_bottleneck"] == "matrix"
    words = {w["words"] for w in r["rewrites"]}
    assert words == {"folded through a contraction for scaled_dot_product_attention"}
    c = roofline_json(capsys, files["sdpa8"], "--algorithms", "classical")
    assert c["totals"]["flops_vector"] == 6 * scores
    assert fused(c) == pytest.approx(6 * scores / 66.9e12, rel=1e-3)


# ---- a value-dependent select computes one branch per element ---------------------------------------
def test_a_row_masked_where_of_two_products_computes_each_row_once(capsys, files):
    # torch.where(m, x @ w1, x @ w2), m a 2048 x 1 bool input, bf16 2048: printed 34.7 us (both matmuls);
    # each output element is one of the two sums, whatever m holds: 2 N^3 FLOPs at BF16 = 17.36 us
    n = 2048
    r = roofline_json(capsys, files["where"])
    assert r["totals"]["flops_matrix"] == 2 * n**3
    assert fused(r) == pytest.approx(2 * n**3 / BF16) and fused(r) <= 17.4e-6
    assert [w["words"] for w in r["rewrites"]] == ["value-dependent select computes one branch for mm"]
    assert r["classical"]["totals"]["flops_matrix"] == 4 * n**3


def test_a_select_between_element_wise_chains_of_products_computes_one_chain(capsys, files):
    # where(m[:, None], relu(x @ w1), relu(x @ w2) * 2), bf16 256: each element needs one branch's sum
    # and chain; the first chain (one max per element) is cheaper in every kind of work than the
    # second (a max and a multiply), so it is the one counted: 2 N^3 matrix FLOPs, N^2 maxes and N^2
    # selects. Before (the rule saw only products read directly): 4 N^3 matrix and 4 N^2 vector FLOPs,
    # as `--algorithms classical` still counts. At the audit's 2048 with tanh on the second branch:
    # 34.73 -> 17.36 us on H100_SXM.
    n = 256
    r = roofline_json(capsys, files["where_tails"])
    assert (r["totals"]["flops_matrix"], r["totals"]["flops_vector"]) == (2 * n**3, 2 * n * n)
    assert [w["words"] for w in r["rewrites"]] == [
        "value-dependent select computes one branch for mm",
        "value-dependent select computes one branch for relu",
        "value-dependent select computes one branch for mul"]
    c = r["classical"]["totals"]
    assert (c["flops_matrix"], c["flops_vector"]) == (4 * n**3, 4 * n * n)
    assert r["validation"]["validated"]


# ---- sound fallbacks ------------------------------------------------------------------------------------
def test_a_timed_out_narrowing_counts_only_the_output_writes(capsys, files):
    """Causal attention, bf16, 4 heads of 2048 x 64: narrowed, the masked half of both products is
    gone (2.17 us, at or below the issue's 2.50 us). When narrowing runs out of its CPU budget the
    kernel used to be priced as written (4.34 us: every masked score computed); now only what is
    certainly needed counts, the output written once: 4 x 2048 x 64 bf16 = 1,048,576 B / 3.35 TB/s."""
    r = roofline_json(capsys, files["causal"])
    assert fused(r) <= 2.50e-6
    t = roofline_json(capsys, files["causal"], "-p", "narrow-needed{seconds=0.000001 statement_seconds=0.0}")
    out_bytes = 4 * 2048 * 64 * 2
    assert t["totals"]["bytes_fused"] == t["totals"]["bytes_unfused"] == out_bytes
    assert t["totals"]["flops_matrix"] == t["totals"]["flops_vector"] == 0
    assert fused(t) == pytest.approx(out_bytes / BW) and fused(t) <= fused(r)
    assert "only its output writes are counted (a sound floor)" in " ".join(t["validation"]["notes"])
    # the work as written is still reported beside the floor: 2 x 2 x 4 x 2048^2 x 64 matrix FLOPs
    assert t["totals"]["flops_matrix_as_written"] == 4 * 4 * 2048 * 2048 * 64


def test_a_block_diagonal_operand_computes_its_two_blocks(capsys, files):
    # x @ block_diag(w1, w2), bf16 2048: printed 17.36 us (2 N^3 at BF16); the products with the two
    # zero blocks add nothing: narrowing keeps the two diagonal blocks, N^3 FLOPs, 8.68 us
    n = 2048
    r = roofline_json(capsys, files["block_diag"])
    assert r["totals"]["flops_matrix"] == n**3
    assert fused(r) == pytest.approx(n**3 / BF16) and fused(r) <= 8.69e-6
    assert r["classical"]["bounds"]["H100_SXM"]["fused_s"] == pytest.approx(fused(r))  # narrowing: both


def test_a_broadcast_multiply_and_sum_is_a_matrix_product(capsys, files):
    # (x[:, :, None] * w[None]).sum(1), bf16 1024: written as N^3 multiplies and N^3 additions on the
    # vector unit, 16.05 us; it is x @ w, 2 N^3 FLOPs at BF16: 2.17 us
    n = 1024
    r = roofline_json(capsys, files["bcast_sum"])
    assert (r["totals"]["flops_matrix"], r["totals"]["flops_vector"]) == (2 * n**3, 0)
    assert fused(r) == pytest.approx(2 * n**3 / BF16) and fused(r) <= 2.18e-6
    assert "polynomial expansion (1 monomial, 1 on the matrix unit, 0 vector) for sum" in \
        [w["words"] for w in r["rewrites"]]
    assert r["classical"]["bounds"]["H100_SXM"]["fused_s"] == pytest.approx(16.05e-6, rel=1e-3)


def test_gathered_rows_of_a_product_are_computed_alone(capsys, files):
    # relu(x @ w)[idx], bf16 2048, 16 indices: printed 17.36 us (the whole product); x[idx] @ w reads w
    # (8 MB), at least one row of x (the new gather's fewest), idx, and writes 16 rows: 2.525 us
    n = 2048
    r = roofline_json(capsys, files["gathered_rows"])
    nbytes = n * n * 2 + n * 2 + 16 * 8 + 16 * n * 2
    assert r["totals"]["bytes_fused"] == nbytes == 8_458_368
    assert r["totals"]["flops_matrix"] == 2 * 16 * n * n
    assert fused(r) == pytest.approx(nbytes / BW) and fused(r) <= 2.53e-6
    assert [w["kind"] for w in r["rewrites"]] == ["gathered rows computed alone"] * 2
    assert r["classical"]["bounds"]["H100_SXM"]["fused_s"] == pytest.approx(2 * n**3 / BF16)


def test_a_chain_of_sums_of_products_with_a_shared_factor_is_one_product(capsys, files):
    # x @ w[0] + x @ w[1] + x @ w[2] + x @ w[3] (a sum in a Python loop), bf16 2048: printed 69.46 us (four
    # GEMMs); x @ (w[0] + w[1] + w[2] + w[3]) is one GEMM, 17.36 us, and 3 N^2 additions of weights
    n = 2048
    r = roofline_json(capsys, files["sum_loop"])
    assert (r["totals"]["flops_matrix"], r["totals"]["flops_vector"]) == (2 * n**3, 3 * n * n)
    assert fused(r) == pytest.approx(2 * n**3 / BF16) and fused(r) <= 17.37e-6
    assert [w["kind"] for w in r["rewrites"]] == ["shared factor"] * 6
    assert r["classical"]["bounds"]["H100_SXM"]["fused_s"] == pytest.approx(8 * n**3 / BF16, rel=1e-3)
