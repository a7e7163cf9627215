"""Constant buffers that are tables of fewer dimensions (`frontends/torch/buffer_tables.py`,
docs/bounds.md section 0.0, "constant buffers"): a buffer constant along a dimension (a broadcast
stored in full) or along the diagonals of two dimensions (a Toeplitz buffer: ALiBi's per-head bias, a
relative-position bias) is read as its table, which the validation kernel computes from the fed buffer.

Audit figures (H100_SXM, fused; DRAM 3.35 TB/s, BF16 989.4 TFLOP/s): ALiBi as a 16 x 2048 x 2048
bf16 buffer in attention over q, k, v 1 x 16 x 2048 x 64 printed 45.07 us (the buffer's 134 MB read);
FlashAttention takes the 16 slopes: the matrix term, 17.36 us, binds. `x @ w + rel`, rel = |j - i|
over 4096 x 4096 bf16: 20.35 us, the product's output alone 10.0 us. `x + pe`, pe one row repeated
4096 x 4096: 30.05 us, x and the output 20.03 us. Small sizes here, bytes by hand.
"""

from __future__ import annotations

import numpy as np
import pytest
from translated import roofline_json, translated_programs

from solar_compiler.frontends.torch.buffer_tables import constant_ends, recognise_affine, recognise_table

BW = 3.35e12


def test_recognise_tables_by_hand():
    i, j = np.arange(12)[:, None], np.arange(10)[None, :]
    assert recognise_table(np.abs(j - i).astype(np.float32)) == ((), (0, 1))        # Toeplitz
    assert recognise_table(np.broadcast_to(np.arange(10.0), (12, 10)).copy()) == ((0,), None)  # rows equal
    slopes = np.array([0.5, 0.25, 0.125])[:, None, None]
    alibi = slopes * (j - i)[None]
    assert recognise_table(alibi) == ((), (1, 2))
    assert recognise_table(np.broadcast_to(alibi[:1], (4, 12, 10)).copy()) == ((0,), (1, 2))
    assert recognise_table(np.random.default_rng(0).standard_normal((12, 10))) is None
    assert recognise_table(np.broadcast_to(np.arange(3.0), (2, 3)).copy()) is None   # too small
    assert recognise_table(np.broadcast_to(np.arange(8.0), (2, 8)).copy()) is None  # half the elements
    assert recognise_table(np.broadcast_to(np.arange(8.0), (4, 8)).copy()) == ((0,), None)  # a quarter
    nan = np.abs(j - i).astype(np.float64)
    nan[0, 0] = np.nan
    assert recognise_table(nan) is None


def test_constant_runs_at_the_ends_of_the_diagonals_by_hand():
    i, j = np.arange(8)[:, None], np.arange(8)[None, :]
    d = (j - i).astype(np.float64)
    causal = np.stack([0.5 * d, 0.25 * d])
    causal[:, d > 0] = -np.inf                            # causal ALiBi: -inf on every j - i >= 1
    assert constant_ends(causal, (1, 2)) == (None, (1, -np.inf))
    assert constant_ends(np.where(d < -2, 0.0, d), (0, 1)) == ((-3, 0.0), None)
    assert constant_ends(np.abs(d), (0, 1)) == (None, None)
    short = d.copy()
    short[d >= 6] = 9.0                                   # 3 of 15 diagonals: under a quarter
    assert constant_ends(short, (0, 1)) == (None, None)


def test_recognise_affine_values_by_hand():
    assert recognise_affine(np.arange(16)) == ((1,), 0)
    assert recognise_affine(np.arange(3, 35, 2, dtype=np.float32)) == ((2,), 3)
    assert recognise_affine(np.arange(16)[None, :]) == ((0, 1), 0)                  # position_ids (1, T)
    i, j = np.arange(4)[:, None], np.arange(5)[None, :]
    assert recognise_affine(j - i) == ((-1, 1), 0)
    assert recognise_affine(np.abs(j - i)) is None                                   # not affine
    assert recognise_affine(np.arange(16) * 0.5) is None                             # not integral
    assert recognise_affine(np.full(16, 3)) is None                                  # one value
    assert recognise_affine(np.arange(4)) is None                                    # too small


