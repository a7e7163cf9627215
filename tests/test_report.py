"""Report dict, JSON/text targets, validation record, plot and the roofline pass's options."""

from __future__ import annotations

import io
import json

import pytest
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, StringAttr

from solar_compiler.analysis.costs import Access, GraphCosts, OpCost
from solar_compiler.analysis.summary import build_report, module_validation, register_report
from solar_compiler.errors import SolarError
from solar_compiler.hw import parse_hw_list
from solar_compiler.passes.roofline import RooflinePass, parse_fidelity
from solar_compiler.records import ProgramInfo
from solar_compiler.report import JsonReportTarget, TextReportTarget, fmt_time

N = 4096
NOT_VALIDATED = {"validated": False, "frontend": "loop-text", "max_rel_err": None, "samples": 0}


def acc(t: str, n: int) -> Access:
    return Access(t, "f32", n, 4 * n)


def mm_graph() -> GraphCosts:
    """init + matmul + exp over 4096x4096 f32 (C read and written by the reduction)."""
    init = OpCost("S0", "C[i, j] = 0.0", "->ij", "mm.py:2", "memory", 0, 0, 0, None, "f32", N * N, (),
                  (acc("C", N * N),))
    mm = OpCost("S1", "C[i, j] += A[i, k] * B[k, j]", "ik,kj->ij", "mm.py:3", "matrix", 2 * N**3, 0, 0,
                "f32", "f32", N**3, (acc("A", N * N), acc("B", N * N), acc("C", N * N)), (acc("C", N * N),))
    ex = OpCost("S2", "Y[i, j] = exp(C[i, j])", "ij->ij", "mm.py:4", "vector", 0, N * N, N * N, None, "f32",
                N * N, (acc("C", N * N),), (acc("Y", N * N),))
    return GraphCosts("mm", [init, mm, ex], 3 * N * N * 4)  # A, B read; Y written


def report(hw: str = "H100_SXM", latency: float | None = None,
           graphs: list[GraphCosts] | None = None) -> dict:
    return build_report(graphs or [mm_graph()], parse_hw_list(hw), source="mm.py", validation=NOT_VALIDATED,
                        latency_s=latency)


def module_with(r: dict | None, info: ProgramInfo | None = None) -> ModuleOp:
    m = ModuleOp([])
    if info is not None:
        info.store(m)
    if r is not None:
        register_report(m, r)
    return m


def emit(target, module: ModuleOp) -> str:
    out = io.StringIO()
    target.emit(Context(), module, out)
    return out.getvalue()


