"""report.html in a real headless browser (Debian's chromium through playwright): loads without
console errors, the tables sort, the charts render, the per-model links work; a screenshot is kept."""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from solar_compiler.bench.outputs import write_outputs
from solar_compiler.bench.store import Store
from solar_compiler.bench.suite import Unit

CHROMIUM = "/usr/bin/chromium"
REQUIRED = os.environ.get("SOLAR_TEST_REQUIRE_OPTIONAL") == "1"  # make test: these must run, not skip


def _report(scale: float, flops: int) -> dict:
    b = {
        "unfused_s": 4e-6 * scale,
        "fused_s": 2e-6 * scale,
        "cache_aware_s": 3e-6 * scale,
        "fused_bottleneck": "memory",
        "fused_terms_s": {"matrix": 1e-7, "memory": 2e-6 * scale},
        "cache_aware_bottleneck": "dram",
        "cache_aware_terms_s": {"dram": 3e-6 * scale},
    }
    return {
        "schema": "solar-report/1",
        "validation": {
            "validated": True,
            "frontend": "torch-export",
            "samples": 3,
            "max_rel_err": 1e-7,
            "sizes": "full",
        },
        "totals": {"flops": flops, "bytes_unfused": 8000, "bytes_fused": 4000, "bytes_cache_aware": 4000},
        "bounds": {"H100_SXM": b},
        "hw": {
            "H100_SXM": {"dram_bw": {"value": 3.35e12}, "matrix": {"f32": {"value": 4.947e14}}, "vector": {}}
        },
        "kernels_unfused": [
            {
                "op": "aten.mm.default",
                "loc": "m.py:3",
                "flops_matrix": flops,
                "flops_vector": 0,
                "bytes": 6000,
                "bound_s": {"H100_SXM": 3e-6 * scale},
                "bottleneck": {"H100_SXM": "memory"},
            },
            {
                "op": "aten.relu.default",
                "loc": "m.py:4",
                "flops_matrix": 0,
                "flops_vector": 10,
                "bytes": 2000,
                "bound_s": {"H100_SXM": 1e-6 * scale},
                "bottleneck": {"H100_SXM": "memory"},
            },
        ],
    }


@pytest.fixture
def suite_out(tmp_path):
    """Five models in two groups: four bounded (one of them beaten by its timing: a violation),
    one failed; times from a KernelBench-format timing file."""
    out = tmp_path / "out"
    store = Store(out)
    units, bfp = [], {}
    timings: dict = {"level1": {}, "level2": {}}
    spec = [
        ("level1", "a.py", 1.0, 10**6, 0.010),
        ("level1", "b.py", 3.0, 10**8, 0.020),
        ("level1", "c.py", 0.5, 10**5, 0.0008),
        ("level2", "d.py", 10.0, 10**9, 0.5),
        ("level2", "e.py", None, None, 1.0),
    ]
    for group, name, scale, flops, ms in spec:
        u = Unit(group, name, f"{group}/{name}", str(tmp_path), f"{len(units):064d}")
        units.append(u)
        bfp[u.key] = "fp"
        timings[group][name] = {"mean": ms, "min": ms * 0.9}
        if scale is None:
            store.save(
                u,
                "bounds",
                {
                    "fingerprint": "fp",
                    "status": "failed",
                    "error_class": "crash",
                    "error": "the interpreter died with signal SIGSEGV",
                    "seconds": 0.5,
                },
            )
        else:
            store.save(
                u,
                "bounds",
                {"fingerprint": "fp", "status": "ok", "seconds": 1.0 + scale, "peak_rss_kb": 300000},
                _report(scale, flops),
            )
    args = SimpleNamespace(hw="H100_SXM", timings="kb.json")
    meta = {
        "command": ["solar-bench", "level1", "level2"],
        "hw": "H100_SXM",
        "mode": "train",
        "workers": 2,
        "backend": "pool",
        "models": 5,
        "computed": {"bounds": 5, "measure": 0},
        "reused": 0,
        "wall_s": 12.5,
    }
    n = write_outputs(out, units, store, bfp, None, timings, args, meta)
    assert n == 1  # c.py: 0.72 us < cache-aware bound 1.5 us
    return out


