"""The report for people: module tree data (`analysis/modules.py`), measured times
(`analysis/measured.py`), and their text views (`render/`): repeated blocks shown once with a count,
depth, folding of small rows, "% of SOL", the width of every line."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from solar_compiler.analysis.costs import Access, GraphCosts, OpCost
from solar_compiler.analysis.measured import Measured, parse_measured
from solar_compiler.analysis.summary import build_report
from solar_compiler.analysis.unfused import UnfusedKernel
from solar_compiler.errors import SolarError
from solar_compiler.hw import parse_hw_list
from solar_compiler.render.kernels import kernel_groups
from solar_compiler.render.tree import module_entries
from solar_compiler.report import render_text

NOT_VALIDATED = {"validated": False, "frontend": "loop-text", "max_rel_err": None, "samples": 0}
BW = 3.35e12  # H100_SXM DRAM bytes/s
# (module, op, elements read = written): two identical blocks, a final norm, a top-level add
LAYOUT = [("h.0.attn", "aten.mm.default", 4096), ("h.0.mlp", "aten.gelu.default", 1024),
          ("h.1.attn", "aten.mm.default", 4096), ("h.1.mlp", "aten.gelu.default", 1024),
          ("ln_f", "aten.layer_norm.default", 512), (None, "aten.add.Tensor", 8)]


def mem_op(i: int, n: int) -> OpCost:
    """n f32 elements in, n out, n vector FLOPs: memory-bound, 8n bytes."""
    return OpCost(f"S{i}", "Y[i] = X[i] + 1", "i->i", f"m.py:{10 + i}", "vector", 0, n, 0, None, "f32", n,
                  (Access(f"X{i}", "f32", n, 4 * n),), (Access(f"Y{i}", "f32", n, 4 * n),))


def blocks_report(measured: Measured | None = None, hw: str = "H100_SXM",
                  layout: list[tuple[str | None, str, int]] = LAYOUT) -> dict:
    ops = [mem_op(i, n) for i, (_, _, n) in enumerate(layout)]
    kernels = [UnfusedKernel(f"k{i}", op, o.loc, (i,), (i,), o.reads, o.writes, mod)
               for i, ((mod, op, _), o) in enumerate(zip(layout, ops, strict=True))]
    # without the latency floor: these kernels of a few kB would each be it (tests/test_latency_floor.py),
    # and the module arithmetic under test is about their bytes
    targets = [replace(t, l2_latency=None) for t in parse_hw_list(hw)]
    return build_report([GraphCosts("m", ops, 8 * 4096)], targets, source="m.py",
                        validation=NOT_VALIDATED, unfused=[kernels], measured=measured)


def test_module_rows_sum_kernels_and_mark_identical_blocks():
    r = blocks_report()
    rows = {m["path"]: m for m in r["modules"]}
    assert [m["path"] for m in r["modules"]] == ["", "h", "h.0", "h.0.attn", "h.0.mlp", "h.1", "h.1.attn",
                                                  "h.1.mlp", "ln_f"]
    assert rows["h.1"]["same_as"] == "h.0" and rows["h.0"]["same_as"] is None
    assert rows["h.1.attn"]["same_as"] is None  # not indexed: not a repeat, even if identical
    assert rows["h"]["bytes"] == 2 * 8 * (4096 + 1024) and rows["h"]["kernels"] == [0, 1, 2, 3]
    assert rows[""]["own_kernels"] == [5] and rows[""]["flops"] == 4096 * 2 + 1024 * 2 + 512 + 8
    total = 8 * (2 * 4096 + 2 * 1024 + 512 + 8) / BW
    assert rows[""]["bound_s"]["H100_SXM"] == pytest.approx(total, rel=1e-12)
    assert rows["h.0"]["share"]["H100_SXM"] == pytest.approx(8 * 5120 / BW / total, rel=1e-12)
    assert rows["ln_f"]["bottleneck"] == {"H100_SXM": "memory"}
    assert [o["module"] for o in r["ops"]] == [m for m, _, _ in LAYOUT]
    assert [k["module"] for k in r["kernels_unfused"]] == [m for m, _, _ in LAYOUT]


def test_tree_shows_repeated_blocks_once_with_their_count():
    r = blocks_report()
    entries = [(e.label, e.level, e.fig.bytes) for e in module_entries(r, depth=9)]
    assert entries == [("model", 0, 8 * 10760), ("h.0-1 (x2)", 1, 8 * 10240), ("attn", 2, 8 * 8192),
                       ("mlp", 2, 8 * 2048), ("ln_f", 1, 8 * 512), ("(self)", 1, 8 * 8)]
    assert [e.label for e in module_entries(r, depth=1)] == ["model", "h.0-1 (x2)", "ln_f", "(self)"]


def test_tiny_siblings_fold_into_one_row():
    r = blocks_report()
    # ln_f (4.8%) and the top-level add (0.07%): only the add is under 1% -> not folded (one row alone)
    labels = [e.label for e in module_entries(r, 1)]
    assert "(self)" in labels
    # make ln_f tiny too: two tiny siblings fold into one "N more" row with their summed figures
    r["kernels_unfused"][4]["bound_s"]["H100_SXM"] = 1e-15
    entries = module_entries(r, 1)
    assert [e.label for e in entries] == ["model", "h.0-1 (x2)", "(2 more, each < 1%)"]
    assert entries[-1].fig.bytes == 8 * 512 + 8 * 8


def test_kernel_groups_merge_repeats_and_sort_by_bound():
    groups = kernel_groups(blocks_report())
    assert [(g.module, g.op, g.count) for g in groups] == [
        ("h.0-1.attn", "aten.mm.default", 2), ("h.0-1.mlp", "aten.gelu.default", 2),
        ("ln_f", "aten.layer_norm.default", 1), ("model", "aten.add.Tensor", 1)]
    assert groups[0].fig.bytes == 2 * 8 * 4096


def test_default_report_fits_the_width_and_names_top_level_modules():
    r = blocks_report(hw="H100_SXM,B200")
    for width in (80, 100, 120):
        text = render_text(r, width=width)
        assert max(len(line) for line in text.splitlines()) <= width, width
    text = render_text(r, width=120)
    assert "h.0-1 (x2)" in text and "ln_f" in text and "(self)" in text
    assert "statements (einsum nodes)" not in text


def test_top_zero_shows_the_deepest_tree():
    # 14 distinct top-level modules with two children each: depth 1 is 15 rows, depth 2 is 43
    layout = [(f"b{i}.{c}", "aten.mm.default", 1000 + i) for i in range(14) for c in ("p", "q")]
    r = blocks_report(layout=layout)
    assert "modules (depth 1 of 2; deeper: --depth 2)" in render_text(r, width=120, top=20)
    text = render_text(r, width=120, top=0)  # --top 0: every row, so the whole tree
    assert "modules (depth 2 of 2)" in text and "b13" in text


def test_main_fields_render_in_the_width():
    """Fields of the bound-validity and validation work (issue 9, 10) in the new header and totals:
    the validation method and elements compared, the warm timing contract, aliases, the traced and
    minimal indirect counts, the literal vector count."""
    r = blocks_report(hw="H100_SXM,B200")
    r["validation"] = {"validated": True, "frontend": "torch-export", "method": "reduced",
                       "reduced_method": "sampled", "samples": 1, "elements_checked": 1234,
                       "max_rel_err": 1e-7, "sizes": "reduced: N=64 (of 4096)",
                       "full_size_same_program": True}
    r["cache_state"] = "warm"
    r["aliases"] = [{"position": 1, "output": "v", "of": "x", "role": "input", "how": "a view"}]
    r["value_dependent"] = [{"op": "S1", "loc": "m.py:11", "tensors": ["W", "idx", "W"], "traced": ["W"]},
                            {"op": "S2", "loc": "m.py:12", "tensors": ["T"], "traced": []}]
    r["totals"]["flops_vector_literal"] = r["totals"]["flops_vector"] + 100
    text = render_text(r, width=100)
    assert max(len(line) for line in text.splitlines()) <= 100
    flat = " ".join(text.split())
    assert ("validation: validated (torch-export frontend, reduced): 1 sample(s) of 1,234 output elements, "
            "max relative error 1.00e-07, on a size-reduced instance (N=64 (of 4096); the full-size kernel "
            "checked to be the same program)") in flat
    assert "timing: warm caches: a working set that fits storage kept between calls" in flat
    assert "aliases: output 1 ('v') is a view of input 'x': no work" in flat
    assert "value-dependent (indirect) accesses: S1 (W, idx); S2 (T)" in flat
    assert "--indirect min for the all-inputs minimum): S1 (W)" in flat
    assert "counted at the fewest elements any index values touch: S1 (idx); S2 (T)" in flat
    assert f"{r['totals']['flops_vector_literal']:,} counted literally" in flat


def test_measured_total_and_modules():
    total = 8 * 10760 / BW
    r = blocks_report(Measured("t.json", 2 * total, {"h.0": 8 * 5120 / BW * 4}))
    m = json.loads(json.dumps(r["measured"]))  # the JSON carries it
    sol = m["sol"]["H100_SXM"]
    assert sol["unfused"]["percent_of_sol"] == pytest.approx(50.0, rel=1e-12)
    assert sol["unfused"]["headroom_x"] == pytest.approx(2.0, rel=1e-12)
    assert sol["unfused"]["headroom_s"] == pytest.approx(total, rel=1e-12)
    assert sol["unfused"]["below_bound"] is False and sol["cache-aware"] is None  # not computed here
    assert sol["fused"]["bound_s"] == r["bounds"]["H100_SXM"]["fused_s"]
    (mod,) = m["modules"]
    assert mod["path"] == "h.0" and mod["sol"]["H100_SXM"]["percent_of_sol"] == pytest.approx(25.0, rel=1e-12)
    text = render_text(r, width=120)
    assert "measured" in text and "50.0%" in text and "25.0%" in text and "VIOLATION" not in text


def test_measured_below_a_bound_is_a_violation():
    r = blocks_report(Measured("1ns", 1e-9))
    assert r["measured"]["sol"]["H100_SXM"]["fused"]["below_bound"] is True
    text = render_text(r, width=120)
    assert "BELOW" in text and "VIOLATION: measured below a bound" in text


def test_parse_measured(tmp_path):
    assert parse_measured("310us") == Measured("310us", pytest.approx(310e-6))
    f = tmp_path / "t.json"
    f.write_text('{"total": "2ms", "modules": {"h.0": 1e-4, "ln_f": "5 us"}}')
    m = parse_measured(str(f))
    assert (m.total_s, m.modules) == (pytest.approx(2e-3), {"h.0": 1e-4, "ln_f": pytest.approx(5e-6)})
    f.write_text('{"totl": "2ms"}')
    with pytest.raises(SolarError, match="expected .*total.*modules"):
        parse_measured(str(f))
    f.write_text('{"total": "-2ms"}')
    with pytest.raises(SolarError, match="bad time '-2ms'"):
        parse_measured(str(f))
    f.write_text('{"modules": {"h.9": "1us"}}')
    with pytest.raises(SolarError, match=r"module 'h.9' is not a module of the program \(did you mean 'h.1'"):
        blocks_report(parse_measured(str(f)))
    f.write_text("{")
    with pytest.raises(SolarError, match=r"t.json:1:2: bad JSON"):
        parse_measured(str(f))


def test_glossary_explains_every_header_and_column_and_docs_hold_it():
    """Every column header and header label the text report prints has a glossary entry, and
    docs/report.md ends with the glossary as `--explain` prints it."""
    import re
    from pathlib import Path

    from solar_compiler.render.glossary import GLOSSARY, markdown

    root = Path(__file__).resolve().parent.parent
    terms = {t.lower() for t, _ in GLOSSARY}
    sources = [*(root / "solar_compiler/render").glob("*.py"), root / "solar_compiler/report.py"]
    printed: set[str] = set()
    for src in sources:
        text = src.read_text()
        for m in re.finditer(r'add_column\(\s*f?"([^"]*)"', text):
            for part in m.group(1).replace("{h}", "").split("\\n"):
                if part.strip():
                    printed.add(part.strip().replace("-\\\\naware", "-aware"))
        printed |= {m.group(1) for m in re.finditer(r'\("  ?([a-z ]+):"', text)}  # header labels
        printed |= {m.group(1) for m in re.finditer(r'f?"([a-z][a-z ]*):\s+', text) if len(m.group(1)) < 12}
    inverse = {"x now", "DRAM BW", "matrix FLOP/s", "vector FLOP/s", "target", "met", "scale all figures"}
    printed -= {"cache-", "aware", "reduced"} | inverse  # the inverse table has its own entry
    missing = sorted(p for p in printed if p.lower() not in terms)
    assert not missing, missing
    assert (root / "docs/report.md").read_text().endswith(markdown())
