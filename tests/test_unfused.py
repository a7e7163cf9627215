"""The unfused bound priced per source op (one eager kernel each): grouping by the statements'
origins, external traffic, the origins surviving `narrow-needed`, the per-kernel report, and the
invariants unfused >= fused and "a coarser grouping never raises the unfused bound"."""

from __future__ import annotations

import copy
from functools import cache
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from programs import TRIL
from translated import cached_translations, roofline_json
from xdsl.context import Context

from solar_compiler.analysis.bounds import graph_bounds
from solar_compiler.analysis.summary import build_report, module_report, module_validation
from solar_compiler.analysis.unfused import source_kernels
from solar_compiler.dialects.convert import kernels_to_module, module_kernels
from solar_compiler.dialects.graph_convert import lift_kernel
from solar_compiler.driver import main
from solar_compiler.errors import SolarError
from solar_compiler.hw import load_target
from solar_compiler.loopir.ast import Kernel, statements
from solar_compiler.passes.narrow_needed import NarrowNeededPass
from solar_compiler.passes.roofline import RooflinePass
from solar_compiler.passes.translate import stamp_origins
from solar_compiler.records import ProgramInfo
from solar_compiler.report import render_text
from solar_compiler.text.parser import parse_kernel
from solar_compiler.transforms.kernels import kernel_costs
from solar_compiler.transforms.narrow import narrow

ROOT = Path(__file__).resolve().parent.parent
BW, VEC_F32, TF32 = 3.35e12, 66.9e12, 494.7e12  # H100 SXM: DRAM B/s, f32 vector and TF32 FLOP/s

SLICED = """\
import torch
import torch.nn as nn
N = 32
class Model(nn.Module):
    def forward(self, a, b):
        c = torch.softmax(a @ b, dim=1)
        z = torch.cat([c, torch.zeros_like(c)], dim=1)
        return torch.relu(z)[:, :40]
def get_inputs():
    return [torch.randn(N, N), torch.randn(N, N)]
def get_init_inputs():
    return []
"""

CONV_RELU = """\
import torch
import torch.nn as nn
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
    def forward(self, x):
        return torch.relu(self.conv(x))
def get_inputs():
    return [torch.randn(2, 3, 8, 8)]
def get_init_inputs():
    return []
"""

DECOMPOSED = """\
import torch
import torch.nn as nn
import torch.nn.functional as F
class Model(nn.Module):
    def forward(self, x):
        return torch.lerp(F.softplus(x), x, 0.25)
def get_inputs():
    return [torch.randn(256, 1024)]
def get_init_inputs():
    return []
"""


# ---- torch programs: a translation cache filled in-process, solar-opt run in-process -------------------
@pytest.fixture(scope="module")
def torch_files(tmp_path_factory, translation_cache):
    """Paths of the programs used here, their translations cached (as `solar-opt --translate` looks
    them up) in a temporary cache directory."""
    pytest.importorskip("torch")
    tmp = tmp_path_factory.mktemp("unfused")
    files = {"sliced": tmp / "sliced.py", "conv_relu": tmp / "conv_relu.py",
             "decomposed": tmp / "decomposed.py"}
    files["sliced"].write_text(SLICED)
    files["conv_relu"].write_text(CONV_RELU)
    files["decomposed"].write_text(DECOMPOSED)
    paths = {k: str(v) for k, v in files.items()}
    for name in ("softmax", "conv_bn_relu", "tril_matmul", "causal_attention_manual",
                 "transformer_encoder_sdpa"):
        paths[name] = f"examples/torch/{name}.py"
    with cached_translations(translation_cache, paths):
        yield paths


def rows(r: dict) -> list[tuple]:
    return [(k["op"], k["stmts"], k["bytes"]) for k in r["kernels_unfused"]]


