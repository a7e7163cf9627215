"""`solar-bench DIR` over SOL-ExecBench problem folders: one unit per problem and workload (the
problem folder's name in `model`, the workload's uuid in `workload`), a JSON record per workload with
the bound in ms per fidelity, and a harness trace JSONL (`--timings`) giving SOL scores and
violations. Bounds here are derived by hand (bytes at B200's 8 TB/s)."""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from solar_compiler.bench.jobs import BoundsConfig, solar_opt_argv
from solar_compiler.bench.results import Measured, rows_for, sol_score
from solar_compiler.bench.suite import Unit, discover
from solar_compiler.bench.timing import TRACE_GROUP, load_timings, lookup_timing
from solar_compiler.errors import SolarError

DATA = Path(__file__).resolve().parent / "data" / "solexec"
BENCH = [sys.executable, "-c", "import sys; from solar_compiler.bench.cli import main; sys.exit(main())"]


def _trace(uuid: str, ms: float | None, ref: float | None, status: str = "PASSED",
           solution: str = "s") -> str:
    perf = None if ms is None else {"latency_ms": ms, "reference_latency_ms": ref, "speedup_factor": ref / ms}
    return json.dumps({"definition": "d", "solution": solution,
                       "workload": {"uuid": uuid, "axes": {}, "inputs": {}},
                       "evaluation": {"status": status, "performance": perf,
                                      "environment": {"hardware": "NVIDIA_B200", "libs": {}}}})


def test_discover_problem_folders_one_unit_per_workload(tmp_path: Path, monkeypatch) -> None:
    """Problem folders below DIR are units per workload; their kernel.py / reference.py are not
    model files; two problems of one name in different groups get distinct generated files."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    for group in ("triton", "cuda"):
        dst = tmp_path / "suite" / group / "gemm"
        shutil.copytree(DATA / "gemm_bf16", dst)
        (dst / "kernel.py").write_text("x = 1\n")
    units = discover([str(tmp_path / "suite")])
    assert [(u.group, u.name, u.workload) for u in units] == [
        ("cuda", "gemm", "gemm-m16-k32"), ("cuda", "gemm", "gemm-m8-k64"),
        ("triton", "gemm", "gemm-m16-k32"), ("triton", "gemm", "gemm-m8-k64")]
    assert len({u.path for u in units}) == 4 and len({u.key for u in units}) == 4
    assert units[0].key == "cuda/gemm@gemm-m16-k32" and units[0].stem == "gemm.gemm-m16-k32"
    one = discover([str(tmp_path / "suite" / "cuda" / "gemm")])  # a problem folder given itself
    assert [(u.group, u.workload) for u in one] == [("cuda", "gemm-m16-k32"), ("cuda", "gemm-m8-k64")]


def test_each_workload_gets_the_precision_policy_of_its_tolerance(tmp_path: Path, monkeypatch) -> None:
    """A unit per workload carries its policy (softmax_pv: the default tolerance admits bf16, 1e-3 TF32,
    1e-6 fp32) into its solar-opt command line and its stored bounds' fingerprint; a run-level
    --precision wins."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    units = discover([str(DATA / "softmax_pv")])
    assert [u.precision for u in units] == ["bf16", "tf32", "fp32"]
    cfg = BoundsConfig(hw="B200")
    argv = solar_opt_argv(units[0].path, cfg.for_unit(units[0]), "r.json")
    assert "--precision=bf16" in argv
    assert f"--precision-reason={units[0].precision_reason}" in argv and "2^-8" in units[0].precision_reason
    assert cfg.for_unit(units[1]).fingerprint_fields()["precision"] == "tf32"
    assert BoundsConfig(hw="B200", precision="fp32").for_unit(units[0]).precision == "fp32"
    model_file = Unit("g", "m.py", "m.py", "/", "0" * 64)  # a model file: the run's policy
    assert cfg.for_unit(model_file) is cfg and "precision_reason" not in cfg.fingerprint_fields()


def test_trace_file_keeps_the_fastest_passed_solution(tmp_path: Path) -> None:
    p = tmp_path / "trace.jsonl"
    p.write_text("\n".join([_trace("w1", 0.006, 0.011, solution="slow"), _trace("w1", 0.004, 0.010),
                            _trace("w2", None, None, status="RUNTIME_ERROR")]) + "\n")
    t = load_timings(str(p))
    assert set(t) == {TRACE_GROUP} and set(t[TRACE_GROUP]) == {"w1"}
    assert lookup_timing(t, "g", "gemm", "w1") == {"mean": 0.004, "baseline": 0.010, "definition": "d",
                                                   "solution": "s", "hardware": "NVIDIA_B200"}
    assert lookup_timing(t, "g", "gemm", "w2") is None
    p.write_text(_trace("w1", 0.004, 0.010) + "\n" + json.dumps({"definition": "d", "workload": {}}) + "\n")
    with pytest.raises(SolarError, match=r"trace.jsonl:2: a trace needs workload.uuid"):
        load_timings(str(p))


