"""The loop-IR executor against NumPy/torch references and hand-derived values."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from executor_reference import interpret

from solar_compiler.executor import compare, execute
from solar_compiler.executor.compare import output_dtypes
from solar_compiler.executor.numeric import erf, quantize
from solar_compiler.loopir.ast import LoopIRError, typecheck
from solar_compiler.loopir.domain import check_bounds
from solar_compiler.mutate import mutants
from solar_compiler.text.parser import parse_kernel

torch = pytest.importorskip("torch")
PROGRAMS = Path(__file__).parent / "executor_programs"


def load(name: str):
    return parse_kernel((PROGRAMS / f"{name}.loop").read_text(), f"{name}.loop")


def randn(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


def check(kernel, inputs: dict, reference: dict) -> dict:
    got = execute(kernel, inputs)
    res = compare(reference, got, output_dtypes(kernel))
    assert res.ok, res.first_mismatch
    return got


def run_src(src: str, inputs: dict, **kw) -> dict:
    return execute(parse_kernel(src, "t.loop"), inputs, **kw)


# ---- programs vs references ---------------------------------------------------------------------
def test_matmul_einsum_path():
    rng = np.random.default_rng(1)
    a, b, bias = randn(rng, 48, 40), randn(rng, 40, 24), randn(rng, 24)
    ref = bias.astype(np.float64) + 0.5 * (a.astype(np.float64) @ b)
    got = check(load("matmul_scaled"), {"A": a, "B": b, "bias": bias}, {"C": ref})
    assert np.abs(got["C"] - ref).max() < 1e-5


def test_matmul_hand_values():
    src = """kernel mm(A: f32[2, 2] input, B: f32[2, 2] input, C: f32[2, 2] output):
    for i in range(2):
        for j in range(2):
            C[i, j] = 0.0
            for k in range(2):
                C[i, j] += A[i, k] * B[k, j]
"""
    a = np.array([[1, 2], [3, 4]], np.float32)
    b = np.array([[5, 6], [7, 8]], np.float32)
    assert run_src(src, {"A": a, "B": b})["C"].tolist() == [[19, 22], [43, 50]]


def test_conv2d_strided_padded_vs_torch():
    rng = np.random.default_rng(2)
    x, w = randn(rng, 2, 3, 9, 9), randn(rng, 4, 3, 3, 3)
    ref = torch.nn.functional.conv2d(torch.from_numpy(x).double(), torch.from_numpy(w).double(),
                                     stride=2, padding=1).numpy()
    check(load("conv2d"), {"X": x, "W": w}, {"Y": ref})


def test_softmax():
    rng = np.random.default_rng(3)
    x = randn(rng, 8, 33) * 5
    check(load("softmax"), {"x": x}, {"y": torch.softmax(torch.from_numpy(x).double(), 1).numpy()})


def test_layernorm_vs_torch():
    rng = np.random.default_rng(4)
    x, g, b = randn(rng, 6, 40) + 3, randn(rng, 40), randn(rng, 40)
    ref = torch.nn.functional.layer_norm(torch.from_numpy(x).double(), (40,), torch.from_numpy(g).double(),
                                         torch.from_numpy(b).double(), eps=1e-5).numpy()
    check(load("layernorm"), {"x": x, "g": g, "b": b}, {"y": ref})


def test_cumsum_scan():
    rng = np.random.default_rng(5)
    x = randn(rng, 4, 50)
    check(load("cumsum"), {"x": x}, {"y": np.cumsum(x.astype(np.float64), axis=1)})
    ones = np.ones((4, 50), np.float32)
    assert execute(load("cumsum"), {"x": ones})["y"][2].tolist() == list(range(1, 51))


def test_scan_bounds_from_vectorised_loop():
    src = """kernel s(x: f32[4, 6] input, y: f32[4, 6] output):
    for b in range(4):
        for t in range(6):
            y[b, t] = 0.0
        y[b, b] = x[b, b]
        for t in scan(b + 1, 6):
            y[b, t] = y[b, t - 1] + x[b, t]