def test_softmax_is_one_kernel_reading_x_once_and_writing_y_once(capsys, torch_files):
    n, d = 64, 1024
    r = roofline_json(capsys, torch_files["softmax"])
    (k,) = r["kernels_unfused"]
    # the inits are separate loop nests (not folded): five nodes, one kernel
    assert (k["op"], k["stmts"]) == ("aten.softmax.int", [0, 1, 2, 3, 4])
    assert k["ops"] == ["S0", "S1", "S2", "S3", "S4"]
    assert (k["reads"], k["writes"]) == ({"x": n * d * 4}, {"softmax": n * d * 4})
    # max (max=: 1), sum (exp(x - m) + accumulate: 3), output (its exp(x - m) is the sum's: the
    # division, 1) per element: 5 (7 counted literally)
    assert (k["flops_matrix"], k["flops_vector"]) == (0, 5 * n * d)
    assert k["bytes"] == r["totals"]["bytes_unfused"] == 2 * n * d * 4
    unfused = r["bounds"]["H100_SXM"]["unfused_s"]
    assert unfused == k["bound_s"]["H100_SXM"] == 2 * n * d * 4 / BW
    assert k["bottleneck"]["H100_SXM"] == "memory"
    # priced per statement, the row statistics' round trips made it larger
    assert sum(o["bytes"] for o in r["ops"]) > 2 * n * d * 4
    assert unfused == r["bounds"]["H100_SXM"]["fused_s"]


def test_an_op_export_decomposes_is_one_eager_kernel(capsys, torch_files):
    """torch.export decomposes softplus into exp, log1p, gt and where, and lerp into nine nodes;
    eager PyTorch runs each call as one kernel (KernelBench level1/29_Softplus ran in 4.27 ms on an
    H100, below the 16.3 ms its four decomposed kernels were priced at). One kernel per call: the
    softplus reads x and writes its result (2 x 1 MiB), the lerp reads both and writes (3 x 1 MiB)."""
    r = roofline_json(capsys, torch_files["decomposed"])
    e = 256 * 1024 * 4
    assert [(k["op"], k["bytes"]) for k in r["kernels_unfused"]] == [
        ("aten.softplus.default", 2 * e), ("aten.lerp.Scalar", 3 * e)]
    assert r["totals"]["bytes_unfused"] == 5 * e
    assert r["bounds"]["H100_SXM"]["unfused_s"] == pytest.approx(5 * e / BW)


def test_conv_relu_two_kernels_by_hand(capsys, torch_files):
    r = roofline_json(capsys, torch_files["conv_relu"])
    x, w, bias, out = 2 * 3 * 8 * 8 * 4, 4 * 3 * 3 * 3 * 4, 4 * 4, 2 * 4 * 8 * 8 * 4
    # the bias init and the guarded reduction are one kernel: its result goes to DRAM once, and the
    # accumulator is never re-read from DRAM (per node: S0 writes it, S1 reads and writes it again)
    assert rows(r) == [("aten.convolution.default", [0, 1], x + w + bias + out),
                       ("aten.relu.default", [2], 2 * out)]
    assert [o["bytes"] for o in r["ops"]] == [bias + out, x + w + 2 * out, 2 * out]
    conv, relu = r["kernels_unfused"]
    taps = 2 * 4 * 3 * 22 * 22  # per spatial dim 8 * 3 - 2 taps fall inside the padding-free image
    # the default model prices the 3 x 3 conv at Winograd F(4x4,3x3): 2 x 2 tiles of 36 products (each
    # tile has 11 x 11 direct taps) per (image, out, in channel), 144, fewer than the FFT of the padded
    # 10 x 10 map (148) or a 32 x 32 FFT tile (its 484 direct taps); classical counts the taps
    assert (conv["flops_matrix"], relu["flops_vector"]) == (2 * 2 * 4 * 3 * 4 * 36, 2 * 4 * 8 * 8)
    classical = roofline_json(capsys, torch_files["conv_relu"], "--algorithms", "classical")
    assert classical["kernels_unfused"][0]["flops_matrix"] == 2 * taps
    h = r["bounds"]["H100_SXM"]
    # each kernel's bytes take 5.2 ns and 2.4 ns, below the 141 ns each eager kernel that reads takes
    # (the latency floor, docs/bounds.md section 9); the ops keep their own memory-bound times
    conv_op, relu_op = r["ops"][1], r["ops"][2]
    assert conv_op["bound_s"]["H100_SXM"] == (x + w + 2 * out) / BW > 2 * taps / TF32
    assert relu_op["bound_s"]["H100_SXM"] == 2 * out / BW
    assert [k["bound_s"]["H100_SXM"] for k in (conv, relu)] == [141e-9, 141e-9]
    assert [k["bottleneck"]["H100_SXM"] for k in (conv, relu)] == ["latency", "latency"]
    assert h["unfused_s"] == 2 * 141e-9 and h["latency_floor_s"] == 141e-9
    assert r["totals"]["bytes_unfused"] == x + w + bias + 3 * out
    assert h["fused_terms_s"]["memory"] == (x + w + bias + out) / BW
    assert h["fused_s"] == h["latency_floor_s"] <= h["unfused_s"]