def test_json_shape_exact_keys():
    r = json.loads(emit(JsonReportTarget(), module_with(report("H100_SXM,A100_SXM", latency=2e-3))))
    assert r["schema"] == "solar-report/1"
    assert set(r) == {"schema", "source", "validation", "precision", "fidelity", "kernels", "narrowed",
                      "cache_size", "cache_state", "indirect", "totals", "bounds", "ops", "kernels_unfused",
                      "modules", "phases", "hw", "aliases", "value_dependent", "inverse", "measured",
                      "reorder_chains", "chains", "llm_ops"}
    assert r["phases"] == []  # not a training step
    assert r["validation"] == NOT_VALIDATED
    assert r["narrowed"] is False and r["cache_size"] is None
    flops, unfused, fused = 2 * N**3 + N * N, (1 + 4 + 2) * N * N * 4, 3 * N * N * 4
    # not narrowed: the as-written counts are the counts
    assert r["totals"] == {"flops": flops, "flops_matrix": 2 * N**3, "flops_vector": N * N,
                           "flops_vector_literal": N * N, "flops_sum": 0, "bytes_unfused": unfused,
                           "bytes_fused": fused,
                           "bytes_cache_aware": None,
                           "flops_as_written": flops, "flops_matrix_as_written": 2 * N**3,
                           "flops_vector_as_written": N * N, "bytes_unfused_as_written": unfused,
                           "bytes_fused_as_written": fused}
    assert list(r["bounds"]) == ["H100_SXM", "A100_SXM"]
    for b in r["bounds"].values():
        assert set(b) == {"unfused_s", "fused_s", "fused_bottleneck", "fused_terms_s", "latency_floor_s",
                          "sum_adds_on_matrix", "cache_aware_s",
                          "cache_aware_bottleneck", "bytes_cache_aware", "cache_aware_terms_s", "levels"}
        # costs only (no kernels): no cache-aware bound
        assert {k: b[k] for k in b if "cache" in k or k == "levels"} == dict.fromkeys(
            ("cache_aware_s", "cache_aware_bottleneck", "bytes_cache_aware", "cache_aware_terms_s", "levels"))
        assert set(b["fused_terms_s"]) == {"matrix", "vector", "memory"}
    assert [o["name"] for o in r["ops"]] == ["S0", "S1", "S2"]
    assert set(r["ops"][1]) == {"name", "kernel", "equation", "label", "loc", "flops", "flops_matrix",
                                "flops_vector", "flops_vector_literal", "flops_transcendental", "flops_sum",
                                "sum_dtype", "revert_matrix", "revert_vector", "bytes",
                                "unit", "matrix_dtype", "vector_dtype", "intensity", "sequential", "indirect",
                                "bound_s",
                                "bottleneck", "cache_aware_s", "cache_aware_bottleneck", "bytes_cache_aware",
                                "bytes_tiled", "module"}
    assert r["ops"][1]["cache_aware_s"] == {"H100_SXM": None, "A100_SXM": None}
    assert [(o["unit"], o["flops"], o["bytes"]) for o in r["ops"]] == [
        ("memory", 0, N * N * 4), ("matrix", 2 * N**3, 4 * N * N * 4), ("vector", N * N, 2 * N * N * 4)]
    assert set(r["inverse"]) == {"latency_s", "H100_SXM", "A100_SXM"}
    for inv in (r["inverse"]["H100_SXM"], r["inverse"]["A100_SXM"]):
        assert set(inv) == {"fused", "unfused"}
        for d in inv.values():
            assert set(d) == {"dram_bw_Bps", "dram_bw_x", "matrix_flops", "matrix_x", "vector_flops",
                              "vector_x", "scale_x", "latency_floor_s", "met"}
    h = r["hw"]["H100_SXM"]
    assert set(h) == {"description", "path", "precision", "dram_bw", "matrix", "vector", "sum", "memory",
                      "latency"}
    assert h["memory"] == [
        {"name": "chip", "per": "chip", "units": 1, "capacity": 121_634_816, "bandwidth": 3.35e12,
         "describe": "on-chip capacity 121.6 MB"},
        {"name": "sm", "per": "sm", "units": 132, "capacity": 524_288, "bandwidth": 16.7e12,
         "describe": "per-SM storage 512 KiB x 132"}]
    assert r["measured"] is None and [m["path"] for m in r["modules"]] == [""]  # no module paths
    assert h["matrix"]["f32"]["value"] == 494.7e12 and h["matrix"]["f32"]["figure"] == "matrix.tf32"
    assert h["vector"]["f32"]["value"] == 66.9e12 and h["dram_bw"]["value"] == 3.35e12
    assert r["value_dependent"] == [] and r["fidelity"] == ["unfused", "fused", "cache-aware"]


def test_hw_record_labels_name_the_figure_used():
    """A bf16 vector op on H100 (vector.fp16 = vector.bf16 = 133.8 TFLOP/s) is labelled vector.bf16:
    matching rates by value used to name the first equal figure, vector.fp16."""
    ex = OpCost("S0", "Y[i] = exp(X[i])", "i->i", "e.py:1", "vector", 0, N, N, None, "bf16", N,
                (Access("X", "bf16", N, 2 * N),), (Access("Y", "bf16", N, 2 * N),))
    h = report(graphs=[GraphCosts("e", [ex], 4 * N)])["hw"]["H100_SXM"]
    assert h["vector"]["bf16"] == {"value": 133.8e12, "figure": "vector.bf16", "estimate": True,
                                   "label": "BF16 vector",
                                   "source": "https://resources.nvidia.com/en-us-tensor-core/gtc22-whitepaper-hopper"}


