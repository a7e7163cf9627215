"""Sums on the matrix unit (docs/bounds.md sections 0.0 and 0.4): a sum's additions may run as MACs
with a ones operand, and the bound splits them between the vector and the matrix unit.

Figures on H100_SXM: FP32 vector 66.9 TFLOP/s; BF16 tensor 989.4; TF32 494.7; INT8 1978.9 TOPS, so
an f32 sum under Ozaki-II (6 products per product, ceil(sqrt 6) = 3 per addition) runs at 1978.9 / 3
= 659.6 TFLOP/s of MACs; DRAM 3.35 TB/s. A MAC is 2 FLOPs.
"""

from __future__ import annotations

import dataclasses
import json
import textwrap

import pytest
from translated import fused_terms, roofline_json, translated_programs

from solar_compiler.analysis.bounds import SumMove, balance, graph_bounds
from solar_compiler.analysis.costs import program_costs
from solar_compiler.dialects.graph_convert import lift_kernel
from solar_compiler.driver import main
from solar_compiler.hw import load_target
from solar_compiler.hw.model import Emulation
from solar_compiler.report import render_text
from solar_compiler.text.parser import parse_kernels

VEC32, BF16, TF32, INT8 = 66.9e12, 989.4e12, 494.7e12, 1978.9e12
SUM32 = INT8 / 3


# ---- the rate: price_sum -------------------------------------------------------------------------------
def test_a_sum_runs_at_the_fastest_matrix_format_holding_its_values():
    h100 = load_target("H100_SXM")
    bf16 = h100.price_sum("bf16")
    assert (bf16.key, bf16.rate) == ("matrix.bf16", BF16)
    f32 = h100.price_sum("f32")  # Ozaki-II: 6 INT8 products per product, 3 per addition
    assert (f32.key, f32.rate) == ("emulation.ozaki2_int8_fp32", INT8 / 3)
    assert "3 INT8 tensor products per addition" in f32.label
    assert h100.price_sum("i64") is None  # no matrix format holds every int64


def test_an_emulation_needs_ceil_sqrt_of_its_products_per_addition():
    # without Ozaki-II: BF16x9 is 3 bf16 parts of x against a ones operand (989.4 / 3 = 329.8), FP16x3
    # ceil(sqrt 3) = 2 parts (494.7); under auto TF32 (494.7) holds f32 by the policy, under fp32 not
    h100 = load_target("H100_SXM")
    kept = {n: e for n, e in h100.emulation.items() if not n.startswith("ozaki")}
    t = dataclasses.replace(h100, emulation=kept)
    assert t.price_sum("f32", "fp32").rate == pytest.approx(BF16 / 2)
    assert t.price_sum("f32", "fp32").key == "emulation.fp16x3"
    only_bf16x9 = dataclasses.replace(t, emulation={"bf16x9": t.emulation["bf16x9"]})
    assert only_bf16x9.price_sum("f32", "fp32").rate == pytest.approx(BF16 / 3)
    assert only_bf16x9.price_sum("f32", "auto").key == "matrix.tf32"
    assert only_bf16x9.price_sum("f32", "auto").rate == TF32
    none = dataclasses.replace(t, emulation={})  # H100 lists no FP32 tensor rate; FP64 holds f32
    assert (none.price_sum("f32", "fp32").key, none.price_sum("f32", "fp32").rate) == ("matrix.fp64", 66.9e12)


def test_an_emulation_on_a_vector_unit_is_not_a_matrix_unit():
    h100 = load_target("H100_SXM")
    vec = Emulation("vec", "fp32", "vector.fp64", 0.01, "src", False)  # absurdly fast, but a vector unit
    t = dataclasses.replace(h100, emulation={"vec": vec})
    assert t.price_sum("f32", "fp32").key == "matrix.fp64"


# ---- the split: balance ----------------------------------------------------------------------------------
def test_balance_moves_a_fraction_until_the_units_meet():
    # M = 1, V = 5, one sum of 4 vector seconds or 2 matrix seconds: moving all overshoots (3 > 1), so
    # f = (5 - 1) / (4 + 2) = 2/3 moves: both units 7/3
    s = balance(1.0, 5.0, [SumMove(4.0, 2.0, 300)])
    assert s.t_matrix == pytest.approx(7 / 3) and s.t_vector == pytest.approx(7 / 3)
    assert s.adds_on_matrix == pytest.approx(200)


def test_balance_moves_the_cheapest_matrix_time_per_vector_second_first():
    # a: 2 vector s for 2 matrix s (ratio 1); b: 2 vector s for 0.5 matrix s (ratio 1/4), moved first:
    # M 0.5, V 4; then a: f = (4 - 0.5) / 4 = 7/8 -> both 2.25
    s = balance(0.0, 6.0, [SumMove(2.0, 2.0, 10), SumMove(2.0, 0.5, 10)])
    assert s.t_matrix == pytest.approx(2.25) and s.t_vector == pytest.approx(2.25)
    assert s.adds_on_matrix == pytest.approx(10 + 10 * 7 / 8)


