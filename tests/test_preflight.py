"""Every argument that can be checked before work starts is checked before any capture (issue 25,
item 4): the translate pass (solar-opt) and the worker pool (solar-bench) are replaced by functions
that fail the test if called, so a check that comes after the work shows as a failure, not as a
slow run."""

from __future__ import annotations

from pathlib import Path

import pytest

from passes.translate import TranslatePass
from solar_compiler import driver
from solar_compiler.bench import cli as bench_cli

ROOT = Path(__file__).resolve().parents[1]
MODEL = str(ROOT / "examples" / "models" / "vit_block.py")


def _never(*args, **kwargs):
    raise AssertionError("work started before the arguments were checked")


@pytest.fixture
def no_capture(monkeypatch):
    monkeypatch.setattr(TranslatePass, "apply", _never)


@pytest.mark.parametrize(
    "args, message",
    [
        (["--hw", "H100_SMX"], "unknown hardware target 'H100_SMX'; did you mean H100_SXM?"),
        (["--hw", "H100_SXM,H2O0"], "unknown hardware target 'H2O0'"),
        (["--precision", "fp7"], "unknown precision policy 'fp7'"),
        (["--measured", "3parsecs"], "--measured '3parsecs': expected a time such as 310us"),
        (["--inverse-roofline", "soon"], "bad target latency 'soon'"),
        (["--cache-size", "lots"], "lots"),
        (["--frontend", "tensorflow"], "unknown frontend 'tensorflow' (known: auto, jax, llm, torch)"),
        (["--mode", "inference"], "argument --mode: invalid choice 'inference'"),
        (["--width", "5"], "--width must be at least 40, got 5"),
        (["--roofline", "fastest"], "invalid choice 'fastest'"),
        (["--indirect", "mim"], "invalid choice 'mim' (did you mean 'min'?"),
    ],
)
def test_solar_opt_rejects_a_bad_option_before_the_capture(no_capture, capsys, args, message):
    rc = driver.main([MODEL, "--translate", "--roofline=all", *args])
    err = capsys.readouterr().err
    assert rc == 1
    assert err.startswith("solar-opt: error: ") and err.count("\n") == 1, err
    assert message in err


@pytest.fixture
def no_workers(monkeypatch):
    monkeypatch.setattr(bench_cli, "make_backend", _never)
    monkeypatch.setattr(bench_cli, "calibrate_host_once", _never)
    monkeypatch.setattr(bench_cli, "discover", _never)


@pytest.mark.parametrize(
    "args, message",
    [
        (["--hw", "H100_SMX"], "unknown hardware target 'H100_SMX'; did you mean H100_SXM?"),
        (["--hw", "host,B2OO"], "unknown hardware target 'B2OO'"),
        (["--precision", "fp7"], "--precision: unknown precision policy 'fp7'"),
    ],
)
def test_solar_bench_rejects_a_bad_argument_before_any_worker(no_workers, tmp_path, capsys, args, message):
    rc = bench_cli.main([MODEL, "--out", str(tmp_path / "out"), *args])
    err = capsys.readouterr().err
    assert rc == 2
    assert err.startswith("solar-bench: error: ") and err.count("\n") == 1, err
    assert message in err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "args, message",
    [
        (["--workers", "0"], "--workers must be at least 1, got 0"),
        (["--trials", "0"], "--trials must be at least 1, got 0"),
        (["--timeout", "0"], "--timeout must be positive, got 0"),
        (["--memory-gb", "-1"], "--memory-gb must be positive, got -1"),
        (["--mode", "inference"], "invalid choice: 'inference'"),
        (["--cache-state", "tepid"], "invalid choice: 'tepid'"),
        (["--compile"], "--compile needs --measure"),
    ],
)
def test_solar_bench_usage_errors(no_workers, tmp_path, capsys, args, message):
    with pytest.raises(SystemExit) as exc:
        bench_cli.main([MODEL, "--out", str(tmp_path / "out"), *args])
    assert exc.value.code == 2
    assert message in capsys.readouterr().err