"""
    y = run_src(src, {"x": np.ones((4, 6), np.float32)})["y"]
    assert y.tolist() == [[max(0, t - b + 1) for t in range(6)] for b in range(4)]


def test_embedding_gather():
    rng = np.random.default_rng(6)
    idx = rng.integers(0, 20, 10)
    e = randn(rng, 20, 8)
    got = execute(load("embedding"), {"idx": idx, "E": e})
    np.testing.assert_array_equal(got["out"], e[idx])


def test_causal_attention_vs_torch():
    rng = np.random.default_rng(7)
    q, k, v = randn(rng, 16, 8), randn(rng, 16, 8), randn(rng, 16, 8)
    t = [torch.from_numpy(a).double()[None, None] for a in (q, k, v)]
    ref = torch.nn.functional.scaled_dot_product_attention(*t, is_causal=True, scale=0.35355339)[0, 0]
    check(load("causal_attention"), {"Q": q, "K": k, "V": v}, {"O": ref.numpy()})


def test_triangular_and_strided_bounds():
    a = np.arange(100, dtype=np.float32).reshape(10, 10)
    got = execute(load("triangular"), {"A": a})
    np.testing.assert_array_equal(got["L"], np.tril(a))
    assert got["r"][3] == 30 + 31 + 32 + 33
    assert got["e"][6] == 66 + 68
    np.testing.assert_array_equal(got["e"], [a[i, i::2].sum() for i in range(10)])


def test_guards_and_select():
    rng = np.random.default_rng(8)
    x = randn(rng, 12, 12)
    y = np.maximum(x, 0)
    y[2:8] = np.where(x[2:8] > 0, 2 * x[2:8], -x[2:8])
    got = execute(load("guarded"), {"x": x})
    np.testing.assert_array_equal(got["y"], y)
    np.testing.assert_array_equal(got["d"], np.diag(x))


def test_scatter_max_pool_last_write_and_int_count():
    rng = np.random.default_rng(9)
    x, k, a = randn(rng, 20), randn(rng, 5), randn(rng, 6, 7)
    got = execute(load("scatter_reduce"), {"x": x, "k": k, "a": a})
    np.testing.assert_allclose(got["y"], np.convolve(x, k), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(got["z"], x.reshape(10, 2).max(1))
    np.testing.assert_array_equal(got["w"], a[:, -1])
    assert got["c"].dtype == np.int32
    np.testing.assert_array_equal(got["c"], (a > 0).sum(1))


def test_rnn_scan_with_vectorised_inner_loops():
    rng = np.random.default_rng(10)
    x, wx, wh = randn(rng, 3, 12, 5), randn(rng, 5, 7) * 0.5, randn(rng, 7, 7) * 0.5
    h = np.zeros((3, 13, 7))
    for t in range(12):
        h[:, t + 1] = np.tanh(x[:, t].astype(np.float64) @ wx + h[:, t] @ wh)
    check(load("rnn"), {"x": x, "Wx": wx, "Wh": wh}, {"h": h})


# ---- narrow floats ------------------------------------------------------------------------------
def test_bf16_rounding_hand_values():
    v = np.array([1 + 2**-8, 1 + 3 * 2**-8, -(1 + 2**-8), 3.4e38, np.nan], np.float32)
    got = quantize(v, "bf16")
    assert got[:3].tolist() == [1.0, 1 + 2**-6, -1.0]
    assert math.isinf(got[3]) and math.isnan(got[4])


def test_narrow_rounding_matches_torch():
    rng = np.random.default_rng(11)
    bits = rng.integers(0, 2**32, 200_000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    scaled = (randn(rng, 100_000) * 10.0 ** rng.integers(-10, 6, 100_000)).astype(np.float32)
    v = np.concatenate([bits, scaled])
    for name, td in (("bf16", torch.bfloat16), ("f16", torch.float16),
                     ("f8e4m3", torch.float8_e4m3fn), ("f8e5m2", torch.float8_e5m2)):
        with np.errstate(all="ignore"):
            got = quantize(v, name)
        np.testing.assert_array_equal(got, torch.from_numpy(v).to(td).float().numpy(), err_msg=name)


def test_bf16_kernel_vs_torch():
    rng = np.random.default_rng(12)
    x, w = (quantize(randn(rng, 64), "bf16") for _ in range(2))
    f = randn(rng, 64)
    got = execute(load("bf16_ops"), {"x": x, "w": w, "f": f})
    tx, tw = torch.from_numpy(x).bfloat16(), torch.from_numpy(w).bfloat16()
    np.testing.assert_array_equal(got["y"], (tx * tw).float().numpy())
    np.testing.assert_array_equal(got["c"], (torch.from_numpy(f) * 3).bfloat16().float().numpy())
    assert got["s"][0] == (tx.float() * tw.float()).sum().bfloat16().float().item()


_TORCH = {"f32": torch.float32, "i32": torch.int32, "f64": torch.float64, "i64": torch.int64,
          "bf16": torch.bfloat16, "f16": torch.float16, "i16": torch.int16, "u16": torch.uint16,
          "f8e4m3": torch.float8_e4m3fn, "f8e5m2": torch.float8_e5m2, "i8": torch.int8, "u8": torch.uint8}
_BITCASTS = [("f32", "i32"), ("f64", "i64"), ("bf16", "i16"), ("bf16", "u16"), ("f16", "i16"), ("f16", "u16"),
             ("bf16", "f16"), ("f8e4m3", "u8"), ("f8e4m3", "i8"), ("f8e5m2", "u8"), ("f8e5m2", "i8"),
             ("f8e4m3", "f8e5m2")]


def _patterns(dtype: str, rng: np.random.Generator) -> torch.Tensor:
    """Every pattern of a 1- or 2-byte dtype; random ones (and signed zeros, infinities) of 4 and 8."""
    t = _TORCH[dtype]
    if t.itemsize == 1:
        return torch.arange(256).to(torch.uint8).view(t)
    if t.itemsize == 2:
        return torch.arange(-2 ** 15, 2 ** 15).to(torch.int16).view(t)
    bits = 8 * t.itemsize
    ints = torch.from_numpy(rng.integers(-2 ** (bits - 1), 2 ** (bits - 1), 4096, dtype=np.int64))
    if not t.is_floating_point:
        return ints.to(t)
    floats = ints.to(torch.int32).view(torch.float32) if bits == 32 else ints.view(torch.float64)
    return torch.cat([floats.to(t), torch.tensor([0.0, -0.0, math.inf, -math.inf, 1.0], dtype=t)])


def _numpy(t: torch.Tensor) -> np.ndarray:
    """A tensor as the executor takes and gives it: bf16 and fp8 values in float32 arrays."""
    return t.float().numpy() if t.dtype in (torch.bfloat16, torch.float8_e4m3fn, torch.float8_e5m2) \
        else t.numpy()


@pytest.mark.parametrize(("src", "dst"), _BITCASTS)
def test_bitcast_is_torch_view(src: str, dst: str):
    """`bitcast(x, dst)` both ways gives torch's `view(dtype)`, bit for bit, on every pattern of the
    narrow dtypes and on random f32 / f64 ones; a NaN gives a NaN's pattern (not its own payload)."""
    for a, b in ((src, dst), (dst, src)):
        x = _patterns(a, np.random.default_rng(13))
        n = x.numel()
        text = f"kernel k(x: {a}[{n}] input, y: {b}[{n}] output):\n    for i in range({n}):\n" \
               f"        y[i] = bitcast(x[i], {b})\n"
        got = run_src(text, {"x": _numpy(x)})["y"]
        want = _numpy(x.view(_TORCH[b]))
        assert got.dtype == want.dtype
        # a NaN's payload is not kept (a float32 NaN holds it): its pattern is some NaN's
        nan = np.isnan(_numpy(x))
        assert np.isnan(_numpy(torch.from_numpy(got[nan]).to(_TORCH[b]).view(x.dtype))).all(), f"{a} -> {b}"
        got, want = got[~nan], want[~nan]
        if want.dtype.kind == "f":
            same = np.isnan(got) == np.isnan(want)
            assert same.all() and (np.signbit(got) == np.signbit(want))[~np.isnan(want)].all(), f"{a} -> {b}"
            got, want = got[~np.isnan(want)], want[~np.isnan(want)]
        np.testing.assert_array_equal(got, want, err_msg=f"{a} -> {b}")


