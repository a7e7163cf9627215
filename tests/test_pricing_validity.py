"""Issue 21 (pricing of low-precision operands and the hardware rates, and the frontend crash on
torch.any): each test uses the issue's figure and failed before its fix."""

from __future__ import annotations

import json

import numpy as np
import pytest
from translated import roofline_json, translated_programs

from solar_compiler.driver import main

ANY_ALL = """
import torch
class Model(torch.nn.Module):
    def forward(self, x, q):
        return torch.any(x > 0.5, dim=1), torch.all(x > -0.5, dim=1), torch.any(x), q.amax(1)
def get_inputs():
    return [torch.rand(64, 128), torch.randint(-100, 100, (64, 128), dtype=torch.int8)]
def get_init_inputs():
    return []
"""

BOOL_MM = """
import torch
class Model(torch.nn.Module):
    def forward(self, a, b):
        return a.float() @ b.float()
def get_inputs():
    return [torch.rand(2048, 2048) > 0.5, torch.rand(2048, 2048) > 0.5]
def get_init_inputs():
    return []
"""


def _mm(a: str, b: str, n: int = 2048, scale: str = "") -> str:
    return f"""
import torch
class Model(torch.nn.Module):
    def forward(self, a, b):
        return (a.float(){scale}) @ b.float()
def get_inputs():
    return [torch.randn({n}, {n}).to({a}), torch.randn({n}, {n}).to({b})]
def get_init_inputs():
    return []
"""


BLOCK_FP8 = """
import torch
M = N = K = 1024
class Model(torch.nn.Module):
    def forward(self, a, sa, b, sb):
        # fp8 operands dequantised in the reference: a with 1 x 128 scales, b with 128 x 128 scales
        ad = (a.float().view(M, K // 128, 128) * sa[:, :, None]).view(M, K)
        bd = (b.float().view(K // 128, 128, N // 128, 128) * sb[:, None, :, None]).view(K, N)
        return ad @ bd
def get_inputs():
    return [torch.randn(M, K).to(torch.float8_e4m3fn), torch.rand(M, K // 128) + 0.5,
            torch.randn(K, N).to(torch.float8_e4m3fn), torch.rand(K // 128, N // 128) + 0.5]
def get_init_inputs():
    return []
"""

# a per-element scale varies along k: no block to apply it to, so it stays f32 work
ELEMENT_SCALED = """
import torch
class Model(torch.nn.Module):
    def forward(self, a, s, b):
        return (a.float() * s) @ b.float()
def get_inputs():
    return [torch.randn(256, 256).bfloat16(), torch.rand(256, 256), torch.randn(256, 256).bfloat16()]
def get_init_inputs():
    return []
"""

# torch._int_mm (int8 x int8 -> int32) had no template: an LLM-only op
INT_MM = """
import torch
class Model(torch.nn.Module):
    def forward(self, a, b):
        return torch._int_mm(a, b)
def get_inputs():
    return [torch.randint(-128, 128, (64, 128), dtype=torch.int8),
            torch.randint(-128, 128, (128, 96), dtype=torch.int8)]
def get_init_inputs():
    return []
"""

PROGRAMS = {"any_all": ANY_ALL, "bool_mm": BOOL_MM, "int_mm": INT_MM,
            "e4m3_e5m2": _mm("torch.float8_e4m3fn", "torch.float8_e5m2"),
            "f16_bf16": _mm("torch.float16", "torch.bfloat16"),
            "bf16_x2": _mm("torch.bfloat16", "torch.bfloat16", scale=" * 2.0"),
            "block_fp8": BLOCK_FP8, "element_scaled": ELEMENT_SCALED}


@pytest.fixture(scope="module")
def torch_files(tmp_path_factory):
    """The programs here, translated (and validated) into a private translation cache."""
    pytest.importorskip("torch")
    with translated_programs(tmp_path_factory.mktemp("pricing"), PROGRAMS) as paths:
        yield paths


# ---- torch.any / torch.all: an i8 accumulator took the i64 extreme as its init (OverflowError) ----
def test_any_all_and_int8_amax_translate_validate_and_count(capsys, torch_files):
    r = roofline_json(capsys, torch_files["any_all"])
    assert r["validation"]["validated"] and r["validation"]["max_rel_err"] == 0.0
    t = r["totals"]
    # x f32 64x128 (32,768 B) and q i8 (8,192 B) read, outputs bool[64] x 2, bool[] and i8[64] written
    assert t["bytes_fused"] == 32_768 + 8_192 + 64 + 64 + 1 + 64 == 41_153
    # 8,192-element steps: 2 compares, 2 max= of any, 1 not of all (= not any(not)), compare + max= of
    # the full any, amax; and the final not of all over 64 rows: 65,600 as written. The not and its
    # compare are one step function of x (`x <= -0.5`, analysis/step_functions.py): one op, 57,408
    assert t["flops"] == 7 * 8_192 + 64 == 57_408
    assert r["classical"]["totals"]["flops"] == 8 * 8_192 + 64 == 65_600


