"""Packed fp4 (torch's float4_e2m1fn_x2, NVFP4 storage) end to end: captured as its bytes (`u8`),
decoded through a uint8 view, shifts and masks and the e2m1 table as a reference writes it, and
the GEMM it feeds priced at the FP4 tensor rate with every tensor counted at its stored width. The
figures below are derived by hand from the problem's shapes."""

from __future__ import annotations

import contextlib
import io
import json
import math
from pathlib import Path

import numpy as np
import pytest

from solar_compiler.analysis.bounds import graph_bounds
from solar_compiler.analysis.costs import contraction_dtype
from solar_compiler.analysis.value_dtypes import ValueDtypes
from solar_compiler.dialects.graph_convert import lift_kernel
from solar_compiler.driver import main
from solar_compiler.executor.numeric import quantize
from solar_compiler.frontends.builder.constants import narrowest_exact
from solar_compiler.hw import load_target
from solar_compiler.loopir.ast import typecheck
from solar_compiler.loopir.rules import nbytes, reduction_identity
from solar_compiler.text.parser import parse_kernel
from solar_compiler.text.printer import print_kernel
from solar_compiler.transforms.kernels import kernel_costs

DATA = Path(__file__).resolve().parent / "data" / "solexec"


def _json_runs(argv: list[str], monkeypatch, tmp_path: Path) -> list[dict]:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main([*argv, "--format", "json", "--quiet"]) == 0
    text = out.getvalue()
    if not text.startswith("# workload"):
        return [json.loads(text)]
    return [json.loads(p.split("\n", 1)[1]) for p in text.split("# workload ") if p.strip()]


def test_nvfp4_gemm_problem(monkeypatch, tmp_path: Path) -> None:
    """C[M, N] = alpha * dequant(A) @ dequant(B).T, N = K = 64, 16-value e4m3 scale blocks.
    Stored bytes: A M*K/2, B N*K/2 (two e2m1 values a byte), scales M*K/16 and N*K/16 (one byte
    each), alpha 4 (a tensor in workload 2, a literal in workload 1), C bf16 2*M*N, and the two
    16-entry decode tables, stored as e2m1 (half a byte a value) and read at one element each under
    `--indirect min` (1 byte each, whole bytes). FLOPs of the GEMM: 2*M*N*K; on B200 and GB200 at
    the FP4 rate, on H100 (no FP4 unit) at FP8, which holds every e2m1 value."""
    for hw in ("B200", "GB200", "H100_SXM"):
        runs = _json_runs([str(DATA / "nvfp4_gemm"), "--workload", "all", "--roofline", "fused", "--hw", hw,
                           "--indirect", "min"], monkeypatch, tmp_path)
        assert len(runs) == 2
        for r, m, alpha in zip(runs, (32, 16), (0, 4), strict=True):
            assert r["validation"]["validated"], r["validation"]
            flops = 2 * m * 64 * 64
            assert r["totals"]["flops_matrix"] == flops
            stored = m * 32 + 64 * 32 + m * 4 + 64 * 4 + alpha + 2 * m * 64 + 2
            assert r["totals"]["bytes_fused"] == stored
            target = load_target(hw)
            rate = (target.matrix.get("fp4") or target.matrix["fp8"]).value
            terms = r["bounds"][hw]["fused_terms_s"]
            assert math.isclose(terms["matrix"], flops / rate, rel_tol=1e-9)
            assert math.isclose(terms["memory"], stored / target.dram_bw.value, rel_tol=1e-9)


def test_e2m1_rounding() -> None:
    """Round to nearest, ties to even mantissa, saturating at 6 (e2m1 has no inf)."""
    x = np.array([0.2, 0.25, 0.75, 1.25, 2.5, 5.0, 7.0, 100.0, -1.25, -0.3, 3.0], dtype=np.float32)
    want = [0.0, 0.0, 1.0, 1.0, 2.0, 4.0, 6.0, 6.0, -1.0, -0.5, 3.0]
    assert quantize(x, "f4e2m1").tolist() == want