def test_bitcast_program_vs_torch():
    """The exponent field of f32 values through i32 and the power of two built back from it, the
    patterns of bf16 and fp8 values and the next bf16 up: each output as torch's views give it."""
    rng = np.random.default_rng(14)
    x = randn(rng, 64) * 100
    h, q = quantize(randn(rng, 64), "bf16"), quantize(randn(rng, 64) * 8, "f8e4m3")
    got = execute(load("bitcast"), {"x": x, "h": h, "q": q})
    tx, th = torch.from_numpy(x), torch.from_numpy(h).bfloat16()
    tq = torch.from_numpy(q).to(torch.float8_e4m3fn)
    e = (tx.view(torch.int32) >> 23) & 0xFF
    np.testing.assert_array_equal(got["e"], e.numpy())
    np.testing.assert_array_equal(got["p"], (e << 23).view(torch.float32).numpy())
    np.testing.assert_array_equal(got["hb"], th.view(torch.int16).numpy())
    np.testing.assert_array_equal(got["qb"], tq.view(torch.uint8).numpy())
    np.testing.assert_array_equal(got["r"], _numpy((th.view(torch.int16) + 1).view(torch.bfloat16)))


def test_f16_tensors_are_float16_arrays():
    src = """kernel h(x: f16[3] input, y: f16[3] output):
    for i in range(3):
        y[i] = x[i] * 3.0
"""
    got = run_src(src, {"x": np.array([1, 1 / 3, 60000], np.float16)})["y"]
    assert got.dtype == np.float16
    assert got[0] == 3 and got[1] == np.float16(np.float32(np.float16(1 / 3)) * 3) and np.isinf(got[2])