def test_grouping_survives_narrowing_that_splits_and_removes(capsys, torch_files):
    """Narrowing removes cat's zero half (the slice never reads it) and splits the output copy into a
    copy and a constant store: the record follows, each kernel keeps its own statements."""
    r = roofline_json(capsys, torch_files["sliced"])
    n = 32
    assert rows(r) == [("aten.mm.default", [0, 1], 3 * n * n * 4),
                       ("aten.softmax.int", [2, 3, 4, 5, 6], 2 * n * n * 4),
                       ("aten.cat.default", [7], 2 * n * n * 4),
                       ("aten.relu.default", [8], 2 * n * n * 4),
                       ("output copy", [9, 10], n * n * 4 + n * 40 * 4)]
    # as written: cat writes 32 x 64, relu reads and writes it, the copy reads 32 x 40 of it
    t = r["totals"]
    assert t["bytes_unfused_as_written"] == 3 * n * n * 4 + 2 * n * n * 4 + 3 * n * n * 4 + \
        4 * n * n * 4 + 2 * n * 40 * 4
    assert t["bytes_unfused"] == sum(b for _, _, b in rows(r))


# The iota/compare of tril and the mask buffer are inlined as affine comparisons (no statements);
# narrowing splits a masked select into its two pieces (kept value, constant), one entry each, when
# both are needed. In causal attention the masked -inf scores are not: their probabilities are known
# zeros (exp(-inf) = 0, 0 / sum = 0), stored as constants without reading the scores, so the select
# keeps only its unmasked piece.
AFTER_NARROWING = {
    "tril_matmul": [("aten.where.self", 0, 1), ("aten.where.self", 1, 1), ("aten.mm.default", 2, 2),
                    ("aten.where.self", 4, 2)],
    "causal_attention_manual": [("aten.linear.default", 0, 2), ("aten.matmul.default", 2, 2),
                                ("aten.mul.Tensor", 4, 1), ("aten.where.self", 5, 1),
                                ("aten.softmax.int", 6, 5), ("aten.matmul.default", 11, 2),
                                ("aten.linear.default", 13, 2)],
}


def origin_runs(k: Kernel) -> list[tuple[str, int, int]]:
    """(op, first statement, count) of each run of statements with the same origin."""
    out: list[list] = []
    last = None
    for c in statements(k):
        o = c.stmt.origin
        if out and o is not None and last is not None and o.id == last.id:
            out[-1][2] += 1
        else:
            out.append([o.op if o else None, c.index, 1])
        last = o
    return [tuple(x) for x in out]


@pytest.mark.parametrize("name", sorted(AFTER_NARROWING))
def test_grouping_after_narrowing_follows_the_statements(name, torch_files):
    """After `narrow-needed` every statement keeps the origin of the statement it came from (and
    writes the same tensor from the same source line), so the kernels of the unfused bound are the
    runs of equal origins. (The masked selects split into guarded pieces.)"""
    from solar_compiler.frontends import FrontendOptions
    from solar_compiler.frontends.torch import frontend as fe

    t = fe.translate_job(torch_files[name], FrontendOptions(validate=False))
    (k,) = t.kernels
    stamp_origins([k], t.source_ops)
    m = kernels_to_module([k])
    NarrowNeededPass().apply(Context(), m)
    narrowed = module_kernels(m)[0]
    assert origin_runs(narrowed) == AFTER_NARROWING[name]
    res = narrow(k)
    before, after = statements(k), statements(narrowed)
    assert len(after) == len(res.origin)
    for j, c in enumerate(after):
        src = before[res.origin[j]]
        assert c.stmt.origin == src.stmt.origin
        assert (c.stmt.target, c.stmt.loc) == (src.stmt.target, src.stmt.loc)