def test_any_all_agree_with_torch_including_all_false_and_all_true_rows(torch_files):
    """Executed on inputs where rows are all below, all above and mixed: torch's values exactly (the
    init is 0 for any and 1 for all, not the i8 extreme, which would make any() True everywhere)."""
    import torch

    from solar_compiler.executor import execute
    from solar_compiler.frontends.model_file import load_model_file
    from solar_compiler.frontends.torch.capture import capture
    from solar_compiler.frontends.torch.translate import translate_program

    tt = translate_program(capture(load_model_file(torch_files["any_all"]), mode="eval"))
    rng = np.random.default_rng(1)
    x = rng.random((64, 128), dtype=np.float32)
    x[:8] = 0.25   # no element > 0.5; all > -0.5
    x[8:16] = -1.0  # all false for both
    x[16:24] = 0.0  # any(x) sees zeros here only
    q = rng.integers(-128, 0, (64, 128), dtype=np.int8)  # amax is negative: an init of 0 would show
    got = execute(tt.validation_kernel(), {tt.inputs["x"]: x, tt.inputs["q"]: q})
    want = _reference(torch.from_numpy(x), torch.from_numpy(q))
    for pos, w in enumerate(want):
        np.testing.assert_array_equal(np.asarray(got[tt.outputs[pos]]), w.numpy())


def _reference(x, q):  # the forward of ANY_ALL
    import torch

    return torch.any(x > 0.5, dim=1), torch.all(x > -0.5, dim=1), torch.any(x), q.amax(1)


def report(capsys, path: str, hw: str, *extra: str) -> dict:
    """The JSON report of `solar-opt PATH --translate --roofline=all --hw HW EXTRA...`."""
    rc = main([path, "--translate", "--roofline=all", "--hw", hw, "--format=json", *extra])
    out = capsys.readouterr()
    assert rc == 0, out.err
    return json.loads(out.out)


# ---- item 7: A100 INT4 and binary tensor rates; a bool matmul through .float() ----------------------------
def test_bool_matmul_through_float_runs_on_a100_binary_tensor_cores(capsys, torch_files):
    """Was 27.5 us (2 x 2048^3 at INT8 624 TOPS); the issue's lower bound is 12.3 us, the DRAM term:
    2 bool inputs (4 MiB each) read, the f32 result (16 MiB) written, at 2.039 TB/s. The products of
    {0, 1} values are exact on the binary unit (AND + popcount, 4,992 TOPS): 3.44 us of compute."""
    r = report(capsys, torch_files["bool_mm"], "A100_SXM")
    assert r["validation"]["validated"]
    t = r["totals"]
    assert t["flops"] == t["flops_matrix"] == 2 * 2048**3
    assert t["bytes_fused"] == 2 * 2048**2 + 4 * 2048**2 == 25_165_824
    (op,) = [o for o in r["ops"] if o["flops"]]
    assert op["matrix_dtype"] == "bool"
    fused = r["bounds"]["A100_SXM"]["fused_s"]
    assert fused == pytest.approx(25_165_824 / 2.039e12, rel=1e-12)
    assert round(fused * 1e6, 1) == 12.3 and fused * 1e6 < 27.5
    assert r["bounds"]["A100_SXM"]["fused_terms_s"]["matrix"] == pytest.approx(2 * 2048**3 / 4992e12,
                                                                               rel=1e-12)
    assert r["hw"]["A100_SXM"]["matrix"]["bool"]["figure"] == "matrix.binary"


# ---- mixed operand pairs and exact scalings (H100_SXM: BF16 989.4, FP8 1978.9, TF32 494.7 TFLOP/s) --------
MM2048 = 2 * 2048**3  # 17,179,869,184 FLOPs


def _matrix(r: dict, hw: str = "H100_SXM") -> tuple[str, str, float]:
    (op,) = [o for o in r["ops"] if o["flops_matrix"]]
    fig = r["hw"][hw]["matrix"][op["matrix_dtype"]]
    return op["matrix_dtype"], fig["figure"], r["bounds"][hw]["fused_terms_s"]["matrix"]


def test_e4m3_times_e5m2_runs_on_hopper_fp8_tensor_cores(capsys, torch_files):
    """Was 17.4 us (the pair joined to bf16); Hopper's fp8 MMA takes mixed e4m3/e5m2: 8.68 us."""
    r = report(capsys, torch_files["e4m3_e5m2"], "H100_SXM")
    assert r["validation"]["validated"]
    assert _matrix(r)[:2] == ("f8e4m3*f8e5m2", "matrix.fp8")
    fused = r["bounds"]["H100_SXM"]["fused_s"]
    assert fused == pytest.approx(MM2048 / 1978.9e12, rel=1e-12) and round(fused * 1e6, 2) == 8.68
    # A100 has no fp8 unit: both fp8 variants fit FP16, the pair runs there (312 TFLOP/s)
    r = report(capsys, torch_files["e4m3_e5m2"], "A100_SXM")
    assert _matrix(r, "A100_SXM")[1] in ("matrix.fp16", "matrix.bf16")