def test_report_numbers_by_hand():
    r = report("H100_SXM,A100_SXM", latency=2e-3)
    h = r["bounds"]["H100_SXM"]
    t_init, t_mm, t_exp = N * N * 4 / 3.35e12, 2 * N**3 / 494.7e12, 2 * N * N * 4 / 3.35e12
    assert h["unfused_s"] == pytest.approx(t_init + t_mm + t_exp, rel=1e-12)
    assert h["fused_s"] == pytest.approx(t_mm, rel=1e-12)
    assert r["bounds"]["A100_SXM"]["fused_s"] == pytest.approx(2 * N**3 / 156e12, rel=1e-12)
    assert [o["bottleneck"]["H100_SXM"] for o in r["ops"]] == ["memory", "matrix", "memory"]
    assert r["ops"][1]["intensity"] == pytest.approx(2 * N**3 / (16 * N * N), rel=1e-15)
    inv = r["inverse"]["H100_SXM"]["fused"]
    assert inv["dram_bw_Bps"] == pytest.approx(3 * N * N * 4 / 2e-3, rel=1e-12)
    assert inv["matrix_x"] == pytest.approx(t_mm / 2e-3, rel=1e-12)
    assert inv["met"] is True


def test_text_report_rows_and_totals():
    text = emit(TextReportTarget(), module_with(report("H100_SXM,A100_SXM", latency=2e-3)))
    assert "validation: NOT validated: loop-text input; nothing was executed against a reference" in text
    assert "narrowing:  not run: counts are as written" in text and "as written (before" not in text
    assert "policy auto" in text and "f32 contractions at TF32 tensor rate (494.7 TFLOP/s)" in text
    # what each dtype was priced at, per target, and the memory levels in words
    assert ("  rates:    matrix f32 494.7 TFLOP/s dense (TF32 tensor); vector f32 66.9 TFLOP/s "
            "(FP32 vector); DRAM 3.35 TB/s") in text
    assert "  memory:   on-chip capacity 91.49 MB, fed at 2.039 TB/s; per-SM storage 448 KiB x 108, fed at " \
        "7.22 TB/s" in text
    rows = {line.split("|")[1].strip(): line for line in text.splitlines() if line.startswith("|")}
    assert {"unfused", "fused", "cache-aware"} <= set(rows)
    fused = [c.strip() for c in rows["fused"].split("|")[1:-1]]
    assert fused == ["fused", "201,326,592", "277.8 us", "matrix", "881 us", "matrix"]
    assert "n/a" in rows["cache-aware"]
    # kernels (here: one per statement, no source ops) sorted by bound; SI counts rounded down, the share
    # of the unfused bound (277.8 / (20.03 + 277.8 + 40.06) us), no module column without module paths
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines)
              if line.startswith("kernels by bound on H100_SXM (3: one per"))
    assert lines[at + 2].split() == ["op", "line", "FLOPs", "bytes", "FLOP/B", "bound", "share", "bound",
                                     "by", "bound", "bound", "by"]
    assert [line.split() for line in lines[at + 4:at + 7]] == [
        ["S1", "3", "137", "G", "268", "MB", "512", "277.8", "us", "82.2%", "matrix", "881", "us", "matrix"],
        ["S2", "4", "16.7", "M", "134", "MB", "0.125", "40.06", "us", "11.9%", "memory", "65.83", "us",
         "memory"],
        ["S0", "2", "0", "67.1", "MB", "0", "20.03", "us", "5.9%", "memory", "32.91", "us", "memory"]]
    assert "totals: 137,455,730,688 FLOPs" in text
    assert "inverse roofline: hardware needed for 2 ms" in text
    assert "statements (einsum nodes), each priced alone" not in text  # only with --ops
    assert "more: --ops: per statement; --depth N" in text