def test_tril_matmul_kernels_by_hand(capsys, torch_files):
    """torch.tril decomposes into iota (sub), compare (le) and select (where); the iota and compare are
    index-valued, inlined into the select, so each tril is one kernel, and narrowing keeps only the
    lower triangles: a, b, where, where_1 and mm are needed on i >= j only (tri = n(n+1)/2 elements),
    the output is written whole (its upper triangle as constant zeros)."""
    r = roofline_json(capsys, torch_files["tril_matmul"])
    n = 256
    tri = n * (n + 1) // 2 * 4
    full = n * n * 4
    got = [(op, b) for op, _, b in rows(r)]
    assert got == [("aten.where.self", 2 * tri), ("aten.where.self", 2 * tri), ("aten.mm.default", 3 * tri),
                   ("aten.where.self", tri + full)]
    assert r["totals"]["bytes_unfused"] == 8 * tri + full == 1_314_816
    # as written: three selects (read x, write) and the mm (read 2, write 1), all full
    assert r["totals"]["bytes_unfused_as_written"] == 3 * 2 * full + 3 * full


def test_text_report_shows_the_kernel_table(capsys, torch_files):
    rc = main([torch_files["conv_bn_relu"], "--translate", "--lift-einsum", "--roofline=all", "--hw",
               "H100_SXM", "--width", "200"])
    out = capsys.readouterr().out
    assert rc == 0
    lines = out.splitlines()
    at = lines.index(next(x for x in lines if x.startswith("kernels by bound on H100_SXM")))
    assert lines[at] == "kernels by bound on H100_SXM (3: one per source op, its intermediates on chip)"
    rows = [x.split() for x in lines[at + 4:at + 7]]
    out_b = 8 * 16 * 32 * 32 * 4
    # bytes: conv reads x (8x3x32x32) and w (16x27), writes out (8x16x32x32), f32: 624,320 B (its FLOPs:
    # FFT of the padded 34 x 34 map, 2 x 8 x 16 x 3 x 1,732 = 1,330,176, the default model); bn and
    # relu read and write out (1,048,576 B; bn also its 4 per-channel vectors, +256 B); bound / 3.35 TB/s
    assert rows == [
        ["bn", "batch_norm", "20", "262", "k", "1.04", "MB", "0.25", "313.1", "ns", "38.5%", "memory"],
        ["model", "relu", "20", "131", "k", "1.04", "MB", "0.125", "313", "ns", "38.5%", "memory"],
        ["conv", "convolution", "20", "1.33", "M", "624", "kB", "2.13", "186.4", "ns", "22.9%", "memory"]]
    # unfused: their sum, 624,320 + 1,048,832 + 1,048,576 B
    unfused = 624_320 + 2 * out_b + 256 + 2 * out_b
    assert f"| unfused                 | {unfused:,} | 812.5 ns | per kernel |" in out
    # conv_bn_relu: one output of 8 x 16 x 32 x 32 elements, compared whole on 3 samples
    assert f"validation: validated (torch-export frontend, full): 3 sample(s) of {8 * 16 * 32 * 32:,} " \
        "output elements, max relative error" in out
    assert ", at full size" in out


def test_transformer_encoder_kernels(capsys, torch_files):
    r = roofline_json(capsys, torch_files["transformer_encoder_sdpa"])
    ops = [k["op"] for k in r["kernels_unfused"]]
    assert ops.count("aten.scaled_dot_product_attention.default") == 1
    sdpa = next(k for k in r["kernels_unfused"] if k["op"] == "aten.scaled_dot_product_attention.default")
    act = 4 * 64 * 128 * 4  # batch x seq x embed, f32
    # scores and probabilities stay on chip: q, k and v come from one projection tensor
    assert (sdpa["reads"], sdpa["writes"]) == ({"linear": 3 * act}, {"scaled_dot_product_attention": act})
    # the residual sum is written once and read back by the final add (a later kernel)
    assert [k["writes"] for k in r["kernels_unfused"] if k["op"] == "aten.add.Tensor"] == [
        {"add": act}, {"add_1": act}]
    b = r["bounds"]["H100_SXM"]
    assert b["unfused_s"] == pytest.approx(sum(k["bound_s"]["H100_SXM"] for k in r["kernels_unfused"]),
                                           rel=1e-15)
    assert b["unfused_s"] >= b["fused_s"]