def test_constants_stored_narrow() -> None:
    assert narrowest_exact(np.array([0.0, 0.5, -6.0, 1.5]), "f32") == "f4e2m1"
    assert narrowest_exact(np.array([1.0, 448.0, 3.0]), "f32") == "f8e4m3"
    assert narrowest_exact(np.array([0.1]), "f32") == "f32"
    assert narrowest_exact(np.array([1.0, np.inf]), "f32") == "f32"
    assert narrowest_exact(np.array([0.5]), "bf16") == "f4e2m1"
    assert narrowest_exact(np.array([3.0]), "i32") == "i32"  # integers keep their dtype


def test_byte_and_unsigned_dtypes() -> None:
    assert nbytes("f4e2m1", 16) == 8 and nbytes("f4e2m1", 15) == 8 and nbytes("u8", 5) == 5
    assert reduction_identity("max=", "u8") == 0 and reduction_identity("min=", "u8") == 255
    assert reduction_identity("min=", "i16") == 32767


def test_loop_text_round_trip() -> None:
    text = """\
kernel k(A: u8[4, 2] input, T: f4e2m1[16] weight, Y: f32[4, 4] output):
    for i in range(4):
        for j in range(2):
            Y[i, 2 * j] = f32(T[i64(A[i, j] and 15)])
            Y[i, 2 * j + 1] = f32(T[i64(A[i, j] // 16)])
"""
    k = typecheck(parse_kernel(text, "t.loop"))
    assert [t.dtype for t in k.tensors] == ["u8", "f4e2m1", "f32"]
    assert typecheck(parse_kernel(print_kernel(k), "t.loop")) == k
    assert k.tensors[1].nbytes == 8


def _split(block: int) -> str:
    """An fp8 GEMM whose reduction k = 16 kb + kl is split in two loops, the scale read at kb."""
    nb = 64 // block
    return f"""
kernel k(A: f8e4m3[8, 64] input, S: f32[8, {nb}] input, B: f8e4m3[64, 8] input, Y: f32[8, 8] output):
    for i in range(8):
        for j in range(8):
            Y[i, j] = 0.0
            for kb in range({nb}):
                for kl in range({block}):
                    Y[i, j] += f32(A[i, {block} * kb + kl]) * S[i, kb] * f32(B[{block} * kb + kl, j])
"""


@pytest.mark.parametrize(("block", "want"), [(16, "f8e4m3"), (32, "f8e4m3"), (8, "f32")])
def test_block_scale_on_a_split_reduction(block: int, want: str) -> None:
    """A scale that leaves reduced loops of extent >= 16 unused is applied per block in the
    accumulator (the catalogue's reordered trees split the reduction so); below 16 it is data."""
    g = lift_kernel(typecheck(parse_kernel(_split(block), "t.loop")))
    n = g.nodes()[-1]
    assert contraction_dtype(n, ValueDtypes(g)) == want


UINT8_MODEL = """\
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        lo = x & 0x0F
        hi = x >> 4
        return (lo << 4) | hi, (x << 1).to(torch.int32)


def get_inputs():
    return [torch.randint(0, 256, (64,), dtype=torch.uint8)]


def get_init_inputs():
    return []
"""


def test_uint8_bit_operations_validate(monkeypatch, tmp_path: Path) -> None:
    """Nibble swap and a wrapping left shift on bytes, checked against torch: 64 bytes in, 64 bytes
    and 64 int32 out."""
    f = tmp_path / "nibbles.py"
    f.write_text(UINT8_MODEL)
    (r,) = _json_runs([str(f), "--translate", "--roofline", "fused", "--hw", "B200"], monkeypatch, tmp_path)
    assert r["validation"]["validated"], r["validation"]
    assert r["totals"]["bytes_fused"] == 64 + 64 + 4 * 64