def test_balance_keeps_the_times_when_the_matrix_unit_binds_or_nothing_moves():
    assert balance(3.0, 2.0, [SumMove(2.0, 0.1, 5)]) == balance(3.0, 2.0, [])
    assert (balance(3.0, 2.0, []).t_matrix, balance(3.0, 2.0, []).t_vector) == (3.0, 2.0)
    s = balance(0.0, 5.0, [SumMove(1.0, 0.5, 7)])  # everything moves and the vector unit still binds
    assert (s.t_matrix, s.t_vector, s.adds_on_matrix) == (0.5, 4.0, 7)



def test_balance_counts_the_flops_a_way_back_moves():
    # an op priced after a rewrite that added 3 vector s and saved 6 matrix s (300 vector FLOPs back,
    # 6,000 matrix FLOPs): M 1, V 4; f = 3 / 9 of it goes back, both units 3; the inverse roofline
    # reads the FLOPs moved
    s = balance(1.0, 4.0, [SumMove(3.0, 6.0, 0, 300, 6000)])
    assert s.t_matrix == pytest.approx(3.0) and s.t_vector == pytest.approx(3.0)
    assert s.adds_on_matrix == 0
    assert (s.flops_off_vector, s.flops_to_matrix) == (pytest.approx(100), pytest.approx(2000))


# ---- which additions: costs -----------------------------------------------------------------------------
def _costs(text: str, distinct: bool = True):
    (k,) = parse_kernels(textwrap.dedent(text), "t.loop")
    return program_costs(lift_kernel(k), distinct=distinct)


EXP_SUM = """\
kernel s(x: f32[128, 32] input, y: f32[128] output):
    for i in range(128):
        y[i] = 0.0
        for k in range(32):
            y[i] += exp(x[i, k])
"""


def test_the_additions_of_a_sum_are_flexible_and_its_body_is_not():
    g = _costs(EXP_SUM)
    (o,) = [o for o in g.ops if o.flops_vector]
    # exp and the accumulation at each of 128 x 32 points: 4,096 of 8,192 vector FLOPs are additions
    assert (o.flops_vector, o.flops_transcendental, o.flops_sum, o.sum_dtype) == (8192, 4096, 4096, "f32")
    assert all(o.flops_sum == 0 for o in _costs(EXP_SUM, distinct=False).ops)  # classical: none


def test_max_reductions_and_contractions_have_no_flexible_additions():
    g = _costs(EXP_SUM.replace("y[i] += exp", "y[i] max= exp"))
    assert all(o.flops_sum == 0 for o in g.ops)
    mm = _costs("""\
        kernel m(a: bf16[16, 8] input, b: bf16[8, 4] input, c: f32[16, 4] output):
            for i in range(16):
                for j in range(4):
                    c[i, j] = 0.0
                    for k in range(8):
                        c[i, j] += f32(a[i, k]) * f32(b[k, j])
        """)
    assert [o.flops_matrix for o in mm.ops if o.flops_matrix] == [2 * 16 * 4 * 8]
    assert all(o.flops_sum == 0 for o in mm.ops)  # its additions are in its MACs already


def test_a_sum_of_widened_bf16_values_is_priced_at_bf16():
    g = _costs("""\
        kernel s(x: bf16[64, 32] input, y: f32[64] output):
            for i in range(64):
                y[i] = 0.0
                for k in range(32):
                    y[i] += f32(x[i, k])
        """)
    (o,) = [o for o in g.ops if o.flops_sum]
    assert (o.flops_sum, o.sum_dtype) == (64 * 32, "bf16")


def test_a_scan_moves_its_scan_additions():
    # the prefix k <= i over 64 x 32 is one scan per column d: 63 additions each (prefix_sums.py)
    g = _costs("""\
        kernel c(x: f32[64, 32] input, y: f32[64, 32] output):
            for i in range(64):
                for d in range(32):
                    y[i, d] = 0.0
                    for k in range(i + 1):
                        y[i, d] += x[k, d]
        """)
    (o,) = [o for o in g.ops if o.flops_sum]
    assert o.algorithm == "prefix sums as a scan" and o.flops_sum == o.flops_vector == 63 * 32


# ---- bounds ---------------------------------------------------------------------------------------------
BROADCAST_SUM = """\
kernel b(x: f32[512, 64] input, z: f32[512, 64] input, y: f32[512, 512] output):
    for i in range(512):
        for j in range(512):
            y[i, j] = 0.0
            for k in range(64):
                y[i, j] += exp(x[i, k] + z[j, k])
"""