def test_erf_accuracy():
    x = np.concatenate([np.linspace(-7, 7, 20001), np.logspace(-10, 0.7, 500)])
    ref = np.array([math.erf(t) for t in x])
    assert np.max(np.abs(erf(x) - ref) / np.maximum(np.abs(ref), 1e-300)) < 1e-13
    assert erf(np.float32([0.5])).dtype == np.float32


def test_erf_series_on_small_arguments_only_keeps_every_bit():
    """The series runs only where |x| < 1, in place: the same float64 operations as evaluating it
    everywhere and selecting, so the same bits; special values and 0-d inputs keep their meaning."""
    from solar_compiler.executor.numeric import _SERIES

    x = np.random.default_rng(3).standard_normal(4096) * 2
    z, s = x * x, np.zeros_like(x)
    for c in reversed(_SERIES):
        s = s * z + c
    whole = np.where(np.abs(x) < 1.0, s * x * (2.0 / math.sqrt(math.pi)), np.nan)
    small = np.abs(x) < 1.0
    assert np.array_equal(erf(x)[small], whole[small])
    got = erf(np.float32([np.nan, np.inf, -np.inf, -0.0, 0.0]))
    assert np.isnan(got[0]) and list(got[1:]) == [1.0, -1.0, 0.0, 0.0] and np.signbit(got[3])
    assert erf(np.asarray(0.5)).shape == () and erf(np.asarray(0.5)) == math.erf(0.5)


# ---- errors -------------------------------------------------------------------------------------
def test_out_of_range_indirect_index():
    idx = np.arange(10)
    idx[3] = 20
    with pytest.raises(LoopIRError, match=r"index 0 of 'E' is 20, outside \[0, 20\), at i=3"):
        execute(load("embedding"), {"idx": idx, "E": np.zeros((20, 8), np.float32)})


def test_out_of_range_affine_read_in_domain():
    src = """kernel o(x: f32[10] input, y: f32[10] output):
    for i in range(10):
        y[i] = x[i + 1]
"""
    with pytest.raises(LoopIRError, match=r"index 0 of 'x' is 10, outside \[0, 10\), at i=9 in the "
                                          r"statement writing 'y'"):
        run_src(src, {"x": np.zeros(10, np.float32)})


