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