def test_sol_score_and_violation_of_a_row() -> None:
    """S = 1 / (1 + (T_k - T_SOL) / (T_b - T_SOL)) against max(fused, cache-aware)."""
    assert sol_score(2.0, 3.0, 1.0) == pytest.approx(2 / 3)
    assert sol_score(1.0, 5.0, 1.0) == 1.0 and sol_score(1.0, 1.0, 1.0) is None
    unit = Unit("g", "gemm", "p.py", "/", "0" * 64, "w1")
    report = {"validation": {"validated": True}, "totals": {"flops": 1},
              "bounds": {"B200": {"unfused_s": 4e-6, "fused_s": 2e-6, "cache_aware_s": 3e-6}}}
    bounds = {"status": "ok", "seconds": 1.0}
    [r] = rows_for(unit, ["B200"], bounds, report, Measured(5e-6, 5e-6, "trace", baseline=9e-6), "x")
    assert (r["workload"], r["sol_s"], r["baseline_s"]) == ("w1", 3e-6, 9e-6)
    assert r["sol_score"] == pytest.approx(1 / (1 + 2 / 6)) and r["violation"] is False
    [r] = rows_for(unit, ["B200"], bounds, report, Measured(2.5e-6, 2.5e-6, "trace", baseline=9e-6), "x")
    assert r["violation"] is True and r["violation_bound"] == "cache-aware" and r["sol_score"] > 1