# ---- the record: checks and errors ----------------------------------------------------------------------
SOFTMAX = (ROOT / "examples/loop/softmax.loop").read_text()


def module_with_ops(text: str, ops: list[dict]):
    k = parse_kernel(text, "k.loop")
    stamp_origins([k], ops)
    m = kernels_to_module([k])
    ProgramInfo("k.loop", "loop-text").store(m)
    return m


def test_bad_records_are_errors():
    short = [{"op": "a", "loc": "k.py:1", "first": 0, "count": 3},
             {"op": "b", "loc": None, "first": 3, "count": 2}]
    with pytest.raises(SolarError, match="does not cover its 6 statements in order"):
        module_with_ops(SOFTMAX, short)
    with pytest.raises(SolarError, match="does not cover"):
        module_with_ops(SOFTMAX, [{"op": "a"}])
    gap = [{"op": "a", "loc": None, "first": 0, "count": 3}, {"op": "b", "loc": None, "first": 4, "count": 3}]
    with pytest.raises(SolarError, match="does not cover"):
        module_with_ops(SOFTMAX, gap)


def test_loop_record_prices_groups_and_survives_narrow_needed():
    """softmax.loop: M (2 statements), exp + S (3), divide (1): the M kernel writes M for a later one;
    the divide kernel re-reads Y (written by the second kernel) and writes it again (an output)."""
    ops = [{"op": "max", "loc": "k.py:1", "first": 0, "count": 2},
           {"op": "exp-sum", "loc": "k.py:2", "first": 2, "count": 3},
           {"op": "div", "loc": "k.py:3", "first": 5, "count": 1}]
    m = module_with_ops(SOFTMAX, ops)
    NarrowNeededPass().apply(Context(), m)
    assert origin_runs(module_kernels(m)[0]) == [("max", 0, 2), ("exp-sum", 2, 3), ("div", 5, 1)]
    RooflinePass(fidelity="all").apply(Context(), m)
    r = module_report(m)
    x, y, row = 8 * 16 * 4, 8 * 16 * 4, 8 * 4
    # (the statements of softmax.loop carry no source position, so a kernel is named by its op alone)
    assert [(k["name"], k["bytes"]) for k in r["kernels_unfused"]] == [
        ("max", x + row), ("exp-sum", x + row + y + row), ("div", y + row + y)]
    assert [k["reads"] for k in r["kernels_unfused"]] == [{"X": x}, {"X": x, "M": row}, {"Y": y, "S": row}]
    text = render_text(r)
    # 1.3 kB: each of the three kernels reads, so each takes the latency floor (141 ns), and so does
    # the fused program
    rows = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]]
            for line in text.splitlines() if line.startswith("|")}
    assert rows["unfused"][1:] == ["423 ns", "per kernel"] and rows["fused"][1:] == ["141 ns", "latency"]
    # the kernels table (no module column: no module paths): one row per kernel, by bound
    table = text[text.index("kernels by bound"):text.index("totals:")].splitlines()[4:]
    assert [row.split()[0] for row in table] == ["max", "exp-sum", "div"]  # all at the floor: program order


def test_narrow_reports_the_origin_of_every_statement():
    tril = TRIL
    res = narrow(parse_kernel(tril, "t.loop"))
    after = statements(res.kernel)
    # the select splits into the copy (i >= j) and the constant store of the upper triangle
    assert res.origin == (0, 1, 2, 2)
    assert [c.stmt.target for c in after] == ["C", "C", "Y", "Y"]


# ---- invariants over real kernels and random groupings -----------------------------------------------
LOOP_FILES = ["causal_attention", "conv2d", "cumsum", "embedding", "layernorm", "matmul", "softmax"]
BOUNDS_FILES = ["causal_attention_4096", "conv3x3_56", "layernorm_8192", "mlp_8192", "softmax_8192",
                "tril_matmul_4096", "matmul_bf16_8192"]
_TARGETS = {n: load_target(n) for n in ("H100_SXM", "A100_SXM", "MI300X")}


@cache
def _kernel(name: str) -> tuple[Kernel, object]:
    sub = "bounds/" if name in BOUNDS_FILES else ""
    k = parse_kernel((ROOT / f"examples/loop/{sub}{name}.loop").read_text(), f"{name}.loop")
    return k, kernel_costs(k)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(LOOP_FILES + BOUNDS_FILES), st.data(), st.sampled_from(["auto", "fp32"]),
       st.sampled_from(sorted(_TARGETS)))