def test_nvfp4_quantize_problem(monkeypatch, tmp_path: Path) -> None:
    """bf16 [16, 64] -> packed codes [16, 32] bytes and e4m3 scales [16, 4]: 2*16*64 + 16*32 + 16*4 =
    2,624 bytes. The sixteen `codes[mask] = v` are selects over all elements (one value per mask), so
    the program is not value-dependent and validates on fresh inputs; the lifted one-element values
    are literals, not reads."""
    (r,) = _json_runs([str(DATA / "nvfp4_quantize"), "--roofline", "fused", "--hw", "B200"], monkeypatch,
                      tmp_path)
    v = r["validation"]
    assert v["validated"] and v["samples"] == 3 and not r["value_dependent"], v
    assert r["totals"]["bytes_fused"] == 2 * 16 * 64 + 16 * 32 + 16 * 4


MASKED_PUT = """\
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        y = x.clone()
        y[x > 0.5] = 2.0
        return torch.index_put(y, (x < -1.0,), torch.tensor(1.0), accumulate=True)


def get_inputs():
    return [torch.randn(8, 32)]


def get_init_inputs():
    return []
"""


def test_masked_index_put_is_a_select(monkeypatch, tmp_path: Path) -> None:
    f = tmp_path / "masked_put.py"
    f.write_text(MASKED_PUT)
    (r,) = _json_runs([str(f), "--translate", "--roofline", "fused", "--hw", "B200"], monkeypatch, tmp_path)
    assert r["validation"]["validated"] and r["validation"]["samples"] == 3, r["validation"]
    assert not r["value_dependent"]
    assert r["totals"]["bytes_fused"] == 2 * 4 * 8 * 32  # x read once, the result written once


SCALED_MM = """\
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, a, b, sa, sb):
        return torch._scaled_mm(a, b.t(), scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)


def get_inputs():
    a = torch.randn(64, 128).clamp(-2, 2).to(torch.float8_e4m3fn)
    b = torch.randn(32, 128).clamp(-2, 2).to(torch.float8_e5m2)
    return [a, b, torch.rand(64, 1), torch.rand(1, 32)]


def get_init_inputs():
    return []
"""


def test_scaled_mm_row_and_column_scales(monkeypatch, tmp_path: Path) -> None:
    """e4m3 [64, 128] x e5m2 [128, 32] with f32 row and column scales, bf16 out: 2*64*32*128 matrix
    FLOPs on the FP8 unit (mixed fp8 operands); bytes 64*128 + 32*128 + 4*64 + 4*32 + 2*64*32."""
    f = tmp_path / "scaled_mm.py"
    f.write_text(SCALED_MM)
    (r,) = _json_runs([str(f), "--translate", "--roofline", "fused", "--hw", "B200"], monkeypatch, tmp_path)
    assert r["validation"]["validated"], r["validation"]
    flops = 2 * 64 * 32 * 128
    assert r["totals"]["flops_matrix"] == flops
    assert r["totals"]["bytes_fused"] == 64 * 128 + 32 * 128 + 4 * 64 + 4 * 32 + 2 * 64 * 32
    rate = load_target("B200").matrix["fp8"].value
    assert math.isclose(r["bounds"]["B200"]["fused_terms_s"]["matrix"], flops / rate, rel_tol=1e-9)



def _signed_decode(sign: str) -> str:
    """A GEMM on values decoded from 4-bit codes: a table of the eight e2m1 magnitudes times a factor
    computed from bit 3 (`sign`), a product the dtype rules alone see as f32."""
    return f"""
kernel k(A: u8[8, 64] input, T: f4e2m1[8] weight, B: f8e4m3[64, 8] input, Y: f32[8, 8] output):
    local V: f32[8, 64]
    for i in range(8):
        for k in range(64):
            V[i, k] = f32(T[i64(A[i, k] and 7)]) * {sign}
    for i in range(8):
        for j in range(8):
            Y[i, j] = 0.0
            for k in range(64):
                Y[i, j] += V[i, k] * f32(B[k, j])
"""


