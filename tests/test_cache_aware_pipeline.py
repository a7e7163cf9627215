"""Cache-aware bounds and needed-work narrowing through `solar-opt --roofline`: the pass pipeline the
shorthand builds, the report (JSON and text), --cache-size, per-target capacities."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from programs import TRIL

from solar_compiler.driver import SolarOptMain, main, roofline_pipeline, split_pipeline

REPO = Path(__file__).resolve().parent.parent
H100 = (REPO / "hw_targets/H100_SXM.yaml").read_text()
N = 4096
H100_TF32, H100_BW, H100_L2_BW = 494.7e12, 3.35e12, 16.7e12



def mm(n: int) -> str:
    return (f"kernel mm(A: f32[{n}, {n}] input, B: f32[{n}, {n}] weight, C: f32[{n}, {n}] output):\n"
            f"    for i in range({n}):\n        for j in range({n}):\n            C[i, j] = 0.0\n"
            f"            for k in range({n}):\n                C[i, j] += A[i, k] * B[k, j]\n")


def run(capsys, *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


def src(tmp_path: Path, text: str, name: str = "k.loop") -> str:
    p = tmp_path / name
    p.write_text(text)
    return str(p)


# ---- the pipeline the shorthand builds ------------------------------------------------------------

@pytest.mark.parametrize("argv,passes", [
    (["--roofline=all"], "narrow-needed,lift-einsum,roofline{fidelity=all}"),
    (["--roofline=fused", "--no-narrow"], "lift-einsum,roofline{fidelity=fused}"),
    (["--lift-einsum", "--roofline=all"], "narrow-needed,lift-einsum,roofline{fidelity=all}"),
    (["-p", "narrow-needed", "--roofline=all"], "narrow-needed,lift-einsum,roofline{fidelity=all}"),
    (["-p", "loop-stats", "--roofline=all"], "loop-stats,narrow-needed,lift-einsum,roofline{fidelity=all}"),
    (["-p", "lift-einsum,loop-stats", "--roofline=all"],
     "narrow-needed,lift-einsum,loop-stats,roofline{fidelity=all}"),
    (["--inverse-roofline=2ms"], 'narrow-needed,lift-einsum,roofline{fidelity=all inverse="2ms"}'),
    (["--roofline=cache-aware", "--cache-size=64MB", "--hw", "H100_SXM,B200"],
     'narrow-needed,lift-einsum,roofline{fidelity=cache-aware hw="H100_SXM,B200" cache-size="64MB"}'),
    (["-p", "lift-einsum"], "lift-einsum"),                           # no --roofline: nothing added
    (["-p", "narrow-needed,lift-einsum,roofline{hw=H100_SXM,A100_SXM}"],
     "narrow-needed,lift-einsum,roofline{hw=H100_SXM,A100_SXM}"),
])
def test_pipeline_of_the_shorthand(argv, passes):
    assert SolarOptMain(args=["x.loop", *argv]).args.passes == passes


def test_translate_comes_before_narrowing():
    a = SolarOptMain(args=["m.py", "--translate", "--roofline=all"]).args
    assert a.passes == "translate,narrow-needed,lift-einsum,roofline{fidelity=all}"
    a = SolarOptMain(args=["m.py", "-p", "translate{mode=train}", "--roofline=fused"]).args
    assert a.passes == "translate{mode=train},narrow-needed,lift-einsum,roofline{fidelity=fused}"


def test_split_pipeline_keeps_options():
    assert split_pipeline('a,b{x=1,2 y="p,q"},c') == ["a", 'b{x=1,2 y="p,q"}', "c"]
    assert split_pipeline("") == []
    assert roofline_pipeline(["loop-stats", "narrow-needed"]) == ["loop-stats", "narrow-needed",
                                                                  "lift-einsum"]
    assert roofline_pipeline(["loop-stats"], narrow=False) == ["loop-stats", "lift-einsum"]


# ---- narrowing in the report ----------------------------------------------------------------------

def test_narrowed_counts_with_as_written_beside(capsys, tmp_path):
    path = src(tmp_path, TRIL)
    rc, out, err = run(capsys, path, "--roofline=all", "--format=json")
    assert (rc, err) == (0, "")
    r = json.loads(out)
    # 36 pairs j <= i of 64, 5 products each: 360 matrix FLOPs (as written 640 + 128 cmp/select)
    assert r["narrowed"] is True
    t = r["totals"]
    assert (t["flops"], t["flops_matrix"], t["flops_vector"]) == (360, 360, 0)
    assert (t["flops_as_written"], t["flops_matrix_as_written"],
            t["flops_vector_as_written"]) == (768, 640, 128)
    assert (t["bytes_unfused"], t["bytes_unfused_as_written"]) == (864, 1088)
    assert t["bytes_fused"] == t["bytes_fused_as_written"] == 576
    # compulsory-bound: 576 / 3.35e12 at every fidelity, below the latency floor (141 ns), which binds;
    # both levels move the compulsory bytes
    h = r["bounds"]["H100_SXM"]
    assert h["fused_terms_s"]["memory"] == h["cache_aware_terms_s"]["chip"] == 576 / H100_BW
    assert h["fused_s"] == h["cache_aware_s"] == h["latency_floor_s"] == 141e-9
    assert [lv["bytes"] for lv in h["levels"]] == [576.0, 576.0]
    rc, out, _ = run(capsys, path, "--roofline=all", "--format=json", "--no-narrow")
    r = json.loads(out)
    assert r["narrowed"] is False
    assert r["totals"]["flops"] == r["totals"]["flops_as_written"] == 768


def test_user_narrow_pass_with_the_shorthand(capsys, tmp_path):
    path = src(tmp_path, TRIL)
    rc, out, err = run(capsys, path, "-p", "narrow-needed", "--roofline=fused", "--format=json")
    assert (rc, err) == (0, "")
    assert json.loads(out)["totals"]["flops"] == 360


# ---- cache-aware through the driver ---------------------------------------------------------------

def test_text_report_levels_and_binding_columns(capsys, tmp_path):
    rc, out, err = run(capsys, src(tmp_path, mm(N)), "--roofline=all", "--hw", "H100_SXM", "--width", "300",
                       "--ops")
    assert (rc, err) == (0, "")
    assert ("  memory:   on-chip capacity 121.6 MB, fed at 3.35 TB/s; per-SM storage 512 KiB x 132, fed at "
            "16.7 TB/s") in out.splitlines()
    assert "cache size:" not in out
    rows = {ln.split("|")[1].strip(): [c.strip() for c in ln.split("|")[1:-1]]
            for ln in out.splitlines() if ln.startswith("|")}
    # per op (--ops): unfused bound, its resource, cache-aware bound, binding level (compute here)
    (s1,) = [ln.split() for ln in out.splitlines() if ln.startswith("S1 ") and "->" in ln]
    assert s1[-6:] == ["277.8", "us", "matrix", "277.8", "us", "matrix"]
    assert rows["cache-aware"] == ["cache-aware", "201,326,592", "277.8 us", "matrix"]
    assert rows["cache-aware chip term"] == ["cache-aware chip term", "201,326,592", "60.1 us", ""]


def test_cache_size_what_if(capsys, tmp_path):
    path = src(tmp_path, mm(N))
    # 4-byte f32 operands (policy fp32): the DRAM level binds above the fused bound (416.7 us)
    rc, out, err = run(capsys, path, "--roofline=cache-aware", "--cache-size=0.5MiB", "--precision=fp32",
                       "--format=json")
    assert (rc, err) == (0, "")
    r = json.loads(out)
    assert r["cache_size"] == 524288 and r["fidelity"] == ["cache-aware"]
    h = r["bounds"]["H100_SXM"]
    assert h["levels"][0]["capacity"] == 524288.0 and h["levels"][1]["capacity"] == 524288.0
    # the DRAM boundary with one SM's capacity: one unit, so more traffic than the 132-unit sm level
    assert h["levels"][0]["bytes"] > h["levels"][1]["bytes"] > 3 * N * N * 4
    assert h["cache_aware_s"] == h["levels"][0]["bytes"] / H100_BW > h["fused_s"]
    assert h["cache_aware_bottleneck"] == "chip"
    assert r["totals"]["bytes_cache_aware"] == h["levels"][0]["bytes"]
    rc, out, _ = run(capsys, path, "--roofline=cache-aware", "--cache-size=0.5MiB", "--width", "300")
    assert ("cache size: 524,288 bytes at the outermost (DRAM) level: overridden by --cache-size "
            "(what-if study, not the targets' figures)") in out
    rows = {ln.split("|")[1].strip() for ln in out.splitlines() if ln.startswith("|")}
    assert "cache-aware" in rows and "fused" not in rows and "unfused" not in rows


def test_targets_with_different_capacities_differ(capsys, tmp_path):
    """16384^3 f32: the reuse bound passes compulsory at the DRAM level on both targets, by amounts
    that depend on the capacity (H100 121.6 MB, A100 91.5 MB): per-target bytes, and a note."""
    path = src(tmp_path, mm(16384))
    rc, out, err = run(capsys, path, "--roofline=cache-aware", "--hw", "H100_SXM,A100_SXM", "--format=json")
    assert (rc, err) == (0, "")
    r = json.loads(out)
    h, a = (r["bounds"][t]["bytes_cache_aware"] for t in ("H100_SXM", "A100_SXM"))
    compulsory = 3 * 16384**2 * 4
    assert compulsory < h < a  # the smaller capacity must move more
    assert r["totals"]["bytes_cache_aware"] == h  # the first target's
    rc, out, _ = run(capsys, path, "--roofline=cache-aware", "--hw", "H100_SXM,A100_SXM")
    assert (f"note: cache-aware DRAM-level bytes differ per target (capacities differ): H100_SXM {int(h):,}, "
            f"A100_SXM {int(a):,}") in out


def test_target_without_levels(capsys, tmp_path):
    yaml = tmp_path / "nolevels.yaml"
    yaml.write_text(H100[:H100.index("levels:")] + "levels: []\n")
    path = src(tmp_path, mm(64))
    rc, out, err = run(capsys, path, "--roofline=all", "--hw", str(yaml))
    assert rc == 1 and err == (f"solar-opt: error: H100_SXM: the target defines no memory levels ({yaml}: "
                               "levels), so it has no cache-aware bound; use fidelity unfused or fused\n")
    rc, out, err = run(capsys, path, "--roofline=fused", "--hw", str(yaml), "--format=json")
    assert rc == 0 and json.loads(out)["bounds"]["H100_SXM"]["cache_aware_s"] is None


def test_cache_size_needs_cache_aware(capsys, tmp_path):
    rc, _, err = run(capsys, src(tmp_path, mm(64)), "--roofline=fused", "--cache-size=1MB")
    assert rc == 1 and err == ("solar-opt: error: roofline: --cache-size sets the on-chip capacity of "
                               "cache-aware bounds; ask for them with fidelity cache-aware or all\n")


def test_report_brackets_each_contraction_between_bound_and_tiled_traffic(capsys, tmp_path):
    # 1024^3 f32 matmul on H100_SXM. DRAM level (121.6 MB holds all 12 MiB of operands): the bound is
    # the compulsory 3 * 1024^2 * 4 B and a single-tile schedule achieves it exactly. Per-SM level
    # (512 KiB): the proven reuse bound is below the traffic of the best tiling found, which is a
    # real schedule's traffic, so bound <= tiled holds and the gap is the bracket users see.
    rc, out, _ = run(capsys, src(tmp_path, mm(1024)), "--roofline=all", "--hw", "H100_SXM", "--format=json")
    assert rc == 0
    (op,) = [o for o in json.loads(out)["ops"] if o["unit"] == "matrix"]
    bound, tiled = op["bytes_cache_aware"]["H100_SXM"], op["bytes_tiled"]["H100_SXM"]
    assert bound["chip"] == tiled["chip"] == 3 * 1024 * 1024 * 4
    assert bound["sm"] <= tiled["sm"]
    assert tiled["sm"] > 3 * 1024 * 1024 * 4
    rc, text, _ = run(capsys, src(tmp_path, mm(1024)), "--roofline=all", "--hw", "H100_SXM", "--width", "300",
                      "--ops")
    assert (f"traffic of {op['name']} on H100_SXM (lower bound vs best tiling found): chip: at least "
            f"12,582,912 B, tiled 12,582,912 B; sm: at least {bound['sm']:,} B, tiled {tiled['sm']:,} B"
            ) in text
    rc, text, _ = run(capsys, src(tmp_path, mm(1024)), "--roofline=all", "--hw", "H100_SXM")
    assert "traffic of" not in text  # the bracket is a detail of the per-statement view (--ops)