def test_unfused_ge_fused_and_coarser_never_higher(name, data, precision, hw):
    k, g = _kernel(name)
    n = len(statements(k))
    cuts = data.draw(st.lists(st.booleans(), min_size=n - 1, max_size=n - 1))
    firsts = [0] + [i + 1 for i, c in enumerate(cuts) if c]
    ops = [{"op": f"op{j}", "loc": None, "first": f, "count": e - f}
           for j, (f, e) in enumerate(zip(firsts, [*firsts[1:], n], strict=True))]
    target = _TARGETS[hw]
    grouped = graph_bounds(g, target, precision, unfused=[_grouped(k, ops, g)])
    assert grouped.unfused_s >= grouped.fused_s > 0
    assert grouped.bytes_unfused >= g.compulsory_bytes
    per_node = graph_bounds(g, target, precision)
    # the fused terms are summed per kernel (so unfused >= fused holds exactly): equal up to rounding
    assert grouped.fused_s == pytest.approx(per_node.fused_s, rel=1e-12)
    assert grouped.unfused_s <= per_node.unfused_s * (1 + 1e-12)
    # one kernel for the whole program: its traffic is exactly the compulsory traffic
    whole = _grouped(k, [{"op": "all", "loc": None, "first": 0, "count": n}], g)
    assert [x.bytes for x in whole] == [g.compulsory_bytes]


def _grouped(k: Kernel, ops: list[dict], g):  # noqa: ANN001, ANN202
    """The unfused kernels of `k` (costed as `g`) with the statements' origins from `ops`."""
    k = copy.deepcopy(k)
    stamp_origins([k], ops)
    return source_kernels(lift_kernel(k), g)


def test_roofline_pass_on_a_loaded_module_without_record_is_per_node():
    m = kernels_to_module([parse_kernel(SOFTMAX, "k.loop")])
    ProgramInfo("k.loop").store(m)
    RooflinePass(fidelity="unfused").apply(Context(), m)
    r = module_report(m)
    assert [k["name"] for k in r["kernels_unfused"]] == [o["name"] for o in r["ops"]]
    assert [k["bytes"] for k in r["kernels_unfused"]] == [o["bytes"] for o in r["ops"]]
    assert all(k["op"] is None for k in r["kernels_unfused"])
    assert "kernels of the unfused bound" not in render_text(r)
    assert module_kernels(m)  # the module is unchanged by the analysis


# ---- the validation record in the text report ------------------------------------------------------------
def _header_of(validation: dict) -> list[str]:
    from solar_compiler.hw import parse_hw_list

    _, g = _kernel("matmul")
    r = build_report([g], parse_hw_list("H100_SXM"), source="m.py", validation=validation,
                     fidelity=("unfused", "fused"))
    text = render_text(r, width=1000)  # one line per record line: no wrapping at the report's width
    return text[text.index("validation:"):text.index("precision:")].rstrip("\n").split("\n")


def test_validation_text_prints_the_whole_record():
    reduced = {"validated": True, "frontend": "torch-export", "max_rel_err": 3e-7, "samples": 3,
               "sizes": "reduced: ROWS=256, COLS=24576", "full_size_same_program": True}
    assert _header_of(reduced) == [
        "validation: validated (torch-export frontend): 3 sample(s), max relative error 3.00e-07, on a "
        "size-reduced instance (ROWS=256, COLS=24576; the full-size kernel checked to be the same program)"]
    traced = {"validated": True, "frontend": "torch-dispatch", "max_rel_err": 0.0, "samples": 1,
              "sizes": "full", "reason": "value-dependent program: validated on the traced sample only",
              "value_dependent": ["aten.nonzero.default at m.py:9: output shape depends on values"] * 2
              + ["aten.topk.default at m.py:8: routing"]}
    assert _header_of(traced) == [
        "validation: validated (torch-dispatch frontend): 1 sample(s), max relative error 0.00e+00, "
        "at full size",
        "            note: value-dependent program: validated on the traced sample only",
        "            value-dependent: the bound holds for the traced sample only; ops:",
        "              aten.nonzero.default at m.py:9: output shape depends on values (x2)",
        "              aten.topk.default at m.py:8: routing"]
    sampled = {"validated": True, "frontend": "torch-export", "method": "sampled", "max_rel_err": 2e-7,
               "samples": 1, "elements_checked": 264, "sizes": "full"}
    assert _header_of(sampled) == [
        "validation: validated (torch-export frontend, sampled): 1 sample(s) of 264 output elements, "
        "max relative error 2.00e-07, at full size"]
    skipped = {"validated": False, "frontend": "torch-export", "max_rel_err": None, "samples": 0,
               "sizes": None, "reason": "validation disabled (validate=false)"}
    assert _header_of(skipped) == [
        "validation: NOT validated (torch-export frontend; the bound is unvalidated): "
        "validation disabled (validate=false)"]