@pytest.mark.parametrize(("sign", "operand", "pair"), [
    ("(1.0 - 2.0 * f32(A[i, k] // 8 and 1))", "f4e2m1", "f8e4m3"),  # +-1 times e2m1: e2m1
    ("(1.0 - 0.75 * f32(A[i, k] // 8 and 1))", "bf16", "bf16"),     # 0.25 * 1.5 = 0.375: no e2m1
])
def test_value_sets_see_through_arithmetic_on_codes(sign: str, operand: str, pair: str) -> None:
    """Each value of V is evaluated over every code (value_sets.py): a sign of +-1 keeps the e2m1
    magnitudes e2m1 values, so with e4m3 B the contraction is fp8; a factor of 1 or 0.25 makes values
    such as 0.375 that only bf16 holds exactly (fp8 literals are never assumed)."""
    from solar_compiler.analysis.structured import operand_factors, reduced_dims, stored_value
    g = lift_kernel(typecheck(parse_kernel(_signed_decode(sign), "t.loop")))
    n = g.nodes()[-1]
    vd = ValueDtypes(g)
    v = operand_factors(stored_value(n))[0]
    assert vd.stored(n, v, reduced_dims(n)) == operand
    assert contraction_dtype(n, vd) == pair


# ---- NVFP4 as vLLM's reference writes it: a sign factor, a bf16 cast of the dequantised values ----------
SIZE = 8192  # large enough that the GEMM, not the DRAM term (C in f32, codes a byte each), bounds it
GEMM_FLOPS = 2 * SIZE**3  # 1,099,511,627,776
FP4_S = GEMM_FLOPS / 9e15  # B200 FP4 dense: 122.17 us


def _b200(text: str) -> tuple[str, float, float]:
    """The contraction's dtype, and the fused bound and its matrix term on B200."""
    g = kernel_costs(parse_kernel(text, "t.loop"))
    b = graph_bounds(g, load_target("B200"))
    return g.ops[-1].matrix_dtype, b.fused_s, b.fused_matrix_s


def _signed(code: str, scale: str) -> str:
    """`t8[code & 7] * where(code & 8, -1, 1) * scale[k // 16]` for A (i) and B (j), the factors in the
    contraction's own body, as the catalogue's reordered trees fold vLLM's `break_fp4_bytes` in."""
    def side(x: str, s: str, i: str) -> str:
        c = f"{x}[{i}, k]"
        return f"f32(T[i64({c} and 7)]) * (-1.0 if bool({c} and 8) else 1.0) * {scale.format(s=s, i=i)}"
    return f"""kernel k(A: u8[{SIZE}, {SIZE}] input, SA: f8e4m3[{SIZE}, {SIZE // 16}] input, \
B: u8[{SIZE}, {SIZE}] input, SB: f8e4m3[{SIZE}, {SIZE // 16}] input, T: f4e2m1[8] weight, \
C: f32[{SIZE}, {SIZE}] output):
    for i in range({SIZE}):
        for j in range({SIZE}):
            C[i, j] = 0.0
            for k in range({SIZE}):
                C[i, j] += {side("A", "SA", "i")} * {side("B", "SB", "j")}
"""


def test_where_sign_times_table_value_is_fp4() -> None:
    """A {-1, 1} sign (an i8 value) times an e2m1 magnitude (no integer) joins to bf16, yet each
    product is an e2m1 value: the operand is priced by its product (operand_products.py), so the GEMM
    runs at FP4, 2 * 8192^3 / 9 PFLOP/s = 122.17 us (was 488.67 at BF16)."""
    dtype, fused_s, matrix_s = _b200(_signed("", "f32({s}[{i}, k // 16])"))
    assert dtype == "f4e2m1"
    assert fused_s == pytest.approx(FP4_S, rel=1e-12) and matrix_s == fused_s


