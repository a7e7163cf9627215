"""`solar-opt`: outputs, one-line diagnostics with exit status 1, --debug tracebacks, lean imports."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from solar_compiler.driver import main

REPO = Path(__file__).resolve().parent.parent
SOLAR_OPT = str(Path(sys.executable).parent / "solar-opt")
MATMUL = str(REPO / "examples/loop/matmul.loop")
INVALID = sorted(p for p in (REPO / "lit_tests/invalid").glob("*.loop") if p.name != "guarded_in_range.loop")


def run_main(capsys, *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_loop_stats_and_text_output(capsys) -> None:
    rc, out, err = run_main(capsys, MATMUL, "-p", "loop-stats", "-t", "loop")
    assert rc == 0
    assert out == "".join(line for line in Path(MATMUL).read_text().splitlines(keepends=True)
                          if not line.startswith("#"))
    assert err.splitlines() == ["// loop-stats: matmul S0 1024 C[i, j] = 0.0",
                                "// loop-stats: matmul S1 32768 C[i, j] += A[i, k] * B[k, j]",
                                "// loop-stats: matmul total 33792"]


def test_mlir_output_names_the_source(capsys) -> None:
    rc, out, _ = run_main(capsys, MATMUL)
    assert rc == 0
    assert out.splitlines()[0] == (f'builtin.module attributes {{solar.program = {{source = "{MATMUL}", '
                                   'frontend = "loop-text", validation = none, value_dependent = [], '
                                   'notes = []}} {')


def test_mlir_input_round_trip(capsys, tmp_path: Path) -> None:
    _, custom, _ = run_main(capsys, MATMUL)
    (tmp_path / "m.mlir").write_text(custom)
    rc, again, _ = run_main(capsys, str(tmp_path / "m.mlir"))
    assert rc == 0 and again == custom
    rc, text, _ = run_main(capsys, str(tmp_path / "m.mlir"), "-t", "loop")
    assert rc == 0 and text.startswith("kernel matmul(A: f32[64, 32] input")


def _one_line_error(rc: int, out: str, err: str) -> str:
    assert rc == 1
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    assert lines[0].startswith("solar-opt: error: ")
    return lines[0]


@pytest.mark.parametrize("path", INVALID, ids=lambda p: p.name)
def test_bad_loop_inputs_give_one_line(capsys, path: Path) -> None:
    line = _one_line_error(*run_main(capsys, str(path)))
    assert line.startswith(f"solar-opt: error: {path}:")
    # the same message the lit test expects (it is written there with [[FILE]] for the path)
    expected = next(ln for ln in path.read_text().splitlines() if ln.startswith("# CHECK: "))
    assert line == expected.split("{{^}}", 1)[1].replace("[[FILE]]", str(path))


@pytest.mark.parametrize(("text", "message"), [
    # xDSL points just past the operation name
    ('loop.kernel "k" {\n  loop.tensor "C" : f32 array<i64: 4> "output"\n  loop.frob "x"\n}\n',
     "bad.mlir:3:13: Operation loop.frob is not registered"),

    ('loop.kernel "k" {\n  loop.tensor "C" : f32 array<i64: 4> "output"\n'
     '  loop.for "i" = affine_map<() -> (0)> to affine_map<() -> (4)> step 1 : i64 {\n'
     '    loop.stmt "C" affine_map<(d0) -> (d0)> "=" {\n      %0 = loop.const 1 : i64 : i64\n'
     '      loop.yield %0 : i64\n    }\n  }\n}\n',
     "bad.mlir:3:3: type mismatch: 'C' is f32 but the value is i64"),  # at the enclosing loop's line
    ('loop.kernel "k" {\n  loop.tensor "C" : f32 array<i64: 4> "output"\n'
     '  loop.for "i" = affine_map<(d0) -> (0)> to affine_map<(d0) -> (d0 * d0)> step 1 : i64 {\n  }\n}\n',
     "bad.mlir:3:56: not an affine map: Multiplication with non-constant (semi-affine) is not supported yet "
     "self: d0 other: d0"),
])
def test_bad_mlir_inputs_give_one_line(capsys, tmp_path: Path, text: str, message: str) -> None:
    f = tmp_path / "bad.mlir"
    f.write_text(text)
    line = _one_line_error(*run_main(capsys, str(f)))
    where = f"{f.parent}/" if message.startswith("bad.mlir") else ""  # the file's full path
    assert line == f"solar-opt: error: {where}{message}"


@pytest.mark.parametrize(("argv", "message"), [
    (["/nonexistent/x.loop"], "/nonexistent/x.loop: cannot read the input: No such file or directory"),
    ([MATMUL, "-p", "no-such-pass"],
     "bad pass pipeline 'no-such-pass': Unrecognized passes: ['no-such-pass']"),
    ([MATMUL, "-p", "loop-stats{x=1}"],
     'bad pass pipeline \'loop-stats{x=1}\': Provided arguments ["x"] not found in expected arguments []'),
    ([MATMUL, "--rooflin=all"], "unknown option '--rooflin' (did you mean '--roofline'?)"),
    ([MATMUL, "--zzz"], "unknown option '--zzz' (solar-opt --help lists the options)"),
    ([MATMUL, "--roofline=all", "--dpeth", "2"], "unknown option '--dpeth' (did you mean '--depth'?)"),
    ([MATMUL, "--roofline=all", "--mesured=3us"], "unknown option '--mesured' (did you mean '--measured'?)"),
    ([MATMUL, "--roofline=all", "--explian"], "unknown option '--explian' (did you mean '--explain'?)"),
    ([MATMUL, "--roofline=al"], "argument --roofline: invalid choice 'al' (did you mean 'all'? choose from "
                                "unfused, fused, cache-aware, all)"),
    ([MATMUL, "--roofline=all", "--depth", "two"],
     "argument --depth: --depth expects a whole number, got 'two'"),
    ([MATMUL, "--roofline=all", "--top=-1"], "argument --top: --top must be at least 0, got -1"),
    ([MATMUL, "--roofline=all", "--format=json", "--depth=2"],
     "--depth: options of the text report; the output here is 'json'"),
    ([MATMUL, "--lift-einsum", "--measured=3us"],
     "--measured compares measured times with the bounds: add --roofline"),
    ([MATMUL, "--roofline=all", "--measured=3 parsecs"],
     "--measured '3 parsecs': expected a time such as 310us, or a JSON file of times"),
    ([MATMUL, "--roofline=all", "--measured=/nonexistent/t.json"],
     "/nonexistent/t.json: cannot read the measured times: No such file or directory"),
])
def test_bad_invocations_give_one_line(capsys, argv: list[str], message: str) -> None:
    assert _one_line_error(*run_main(capsys, *argv)) == f"solar-opt: error: {message}"


def test_exit_status_and_stderr_of_the_real_process(tmp_path: Path) -> None:
    bad = REPO / "lit_tests/invalid/type_mismatch.loop"
    r = subprocess.run([SOLAR_OPT, str(bad)], capture_output=True, text=True)
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr == f"solar-opt: error: {bad}:8:9: type mismatch: 'C' is i32 but the value is f32\n"
    stdin = subprocess.run([SOLAR_OPT, "-f", "loop"], input="kernel\n", capture_output=True, text=True)
    assert (stdin.returncode, stdin.stderr) == (1, "solar-opt: error: stdin:1:7: unexpected end of line, "
                                                   "expected a name\n")


def test_a_flag_typo_is_one_line_and_exit_1_in_the_real_process() -> None:
    """The README's promise: a typo is one line with a suggestion and exit status 1 (not argparse's
    usage text and exit 2)."""
    r = subprocess.run([SOLAR_OPT, MATMUL, "--roofline=all", "--hw", "H100_SXM", "--plto", "x.svg"],
                       capture_output=True, text=True)
    assert (r.returncode, r.stdout) == (1, "")
    assert r.stderr == "solar-opt: error: unknown option '--plto' (did you mean '--plot'?)\n"


def test_explain_alone_prints_the_glossary(capsys) -> None:
    from solar_compiler.render.glossary import GLOSSARY

    rc, out, err = run_main(capsys, "--explain")
    assert (rc, err) == (0, "")
    assert out.startswith("terms (solar-opt --explain; docs/report.md):\n"
                          "  source: the program the report is about")
    assert all(f"  {term}: " in out for term, _ in GLOSSARY)


def test_view_flags_reach_the_text_report(capsys) -> None:
    rc, out, _ = run_main(capsys, MATMUL, "--roofline=all", "--hw", "H100_SXM", "--width", "60", "--ops",
                          "--explain", "--top", "1")
    assert rc == 0
    assert max(len(line) for line in out.splitlines()) <= 60
    assert "statements (einsum nodes), each priced alone" in out.replace("\n", " ")
    assert "  % of SOL: 100 x bound / measured" in out  # the glossary, after the report
    rc, out, _ = run_main(capsys, MATMUL, "-t", "report{width=50}", "-p", "lift-einsum,roofline")
    assert rc == 0 and max(len(line) for line in out.splitlines()) <= 50


def test_debug_shows_the_traceback() -> None:
    bad = REPO / "lit_tests/invalid/type_mismatch.loop"
    r = subprocess.run([SOLAR_OPT, str(bad), "--debug"], capture_output=True, text=True)
    assert r.returncode == 1
    assert r.stderr.startswith("Traceback (most recent call last):")
    assert r.stderr.rstrip().splitlines()[-1] == (
        f"solar_compiler.errors.LoopIRError: {bad}:8:9: type mismatch: 'C' is i32 but the value is f32")


def test_start_up_imports_no_heavy_frameworks() -> None:
    """A loop-IR run must not import torch, jax or litellm (each costs seconds to import)."""
    code = ("import sys; from solar_compiler.driver import main; "
            f"rc = main([{MATMUL!r}, '-p', 'loop-stats', '-t', 'loop']); "
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'torch', 'jax', 'litellm'}), rc)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert r.stdout.splitlines()[-1] == "[] 0"
    assert r.stderr.splitlines()[-1] == "// loop-stats: matmul total 33792"


BAD_LOOP = "kernel x(A: f32[4] output):\n    for i in range(5):\n        A[i] = 1.0\n"


def test_failed_run_writes_nothing(capsys, tmp_path: Path) -> None:
    bad = tmp_path / "bad.loop"
    bad.write_text(BAD_LOOP)
    kept = tmp_path / "kept.txt"
    kept.write_text("the user's file\n")
    rc, _, err = run_main(capsys, str(bad), "-t", "loop", "-o", str(kept))
    assert rc == 1 and "leaves the range [0, 4)" in err
    assert kept.read_text() == "the user's file\n"
    fresh = tmp_path / "fresh.txt"
    rc, _, _ = run_main(capsys, str(bad), "-t", "loop", "-o", str(fresh))
    assert rc == 1 and not fresh.exists()


def test_output_is_written_on_success_and_never_over_the_input(capsys, tmp_path: Path) -> None:
    src = tmp_path / "m.loop"
    src.write_text(Path(MATMUL).read_text())
    out = tmp_path / "out.loop"
    rc, _, _ = run_main(capsys, str(src), "-t", "loop", "-o", str(out))
    assert rc == 0 and out.read_text().startswith("kernel matmul(")
    before = src.read_text()
    rc, _, err = run_main(capsys, str(src), "-t", "loop", "-o", str(src))
    assert rc == 1 and "refusing to overwrite the input file" in err
    assert src.read_text() == before


def test_plain_xdsl_opt_loads_the_universe() -> None:
    """The `xdsl.universe` entry point: xdsl-opt knows the loop and einsum dialects and the passes."""
    xdsl_opt = str(Path(SOLAR_OPT).with_name("xdsl-opt"))
    mlir = subprocess.run([SOLAR_OPT, MATMUL], capture_output=True, text=True, check=True).stdout
    r = subprocess.run([xdsl_opt, "-p", "lift-einsum,annotate-costs"], input=mlir, capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stderr
    assert "einsum.graph @matmul attributes {cost.compulsory_bytes = 14336 : i64}" in r.stdout


def test_an_internal_error_is_reported_as_a_bug(capsys, monkeypatch) -> None:
    """Anything that is not a user error (SolarError, a parse or verification error) says it is a bug
    and exits 70; --debug shows the traceback instead."""
    from solar_compiler import driver

    def broken(self):  # noqa: ANN001, ANN202
        raise KeyError("no such key")

    monkeypatch.setattr(driver.SolarOptMain, "run", broken)
    rc = driver.main([MATMUL])
    err = capsys.readouterr().err
    assert rc == 70
    assert err == ("solar-opt: internal error (a bug in solar-opt, not in the input): "
                   "KeyError: 'no such key' (rerun with --debug for the traceback)\n")
    with pytest.raises(KeyError):
        driver.main([MATMUL, "--debug"])


def test_the_command_skips_teardown_but_loses_no_output(tmp_path: Path, capsys) -> None:
    """`solar-opt` ends with `os._exit` after flushing: its output through a pipe and into a file
    is exactly what `main` prints in-process, and the exit status is main's."""
    args = [MATMUL, "--roofline=all", "--hw", "H100_SXM", "--format=json"]
    r = subprocess.run([SOLAR_OPT, *args], capture_output=True, text=True)
    rc, out, _ = run_main(capsys, *args)
    assert (r.returncode, rc) == (0, 0)
    assert r.stdout == out and r.stdout.rstrip().endswith("}")
    target = tmp_path / "r.json"
    assert subprocess.run([SOLAR_OPT, *args, "-o", str(target)]).returncode == 0
    assert target.read_text() == out