def test_module_validation_adds_the_frontends_value_dependent_ops():
    from xdsl.dialects.builtin import ModuleOp

    rec = {"validated": True, "frontend": "torch-dispatch", "max_rel_err": 0.0, "samples": 1}
    m = ModuleOp([])
    ProgramInfo("m.py", "torch", rec, []).store(m)
    assert module_validation(m) == rec
    ProgramInfo("m.py", "torch", rec, ["aten.nonzero.default at m.py:9: why"]).store(m)
    assert module_validation(m) == {**rec, "value_dependent": ["aten.nonzero.default at m.py:9: why"]}


SCAN = """\
kernel cs(X: f32[4, 64] input, Y: f32[4, 64] output):
    for b in range(4):
        Y[b, 0] = X[b, 0]
        for t in {loop}(1, 64):
            Y[b, t] = Y[b, t - 1] + X[b, t]
"""


@pytest.mark.parametrize("loop, carried", [("scan", True), ("range", False)])
def test_scan_carried_read_is_on_chip_by_the_nodes_sequential_loop(loop, carried):
    """Two ops (the first column, the scan): the scan's read of Y[b, t - 1] was written by an earlier
    step of its own kernel inside the `sequential` loop, so it is not DRAM traffic; the same read
    under a `range` loop (no carried order) comes from memory: Y[b, 0..62], 4 * 63 f32 = 1008 B."""
    k = parse_kernel(SCAN.format(loop=loop), "k.loop")
    p = lift_kernel(k)
    assert [x.data for x in p.nodes()[1].get_iterator_types().data] == \
        ["parallel", "sequential" if carried else "parallel"]
    g = kernel_costs(k)
    first, scan = _grouped(k, [{"op": "a", "loc": None, "first": 0, "count": 1},
                               {"op": "b", "loc": None, "first": 1, "count": 1}], g)
    assert [(a.tensor, a.bytes) for a in first.reads] == [("X", 16)]    # X[b, 0]: 4 f32
    assert [(a.tensor, a.bytes) for a in first.writes] == [("Y", 16)]
    assert [(a.tensor, a.bytes) for a in scan.reads] == \
        ([] if carried else [("Y", 1008)]) + [("X", 1008)]            # X[b, 1..63]
    assert [(a.tensor, a.bytes) for a in scan.writes] == [("Y", 1008)]  # Y[b, 1..63]


def test_kernels_follow_the_origins_on_the_graph_nodes():
    """The kernels are read from the nodes' `origin`s: giving the scan node the first node's origin
    on the lifted graph makes one kernel, whose traffic is X read and Y written once (1024 B each)."""
    k = parse_kernel(SCAN.format(loop="scan"), "k.loop")
    stamp_origins([k], [{"op": "a", "loc": None, "first": 0, "count": 1},
                        {"op": "b", "loc": None, "first": 1, "count": 1}])
    p = lift_kernel(k)
    g = kernel_costs(k)
    assert len(source_kernels(p, g)) == 2
    first, scan = p.nodes()
    assert first.origin is not None and scan.origin is not None
    scan.origin = first.origin
    (one,) = source_kernels(p, g)
    assert (one.op, one.ops, one.stmts) == ("a", (0, 1), (0, 1))
    assert [(a.tensor, a.bytes) for a in one.reads] == [("X", 1024)]
    assert [(a.tensor, a.bytes) for a in one.writes] == [("Y", 1024)]