def test_fused_and_unfused_bounds_split_the_additions():
    # per (i, j, k): add, exp, accumulate; P = 512 * 512 * 64 points. Vector 3P at 66.9 T; the P
    # accumulations move to the matrix unit (2P at 659.6 T), which stays below the 2P vector FLOPs left
    p = 512 * 512 * 64
    g = _costs(BROADCAST_SUM)
    b = graph_bounds(g, load_target("H100_SXM"))
    assert b.fused_vector_s == pytest.approx(2 * p / VEC32, rel=1e-12)
    assert b.fused_matrix_s == pytest.approx(2 * p / SUM32, rel=1e-12)
    assert b.sum_adds_on_matrix == p
    assert b.fused_s == pytest.approx(2 * p / VEC32, rel=1e-12)
    (k,) = b.kernels
    assert (k.t_matrix, k.t_vector) == (b.fused_matrix_s, b.fused_vector_s)
    assert b.ops[0].bound_s == pytest.approx(2 * p / VEC32, rel=1e-12)
    classical = graph_bounds(_costs(BROADCAST_SUM, distinct=False), load_target("H100_SXM"))
    assert classical.fused_s == pytest.approx(3 * p / VEC32, rel=1e-12) and classical.sum_adds_on_matrix == 0


def test_the_report_and_the_inverse_roofline_say_where_the_additions_ran(tmp_path, capsys):
    f = tmp_path / "b.loop"
    f.write_text(BROADCAST_SUM)
    p = 512 * 512 * 64
    assert main([str(f), "--roofline=fused", "--hw", "H100_SXM", "--format=json",
                 "--inverse-roofline", "1us"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["totals"]["flops_sum"] == p and r["bounds"]["H100_SXM"]["sum_adds_on_matrix"] == p
    assert r["hw"]["H100_SXM"]["sum"]["f32"]["figure"] == "emulation.ozaki2_int8_fp32"
    inv = r["inverse"]["H100_SXM"]["fused"]
    assert inv["matrix_flops"] == pytest.approx(2 * p / 1e-6)
    assert inv["vector_flops"] == pytest.approx(2 * p / 1e-6)
    text = " ".join(render_text(r).split())
    assert f"sums: {p:,} additions of sums and scans may run on the matrix unit" in text
    assert f"the fused terms run {p:,} on H100_SXM there" in text
    assert "sums on the matrix unit f32 659.6 TFLOP/s (ozaki2_int8_fp32 emulation" in text
    assert main([str(f), "--roofline=fused", "--hw", "H100_SXM", "--format=json",
                 "--algorithms", "classical"]) == 0
    c = json.loads(capsys.readouterr().out)
    assert c["bounds"]["H100_SXM"]["sum_adds_on_matrix"] == 0 and c["hw"]["H100_SXM"]["sum"] == {}
    assert "sums:" not in render_text(c)


# ---- the sliding-window sum -----------------------------------------------------------------------
BAND = """import torch
N, D, W = 4096, 1024, 512
class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        o = torch.ones(N, N)
        self.register_buffer("band", torch.tril(o) - torch.tril(o, -W))
    def forward(self, x):
        return self.band @ x
def get_inputs():
    return [torch.randn(N, D)]
def get_init_inputs():
    return []
"""


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    pytest.importorskip("torch")
    with translated_programs(tmp_path_factory.mktemp("sums"), {"band": BAND}) as paths:
        yield paths


def test_a_band_matrix_product_is_bound_by_memory_not_by_vector_additions(capsys, files):
    # after narrowing: one addition per band point, sum_i min(i + 1, 512) = 1,966,336 per column, x 1024
    # = 2,013,528,064 (the band's 1.0 is no operation). Classical, on the vector unit: 30.10 us; a banded
    # tensor-core GEMM needs about 11 us. Split, compute is 5.07 us and the traffic (x and the output,
    # 33,554,432 B) binds: 10.02 us on both fidelities
    adds = 2_013_528_064
    r = roofline_json(capsys, files["band"])
    h = r["bounds"]["H100_SXM"]
    assert r["totals"]["flops_vector"] == adds and r["totals"]["flops_sum"] == adds
    v, m = adds / VEC32, 2 * adds / SUM32
    f = v / (v + m)
    assert h["fused_terms_s"]["matrix"] == pytest.approx(f * m, rel=1e-9)
    assert h["fused_terms_s"]["vector"] == pytest.approx(f * m, rel=1e-9)
    assert fused_terms(r) == h["fused_terms_s"]["memory"] == pytest.approx(33_554_432 / 3.35e12, rel=1e-12)
    assert h["fused_s"] <= 11e-6 and h["unfused_s"] == pytest.approx(h["fused_s"])
    assert r["classical"]["bounds"]["H100_SXM"]["fused_s"] == pytest.approx(adds / VEC32, rel=1e-9)