def test_results_json_lists_the_violation_with_its_ops(suite_out, capsys):
    data = json.loads((suite_out / "results.json").read_text())
    (v,) = data["violations"]
    assert (v["model"], v["bound"], v["measured_min_s"]) == ("c.py", "cache-aware", pytest.approx(0.72e-6))
    assert [(o["op"], o["share"]) for o in v["ops"]] == [
        ("aten.mm.default", 0.75),
        ("aten.relu.default", 0.25),
    ]
    g1 = next(g for g in data["groups"] if g["group"] == "level1")
    # headroom (mean / fused): a 10 us / 2 us = 5, b 20 us / 6 us, c 0.8 us / 1 us
    assert g1["headroom_geomean"]["fused"] == pytest.approx((5 * (20 / 6) * 0.8) ** (1 / 3))


def _browser():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        if REQUIRED:
            raise
        pytest.skip("playwright not installed (pip install '.[browser]')")
    if not Path(CHROMIUM).exists():
        if REQUIRED:
            pytest.fail(f"{CHROMIUM} missing (apt-get install chromium)")
        pytest.skip(f"{CHROMIUM} missing")
    return sync_playwright


def test_report_in_headless_chromium(suite_out, tmp_path):
    sync_playwright = _browser()
    errors: list[str] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"]
        )
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto((suite_out / "report.html").as_uri())
        page.wait_for_load_state("load")
        assert page.title() == "solar-bench report"

        # the charts render: a histogram and a roofline per group, points for bounded models
        assert page.locator("svg.chart").count() == 4
        for i in range(4):
            box = page.locator("svg.chart").nth(i).bounding_box()
            assert box is not None and box["width"] > 300 and box["height"] > 200
        assert page.locator("svg.roofline").nth(0).locator("circle.pt").count() == 3
        assert page.locator("svg.roofline").nth(1).locator("circle.pt").count() == 1
        assert page.locator("svg.hist").nth(0).locator("rect.bar").count() >= 1
        assert page.locator("svg.roofline polyline.roof").count() == 2

        # the per-model table sorts by the fused bound (empty cells last), both ways
        models = page.locator("#models")
        col = [h.strip() for h in models.locator("th").all_inner_texts()].index("fused")
        header = models.locator("th").nth(col)

        def column() -> list[str]:
            return models.locator(f"tbody tr td:nth-child({col + 1})").evaluate_all(
                "cells => cells.map(c => c.dataset.v)"
            )

        header.click()
        asc = column()
        assert [float(v) for v in asc[:4]] == sorted(float(v) for v in asc[:4]) and asc[4] == ""
        assert header.get_attribute("aria-sort") == "ascending"
        header.click()
        desc = column()
        assert [float(v) for v in desc[:4]] == sorted((float(v) for v in desc[:4]), reverse=True)
        # a text column sorts too
        mcol = [h.strip() for h in models.locator("th").all_inner_texts()].index("model")
        models.locator("th").nth(mcol).click()
        names = models.locator(f"tbody tr td:nth-child({mcol + 1})").all_inner_texts()
        assert names == sorted(names)

        # the violation is listed with its op breakdown
        assert "c.py on H100_SXM" in page.locator("h3.viol").first.inner_text()
        shot = tmp_path / "report.png"
        page.screenshot(path=str(shot), full_page=True)

        # each model links to its own page
        page.locator("#models a", has_text="d.py").click()
        page.wait_for_load_state("load")
        assert page.title() == "level2/d.py"
        assert page.locator("#bounds tbody tr").count() == 1
        assert page.locator("#ops-H100_SXM tbody tr").count() == 2
        browser.close()
    assert errors == []
    import matplotlib.image as mpimg

    img = mpimg.imread(str(shot))
    assert img.shape[1] == 1400 and img.shape[0] > 1000
    assert img[..., :3].std() > 0.05  # not a blank page