def test_help_lists_the_options(capsys) -> None:
    """`--help` formats every option's help (argparse expands `%`: a literal one is `%%`)."""
    with pytest.raises(SystemExit) as e:
        main(["--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert "--measured TIME|FILE.json" in out and "% of SOL and headroom per fidelity" in out


def test_user_code_runs_under_the_default_collector(capsys) -> None:
    """solar-opt relaxes the cyclic GC for its own analyses, but a model file runs under CPython's
    defaults (object lifetimes in user code may rely on prompt collection)."""
    import gc

    from solar_compiler.gc_policy import GC_GEN0_THRESHOLD, user_code_gc

    assert run_main(capsys, MATMUL, "-p", "loop-stats")[0] == 0
    relaxed = gc.get_threshold()
    assert relaxed[0] >= GC_GEN0_THRESHOLD
    with user_code_gc():
        assert gc.get_threshold() == (700, 10, 10)
    assert gc.get_threshold() == relaxed


def test_measured_below_a_bound_exits_4(capsys) -> None:
    """Issue 21 item 8: a measured time below a bound exits 4 (1, 2, 3, 70 are taken), report still
    printed. matmul_f32_4096 on H100_SXM: 2 x 4096^3 FLOPs at TF32 494.7 TFLOP/s = 277.8 us."""
    mm = str(REPO / "examples/loop/bounds/matmul_f32_4096.loop")
    rc, out, err = run_main(capsys, mm, "--roofline=all", "--hw", "H100_SXM", "--measured=100us")
    assert rc == 4
    assert "fused        277.8 us  277.8% BELOW" in out
    assert err == ("solar-opt: SOL violation: the measured time is below the bound (H100_SXM unfused, "
                   "H100_SXM fused, H100_SXM cache-aware): a bug in the bound, or a measurement of "
                   "something else\n")
    rc, out, err = run_main(capsys, mm, "--roofline=all", "--hw", "H100_SXM", "--measured=278us",
                            "--format=json")
    assert (rc, err) == (0, "")
    rc, _, err = run_main(capsys, mm, "--roofline=all", "--hw", "H100_SXM", "--measured=277us",
                          "--format=json")
    assert rc == 4 and "(H100_SXM unfused, H100_SXM fused, H100_SXM cache-aware)" in err