def test_text_report_top_folds_the_rest_and_ops_adds_the_statements():
    r = report("H100_SXM")
    text = emit(TextReportTarget(top=1, ops=True), module_with(r))
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("kernels by bound"))
    assert lines[at + 4].split()[:2] == ["S1", "3"]
    assert lines[at + 5].split() == ["(2", "more)", "16.7", "M", "201", "MB", "60.1", "us", "17.8%"]
    at = next(i for i, line in enumerate(lines) if line.startswith("statements (einsum nodes), each priced"))
    assert "stays on" in lines[at] + lines[at + 1]  # the per-statement view says why it differs
    op_rows = [line.split() for line in lines[at:] if line.startswith(("S", "  "))]
    assert ["S1", "model", "ik,kj->ij", "3", "137", "G", "268", "MB", "512", "277.8", "us",
            "matrix"] in op_rows


def test_multiple_kernels_are_one_program_with_prefixed_names():
    g2 = GraphCosts("ew", [mm_graph().ops[2]], 2 * N * N * 4)
    r = report(graphs=[mm_graph(), g2])
    assert [o["name"] for o in r["ops"]] == ["mm.S0", "mm.S1", "mm.S2", "ew.S2"]
    assert r["kernels"] == ["mm", "ew"]
    assert r["totals"]["bytes_fused"] == 5 * N * N * 4


def test_value_dependent_ops_listed():
    g = mm_graph()
    gather = OpCost("S3", "Y[i] = W[idx[i]]", "i->i", "emb.py:7", "memory", 0, 0, 0, None, "f32", 8,
                    (Access("W", "f32", 8, 32, indirect=True), Access("idx", "i64", 8, 64)),
                    (acc("Y", 8),), indirect=True)
    r = report(graphs=[GraphCosts("mm", [*g.ops, gather], g.compulsory_bytes)])
    assert r["value_dependent"] == [{"op": "S3", "loc": "emb.py:7", "tensors": ["W"], "traced": []}]


def test_validation_record():
    assert module_validation(module_with(None, ProgramInfo("m.loop", "loop-text"))) == NOT_VALIDATED
    rec = {"validated": True, "frontend": "torch", "max_rel_err": 1.5e-6, "samples": 3}
    assert module_validation(module_with(None, ProgramInfo("m.py", "torch", rec))) == rec
    with pytest.raises(SolarError, match="validation record misses samples"):
        module_validation(module_with(None, ProgramInfo("m.py", "torch", {
            "validated": True, "frontend": "torch", "max_rel_err": 0.0})))
    # a malformed record on the module is a one-line error naming the attribute
    m = ModuleOp([])
    m.attributes["solar.program"] = StringAttr("{")
    with pytest.raises(SolarError, match="module attribute solar.program"):
        module_validation(m)
    r = report()
    r["validation"] = rec
    assert "validated (torch frontend): 3 sample(s), max relative error 1.50e-06" in emit(
        TextReportTarget(), module_with(r))


def test_targets_need_the_roofline_pass():
    for target in (TextReportTarget(), JsonReportTarget()):
        with pytest.raises(SolarError, match="run the roofline pass first"):
            emit(target, ModuleOp([]))


@pytest.mark.parametrize("s,text", [(2.5e-9, "2.5 ns"), (1e-6, "1 us"), (277.8e-6, "277.8 us"),
                                    (0.0123456, "12.35 ms"), (3.0, "3 s"), (None, "n/a"),
                                    (1.3248e-10, "132.5 ps"), (0.0, "0 s")])
def test_fmt_time(s, text):
    assert fmt_time(s) == text


