"""Bit casts (`bitcast(x, i32)`, `loop.bitcast`): torch's `x.view(dtype)` between dtypes of one width,
end to end. torchao's MXFP8 quantisation (`to_mx`) reads a block's exponent through an f32 -> i32 view
and builds its power-of-two scale back through an i32 -> f32 one. A bit cast is a register
reinterpretation: 0 FLOPs, no bytes of its own; the figures below are derived by hand."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import numpy as np
import pytest

from solar_compiler.analysis.value_dtypes import ValueDtypes
from solar_compiler.dialects.graph_convert import lift_kernel
from solar_compiler.driver import main
from solar_compiler.executor import execute
from solar_compiler.frontends.torch.validation import _widen_kernel
from solar_compiler.loopir.ast import Bitcast, Cast, Read, RuleError, bitcast_result, typecheck
from solar_compiler.text.parser import parse_kernel
from solar_compiler.text.printer import print_kernel
from solar_compiler.transforms.chain_sample import to_f64

torch = pytest.importorskip("torch")
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


def _model(tmp_path: Path, name: str, forward: str, inputs: str) -> Path:
    f = tmp_path / f"{name}.py"
    f.write_text(f"import torch\n\n\nclass Model(torch.nn.Module):\n    def forward(self, {forward}\n\n\n"
                 f"def get_inputs():\n    return [{inputs}]\n\n\ndef get_init_inputs():\n    return []\n")
    return f


# ---- the rule and the text form -----------------------------------------------------------------------
@pytest.mark.parametrize(("src", "dst"), [("f32", "i32"), ("i32", "f32"), ("bf16", "i16"), ("f16", "u16"),
                                          ("bf16", "f16"), ("f64", "i64"), ("f8e4m3", "u8"),
                                          ("i8", "f8e5m2")])
def test_equal_widths_bit_cast(src: str, dst: str) -> None:
    assert bitcast_result(src, dst) == dst


@pytest.mark.parametrize(("src", "dst"), [("f32", "i16"), ("f32", "u8"), ("bool", "u8"), ("i8", "bool"),
                                          ("f4e2m1", "u8")])
def test_other_widths_and_bool_do_not(src: str, dst: str) -> None:
    with pytest.raises(RuleError, match=f"bit cast from {src} to {dst}"):
        bitcast_result(src, dst)


TEXT = """\
kernel k(X: f32[8] input, E: i32[8] input, Y: i32[8] output, Z: f32[8] output):
    for i in range(8):
        Y[i] = bitcast(X[i], i32) // 8388608 and 255
        Z[i] = bitcast(E[i] * 8388608, f32) * bitcast(i32(1065353216), f32) + f32(bitcast(X[i], i32))