POSITIONS = """import torch
import torch.nn.functional as F
H, T, D = 2, 256, 32
class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("pos", torch.arange(1024))
    def forward(self, q, k, v):
        p = self.pos[:q.shape[-2]]
        return F.scaled_dot_product_attention(q, k, v, attn_mask=p[:, None] >= p[None, :])
def get_inputs():
    return [torch.randn(1, H, T, D), torch.randn(1, H, T, D), torch.randn(1, H, T, D)]
def get_init_inputs():
    return []
"""


ALIBI = """import torch
H, T, D = 4, 256, 32
class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        slopes = 2.0 ** (-8.0 * torch.arange(1, H + 1) / H)
        pos = torch.arange(T)
        self.register_buffer("alibi", slopes[:, None, None] * (pos[None, :] - pos[:, None])[None])
    def forward(self, q, k, v):
        s = q @ k.transpose(-1, -2) * D ** -0.5 + self.alibi
        return torch.softmax(s, -1) @ v
def get_inputs():
    return [torch.randn(1, H, T, D), torch.randn(1, H, T, D), torch.randn(1, H, T, D)]
def get_init_inputs():
    return []
"""

REL = """import torch
N = 512
class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        p = torch.arange(N)
        self.register_buffer("rel", (p[None, :] - p[:, None]).abs().float())
        self.register_buffer("pe", torch.arange(N).float().sqrt()[None, :].repeat(N, 1))
    def forward(self, x, w):
        return x @ w + self.rel + self.pe
def get_inputs():
    return [torch.randn(N, 64), torch.randn(64, N)]
def get_init_inputs():
    return []
"""

CAUSAL_ALIBI = ALIBI.replace(
    'self.register_buffer("alibi", slopes[:, None, None] * (pos[None, :] - pos[:, None])[None])',
    'd = (pos[None, :] - pos[:, None])[None]\n'
    '        self.register_buffer("alibi", (slopes[:, None, None] * d).masked_fill(d > 0, float("-inf")))')

PROGRAMS = {
    "positions": POSITIONS,
    "causal_alibi": CAUSAL_ALIBI,
    "alibi": ALIBI,
    "rel": REL,
    # the diagonals drawn from the global generator: another buffer per construction seed, data
    "seeded": REL.replace('(p[None, :] - p[:, None]).abs().float()',
                          'torch.randn(2 * N)[(p[None, :] - p[:, None]) + N]'),
}


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    pytest.importorskip("torch")
    with translated_programs(tmp_path_factory.mktemp("tables"), PROGRAMS) as paths:
        yield paths


def test_a_mask_from_a_position_buffer_is_causal(capsys, files):
    # pos = arange(1024) as a buffer: p[:, None] >= p[None, :] is i >= j, so narrowing keeps the
    # T (T + 1) / 2 = 32,896 causal pairs per head of QK^T and of PV: 2 x 2 x 32,896 x 32 x 2 matrix
    # FLOPs (the full products: 2 x 2 x 65,536 x 32 x 2). The audit's 16 heads, T = 2048, d = 64 bf16
    # on H100: 17.36 us -> 8.69 us.
    r = roofline_json(capsys, files["positions"])
    assert r["validation"]["validated"]
    assert "constant buffer 'pos' [1024] holds i0 at [i0, ..]: computed from indices, not read" \
        in r["validation"]["notes"]
    assert r["totals"]["flops_matrix"] == 2 * 2 * 32_896 * 32 * 2