def test_solar_bench_over_problem_folders_with_a_trace(tmp_path: Path) -> None:
    """gemm_bf16: C[M, 2K] = A[M, K] @ B[2K, K]^T in bf16. Workload gemm-m16-k32: (16*32 + 64*32 +
    16*64) * 2 = 7168 bytes -> 0.896 ns at 8 TB/s; gemm-m8-k64: (8*64 + 128*64 + 8*128) * 2 = 19456
    bytes -> 2.432 ns; both below the latency floor, 123 ns, their bound. The trace's kernel (4 us, baseline
    10 us) scores 1/(1 + (4e-6 - T) / (1e-5 - T))."""
    shutil.copytree(DATA / "gemm_bf16", tmp_path / "probs" / "gemm_bf16")
    trace = tmp_path / "trace.jsonl"
    trace.write_text(_trace("gemm-m16-k32", 0.004, 0.010) + "\n"
                     + _trace("gemm-m8-k64", None, None, status="INCORRECT_NUMERICAL") + "\n")
    out = tmp_path / "out"
    env = {"XDG_CACHE_HOME": str(tmp_path / "xdg"), "PATH": "/usr/bin:/bin"}
    r = subprocess.run([*BENCH, str(tmp_path / "probs"), "--hw", "B200", "--workers", "1", "--out", str(out),
                        "--timings", str(trace)], capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stderr
    rows = list(csv.DictReader((out / "results.csv").open()))
    assert [(x["group"], x["model"], x["workload"], x["validated"]) for x in rows] == [
        ("probs", "gemm_bf16", "gemm-m16-k32", "True"), ("probs", "gemm_bf16", "gemm-m8-k64", "True")]
    assert [int(x["bytes_fused"]) for x in rows] == [7168, 19456]
    t_sol = 123e-9  # 7168 / 8e12 = 0.9 ns of bytes: B200's latency floor (docs/bounds.md section 9) binds
    assert float(rows[0]["sol_s"]) == pytest.approx(t_sol)
    assert float(rows[0]["sol_score"]) == pytest.approx(1 / (1 + (4e-6 - t_sol) / (1e-5 - t_sol)))
    assert rows[1]["sol_score"] == "" and rows[1]["measured_s"] == ""
    rec = json.loads((out / "models" / "probs" / "gemm_bf16.gemm-m8-k64.workload.json").read_text())
    assert rec["problem"] == "gemm_bf16" and rec["workload"] == "gemm-m8-k64"
    b = rec["targets"]["B200"]
    assert b["fused_ms"] == pytest.approx(123e-9 * 1e3) and b["fused_ms"] > 19456 / 8e12 * 1e3
    assert b["sol_ms"] == pytest.approx(b["fused_ms"])
    assert b["unfused_ms"] == pytest.approx(b["fused_ms"]) and "measured_ms" not in b
    assert "SOL score on B200" in r.stdout and "mean 0.718" in r.stdout
    report = json.loads((out / "models" / "probs" / "gemm_bf16.gemm-m8-k64.report.json").read_text())
    assert report["precision"] == "bf16" and report["precision_reason"].startswith("the default tolerance")


# ---- a problem's workloads as one job (bench/problems.py) -----------------------------------------
DEFINITION = {"name": "p", "op_type": "elementwise", "description": "y = x * 2 + 1",
              "axes": {"M": {"type": "var"}, "N": {"type": "const", "value": 8}},
              "inputs": {"x": {"shape": ["M", "N"], "dtype": "float32"}},
              "outputs": {"y": {"shape": ["M", "N"], "dtype": "float32"}}}
# what the reference does at M = 5 (the middle workload): nothing special, raise, or kill its process
AT_M5 = {"three": "", "raises": "        raise ValueError('M = 5 is not supported')\n",
         "segv": "        import ctypes, faulthandler\n        faulthandler.disable()\n"
                 "        ctypes.string_at(0)\n"}


def _problem(folder: Path, at_m5: str) -> None:
    folder.mkdir(parents=True)
    (folder / "definition.json").write_text(json.dumps(DEFINITION))
    (folder / "reference.py").write_text(f"import torch\n\n\ndef run(x):\n    if x.shape[0] == 5:\n"
                                         f"{at_m5 or '        pass'}\n    return x * 2.0 + 1.0\n")
    (folder / "workload.jsonl").write_text("".join(
        json.dumps({"uuid": f"m{m}", "axes": {"M": m}, "inputs": {"x": {"type": "random"}}}) + "\n"
        for m in (3, 5, 7)))


@pytest.fixture(scope="module")
def batched(tmp_path_factory):
    base = tmp_path_factory.mktemp("batched")
    for name, at_m5 in AT_M5.items():
        _problem(base / "probs" / name, at_m5)
    env = {"XDG_CACHE_HOME": str(base / "xdg"), "PATH": "/usr/bin:/bin"}
    r = subprocess.run([*BENCH, str(base / "probs"), "--hw", "B200", "--workers", "2", "--out",
                        str(base / "out")], capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stderr
    rows = {(x["model"], x["workload"]): x for x in csv.DictReader((base / "out" / "results.csv").open())}
    return base / "out" / "models" / "probs", rows, r


def _method(models: Path, problem: str, workload: str) -> str:
    return json.loads((models / f"{problem}.{workload}.report.json").read_text())["validation"]["method"]


def test_a_problems_workloads_run_as_one_job_and_carry_validation(batched) -> None:
    """Three workloads of one program: three rows, all validated; the cheapest is executed, the two
    others are its program at other sizes (method "other-workload"), each with its own bytes."""
    models, rows, _ = batched
    got = [rows[("three", f"m{m}")] for m in (3, 5, 7)]
    assert [(x["status"], x["validated"]) for x in got] == [("ok", "True")] * 3
    assert [int(x["bytes_fused"]) for x in got] == [2 * m * 8 * 4 for m in (3, 5, 7)]
    methods = [_method(models, "three", f"m{m}") for m in (3, 5, 7)]
    assert methods == ["full", "other-workload", "other-workload"]
    rec = json.loads((models / "three.m5.bounds.json").read_text())
    assert rec["problem_job"]["workloads"] == 3 and rec["status"] == "ok"
    assert (models / "three.m7.bounds.log").is_file()


def test_a_failing_workload_fails_alone_in_its_problems_job(batched) -> None:
    """The reference raises at M = 5: that row fails with the reference's error, the others are ok
    (validated, one carrying the other's record), all from the one problem job."""
    models, rows, _ = batched
    bad = rows[("raises", "m5")]
    assert bad["status"] == "failed" and "M = 5 is not supported" in bad["error"], bad
    assert [(rows[("raises", w)]["status"], rows[("raises", w)]["validated"]) for w in ("m3", "m7")] == \
        [("ok", "True")] * 2
    assert _method(models, "raises", "m7") == "other-workload"
    assert json.loads((models / "raises.m5.bounds.json").read_text())["problem_job"]["workloads"] == 3


def test_a_killed_problem_job_runs_its_workloads_alone(batched) -> None:
    """The reference kills its process at M = 5: the problem's job crashes as a whole, so its three
    workloads run again as units of their own: M = 5 crashes alone, M = 3 and M = 7 are ok (each
    validated on its own now)."""
    models, rows, r = batched
    assert rows[("segv", "m5")]["error_class"] == "crash"
    assert rows[("segv", "m5")]["error"] == "the interpreter died with signal SIGSEGV"
    for w in ("m3", "m7"):
        assert (rows[("segv", w)]["status"], rows[("segv", w)]["validated"]) == ("ok", "True")
        assert _method(models, "segv", w) == "full"
        rec = json.loads((models / f"segv.{w}.bounds.json").read_text())
        assert rec["problem_job"]["ran_alone"].startswith("crash: ")
    assert "3 workloads run again one by one" in r.stderr