def _cast(levels: int, scale: str = "f32(SA[i, k // 16])", dtype: str = "bf16") -> str:
    """`(table[code] * scale[k // 16]).to(dtype)` as A's operand: in one writer (`levels` 1) or, as
    vLLM's `dequantize_to_dtype` is captured, the product in one local and its cast in the next."""
    prod = f"f32(T[i64(A[i, k])]) * {scale}"
    head = f"""kernel k(A: u8[{SIZE}, {SIZE}] input, SA: f8e4m3[{SIZE}, {SIZE // 16}] input, \
X: f32[{SIZE}, {SIZE}] input, B: bf16[{SIZE}, {SIZE}] input, T: f4e2m1[16] weight, \
C: f32[{SIZE}, {SIZE}] output):
    local P: f32[{SIZE}, {SIZE}]
    local D: {dtype}[{SIZE}, {SIZE}]
"""
    if levels == 1:
        body = f"""    for i in range({SIZE}):
        for k in range({SIZE}):
            D[i, k] = {dtype}({prod})
"""
    else:
        body = f"""    for i in range({SIZE}):
        for k in range({SIZE}):
            P[i, k] = {prod}
    for i in range({SIZE}):
        for k in range({SIZE}):
            D[i, k] = {dtype}(P[i, k])
"""
    return head + body + f"""    for i in range({SIZE}):
        for j in range({SIZE}):
            C[i, j] = 0.0
            for k in range({SIZE}):
                C[i, j] += f32(D[i, k]) * f32(B[j, k])
"""


@pytest.mark.parametrize("levels", [1, 2])
def test_rounding_cast_of_block_scaled_fp4_is_looked_through(levels: int) -> None:
    """bf16(e2m1 value * e4m3 scale[k // 16]) (each product exact in bf16: at most 6 significant bits)
    with a bf16 B: the A operand is e2m1 (`value_dtypes.rounding_cast`), the pair e2m1 x bf16 is bf16
    (priced at BF16 whatever A is). With e2m1 B too (below) the GEMM is FP4."""
    dtype, _, _ = _b200(_cast(levels))
    assert dtype == "bf16"
    text = _cast(levels).replace(f"B: bf16[{SIZE}, {SIZE}]", f"B: u8[{SIZE}, {SIZE}]") \
        .replace("f32(B[j, k])", "f32(T[i64(B[j, k])])")
    dtype, fused_s, matrix_s = _b200(text)
    assert dtype == "f4e2m1"
    assert fused_s == pytest.approx(FP4_S, rel=1e-12) and matrix_s == fused_s


@pytest.mark.parametrize(("scale", "dtype", "want"), [
    ("f32(SA[i, k // 16]) / 3.0", "bf16", "f4e2m1"),  # a global scale folded in: the rounding is real
    ("X[i, k // 16]", "f16", "f4e2m1"),              # an f32 scale per block, cast to f16
    ("X[i, k]", "bf16", "bf16"),                     # a scale per element is data: bf16 as written
])
def test_rounding_cast_rules(scale: str, dtype: str, want: str) -> None:
    text = _cast(2, scale, dtype).replace(f"B: bf16[{SIZE}, {SIZE}]", f"B: u8[{SIZE}, {SIZE}]") \
        .replace("f32(B[j, k])", "f32(T[i64(B[j, k])])")
    assert _b200(text)[0] == want


def test_cast_of_a_wide_scaled_product_keeps_the_cast_dtype() -> None:
    """bf16(x * s[k // 16]) on f32 x: the look-through finds f32 values under the scale, wider than
    the cast's bf16, and keeps bf16 (it never prices above the value as written)."""
    text = _cast(1, "X[i, k] * f32(SA[i, k // 16])").replace("f32(T[i64(A[i, k])]) * ", "")
    assert _b200(text)[0] == "bf16"


