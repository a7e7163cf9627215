"""benchmarks/gpu_sol_check.py without a GPU: its --dry-run (bounds from solar-opt, CPU timing), its
table and files, and its verdict on an injected measured time. Byte counts are hand-derived for
the H200 (DRAM 4.8e12 B/s, fp32 = 4 B); these tiny examples are memory-bound."""

from __future__ import annotations

import csv
import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EX = ROOT / "examples" / "torch"
BW = 4.8e12
THREE = [EX / "matmul.py", EX / "softmax.py", EX / "batchnorm.py"]


def _load():
    spec = importlib.util.spec_from_file_location("gpu_sol_check", ROOT / "benchmarks" / "gpu_sol_check.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["gpu_sol_check"] = mod  # dataclasses resolve their module through sys.modules
    spec.loader.exec_module(mod)
    return mod


gsc = _load()

# fused bound = compulsory bytes / DRAM bandwidth, in ms, or H200's latency floor (141 ns,
# docs/bounds.md section 9) where that is larger: matmul's 75 ns and softmax's 109 ns of bytes
FLOOR_MS = 141e-9 * 1e3
MATMUL_MS = max((256 * 128 + 128 * 192 + 256 * 192) * 4 / BW * 1e3, FLOOR_MS)  # A, B read; C written
SOFTMAX_MS = max(2 * 64 * 1024 * 4 / BW * 1e3, FLOOR_MS)                        # x read, y written
# train mode: x read, y written, weight + bias read (32 each); batch statistics, no running stats read
BATCHNORM_TRAIN_MS = (2 * 16 * 32 * 16 * 16 + 2 * 32) * 4 / BW * 1e3
# eval mode reads running_mean and running_var too
BATCHNORM_EVAL_MS = (2 * 16 * 32 * 16 * 16 + 4 * 32) * 4 / BW * 1e3


@pytest.fixture(scope="module")
def bounds_dir(tmp_path_factory) -> Path:
    """Bound reports shared by the tests (each example is translated once)."""
    return tmp_path_factory.mktemp("bounds")


def _csv(out: Path) -> list[dict[str, str]]:
    with open(out / "results.csv", newline="") as f:
        return list(csv.DictReader(f))


def test_dry_run_three_examples(tmp_path, bounds_dir, capsys):
    out = tmp_path / "out"
    rc = gsc.main(["--dry-run", "--trials", "3", "--min-trials", "3", "--bounds-dir", str(bounds_dir),
                   "--out", str(out), *map(str, THREE)])
    assert rc == 0
    printed = capsys.readouterr().out
    header = next(line for line in printed.splitlines() if line.startswith("example"))
    assert header.split() == ["example", "min", "ms", "median", "ms", "n", "fused", "ms", "cache-aware",
                              "ms", "unfused", "ms", "headroom", "status", "note"]
    rows = {r["example"]: r for r in _csv(out)}
    assert list(_csv(out)[0]) == list(gsc.COLUMNS)
    assert sorted(rows) == ["batchnorm", "matmul", "softmax"]
    for name, fused in (("matmul", MATMUL_MS), ("softmax", SOFTMAX_MS), ("batchnorm", BATCHNORM_TRAIN_MS)):
        r = rows[name]
        assert float(r["fused_ms"]) == pytest.approx(fused, rel=1e-12)
        # a single kernel per example: nothing to fuse, and everything fits in on-chip memory
        assert float(r["unfused_ms"]) == pytest.approx(fused, rel=1e-12)
        assert float(r["cache_aware_ms"]) == pytest.approx(fused, rel=1e-12)
        assert int(r["trials"]) == 3
        assert float(r["measured_min_ms"]) <= float(r["measured_median_ms"])
        assert float(r["headroom"]) == pytest.approx(float(r["measured_min_ms"]) / fused, rel=1e-9)
        assert r["status"] == "ok"  # a CPU is far slower than an H200's memory bound
        assert r["note"] == "dry run: CPU, no flush"
    meta = json.loads((out / "results.json").read_text())
    facts = (meta["hw"], meta["mode"], meta["device"], meta["clock"])
    assert facts == ("H200", "train", "cpu", "perf_counter")
    assert [r["example"] for r in meta["rows"]] == ["batchnorm", "matmul", "softmax"]


def test_mode_reaches_the_bounds(tmp_path, bounds_dir):
    out = tmp_path / "out"
    rc = gsc.main(["--bounds-only", "--mode", "eval", "--bounds-dir", str(bounds_dir), "--out", str(out),
                   str(EX / "batchnorm.py")])
    assert rc == 0
    (r,) = _csv(out)
    assert r["status"] == "bounded" and r["measured_min_ms"] == ""
    assert float(r["fused_ms"]) == pytest.approx(BATCHNORM_EVAL_MS, rel=1e-12)


def test_injected_fast_time_is_a_violation(tmp_path, bounds_dir, monkeypatch, capsys):
    """matmul 'measured' at half its fused bound, softmax exactly at its bound (not below: ok)."""
    fake = {"matmul": MATMUL_MS / 2, "softmax": SOFTMAX_MS}

    def fake_time(path: Path, **kwargs):
        ms = fake[path.stem]
        return gsc.Timing(ms, ms, 7, "injected")

    monkeypatch.setattr(gsc, "time_model", fake_time)
    out = tmp_path / "out"
    rc = gsc.main(["--dry-run", "--bounds-dir", str(bounds_dir), "--out", str(out),
                   str(EX / "matmul.py"), str(EX / "softmax.py")])
    assert rc == 1
    rows = {r["example"]: r for r in _csv(out)}
    assert rows["matmul"]["status"] == "VIOLATION"
    assert float(rows["matmul"]["headroom"]) == pytest.approx(0.5, rel=1e-12)
    assert rows["softmax"]["status"] == "ok"
    assert float(rows["softmax"]["headroom"]) == pytest.approx(1.0, rel=1e-12)
    assert "VIOLATION=1" in capsys.readouterr().out


def test_status_rules():
    b = gsc.Bounds(fused_s=1e-3, cache_aware_s=2e-3, unfused_s=3e-3, bottleneck="memory")
    # between fused and cache-aware: the cache-aware bound is beaten
    assert gsc.status(gsc.Row("x", b, gsc.Timing(1.5, 2.0, 5))) == "VIOLATION"
    assert gsc.status(gsc.Row("x", b, gsc.Timing(2.0, 2.0, 5))) == "ok"
    # below the unfused bound alone is no violation (a fused implementation may beat it)
    assert gsc.status(gsc.Row("x", b, gsc.Timing(2.5, 2.5, 5))) == "ok"
    assert gsc.status(gsc.Row("x", b)) == "bounded"
    assert gsc.status(gsc.Row("x", error="bounds: x.py:3: unsupported op")) == "ERROR"
    assert gsc.status(gsc.Row("x", b, error="SKIPPED: timing budget of 360 s spent")) == "SKIPPED"
    recs = [gsc.record(gsc.Row("a", b, gsc.Timing(5.0, 6.0, 5))), gsc.record(gsc.Row("b", error="timing: x"))]
    assert gsc.exit_code(recs) == 2
    assert gsc.exit_code(recs[:1]) == 0


def test_missing_file_is_one_line_error(tmp_path, capsys):
    rc = gsc.main(["--dry-run", "--out", str(tmp_path), str(tmp_path / "nope.py")])
    assert rc == 2
    err = capsys.readouterr().err.strip()
    assert err == f"gpu_sol_check: error: no such file: {tmp_path / 'nope.py'}"