def test_missing_init_shows_as_nan():
    src = (PROGRAMS.parent.parent / "examples/loop/matmul.loop").read_text()
    kernel = parse_kernel(src.replace("            C[i, j] = 0.0\n", ""))
    a, b = np.ones((64, 32), np.float32), np.ones((32, 16), np.float32)
    got = execute(kernel, {"A": a, "B": b})
    assert np.isnan(got["C"]).all()
    res = compare({"C": a @ b}, got, {"C": "f32"})
    assert not res.ok and res.max_rel_err == math.inf
    assert res.first_mismatch == "C[0, 0]: got nan, expected 32.0"


def test_int_outputs_start_at_sentinel():
    src = """kernel c(x: f32[4] input, y: i32[4] output):
    for i in range(1, 4):
        y[i] = i32(x[i])
"""
    y = run_src(src, {"x": np.array([1.5, 2.5, -3.7, 9.0], np.float32)})["y"]
    assert y.tolist() == [np.iinfo(np.int32).min, 2, -3, 9]


def test_integer_division_by_zero():
    src = """kernel q(k: i64[4] input, y: i64[4] output):
    for i in range(4):
        if i >= 1:
            y[i] = 12 // k[i]
"""
    y = run_src(src, {"k": np.array([0, 1, 2, -5])})["y"]
    assert y.tolist() == [np.iinfo(np.int64).min, 12, 6, -3]  # the zero divisor is masked out
    with pytest.raises(LoopIRError, match=r"integer 'floordiv' by zero at i=2 in the statement writing 'y'"):
        run_src(src, {"k": np.array([1, 1, 0, 1])})


def test_carried_dependence_in_non_scan_loop_is_rejected():
    src = """kernel d(x: f32[10] input, y: f32[10] output):
    y[0] = x[0]
    for i in range(1, 10):
        y[i] = y[i - 1] + x[i]
"""
    with pytest.raises(LoopIRError, match=r"different iterations of non-scan loop 'i'.*make 'i' a scan loop"):
        run_src(src, {"x": np.zeros(10, np.float32)})


def test_distribution_across_statements_is_checked():
    src = """kernel d(x: f32[10] input, a: f32[10] output, b: f32[9] output):
    for i in range(9):
        a[i] = x[i]
        b[i] = a[i + 1]
"""
    with pytest.raises(LoopIRError, match=r"statement writing 'a'.*and the statement writing 'b'"):
        run_src(src, {"x": np.zeros(10, np.float32)})


@pytest.mark.parametrize(("inputs", "message"), [
    ({"x": np.zeros(4, np.float64)}, r"input 'x' has dtype float64, expected float32 \(f32\)"),
    ({"x": np.zeros(5, np.float32)}, r"input 'x' has shape \(5,\), expected \(4,\)"),
    ({}, r"missing input 'x' of kernel 'c'"),
    ({"x": np.zeros(4, np.float32), "z": np.zeros(1)}, r"'z' is not an input of kernel 'c' \(inputs: x\)"),
])
def test_input_checks(inputs, message):
    src = """kernel c(x: f32[4] input, y: f32[4] output):
    for i in range(4):
        y[i] = x[i]
"""
    with pytest.raises(LoopIRError, match=message):
        run_src(src, inputs)


# ---- chunking -----------------------------------------------------------------------------------
def test_chunked_execution_matches_unchunked():
    rng = np.random.default_rng(13)
    kernel = load("conv2d")
    ins = {"X": randn(rng, 2, 3, 9, 9), "W": randn(rng, 4, 3, 3, 3)}
    whole = execute(kernel, ins)["Y"]
    np.testing.assert_allclose(execute(kernel, ins, budget=256)["Y"], whole, rtol=1e-5, atol=1e-5)
    a = randn(rng, 6, 7)
    sr = load("scatter_reduce")
    small = execute(sr, {"x": randn(rng, 20), "k": randn(rng, 5), "a": a}, budget=64)
    np.testing.assert_array_equal(small["w"], a[:, -1])