def test_an_alibi_buffer_is_read_as_its_slopes_diagonals(capsys, files):
    # q, k, v 3 x 4 x 256 x 32 f32 (393,216 B), the output 131,072 B, the table 4 x 511 f32 (8,176 B);
    # the 4 x 256 x 256 buffer (1,048,576 B) is never read
    r = roofline_json(capsys, files["alibi"])
    assert r["validation"]["validated"]
    note = ("constant buffer 'alibi' [4, 256, 256] is constant along the diagonals of dims 1, 2 (a function "
            "of idx[2] - idx[1]): read as its table 'alibi_table' [4, 511] (2,044 of 262,144 values)")
    assert note in r["validation"]["notes"]
    assert r["totals"]["bytes_fused"] == 393_216 + 131_072 + 8_176 == 532_464


def test_a_causal_alibi_buffer_is_causal(capsys, files):
    # ALiBi and the causal mask in one buffer: -inf on every j - i >= 1 is selected by the indices,
    # so narrowing keeps the T (T + 1) / 2 = 32,896 pairs per head of QK^T and of PV: 4 heads x 2 x
    # 32,896 x 32 x 2 matrix FLOPs. The audit's 16 heads, T = 2048, d = 64 bf16 on H100: 17.36 us
    # (the whole product, the table read as data) -> 8.69 us.
    r = roofline_json(capsys, files["causal_alibi"])
    assert r["validation"]["validated"]
    notes = r["validation"]["notes"]
    assert any("-inf where idx[2] - idx[1] >= 1 (computed from indices)" in n for n in notes)
    assert r["totals"]["flops_matrix"] == 4 * 2 * 32_896 * 32 * 2


def test_a_relative_bias_and_a_stored_broadcast_read_their_tables(capsys, files):
    # x 131,072 B, w 131,072 B, the output 1,048,576 B; rel's table 1,023 f32 (4,092 B) and pe's one
    # row (2,048 B), in place of 2 x 1,048,576 B
    r = roofline_json(capsys, files["rel"])
    assert r["validation"]["validated"]
    assert r["totals"]["bytes_fused"] == 131_072 * 2 + 1_048_576 + 4_092 + 2_048 == 1_316_860
    assert r["bounds"]["H100_SXM"]["fused_s"] == pytest.approx(1_316_860 / BW, rel=1e-12)


def test_a_buffer_that_depends_on_the_seed_is_data(capsys, files):
    r = roofline_json(capsys, files["seeded"])
    assert not any("table" in n for n in r["validation"]["notes"] if "rel" in n)
    assert r["totals"]["bytes_fused"] == 1_316_860 - 4_092 + 1_048_576


def test_the_validation_kernel_computes_the_table_from_the_fed_buffer(files):
    """Fed another buffer, the validation kernel reads that one's diagonals: a Toeplitz buffer of
    other slopes gives torch's values; a buffer that is no table does not (validation would fail)."""
    import torch

    from solar_compiler.executor import execute
    from solar_compiler.frontends.model_file import load_model_file
    from solar_compiler.frontends.torch.capture import capture
    from solar_compiler.frontends.torch.translate import translate_program

    spec = load_model_file(files["alibi"])
    tt = translate_program(capture(spec, mode="eval"))
    assert "alibi_table" in {t.name for t in tt.kernel.by_role("weight")}
    rng = np.random.default_rng(3)
    q, k, v = (rng.standard_normal((1, 4, 256, 32)).astype(np.float32) for _ in range(3))
    pos = np.arange(256)
    slopes = np.array([1.0, -0.5, 0.3, 2.0])[:, None, None]
    other = (slopes * (pos[None, :] - pos[:, None])[None]).astype(np.float32)
    noise = rng.standard_normal((4, 256, 256)).astype(np.float32)

    def run(buf):
        got = execute(tt.validation_kernel(), {tt.inputs["q"]: q, tt.inputs["k"]: k, tt.inputs["v"]: v,
                                               tt.inputs["alibi"]: buf})
        s = torch.from_numpy(q) @ torch.from_numpy(k).transpose(-1, -2) * 32 ** -0.5 + torch.from_numpy(buf)
        return np.asarray(got[tt.outputs[0]]), (torch.softmax(s, -1) @ torch.from_numpy(v)).numpy()

    got, want = run(other)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    got, want = run(noise)
    assert not np.allclose(got, want, rtol=1e-2, atol=1e-3)
