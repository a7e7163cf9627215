"""Integer-valued operands (value_sets.py, `Range`): a fake-quantised or sign operand is priced at the
narrowest dtype that holds each integer it can take.

H100_SXM: INT8 and FP8 1978.9 TOPS / TFLOP/s dense, BF16 989.4, TF32 494.7 (fp32 operands under
`--precision auto`). A 4096^3 GEMM is 2 * 4096^3 = 137,438,953,472 FLOPs.
"""

from __future__ import annotations

import pytest

from solar_compiler.analysis.bounds import graph_bounds
from solar_compiler.analysis.value_sets import holds_range, narrowest_range
from solar_compiler.hw import load_target
from solar_compiler.text.parser import parse_kernel
from solar_compiler.transforms.kernels import kernel_costs

N = 4096
MM_FLOPS = 2 * N**3


def _quantised(dtype: str, code: str) -> str:
    """C = Q(A) @ Q(B) where Q(x) is `code` with x in place of X, each operand in its own local."""
    return f"""kernel fq(A: {dtype}[{N}, {N}] input, B: {dtype}[{N}, {N}] input, C: {dtype}[{N}, {N}] output):
    local Aq: {dtype}[{N}, {N}]
    local Bq: {dtype}[{N}, {N}]
    for i in range({N}):
        for k in range({N}):
            Aq[i, k] = {code.replace("X", "A[i, k]")}
    for k in range({N}):
        for j in range({N}):
            Bq[k, j] = {code.replace("X", "B[k, j]")}
    for i in range({N}):
        for j in range({N}):
            C[i, j] = 0
            for k in range({N}):
                C[i, j] += Aq[i, k] * Bq[k, j]
"""


def _priced(text: str) -> tuple[str, float]:
    g = kernel_costs(parse_kernel(text, "t.loop"))
    return g.ops[-1].matrix_dtype, graph_bounds(g, load_target("H100_SXM")).fused_s


@pytest.mark.parametrize(("dtype", "code", "want", "rate"), [
    # torch.clamp(torch.round(x * 16), -128, 127): 256 integers, each an int8 value (was TF32, 277.8 us)
    ("f32", "min(max(round(X * 16.0), -128.0), 127.0)", "i8", 1978.9e12),
    ("bf16", "min(max(round(X * 16.0), -128.0), 127.0)", "i8", 1978.9e12),
    # sign(x) in {-1, 0, 1} whatever x is (binarised networks)
    ("bf16", "sign(X)", "i8", 1978.9e12),
    # floor into [0, 255]: uint8 codes
    ("f32", "min(max(floor(X * 8.0), 0.0), 255.0)", "u8", 1978.9e12),
    # [-200, 200] holds in no 8-bit type, but bf16 holds every integer up to 256
    ("f32", "min(max(round(X * 16.0), -200.0), 200.0)", "bf16", 989.4e12),
    # a rounded value with no clamp may be any integer: TF32 under auto, as written
    ("f32", "round(X * 16.0)", "f32", 494.7e12),
    # the clamp of an unrounded value is no integer
    ("f32", "min(max(X * 16.0, -128.0), 127.0)", "f32", 494.7e12),
])
def test_integer_operands_are_priced_at_the_narrowest_holding_dtype(dtype, code, want, rate):
    got, fused_s = _priced(_quantised(dtype, code))
    assert got == want
    assert fused_s == pytest.approx(MM_FLOPS / rate, rel=1e-12)


def test_int8_fake_quant_figure():
    # 137,438,953,472 / 1978.9e12 = 69.45 us, against 277.82 us at TF32 before
    _, fused_s = _priced(_quantised("f32", "min(max(round(X * 16.0), -128.0), 127.0)"))
    assert round(fused_s * 1e6, 2) == 69.45


def test_range_rules():
    assert holds_range("i8", (-128.0, 127.0)) and not holds_range("i8", (-129.0, 0.0))
    assert holds_range("f8e4m3", (-16.0, 16.0)) and not holds_range("f8e4m3", (0.0, 17.0))
    assert holds_range("f8e5m2", (-8.0, 8.0)) and not holds_range("f8e5m2", (0.0, 9.0))
    assert holds_range("bf16", (-256.0, 256.0)) and not holds_range("bf16", (0.0, 257.0))
    assert holds_range("f4e2m1", (-4.0, 4.0)) and not holds_range("f4e2m1", (0.0, 5.0))
    order = ["bool", "i8", "u8", "bf16", "f32"]
    assert narrowest_range((0.0, 1.0), order) == "bool"
    assert narrowest_range((0.0, 200.0), order) == "u8"
    assert narrowest_range((float("-inf"), 0.0), order) is None