def _sign_times(dtype: str) -> str:
    return f"""kernel k(A: {dtype}[{SIZE}, {SIZE}] input, S: bool[{SIZE}, {SIZE}] input, \
B: {dtype}[{SIZE}, {SIZE}] input, C: f32[{SIZE}, {SIZE}] output):
    for i in range({SIZE}):
        for j in range({SIZE}):
            C[i, j] = 0.0
            for k in range({SIZE}):
                C[i, j] += f32(A[i, k]) * (-1.0 if S[i, k] else 1.0) * f32(B[k, j])
"""


@pytest.mark.parametrize(("dtype", "want"), [
    # -128 * -1 = 128 is no int8 value: A's products lie in [-128, 128], which bf16 holds (to 256)
    ("i8", "bf16"),
    # every float format is symmetric about zero: a sign keeps an e4m3 value e4m3
    ("f8e4m3", "f8e4m3"),
    ("bf16", "bf16"),
])
def test_sign_factor_keeps_only_symmetric_formats(dtype: str, want: str) -> None:
    assert _b200(_sign_times(dtype))[0] == want


def test_product_of_two_fp4_values_is_fp8() -> None:
    """Two e2m1 table entries multiplied into one operand (1.5 * 1.5 = 2.25: 4 significant bits) are
    e4m3 values, not e2m1 ones; B's stay e2m1, which e4m3 holds: FP8, 244.34 us."""
    text = _signed("", "f32({s}[{i}, k // 16])").replace("(-1.0 if bool(A[i, k] and 8) else 1.0)",
                                                        "f32(T[i64(A[i, k] // 16)])")
    dtype, fused_s, _ = _b200(text)
    assert dtype == "f8e4m3"
    assert fused_s == pytest.approx(GEMM_FLOPS / 4.5e15, rel=1e-12)


def test_nvfp4_gemm_vllm_problem(monkeypatch, tmp_path: Path) -> None:
    """vLLM's reference (`nvfp4_gemm_vllm`, M = 32, N = K = 64): the sign as `torch.where(signs, -1.0,
    1.0)` times `kE2M1ToFloat[abs]`, the e4m3 scales divided by a global scale, the dequantised
    operands cast to bf16 before `torch.matmul`. The GEMM is FP4 (a sign keeps e2m1 values e2m1; the
    bf16 cast of a block-scaled e2m1 product is looked through): 2*32*64*64 = 262,144 FLOPs at 9
    PFLOP/s, 29.1 ps (116.5 at BF16 before). Stored bytes: A 1,024, B 2,048, scales 128 + 256, C
    4,096, the one 8-entry table both decodes share 1 under `--indirect min`. At M = 1024, N = K =
    4096 (SOL-ExecBench's nvfp4_scaled_mm workload) the bound is 34.36 GFLOPs / 9 PFLOP/s = 3.818 us,
    where it printed 15.271 us at BF16."""
    argv = [str(DATA / "nvfp4_gemm_vllm"), "--roofline", "fused", "--hw", "B200", "--indirect", "min"]
    (r,) = _json_runs(argv, monkeypatch, tmp_path)
    assert r["validation"]["validated"], r["validation"]
    flops = 2 * 32 * 64 * 64
    assert [o["matrix_dtype"] for o in r["ops"] if o["matrix_dtype"]] == ["f4e2m1"]
    assert r["totals"]["flops_matrix"] == flops
    assert r["totals"]["bytes_fused"] == 32 * 32 + 64 * 32 + 32 * 4 + 64 * 4 + 2 * 32 * 64 + 1
    rate = load_target("B200").matrix["fp4"].value  # 9 PFLOP/s
    assert math.isclose(r["bounds"]["B200"]["fused_terms_s"]["matrix"], flops / rate, rel_tol=1e-9)