# ---- compare ------------------------------------------------------------------------------------
def test_compare_tolerances():
    ref = {"y": np.ones(100, np.float32)}
    near = {"y": np.full(100, 1 + 5e-5, np.float32)}
    far = {"y": np.full(100, 1 + 5e-3, np.float32)}
    assert compare(ref, near, {"y": "f32"}).ok
    assert not compare(ref, far, {"y": "f32"}).ok
    assert compare(ref, far, {"y": "bf16"}).ok
    res = compare(ref, far, {"y": "f32"})
    assert res.first_mismatch == "y[0]: got 1.005, expected 1 (relative norm error 0.005 > 0.0001 for f32)"
    assert compare({"c": np.array([1, 2])}, {"c": np.array([1, 3])}, {"c": "i64"}).first_mismatch == \
        "c[1]: got 3, expected 2"
    inf_ref = {"y": np.array([np.inf, 1.0])}
    assert compare(inf_ref, {"y": np.array([np.inf, 1.0])}, {"y": "f64"}).ok
    assert not compare(inf_ref, {"y": np.array([1.0, 1.0])}, {"y": "f64"}).ok


def test_compare_all_finite_takes_the_same_norms_without_masks():
    """Both arrays finite everywhere (the usual case) skip the masks of the NaN/inf rules; the error
    and the message are those of the masked path, which a NaN both sides share forces here."""
    rng = np.random.default_rng(3)
    ref = rng.standard_normal(1000).astype(np.float32)
    got = (ref + rng.standard_normal(1000).astype(np.float32) * 1e-6).astype(np.float32)
    got[417] += 0.5
    fast = compare({"y": ref}, {"y": got}, {"y": "f32"})
    nan = np.array([np.nan], np.float32)
    masked = compare({"y": np.concatenate([ref, nan])}, {"y": np.concatenate([got, nan])}, {"y": "f32"})
    assert fast.max_rel_err == masked.max_rel_err > 1e-4
    assert fast.first_mismatch == masked.first_mismatch
    assert fast.first_mismatch.startswith("y[417]: got ")
    assert not compare({"y": ref}, {"y": np.where(np.arange(1000) == 5, np.inf, got)}, {"y": "f32"}).ok


# ---- differential test against the point-by-point oracle ----------------------------------------
def _inputs(kernel, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    return {t.name: rng.integers(0, 20, t.shape) if t.dtype == "i64" else randn(rng, *t.shape)
            for t in kernel.by_role("input", "weight")}


@pytest.mark.parametrize("name", ["bitcast", "causal_attention", "conv2d", "cumsum", "embedding", "guarded",
                                  "layernorm", "rnn", "scatter_reduce", "softmax", "triangular"])
def test_mutants_agree_with_point_by_point_oracle(name):
    """The mutants of a program are a corpus of odd but valid kernels (dropped guards and inits, other
    reduction kinds, `=` under a reduction loop, swapped indices): each must run as the literal
    program does. Compared in exact arithmetic, the executor may be off by the f32 tolerance or by
    twice the literal f32 evaluation's own error (ill-conditioned mutants)."""
    kernel = load(name)
    ins = _inputs(kernel, 0)
    dtypes = output_dtypes(kernel)
    for desc, m in [("original", kernel), *mutants(kernel)]:
        try:
            check_bounds(typecheck(m))
        except LoopIRError:
            continue
        try:
            got = execute(m, ins)
        except LoopIRError as e:
            if "non-scan loop" not in str(e):  # else the executor refuses a program the oracle runs
                with pytest.raises(LoopIRError):
                    interpret(m, ins)
            continue
        exact = interpret(m, ins, exact=True)
        for how, out in (("whole", got), ("in 4 KB chunks", execute(m, ins, budget=4096))):
            c = compare(exact, out, dtypes)
            if not c.ok:
                literal = compare(exact, interpret(m, ins), dtypes)
                assert c.max_rel_err <= 2 * literal.max_rel_err, f"{desc} ({how}): {c.first_mismatch}"