def _report_with_modules(scale: float, flops: int) -> dict:
    """`_report` with a module tree (blocks.0.attn, blocks.0.mlp) and six kernels in it."""
    r = _report(scale, flops)
    ks = []
    for i, (mod, op) in enumerate([("blocks.0.attn", "aten.bmm.default"), ("blocks.0.attn", "aten.softmax"),
                                   ("blocks.0.mlp", "aten.mm.default"), ("blocks.0.mlp", "aten.gelu"),
                                   ("blocks.0.mlp", "aten.mm.default"), ("", "aten.add.Tensor")]):
        f = flops // (i + 1)
        ks.append({"op": op, "module": mod, "loc": f"m.py:{10 + i}", "flops_matrix": f, "flops_vector": 0,
                   "bytes": 1000 * (i + 1), "bound_s": {"H100_SXM": scale * 1e-6 / (i + 1)},
                   "bottleneck": {"H100_SXM": "memory"}})
    r["kernels_unfused"] = ks

    def mod(path: str, parent: str | None, depth: int, idx: list[int]) -> dict:
        return {"path": path, "name": path.rsplit(".", 1)[-1] or "model", "parent": parent, "depth": depth,
                "kernels": idx, "own_kernels": [], "flops": sum(flops // (i + 1) for i in idx),
                "bytes": sum(1000 * (i + 1) for i in idx),
                "bound_s": {"H100_SXM": sum(scale * 1e-6 / (i + 1) for i in idx)},
                "bottleneck": {"H100_SXM": "memory"}, "share": {"H100_SXM": len(idx) / 6}, "same_as": None}

    block = [0, 1, 2, 3, 4]
    r["modules"] = [mod("", None, 0, list(range(6))), mod("blocks", "", 1, block),
                    mod("blocks.0", "blocks", 2, block), mod("blocks.0.attn", "blocks.0", 3, [0, 1]),
                    mod("blocks.0.mlp", "blocks.0", 3, [2, 3, 4])]
    return r


@pytest.fixture
def measured_out(tmp_path):
    """A --measure suite of eight models: six timed, one whose timing failed (a JAX model timed as
    torch, say), one whose bounds failed."""
    out = tmp_path / "out"
    store = Store(out)
    units, bfp, mfp = [], {}, {}
    for i in range(8):
        u = Unit("suite", f"m{i}.py", f"suite/m{i}.py", str(tmp_path), f"{i:064d}")
        units.append(u)
        bfp[u.key], mfp[u.key] = "fp", "mfp"
        if i == 7:
            store.save(u, "bounds", {"fingerprint": "fp", "status": "failed", "error_class": "translate",
                                     "error": "m7.py:1: syntax error"})
            continue
        store.save(u, "bounds", {"fingerprint": "fp", "status": "ok", "seconds": 1.0},
                   _report_with_modules(2.0 ** i, 10**6 * (i + 1)))
        if i == 6:
            store.save(u, "measure", {"fingerprint": "mfp", "phase": "measure", "status": "failed",
                                      "error_class": "measure",
                                      "error": "m6.py: Model.__init__() missing 1 required positional "
                                               "argument: 'rngs'"})
        else:
            ms = 0.01 * 2.0**i
            store.save(u, "measure", {"fingerprint": "mfp", "phase": "measure", "status": "ok",
                                      "timing": {"device": "cpu", "hardware": "cpu", "eager": {
                                          "mean": ms, "median": ms, "min": ms, "max": ms, "std": 0.0,
                                          "num_trials": 5}}})
    args = SimpleNamespace(hw="H100_SXM", timings=None)
    meta = {"command": ["solar-bench", "suite", "--measure"], "hw": "H100_SXM", "mode": "eval",
            "workers": 1, "backend": "pool", "models": 8, "computed": {"bounds": 8, "measure": 7},
            "reused": 0, "wall_s": 3.0}
    assert write_outputs(out, units, store, bfp, mfp, None, args, meta) == 0
    return out


def test_failed_timing_shows_by_phase_in_results(measured_out):
    data = json.loads((measured_out / "results.json").read_text())
    by = {r["model"]: r for r in data["rows"]}
    assert (by["m6.py"]["status"], by["m6.py"]["measure_status"], by["m6.py"]["measure_error_class"]) == (
        "ok", "failed", "measure")
    assert by["m6.py"]["measured_s"] is None and by["m0.py"]["measure_status"] == "ok"
    (g,) = data["groups"]
    assert (g["bounded"], g["measured"], g["failed"]) == (7, 6, {"measure": 1, "translate": 1})


def _boxes_overlap(a: dict, b: dict) -> bool:
    return not (a["x"] + a["width"] <= b["x"] or b["x"] + b["width"] <= a["x"]
                or a["y"] + a["height"] <= b["y"] or b["y"] + b["height"] <= a["y"])


def test_measured_report_in_headless_chromium(measured_out, tmp_path):
    """Labelled roofline dots (the largest, without overlap) and hover titles on all; failures by
    phase (a failed timing is never 'ok' with no time); the model page's module tree with paths and
    its kernel roofline."""
    from solar_compiler.bench.html import TOP_LABELS

    sync_playwright = _browser()
    errors: list[str] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"]
        )
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto((measured_out / "report.html").as_uri())
        page.wait_for_load_state("load")
        roof = page.locator("svg.roofline").first
        dots = roof.locator("circle.pt")
        assert dots.count() == 7
        titles = dots.locator("title").all_text_contents()
        assert len(titles) == 7 and all("FLOP/B" in t and "FLOP/s" in t for t in titles)
        labels = roof.locator("text.lbl")
        assert labels.count() == TOP_LABELS
        # the labelled dots are the slowest models (m6 unmeasured: at its fused bound, the largest)
        assert set(labels.all_text_contents()) == {"m6.py", "m5.py", "m4.py", "m3.py", "m2.py"}
        boxes = [labels.nth(i).bounding_box() for i in range(labels.count())]
        assert not any(_boxes_overlap(a, b) for i, a in enumerate(boxes) for b in boxes[i + 1:])

        models = page.locator("#models")
        head = [h.strip() for h in models.locator("th").all_inner_texts()]
        row6 = models.locator("tbody tr", has_text="m6.py")
        cells6 = row6.locator("td").all_inner_texts()
        assert cells6[head.index("status")] == "measure failed"
        assert cells6[head.index("failed phase")] == "measure"
        assert cells6[head.index("measured")] == "failed (measure)"
        assert row6.get_attribute("class") == "failed"
        cells7 = models.locator("tbody tr", has_text="m7.py").locator("td").all_inner_texts()
        assert (cells7[head.index("failed phase")], cells7[head.index("error class")]) == (
            "bounds", "translate")
        assert page.locator("#groups tbody td", has_text="measure 1").count() == 1

        page.locator("#models a", has_text="m6.py").click()
        page.wait_for_load_state("load")
        assert "timing failed [measure]" in page.locator("p.failed").inner_text()
        tree = page.locator("table.tree")
        paths = tree.locator("tbody tr td:nth-child(2)").all_inner_texts()
        assert paths == ["(model)", "blocks", "blocks.0", "blocks.0.attn", "blocks.0.mlp"]
        kroof = page.locator("svg.roofline").first
        assert kroof.locator("circle.pt").count() == 6
        assert kroof.locator("text.lbl").first.text_content() == "blocks.0.attn: aten.bmm.default"
        assert kroof.locator("circle.pt title").first.text_content().startswith("blocks.0.attn: aten.bmm")
        first_op = page.locator("#ops-H100_SXM tbody tr").first
        assert first_op.locator("td").nth(1).inner_text() == "blocks.0.attn"
        browser.close()
    assert errors == []