def test_plot_svg_names_kernels_and_targets(tmp_path):
    from solar_compiler.plot import write_plot

    path = tmp_path / "r.svg"
    write_plot(report("H100_SXM,A100_SXM"), str(path))
    svg = path.read_text()
    assert svg.startswith("<?xml") and "H100_SXM: fused 277.8 us" in svg and "A100_SXM" in svg
    assert ">S1 (82.2%)<" in svg and ">S2 (11.9%)<" in svg  # kernels, labelled with their share
    assert "1 kernel(s) with no FLOPs or no bytes not placed" in svg  # S0 moves bytes only
    assert ">model, fused 277.8 us<" in svg and ">model, unfused 337.9 us<" in svg
    png = tmp_path / "r.png"
    write_plot(report(), str(png))
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(SolarError, match="plot file must end in .png or .svg"):
        write_plot(report(), str(tmp_path / "r.pdf"))


def _crowded_report() -> dict:
    """40 kernels in 10 modules at nearby intensities, and a measured time: labels must find room."""
    ops, kernels = [], []
    for i in range(40):  # intensities from 1/8 to 4 FLOP/B, bounds within 2x of each other
        n = 2 ** 20 + i * 4096
        f = n * (1 + i % 8) * (1 + i // 8)
        ops.append(OpCost(f"S{i}", "Y[i] = X[i] * W[i]", "i->i", f"m.py:{i + 1}", "vector", 0, f, 0, None,
                          "f32", n, (acc("X", n),), (acc("Y", n),)))
    g = GraphCosts("m", ops, 8 * 2 ** 20)
    from solar_compiler.analysis.unfused import UnfusedKernel

    for i, o in enumerate(ops):
        kernels.append(UnfusedKernel(f"mul @ m.py:{i}", "aten.mul.Tensor", o.loc, (i,), (i,), o.reads,
                                     o.writes, f"blocks.{i % 10}.mlp"))
    from solar_compiler.analysis.measured import Measured

    return build_report([g], parse_hw_list("H100_SXM"), source="m.py", validation=NOT_VALIDATED,
                        unfused=[kernels], measured=Measured("3ms", 3e-3, {"blocks.1": 2e-4}))


def test_plot_labels_do_not_overlap_and_show_the_model_and_measured_points():
    from matplotlib.text import Text

    from solar_compiler.plot import roofline_figure

    fig = roofline_figure(_crowded_report())
    renderer = fig.canvas.get_renderer()
    (ax,) = fig.axes
    labels = [t for t in ax.texts if t.get_text() and "unlabelled" not in t.get_text()]
    unlabelled = next(t.get_text() for t in ax.texts if "unlabelled" in t.get_text())
    assert unlabelled == f"{40 + 4 - len(labels)} kernel(s) unlabelled (smaller, or no room)"
    for t in labels:
        t.update_positions(renderer)
    boxes = [Text.get_window_extent(t, renderer) for t in labels]  # the text, without a leader line
    assert len(labels) >= 8
    assert not [(a.get_text(), b.get_text()) for i, (a, ba) in enumerate(zip(labels, boxes, strict=True))
                for b, bb in zip(labels[i + 1:], boxes[i + 1:], strict=True) if ba.overlaps(bb)]
    axbox = ax.get_window_extent(renderer)
    assert all(axbox.x0 <= b.x0 and b.x1 <= axbox.x1 and axbox.y0 <= b.y0 and b.y1 <= axbox.y1 for b in boxes)
    text = {t.get_text() for t in labels}
    assert any(t.startswith("blocks.") and " mul " in t for t in text)  # module path and op
    assert any(t.startswith("measured 3 ms, ") and "% of fused SOL" in t for t in text)
    assert "measured blocks.1 200 us" in text


def test_pass_options_rejected():
    with pytest.raises(SolarError, match="unknown fidelity 'fast'"):
        parse_fidelity("fast")
    assert parse_fidelity("cache-aware") == ("cache-aware",)
    assert parse_fidelity("all") == ("unfused", "fused", "cache-aware")
    m = module_with(None, ProgramInfo("m.loop", "loop-text"))
    with pytest.raises(SolarError, match="unknown precision policy 'fp4'"):
        RooflinePass(precision="fp4").apply(Context(), m)
    with pytest.raises(SolarError, match="--cache-size sets the on-chip capacity of cache-aware bounds; ask"):
        RooflinePass(fidelity="fused", cache_size="1MB").apply(Context(), m)
    with pytest.raises(SolarError, match="bad cache size '12 parsecs'"):
        RooflinePass(cache_size="12 parsecs").apply(Context(), m)
    with pytest.raises(SolarError, match="bad target latency '5 parsecs'"):
        RooflinePass(inverse="5 parsecs").apply(Context(), m)


# ---- end to end through solar-opt ------------------------------------------------------------------

MM4096 = """\
kernel mm(A: f32[4096, 4096] input, B: f32[4096, 4096] weight, C: f32[4096, 4096] output):
    for i in range(4096):
        for j in range(4096):
            C[i, j] = 0.0
            for k in range(4096):
                C[i, j] += A[i, k] * B[k, j] @ "mm.py:3"
"""


def solar_opt(capsys, *args: str) -> tuple[int, str, str]:
    from solar_compiler.driver import main

    rc = main(list(args))
    out, err = capsys.readouterr()
    return rc, out, err


def test_e2e_matmul_4096_json(capsys, tmp_path):
    src = tmp_path / "mm.loop"
    src.write_text(MM4096)
    rc, out, err = solar_opt(capsys, str(src), "--lift-einsum", "--roofline=all", "--hw", "H100_SXM,A100_SXM",
                             "--inverse-roofline", "0.2ms", "--format=json")
    assert (rc, err) == (0, "")
    r = json.loads(out)
    assert r["validation"] == NOT_VALIDATED and r["source"] == str(src)
    assert r["totals"]["flops_matrix"] == 2 * N**3 and r["totals"]["bytes_fused"] == 3 * N * N * 4
    h100 = max(2 * N**3 / 494.7e12, 3 * N * N * 4 / 3.35e12)
    a100 = max(2 * N**3 / 156e12, 3 * N * N * 4 / 2.039e12)
    assert r["bounds"]["H100_SXM"]["fused_s"] == pytest.approx(h100, rel=1e-12)
    assert r["bounds"]["H100_SXM"]["unfused_s"] == pytest.approx(h100, rel=1e-12)  # one node: C folded
    assert r["bounds"]["A100_SXM"]["fused_s"] == pytest.approx(a100, rel=1e-12)
    assert [(o["name"], o["loc"], o["unit"]) for o in r["ops"]] == [("S1", "mm.py:3", "matrix")]
    inv = r["inverse"]["H100_SXM"]["fused"]
    assert inv["matrix_flops"] == pytest.approx(2 * N**3 / 2e-4, rel=1e-12)
    assert inv["matrix_x"] == pytest.approx(2 * N**3 / 494.7e12 / 2e-4, rel=1e-12)
    assert inv["met"] is False  # 277.8 us > 200 us
    assert r["inverse"]["A100_SXM"]["fused"]["matrix_x"] == pytest.approx(2 * N**3 / 156e12 / 2e-4, rel=1e-12)


def test_e2e_precision_fp32_and_pass_pipeline(capsys, tmp_path):
    src = tmp_path / "mm.loop"
    src.write_text(MM4096)
    pipeline = "lift-einsum,roofline{hw=H100_SXM,A100_SXM precision=fp32}"
    rc, out, _ = solar_opt(capsys, str(src), "-p", pipeline, "-t", "json")
    assert rc == 0
    r = json.loads(out)
    assert list(r["bounds"]) == ["H100_SXM", "A100_SXM"]
    # fp32 accuracy at its fastest method: Ozaki-II on INT8 (H100: 1978.9 / 6), FP16x3 (A100: 312 / 3)
    assert r["bounds"]["H100_SXM"]["fused_s"] == pytest.approx(2 * N**3 / (1978.9e12 / 6), rel=1e-12)
    assert r["bounds"]["A100_SXM"]["fused_s"] == pytest.approx(2 * N**3 / (312e12 / 3), rel=1e-12)
    assert r["hw"]["H100_SXM"]["precision"].startswith("fp32: f32 contractions at ozaki2_int8_fp32 emulation")
    assert r["hw"]["H100_SXM"]["matrix"]["f32"]["figure"] == "emulation.ozaki2_int8_fp32"
    assert r["hw"]["A100_SXM"]["matrix"]["f32"]["figure"] == "emulation.fp16x3"


def test_e2e_example_text_and_plot(capsys, tmp_path):
    plot = tmp_path / "out" / "r.svg"
    plot.parent.mkdir()
    rc, out, err = solar_opt(capsys, "examples/loop/matmul.loop", "--roofline=fused", "--hw", "H100_SXM",
                             "--plot", str(plot))
    assert (rc, err) == (0, "")
    assert "source:     examples/loop/matmul.loop  (kernels: matmul)" in out
    rows = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[1:-1]]
            for line in out.splitlines() if line.startswith("|")}
    # 64x32x16 f32: 65,536 FLOPs; A 8 KiB + B 2 KiB + C 4 KiB = 14,336 bytes / 3.35 TB/s = 4.279 ns
    assert ("totals: 65,536 FLOPs (65,536 matrix, 0 vector); 14,336 bytes unfused, 14,336 bytes "
            "compulsory") in out
    # the bound is the latency floor: one read's round trip on H100 (docs/bounds.md section 9)
    assert rows["fused"] == ["fused", "14,336", "141 ns", "latency"]
    assert rows["fused memory term"] == ["fused memory term", "", "4.279 ns", ""]
    assert rows["latency floor"] == ["latency floor", "", "141 ns", ""]
    assert "unfused" not in rows and "cache-aware" not in rows
    assert "kernels by bound" not in out  # a view of the unfused bound: only with --roofline=all/unfused
    rc, out, err = solar_opt(capsys, "examples/loop/matmul.loop", "--roofline=all", "--hw", "H100_SXM")
    kernel = next(line.split() for line in out.splitlines() if line.startswith("S1 "))
    assert kernel == ["S1", "-", "65.5", "k", "14.3", "kB", "4.57", "141", "ns", "100.0%", "latency"]
    assert ">S1 (100.0%)<" in plot.read_text()