def test_f16_times_bf16_under_fp32_policy_runs_on_tf32(capsys, torch_files):
    """Was 52.1 us under --precision fp32 (joined to f32: Ozaki-II); TF32 holds every f16 and bf16
    value exactly, whatever the policy: 34.7 us."""
    r = report(capsys, torch_files["f16_bf16"], "H100_SXM", "--precision", "fp32")
    assert _matrix(r)[:2] == ("bf16*f16", "matrix.tf32")
    fused = r["bounds"]["H100_SXM"]["fused_s"]
    assert fused == pytest.approx(MM2048 / 494.7e12, rel=1e-12) and round(fused * 1e6, 1) == 34.7


def test_an_exact_scaling_keeps_the_upcast_look_through(capsys, torch_files):
    """(a.float() * 2.0) @ b.float() on bf16: was 34.7 us at TF32; 2 * (A @ B) runs at BF16: 17.4 us.
    The multiply stays vector work (2048^2 FLOPs)."""
    r = report(capsys, torch_files["bf16_x2"], "H100_SXM")
    assert r["validation"]["validated"]
    dt, fig, t_matrix = _matrix(r)
    assert (dt, fig) == ("bf16", "matrix.bf16") and t_matrix == pytest.approx(MM2048 / 989.4e12, rel=1e-12)
    # classical: the multiply by 2 as written; the default model may fold the scale into the tree
    assert r["classical"]["totals"]["flops_vector"] == 2048**2
    assert r["totals"]["flops_vector"] <= 2048**2
    assert round(r["bounds"]["H100_SXM"]["fused_s"] * 1e6, 1) == 17.4


def test_block_scaled_fp8_gemm_is_priced_at_the_fp8_rate(capsys, torch_files):
    """The B200 case in small: fp8 operands with 1 x 128 and 128 x 128 fp32 scales, dequantised before
    the matmul. Was priced at TF32 (2 x 1024^3 / 1125 TFLOP/s = 1.909 us of compute on B200); the
    per-block scales apply in the accumulator, so FP8 4.5 PFLOP/s: 0.477 us, and the bound is the DRAM
    term (two 1 MiB fp8 operands, 32 KiB + 256 B of scales, a 4 MiB f32 result at 8 TB/s)."""
    r = report(capsys, torch_files["block_fp8"], "B200")
    assert r["validation"]["validated"]
    dt, fig, t_matrix = _matrix(r, "B200")
    assert (dt, fig) == ("f8e4m3", "matrix.fp8")
    assert t_matrix == pytest.approx(2 * 1024**3 / 4.5e15, rel=1e-12)
    assert r["totals"]["bytes_fused"] == 2 * 1024**2 + 1024 * 8 * 4 + 8 * 8 * 4 + 4 * 1024**2 == 6_324_480
    fused = r["bounds"]["B200"]["fused_s"]
    assert fused == pytest.approx(6_324_480 / 8.0e12, rel=1e-12) and fused < 2 * 1024**3 / 1125e12


def test_a_per_element_scale_is_not_looked_through(capsys, torch_files):
    """(a.float() * s) @ b.float() with s varying along k: the products are of f32 values, so the
    contraction stays f32 (TF32 under auto), never BF16."""
    r = report(capsys, torch_files["element_scaled"], "H100_SXM")
    assert _matrix(r)[:2] == ("f32", "matrix.tf32")


# ---- item 6 (part): repeated notes are folded in the JSON too ---------------------------------------------
def test_int_mm_runs_on_int8_tensor_cores(capsys, torch_files):
    # 2 x 64 x 128 x 96 = 1,572,864 INT8 operations at 1978.9 TOPS on H100 (exact: int32 sums);
    # bytes: a 8,192, b 12,288, the i32 output 24,576
    r = roofline_json(capsys, torch_files["int_mm"])
    assert r["validation"]["validated"] and r["validation"]["max_rel_err"] == 0
    assert r["totals"]["flops_matrix"] == 1_572_864 and r["totals"]["bytes_fused"] == 45_056
    matrix = r["bounds"]["H100_SXM"]["fused_terms_s"]["matrix"]
    assert matrix == pytest.approx(1_572_864 / 1978.9e12, rel=1e-12)


def test_repeated_notes_are_folded_with_their_count():
    """Repeated notes are one entry with their count. (A value read per iteration of a Python loop is
    noted once per source line by the capture, and a loop of more than 64 reads is refused with its
    line: tests/test_baked_constants.py; the issue's 4,096 identical entries can no longer arise.)"""
    from solar_compiler.analysis.summary import fold_repeats

    assert fold_repeats(["b", "a", "b", "c", "b"]) == ["b (x3)", "a", "c"]
    assert fold_repeats(["a"] * 128) == ["a (x128)"]