"""


def test_text_round_trip() -> None:
    """parse -> print -> parse gives the same typed kernel, and printing it again the same text; a
    literal operand keeps its explicit type (its default, i64, has another width)."""
    k = parse_kernel(TEXT, "k.loop")
    assert print_kernel(k) == TEXT
    assert parse_kernel(print_kernel(k)) == k
    z = k.body[0].body[1].value
    assert z.b == Cast(Bitcast(Read("X", z.b.x.x.indices, "f32"), "i32"), "f32")  # a cast of a bit cast


# ---- torch programs -------------------------------------------------------------------------------------
def test_exponent_field_validates_with_exact_counts(monkeypatch, tmp_path: Path) -> None:
    """`(x.view(torch.int32) >> 23) & 0xFF`, x f32[4, 8]: the bit cast is inlined into the shift's read.
    FLOPs: 32 shifts + 32 masks = 64 (the bit cast none). Bytes fused: x 32 * 4 + the i32 result 32 * 4
    = 256; unfused: the shift (x in, i32 out: 256) and the mask (256) = 512."""
    f = _model(tmp_path, "exponent", "x):\n        return (x.view(torch.int32) >> 23) & 0xFF",
               "torch.randn(4, 8) * 100")
    (r,) = _json_runs([str(f), "--translate", "--roofline", "all", "--hw", "B200"], monkeypatch, tmp_path)
    assert r["validation"]["validated"] and r["validation"]["max_rel_err"] == 0.0, r["validation"]
    t = r["totals"]
    assert (t["flops"], t["flops_matrix"], t["flops_vector"]) == (64, 0, 64)
    assert (t["bytes_fused"], t["bytes_unfused"]) == (256, 512)


def test_power_of_two_from_exponent_validates_with_exact_counts(monkeypatch, tmp_path: Path) -> None:
    """`(e << 23).view(torch.float32)`, e i32[4, 8] in [1, 255): FLOPs: 32 shifts (a product by 2^23).
    A view returned as an output is materialised by one copy (the frontend's rule for every view):
    the shift's i32 local read and the f32 output written through the bit cast. Bytes fused: e 128
    + the result 128 = 256; unfused: the shift (256) and the output copy (256) = 512."""
    f = _model(tmp_path, "pow2", "e):\n        return (e << 23).view(torch.float32)",
               "torch.randint(1, 255, (4, 8), dtype=torch.int32)")
    (r,) = _json_runs([str(f), "--translate", "--roofline", "all", "--hw", "B200"], monkeypatch, tmp_path)
    assert r["validation"]["validated"] and r["validation"]["max_rel_err"] == 0.0, r["validation"]
    t = r["totals"]
    assert (t["flops"], t["flops_vector"]) == (32, 32)
    assert (t["bytes_fused"], t["bytes_unfused"]) == (256, 512)


def test_a_bit_cast_view_is_read_through_by_its_consumer(monkeypatch, tmp_path: Path) -> None:
    """`(e << 23).view(torch.float32) * x`: no statement for the view, the product reads the shifted
    local through the bit cast. FLOPs 32 + 32 = 64; bytes fused e, x and the result, 3 * 128 = 384;
    unfused the shift (256) and the product (the local and x in, the result out: 384) = 640."""
    f = _model(tmp_path, "scaled", "e, x):\n        return (e << 23).view(torch.float32) * x",
               "torch.randint(100, 150, (4, 8), dtype=torch.int32), torch.randn(4, 8)")
    (r,) = _json_runs([str(f), "--translate", "--roofline", "all", "--hw", "B200"], monkeypatch, tmp_path)
    assert r["validation"]["validated"], r["validation"]
    t = r["totals"]
    assert (t["flops"], t["bytes_fused"], t["bytes_unfused"]) == (64, 384, 640)


def test_a_view_that_changes_the_element_size_is_an_error(monkeypatch, tmp_path: Path) -> None:
    f = _model(tmp_path, "bytes", "x):\n        return x.view(torch.uint8)", "torch.randn(4, 8)")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        assert main([str(f), "--translate", "--frontend", "torch", "--quiet"]) != 0
    assert "no loop-IR template for a bit cast from f32 to u8 (view(dtype)): only dtypes of one element " \
           "size are" in err.getvalue()


# ---- torchao's MXFP8 quantisation ---------------------------------------------------------------------
def test_mxfp8_quantize_problem(monkeypatch, tmp_path: Path) -> None:
    """bf16 [M, 4096] -> e4m3 codes [M, 4096] and one biased E8M0 exponent per 32 values, returned as
    int32 [M, 128]. Bytes (fused, B200): the input read once, 2 B a value; each code 1 B; each scale
    4 B (int32): 2 * 4096 M + 4096 M + 4 * 128 M = 12,800 M. FLOPs per row: per value |x|, the block
    max, the division by the scale and the two-sided clamp (5 * 4096); per block the shift, mask,
    two subtractions, two-sided clamp, bias, shift back and the clamp of the scale (9 * 128): 21,632 M.
    The bit casts, and the casts to u8, i32 and e4m3, are none."""
    runs = _json_runs([str(DATA / "mxfp8_quantize"), "--workload", "all", "--roofline", "all",
                       "--hw", "B200"], monkeypatch, tmp_path)
    assert len(runs) == 2
    for r, m in zip(runs, (1, 16), strict=True):
        assert r["validation"]["validated"] and r["validation"]["max_rel_err"] == 0.0, r["validation"]
        t = r["totals"]
        assert t["bytes_fused"] == t["bytes_cache_aware"] == 2 * 4096 * m + 4096 * m + 4 * 128 * m
        assert (t["flops"], t["flops_matrix"]) == ((5 * 4096 + 9 * 128) * m, 0)


# ---- analyses -------------------------------------------------------------------------------------------
def _operand_dtype(text: str) -> str:
    g = lift_kernel(typecheck(parse_kernel(text, "t.loop")))
    n = g.nodes()[-1]
    factor = n.body.block.last_op.operands[0].owner.lhs  # the first factor of the product yielded
    return ValueDtypes(g).of(n, factor)


def test_a_bit_cast_keeps_no_value() -> None:
    """bf16 bits read as i16 are integers of the whole i16 range, not bf16 values: the factor is i16
    (an implementation may not multiply it on a bf16 unit); a cast of the same tensor keeps bf16. e4m3
    codes read from bytes are e4m3 values, not the bytes' integers."""
    gemm = """
kernel k(A: {a}[4, 16] input, B: f32[16, 4] weight, C: f32[4, 4] output):
    for i in range(4):
        for j in range(4):
            C[i, j] = 0.0
            for k in range(16):
                C[i, j] += f32({factor}) * B[k, j]
"""
    assert _operand_dtype(gemm.format(a="bf16", factor="bitcast(A[i, k], i16)")) == "i16"
    assert _operand_dtype(gemm.format(a="bf16", factor="A[i, k]")) == "bf16"
    assert _operand_dtype(gemm.format(a="u8", factor="bitcast(A[i, k], f8e4m3)")) == "f8e4m3"
    assert _operand_dtype(gemm.format(a="u8", factor="A[i, k]")) == "u8"


@pytest.mark.parametrize("widen", [to_f64, _widen_kernel], ids=["reorder-chains", "validation"])
def test_float64_second_opinion_keeps_a_bit_cast_at_its_width(widen) -> None:
    """Widening every f32 to f64 (the float64 checks of `reorder-chains` and of validation) leaves a bit
    cast on its own dtypes: the operand cast back to f32 first, the result widened after. The bits are
    the same; the f64 arithmetic around them rounds less."""
    k = typecheck(parse_kernel(TEXT, "k.loop"))
    wide = typecheck(widen(k))
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(8) * 100).astype(np.float32)
    e = rng.integers(1, 200, 8).astype(np.int32)
    got, ref = execute(wide, {"X": x.astype(np.float64), "E": e}), execute(k, {"X": x, "E": e})
    np.testing.assert_array_equal(got["Y"], ref["Y"])
    np.testing.assert_allclose(got["Z"], ref["Z"], rtol=1e-6)
    bits = [n for n in wide.body[0].body[1].value.walk() if isinstance(n, Bitcast)]
    assert [(b.x.dtype, b.dtype) for b in bits] == [("i32", "f32"), ("i32", "f32"), ("f32", "i32")]
