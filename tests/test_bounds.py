"""Bounds arithmetic against hand-derived numbers. Expected values use the literal datasheet figures
of hw_targets/H100_SXM.yaml and A100_SXM.yaml (dense peaks), never the code under test."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from solar_compiler.analysis.bounds import graph_bounds, inverse_roofline, op_bound
from solar_compiler.analysis.costs import Access, GraphCosts, OpCost
from solar_compiler.errors import SolarError
from solar_compiler.hw import load_target

H100_TF32 = 494.7e12
H100_FP32_VEC = 66.9e12   # = H100 FP64 tensor, the fastest native exact unit for f32
H100_INT8 = 1978.9e12     # dense INT8 tensor: Ozaki-II emulation runs fp32 (6 products) and fp64 (14) on it
H100_BF16_TC = 989.4e12
H100_BF16_VEC = 133.8e12
H100_BW = 3.35e12
A100_TF32 = 156e12
A100_BW = 2.039e12
N = 4096


@pytest.fixture(scope="module")
def h100():
    return load_target("H100_SXM")


def acc(tensor: str, elements: int, dtype: str = "f32") -> Access:
    width = {"f32": 4, "bf16": 2, "f16": 2}[dtype]
    return Access(tensor, dtype, elements, elements * width)


def matmul(m: int, n: int, k: int, dtype: str = "f32", name: str = "S1") -> OpCost:
    """C[m,n] = A[m,k] @ B[k,n]: 2*m*n*k FLOPs; reads A, B once, writes C once."""
    return OpCost(name, "C[i, j] += A[i, k] * B[k, j]", "ik,kj->ij", "mm.py:3", "matrix", 2 * m * n * k,
                  0, 0, dtype, dtype, m * n * k, (acc("A", m * k, dtype), acc("B", k * n, dtype)),
                  (acc("C", m * n, dtype),))


def elementwise(n: int, flops_per: int, dtype: str = "f32", name: str = "S2") -> OpCost:
    """Y[i] = f(X[i]): n*flops_per vector FLOPs, one read and one write per element."""
    return OpCost(name, "Y[i] = exp(X[i])", "i->i", "ew.py:1", "vector", 0, n * flops_per, n, None, dtype, n,
                  (acc("X", n, dtype),), (acc("Y", n, dtype),))


def graph(*ops: OpCost, compulsory: int | None = None) -> GraphCosts:
    return GraphCosts("k", list(ops), sum(o.bytes for o in ops) if compulsory is None else compulsory)


def test_matmul_4096_f32_auto_is_tf32_priced(h100):
    b = graph_bounds(graph(matmul(N, N, N)), h100, "auto")
    t_compute = 2 * N**3 / H100_TF32
    t_memory = 3 * N**2 * 4 / H100_BW
    assert b.fused_s == pytest.approx(max(t_compute, t_memory), rel=1e-12)
    assert b.unfused_s == pytest.approx(max(t_compute, t_memory), rel=1e-12)
    assert b.fused_s == pytest.approx(277.82e-6, rel=1e-4)  # 137.44 GFLOP / 494.7 TFLOP/s
    assert b.fused_memory_s == pytest.approx(60.10e-6, rel=1e-3)
    assert b.fused_bottleneck == "matrix" and b.ops[0].bottleneck == "matrix"


def test_precision_fp32_vs_auto_ratio(h100):
    # fp32 accuracy on H100: the fastest method is Ozaki-II on INT8 tensor cores (6 INT8 products per
    # fp32 product, 329.8 TFLOP/s), not the FP32 lanes (66.9): a bound at 66.9 is beaten by it.
    g = graph(matmul(N, N, N))
    auto = graph_bounds(g, h100, "auto").fused_s
    fp32 = graph_bounds(g, h100, "fp32").fused_s
    assert fp32 == pytest.approx(2 * N**3 / (H100_INT8 / 6), rel=1e-12)
    assert fp32 / auto == pytest.approx(H100_TF32 / (H100_INT8 / 6), rel=1e-12)


def test_bf16_contraction_priced_at_bf16_rate(h100):
    op = matmul(N, N, N, "bf16")
    assert op.bytes == 3 * N * N * 2
    b = graph_bounds(graph(op), h100, "fp32")  # the policy only concerns f32 contractions
    assert b.fused_matrix_s == pytest.approx(2 * N**3 / H100_BF16_TC, rel=1e-12)
    assert b.fused_memory_s == pytest.approx(3 * N * N * 2 / H100_BW, rel=1e-12)


def test_vector_work_at_vector_rate_per_dtype(h100):
    f32 = op_bound(elementwise(1 << 20, 8), h100)
    bf16 = op_bound(elementwise(1 << 20, 8, "bf16"), h100)
    assert f32.t_vector == pytest.approx(8 * 2**20 / H100_FP32_VEC, rel=1e-12)
    assert bf16.t_vector == pytest.approx(8 * 2**20 / H100_BF16_VEC, rel=1e-12)
    assert f32.t_memory == pytest.approx(2 * 4 * 2**20 / H100_BW, rel=1e-12)
    assert f32.bottleneck == "memory" and f32.t_matrix == 0.0


def test_fused_takes_max_over_units_and_sums_per_dtype(h100):
    """Matrix work at two dtypes adds on the matrix unit; vector work overlaps it (max, not sum)."""
    ops = (matmul(N, N, N, "f32", "S0"), matmul(N, N, N, "bf16", "S1"), elementwise(N * N, 3000, "f32", "S2"))
    b = graph_bounds(graph(*ops, compulsory=N * N * 4), h100)
    t_matrix = 2 * N**3 / H100_TF32 + 2 * N**3 / H100_BF16_TC
    t_vector = 3000 * N * N / H100_FP32_VEC  # 752 us > 417 us of matrix time
    assert b.fused_matrix_s == pytest.approx(t_matrix, rel=1e-12)
    assert b.fused_vector_s == pytest.approx(t_vector, rel=1e-12)
    assert b.fused_memory_s == pytest.approx(N * N * 4 / H100_BW, rel=1e-12)
    assert b.fused_s == pytest.approx(max(t_matrix, t_vector), rel=1e-12)
    assert b.fused_bottleneck == "vector"
    # unfused: each op alone, its own max, summed
    per_op = [2 * N**3 / H100_TF32, 2 * N**3 / H100_BF16_TC, t_vector]
    assert b.unfused_s == pytest.approx(sum(per_op), rel=1e-12)
    assert [o.bottleneck for o in b.ops] == ["matrix", "matrix", "vector"]


def test_unfused_counts_every_op_round_trip(h100):
    """Two elementwise ops through a DRAM intermediate: unfused moves 4 arrays, fused 2."""
    n = 1 << 24
    g = graph(elementwise(n, 1, name="S0"), elementwise(n, 1, name="S1"), compulsory=2 * 4 * n)
    b = graph_bounds(g, h100)
    assert b.unfused_s == pytest.approx(4 * 4 * n / H100_BW, rel=1e-12)
    assert b.fused_s == pytest.approx(2 * 4 * n / H100_BW, rel=1e-12)
    assert b.fused_bottleneck == "memory"


def test_multiple_kernels_priced_as_one_program(h100):
    a = GraphCosts("a", [matmul(N, N, N)], 3 * N * N * 4)
    e = GraphCosts("e", [elementwise(N * N, 1)], 2 * N * N * 4)
    b = graph_bounds([a, e], h100)
    assert b.fused_memory_s == pytest.approx(5 * N * N * 4 / H100_BW, rel=1e-12)
    assert b.fused_s == pytest.approx(2 * N**3 / H100_TF32, rel=1e-12)
    assert len(b.ops) == 2


def test_other_target_a100(h100):
    b = graph_bounds(graph(matmul(N, N, N)), load_target("A100_SXM"))
    assert b.hw == "A100_SXM"
    assert b.fused_s == pytest.approx(max(2 * N**3 / A100_TF32, 3 * N * N * 4 / A100_BW), rel=1e-12)


def test_bad_costs_are_errors(h100):
    with pytest.raises(SolarError, match="no ops to bound"):
        graph_bounds(GraphCosts("k", [], 0), h100)
    with pytest.raises(SolarError, match="compulsory bytes 999999999 exceed"):
        graph_bounds(graph(elementwise(16, 1), compulsory=999_999_999), h100)
    bad = OpCost("S0", "x", "i->i", "m.py:4", "matrix", 10, 0, 0, None, "f32", 5, (), (acc("Y", 5),))
    with pytest.raises(SolarError, match="m.py:4: op S0 has matrix FLOPs but no matrix dtype"):
        op_bound(bad, h100)


def test_inverse_memory_bound_op(h100):
    n = 1 << 26  # 256 MiB in, 256 MiB out, 1 FLOP each: memory-bound
    g = graph(elementwise(n, 1))
    b = graph_bounds(g, h100)
    inv = inverse_roofline(b, [g], 2e-3)
    nbytes = 2 * 4 * n
    fused = inv["fused"]
    assert fused["dram_bw_Bps"] == pytest.approx(nbytes / 2e-3, rel=1e-12)
    assert fused["dram_bw_x"] == pytest.approx(nbytes / 2e-3 / H100_BW, rel=1e-12)
    assert fused["vector_flops"] == pytest.approx(n / 2e-3, rel=1e-12)
    assert fused["vector_x"] == pytest.approx(n / 2e-3 / H100_FP32_VEC, rel=1e-12)
    assert fused["matrix_flops"] == 0.0 and fused["matrix_x"] == 0.0
    assert fused["dram_bw_x"] == pytest.approx(0.080130, rel=1e-4)  # 160.3 us of traffic vs 2 ms
    assert fused["met"] is True
    tight = inverse_roofline(b, [g], 100e-6)["fused"]
    assert tight["dram_bw_x"] == pytest.approx(nbytes / 100e-6 / H100_BW, rel=1e-12)
    assert tight["met"] is False


def test_inverse_unfused_scale(h100):
    n = 1 << 24
    g = graph(elementwise(n, 1, name="S0"), matmul(N, N, N), compulsory=2 * 4 * n + 3 * N * N * 4)
    b = graph_bounds(g, h100)
    inv = inverse_roofline(b, [g], 1e-4)
    per_op = [2 * 4 * n / H100_BW, 2 * N**3 / H100_TF32]
    assert inv["unfused"]["scale_x"] == pytest.approx(sum(per_op) / 1e-4, rel=1e-12)
    assert inv["unfused"]["dram_bw_Bps"] == pytest.approx((2 * 4 * n + 3 * N * N * 4) / 1e-4, rel=1e-12)
    assert inv["unfused"]["matrix_x"] == pytest.approx(2 * N**3 / H100_TF32 / 1e-4, rel=1e-12)
    assert inv["fused"]["scale_x"] == pytest.approx(2 * N**3 / H100_TF32 / 1e-4, rel=1e-12)
    assert inv["unfused"]["met"] is False and inv["fused"]["met"] is False


def test_fused_never_exceeds_unfused_by_rounding(h100):
    """184 + 216 + 5328 bytes: (sum b) / bw rounds one ulp above sum(b / bw) in float64."""
    g = graph(elementwise(23, 1, name="S0"), elementwise(27, 1, name="S1"), elementwise(666, 1, name="S2"))
    assert sum(b / H100_BW for b in (184, 216, 5328)) < 5728 / H100_BW  # the trap exists
    b = graph_bounds(g, replace(h100, l2_latency=None))  # the latency floor (141 ns) would hide it
    assert b.unfused_s >= b.fused_s
    assert b.fused_s == pytest.approx(5728 / H100_BW, rel=1e-15)


# ---- invariant: unfused >= fused > 0 --------------------------------------------------------------

_dtypes = st.sampled_from(["f32", "bf16", "f16"])


@st.composite
def op_costs(draw: st.DrawFn, i: int) -> OpCost:
    mdt, vdt = draw(_dtypes), draw(_dtypes)
    fm = draw(st.one_of(st.just(0), st.integers(0, 10**15)))  # 0 often: memory-bound ops matter most
    fv = draw(st.one_of(st.just(0), st.integers(0, 10**13)))
    reads = tuple(acc(f"T{i}_{j}", draw(st.integers(1, 10**9)), vdt) for j in range(draw(st.integers(0, 3))))
    writes = (acc(f"O{i}", draw(st.integers(1, 10**9)), vdt),)
    return OpCost(f"S{i}", "", "", None, "vector", fm, fv, 0, mdt if fm else None, vdt, 1, reads, writes)


@st.composite
def graphs(draw: st.DrawFn) -> GraphCosts:
    ops = [draw(op_costs(i)) for i in range(draw(st.integers(1, 6)))]
    total = sum(o.bytes for o in ops)
    # compulsory == total (no intermediates) is the case where float rounding could invert the order
    return GraphCosts("k", ops, draw(st.one_of(st.just(total), st.integers(1, total))))


_TARGETS = {name: load_target(name) for name in ("H100_SXM", "A100_SXM", "MI300X")}


@settings(max_examples=500, deadline=None)
@given(graphs(), st.sampled_from(["auto", "fp32", "bf16"]), st.sampled_from(sorted(_TARGETS)))
def test_unfused_ge_fused_gt_zero(g, precision, hw):
    b = graph_bounds(g, _TARGETS[hw], precision)
    assert b.unfused_s >= b.fused_s > 0
    assert b.fused_s >= max(o.t_compute for o in b.ops)


# ---- cache-aware bounds (io_bounds.cache_aware per level, fused terms kept) -------------------------

H100_L2_BW = 16.7e12
H100_DRAM_CAP = 121634816     # levels[0] (chip) of hw_targets/H100_SXM.yaml: all on-chip storage
H100_SM_CAP = 524288          # levels[1] (sm): one SM


def mm_text(m: int, n: int, k: int, dt: str = "f32") -> str:
    return (f"kernel mm(A: {dt}[{m}, {k}] input, B: {dt}[{k}, {n}] weight, C: {dt}[{m}, {n}] output):\n"
            f"    for i in range({m}):\n        for j in range({n}):\n            C[i, j] = 0.0\n"
            f"            for k in range({k}):\n                C[i, j] += A[i, k] * B[k, j]\n")


def mlp_text(b: int, d: int, h: int, e: int, dt: str = "f32") -> str:
    return (f"kernel mlp(X: {dt}[{b}, {d}] input, W1: {dt}[{d}, {h}] weight, W2: {dt}[{h}, {e}] weight, "
            f"Y: {dt}[{b}, {e}] output):\n    local H: {dt}[{b}, {h}]\n"
            f"    for i in range({b}):\n        for j in range({h}):\n            H[i, j] = 0.0\n"
            f"            for k in range({d}):\n                H[i, j] += X[i, k] * W1[k, j]\n"
            f"            H[i, j] = max(H[i, j], 0.0)\n"
            f"    for i in range({b}):\n        for j in range({e}):\n            Y[i, j] = 0.0\n"
            f"            for k in range({h}):\n                Y[i, j] += H[i, k] * W2[k, j]\n")


def with_kernels(*texts: str, hw=None, precision: str = "auto", cache_size: int | None = None):
    from solar_compiler.dialects.graph_convert import lift_kernel
    from solar_compiler.text.parser import parse_kernel
    from solar_compiler.transforms.kernels import kernel_costs

    ks = [parse_kernel(t, "t.loop") for t in texts]
    ps = [lift_kernel(k) for k in ks]
    gs = [kernel_costs(k) for k in ks]
    return graph_bounds(gs, hw or _TARGETS["H100_SXM"], precision, ps, cache_size), gs


def theorem_r(work: float, s: float, w: float = 1 / 64, delta: int = 4, units: int = 1) -> float:
    """Theorem R (docs/bounds.md) written out: Q >= h (2W / (F(h + 2d) + F(2S + h + 2d)) - P),
    F(T) = sqrt(w) (T/3)^1.5, best h on a fine grid (the code uses a coarser fixed grid)."""
    import math

    import numpy as np

    h = s * np.geomspace(0.05, 50, 200001)
    f = lambda t: math.sqrt(w) * (t / 3) ** 1.5  # noqa: E731
    return float((h * (2 * work / (f(h + 2 * delta) + f(2 * s + h + 2 * delta)) - units)).max())


def test_cache_aware_matmul_4096_is_compute_bound(h100):
    b, (g,) = with_kernels(mm_text(N, N, N), hw=h100)
    ca = b.cache_aware
    assert g.compulsory_bytes == 3 * N * N * 4
    chip, sm = ca.levels
    assert (chip.name, chip.capacity, chip.units, chip.bytes) == ("chip", H100_DRAM_CAP, 1, 3 * N * N * 4)
    # one SM: 1.927 W / sqrt(S_words) words less ~132 segments. Policy auto: an operand may be a
    # 19-bit TF32 value (2.375 B), the output stays 4 B: w = 1 / (2.375^2 * 4); 7.358e9 B, 3.7x
    # compulsory (1.3215e9 B with 4-byte operands: test_cache_aware_matmul_4096_fp32_operands) ...
    assert (sm.name, sm.capacity, sm.units) == ("sm", H100_SM_CAP, 132)
    # (the code's fixed grid of h, 2^(k/8) B, lands within 2.2e-4 of the fine grid's optimum)
    best = theorem_r(N**3, H100_SM_CAP, w=1 / (2.375**2 * 4), units=132)
    assert best * (1 - 3e-4) <= sm.bytes <= best
    assert sm.bytes == 735_792_064
    # ... but 7.358e8 / 16.7e12 = 44.1 us < 277.8 us of TF32 compute: cache-aware = fused, exactly
    assert ca.terms_s["sm"] == sm.bytes / H100_L2_BW == pytest.approx(44.06e-6, rel=1e-3)
    assert ca.terms_s["chip"] == b.fused_memory_s
    assert b.cache_aware_s == b.fused_s == 2 * N**3 / H100_TF32
    assert ca.bottleneck == "matrix" and ca.bytes_dram == 3 * N * N * 4 and ca.cache_size is None
    (op,) = ca.ops
    assert (op.name, op.bound_s, op.bottleneck) == ("S1", b.fused_s, "matrix")
    assert op.bytes == {"chip": 3 * N * N * 4, "sm": sm.bytes}


def test_cache_aware_matmul_4096_fp32_operands(h100):
    # policy fp32: 4-byte operands (w = 1/64) and fp32-accurate compute (Ozaki-II on INT8, 329.8 TF)
    b, _ = with_kernels(mm_text(N, N, N), hw=h100, precision="fp32")
    sm = b.cache_aware.levels[1]
    assert sm.bytes == pytest.approx(theorem_r(N**3, H100_SM_CAP, units=132), rel=1e-5)
    assert sm.bytes == pytest.approx(1.32147e9, rel=1e-5)
    assert b.cache_aware_s == b.fused_s == pytest.approx(2 * N**3 / (1978.9e12 / 6), rel=1e-12)


def test_cache_size_overrides_the_dram_level(h100):
    b, _ = with_kernels(mm_text(N, N, N), hw=h100, cache_size=2**18, precision="fp32")
    chip, sm = b.cache_aware.levels
    # 256 KiB = 2^16 words, 4-byte operands (policy fp32): 1.92687 * 2^36 / 2^8 words * 4 B
    # - (4 / sqrt 3) * 2^18 B = 2.0683e9 B
    assert chip.capacity == 2**18
    assert chip.bytes == pytest.approx(theorem_r(N**3, 2**18), rel=1e-3)
    assert chip.bytes == pytest.approx(1.92687 * 2**36 / 256 * 4 - 4 / 3**0.5 * 2**18, rel=1e-3)
    assert sm.capacity == H100_SM_CAP  # inner levels keep the target's figures
    # 617.4 us, above the 416.7 us of fp32-accurate compute
    assert b.cache_aware_s == chip.bytes / H100_BW == pytest.approx(617.4e-6, rel=1e-3)
    assert b.cache_aware_s > b.fused_s and b.cache_aware.bottleneck == "chip"
    assert b.cache_aware.cache_size == 2**18


def test_cache_aware_elementwise_equals_fused(h100):
    text = ("kernel ew(X: f32[4096, 4096] input, Y: f32[4096, 4096] output):\n    local T: f32[4096, 4096]\n"
            "    for i in range(4096):\n        for j in range(4096):\n            T[i, j] = X[i, j] * 2.0\n"
            "    for i in range(4096):\n        for j in range(4096):\n            Y[i, j] = exp(T[i, j])\n")
    for cap in (None, 64):
        b, _ = with_kernels(text, hw=h100, cache_size=cap)
        assert [lv.bytes for lv in b.cache_aware.levels] == [2 * N * N * 4] * 2
        assert b.cache_aware_s == b.fused_s == 2 * N * N * 4 / H100_BW
        assert [(o.name, o.bottleneck) for o in b.cache_aware.ops] == [("S0", "chip"), ("S1", "chip")]


def test_cache_aware_sums_kernels(h100):
    """Two kernels (disjoint tensors): per-level traffic adds up."""
    ew = ("kernel ew(X: f32[1024] input, Y: f32[1024] output):\n    for i in range(1024):\n"
          "        Y[i] = X[i] * 2.0\n")
    both, _ = with_kernels(mm_text(N, N, N), ew, hw=h100)
    mm_only, _ = with_kernels(mm_text(N, N, N), hw=h100)
    for a, m in zip(both.cache_aware.levels, mm_only.cache_aware.levels, strict=True):
        assert a.bytes == m.bytes + 2 * 1024 * 4
    assert [o.name for o in both.cache_aware.ops] == ["S1", "S0"]


def test_cache_aware_errors(h100):
    from dataclasses import replace

    from solar_compiler.analysis.costs import program_costs
    from solar_compiler.dialects.graph_convert import lift_kernel
    from solar_compiler.text.parser import parse_kernel

    k = lift_kernel(parse_kernel(mm_text(64, 64, 64), "t.loop"))
    g = program_costs(k)
    with pytest.raises(SolarError, match="H100_SXM: the target defines no memory levels"):
        graph_bounds(g, replace(h100, levels=()), "auto", [k])
    other = lift_kernel(parse_kernel(mm_text(64, 64, 64).replace("kernel mm", "kernel nn"), "t.loop"))
    with pytest.raises(SolarError, match=r"kernels \['nn'\] do not match the costed kernels \['mm'\]"):
        graph_bounds(g, h100, "auto", [other])
    with pytest.raises(SolarError, match="a cache size override needs the kernels"):
        graph_bounds(g, h100, "auto", None, 1024)
    with pytest.raises(SolarError, match="cache size 0 bytes: must be positive"):
        graph_bounds(g, h100, "auto", [k], 0)


# ---- invariants: fused <= cache-aware, cache-aware non-increasing in the capacity --------------------

_dims = st.integers(1, 1 << 14)


@st.composite
def programs(draw: st.DrawFn) -> str:
    dt = draw(st.sampled_from(["f32", "bf16"]))
    if draw(st.booleans()):
        return mm_text(draw(_dims), draw(_dims), draw(_dims), dt)
    return mlp_text(draw(_dims), draw(_dims), draw(_dims), draw(_dims), dt)


@settings(max_examples=40, deadline=None)
@given(programs(), st.lists(st.integers(1 << 10, 1 << 30), min_size=2, max_size=2, unique=True),
       st.sampled_from(["auto", "fp32"]), st.sampled_from(sorted(_TARGETS)))
def test_fused_le_cache_aware_monotone_in_capacity(text, caps, precision, hw):
    small, big = sorted(caps)
    runs = [with_kernels(text, hw=_TARGETS[hw], precision=precision, cache_size=c)
            for c in (small, big, None)]
    for b, gs in runs:
        assert b.fused_s <= b.cache_aware_s
        assert all(lv.bytes >= sum(g.compulsory_bytes for g in gs) for lv in b.cache_aware.levels)
        assert all(o.bound_s <= c.bound_s for o, c in zip(b.ops, b.cache_aware.ops, strict=True))
    (b_small, _), (b_big, _), (b_target, _) = runs
    assert b_small.fused_s == b_big.fused_s == b_target.fused_s  # the capacity never touches fused
    assert b_small.cache_aware_s >= b_big.cache_aware_s
    assert b_small.cache_aware.bytes_dram >= b_big.cache_aware.bytes_dram