def test_e2e_errors_are_one_line(capsys):
    rc, _, err = solar_opt(capsys, "examples/loop/matmul.loop", "--roofline=all", "--cache-size=-2MB")
    assert rc == 1 and err == ("solar-opt: error: bad cache size '-2MB': expected bytes, optionally with one "
                               "of B, kB, MB, GB, KiB, MiB, GiB (e.g. 64MB or 0.5MiB)\n")
    rc, _, err = solar_opt(capsys, "examples/loop/matmul.loop", "--roofline=all", "--hw", "H999")
    assert rc == 1 and err.startswith("solar-opt: error: unknown hardware target 'H999'")
    rc, _, err = solar_opt(capsys, "examples/loop/matmul.loop", "-t", "report")
    assert rc == 1 and "run the roofline pass first" in err


def test_e2e_no_kernel(capsys, tmp_path):
    src = tmp_path / "empty.mlir"
    src.write_text("func.func @f() {\n  func.return\n}\n")
    rc, _, err = solar_opt(capsys, str(src), "--roofline=all")
    assert rc == 1 and err.endswith("roofline: no kernel in the module (is the input translated?)\n")


def test_records_keep_scalar_kinds_apart() -> None:
    """Scalar attributes are interned per (type, value): True and 1 stay a bool and an int, -0.0 keeps
    its sign (floats are not interned), and a round trip gives every value back."""
    import math

    from solar_compiler.records import attr_to_data, data_to_attr

    values = [True, 1, 1.0, -0.0, 0.0, 0, False, None, "1", 2 ** 70, math.inf]
    back = attr_to_data(data_to_attr(values))
    assert back == values and [type(v) for v in back] == [type(v) for v in values]
    assert math.copysign(1.0, back[3]) == -1.0
    assert data_to_attr(7) is data_to_attr(7)
