"""SOL-ExecBench problem folders (tests/data/solexec/*) through `solar-opt`: every workload translated,
validated against its reference and counted exactly (FLOPs and bytes derived by hand below); the
format's checks give one-line errors."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from solar_compiler.driver import main
from solar_compiler.errors import SolarError
from solar_compiler.frontends.solexec.problem import (
    eval_axis_expr,
    expand_argv,
    load_problem,
    precision_policy,
)
from solar_compiler.frontends.solexec.runtime import (
    E2M1_VALUES,
    cuda_on_cpu,
    decode_fp4,
    encode_e2m1,
    pack_fp4,
)

DATA = Path(__file__).resolve().parent / "data" / "solexec"


@pytest.fixture(scope="module")
def reports(tmp_path_factory) -> dict[str, list[tuple[str, dict]]]:
    """problem -> [(workload uuid, JSON report)] of `solar-opt DIR --workload all --roofline unfused`."""
    out: dict[str, list[tuple[str, dict]]] = {}
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("xdg")))
        for name in ("gemm_bf16", "fp8_scaled_gemm", "linear_backward", "custom_probs", "rmsnorm_cuda",
                     "shape_branch", "paged_decode"):
            o = tmp_path_factory.mktemp(name) / "stdout"
            import contextlib

            with open(o, "w") as f, contextlib.redirect_stdout(f):
                rc = main([str(DATA / name), "--workload", "all", "--roofline", "unfused", "--hw", "B200",
                           "--format", "json", "--quiet"])
            assert rc == 0, name
            text = o.read_text()
            parts = [p for p in text.split("# workload ") if p.strip()]
            out[name] = [(p.split("\n", 1)[0], json.loads(p.split("\n", 1)[1])) for p in parts] \
                if text.startswith("# workload") else [("", json.loads(text))]
    return out


def _totals(report: dict) -> tuple[int, int, int]:
    assert report["validation"]["validated"], report["validation"]
    t = report["totals"]
    return t["flops"], t["bytes_unfused"], t["bytes_fused"]


def test_gemm_var_and_expr_axes_two_workloads(reports) -> None:
    # C[M, N] = A[M, K] @ B[N, K].T in bf16, N = 2 * K: 2*M*N*K FLOPs; 2 bytes per element of A, B, C
    (u0, r0), (u1, r1) = reports["gemm_bf16"]
    assert (u0, u1) == ("gemm-m16-k32", "gemm-m8-k64")
    b0, b1 = 2 * (16 * 32 + 64 * 32 + 16 * 64), 2 * (8 * 64 + 128 * 64 + 8 * 128)
    assert _totals(r0) == (2 * 16 * 64 * 32, b0, b0)
    assert _totals(r1) == (2 * 8 * 128 * 64, b1, b1)
    assert r0["validation"]["method"] == "full"


def test_fp8_inputs_count_one_byte(reports) -> None:
    # c[16, 48] = (a[16, 32] e4m3 @ b[48, 32].T e5m2) * scale -> bf16: the matmul and one multiply per
    # output; compulsory bytes: 1 per fp8 element, 2 per bf16 output
    [(_, r)] = reports["fp8_scaled_gemm"]
    flops, _, fused = _totals(r)
    # classical: the scale as written; the default model folds the scalar into the contraction
    assert r["classical"]["totals"]["flops"] == 2 * 16 * 48 * 32 + 16 * 48
    assert flops == 2 * 16 * 48 * 32
    assert fused == 16 * 32 + 48 * 32 + 2 * 16 * 48


def test_backward_problem(reports) -> None:
    # grad_x[16, 64] = grad_y[16, 32] @ weight[32, 64]; grad_weight[32, 64] = grad_y.T @ x[16, 64]
    [(_, r)] = reports["linear_backward"]
    m, k, n = 16, 64, 32
    # unfused: each matmul reads grad_y once; fused: every tensor once
    assert _totals(r) == (2 * (2 * m * n * k), 4 * (2 * m * n + m * k + n * k + m * k + n * k),
                          4 * (m * n + m * k + n * k + m * k + n * k))


def test_custom_inputs_problem(reports) -> None:
    # out[24, 16] = probs[24, 8] @ values[8, 16], probs from the definition's entry point
    [(_, r)] = reports["custom_probs"]
    assert _totals(r) == (2 * 24 * 8 * 16, 4 * (24 * 8 + 8 * 16 + 24 * 16), 4 * (24 * 8 + 8 * 16 + 24 * 16))


def test_reference_written_for_cuda(reports) -> None:
    # y = x * rsqrt(mean(x^2) + eps) * w, T=32, H=64: pow, mul, mul per element (3*T*H), the mean's
    # T*H adds and T divides, + eps and rsqrt per row (2*T); compulsory bytes: x, w, y in f32
    [(_, r)] = reports["rmsnorm_cuda"]
    t, h = 32, 64
    flops, _, fused = _totals(r)
    assert flops == 3 * t * h + (t * h + t) + 2 * t
    assert fused == 4 * (t * h + h + t * h)


def test_cuda_on_cpu_is_undone() -> None:
    before = torch.cuda.is_available()
    with cuda_on_cpu():
        assert torch.cuda.is_available() and torch.cuda.get_device_capability() == (10, 0)
        x = torch.ones(3, device="cuda").cuda().to("cuda:0")
        assert x.device.type == "cpu"
    assert torch.cuda.is_available() == before


def test_fp4_round_trip_through_bytes() -> None:
    codes = torch.arange(16, dtype=torch.uint8).reshape(2, 8)
    packed = pack_fp4(codes)
    assert packed.dtype == torch.float4_e2m1fn_x2 and tuple(packed.shape) == (2, 4)
    assert packed.view(torch.uint8)[0, 0].item() == 0 | (1 << 4)  # element 0 in the low nibble
    assert decode_fp4(packed).tolist() == [list(E2M1_VALUES[:8]), list(E2M1_VALUES[8:])]
    x = torch.tensor([0.3, -0.8, 2.4, 7.0, -5.1, 1.2])
    assert decode_fp4(pack_fp4(encode_e2m1(x))).tolist() == [0.5, -1.0, 2.0, 6.0, -6.0, 1.0]


def test_axis_expressions_are_parsed_not_evaluated() -> None:
    assert eval_axis_expr("(a + 2) * b // 3 - a % 2 + 2 ** 3 + b / 2", {"a": 4, "b": 6}, "w") == 12 + 8 + 3
    for expr, what in [("__import__('os')", "not integer arithmetic"), ("a.real", "not integer arithmetic"),
                       ("a / 4", "not an integer"), ("c + 1", "no axis defined"), ("a //", "cannot parse"),
                       ("a % 0", "divides by zero")]:
        with pytest.raises(SolarError, match=what):
            eval_axis_expr(expr, {"a": 6}, "w")


def _broken(tmp_path: Path, edit) -> Path:
    d = tmp_path / "p"
    shutil.copytree(DATA / "gemm_bf16", d)
    edit(d)
    return d


def _set_def(d: Path, fn) -> None:
    data = json.loads((d / "definition.json").read_text())
    fn(data)
    (d / "definition.json").write_text(json.dumps(data))


@pytest.mark.parametrize(("edit", "message"), [
    (lambda d: (d / "definition.json").write_text("{\n  \"axes\": [\n"), r"definition.json:3: invalid JSON"),
    (lambda d: _set_def(d, lambda x: x["axes"].update(K={"type": "sym"})), r"axis 'K' has type 'sym'"),
    (lambda d: _set_def(d, lambda x: x["inputs"]["A"].update(dtype="float128")), r"dtype 'float128'"),
    (lambda d: _set_def(d, lambda x: x["inputs"]["A"].update(shape=["M", "Q"])), r"shape entry 'Q'"),
    (lambda d: (d / "workload.jsonl").write_text('{"axes": {"M": 4}, "inputs": {}}\n'),
     r"workload.jsonl:1: var axis 'K' needs"),
    (lambda d: (d / "workload.jsonl").write_text(
        '{"axes": {"M": 4, "K": 2}, "inputs": {"A": {"type": "custom"}}}\n'),
     r"workload.jsonl:1: input 'A' is custom but the definition has no custom_inputs_entrypoint"),
    (lambda d: (d / "reference.py").write_text("import torch\n\ndef forward(A, B):\n    return A\n"),
     r"reference.py:1: the reference defines no function 'run'"),
    (lambda d: (d / "workload.jsonl").write_text(
        '{"axes": {"M": 4, "K": 2}, "inputs": {}, "tolerance": {"max_rtol": "1%"}}\n'),
     r"workload.jsonl:1: tolerance 'max_rtol' must be a non-negative number"),
])
def test_malformed_problems_are_one_line_errors(tmp_path: Path, capsys, edit, message: str) -> None:
    d = _broken(tmp_path, edit)
    with pytest.raises(SolarError, match=message):
        load_problem(d)
    assert main([str(d), "--quiet"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "error:" in err


def test_workload_selection(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    runs = expand_argv([str(DATA / "gemm_bf16"), "--workload=gemm-m8-k64"])
    assert [label for label, _, _ in runs] == ["gemm-m8-k64"]
    assert "--translate" in runs[0][1] and runs[0][1][0].endswith("gemm_bf16.w1.py")
    assert runs[0][2] == runs[0][1][0]
    with pytest.raises(SolarError, match="there are 2 workloads"):
        expand_argv([str(DATA / "gemm_bf16"), "--workload", "5"])
    with pytest.raises(SolarError, match="no argument is one"):
        expand_argv(["model.py", "--workload", "all"])


def test_workloads_translate_together_and_carry_validation(reports) -> None:
    """`--workload all` translates the workloads in one child: the cheapest is validated, and each
    other one that is the same program at other sizes carries its record over; a program that
    changes with the shapes (shape_branch: exp(x) + 1 for M <= 4, x * 2 above) is validated on its own."""
    methods = [r["validation"]["method"] for _, r in reports["gemm_bf16"]]
    assert sorted(methods) == ["full", "other-workload"]
    carried = next(r["validation"] for _, r in reports["gemm_bf16"] if r["validation"]["method"] != "full")
    assert carried["validated"] and carried["full_size_same_program"] and carried["workload_method"] == "full"
    assert carried["sizes"] == "of workload gemm_bf16.w0 (full there)"  # w0: 16x32x64 is the cheaper
    got = {u: (r["validation"]["method"], r["totals"]["flops"]) for u, r in reports["shape_branch"]}
    # m2: exp and add per element (2 x 8 x 2 = 32 FLOPs); m8 / m16: one multiply per element
    assert got == {"m2": ("full", 32), "m8": ("full", 64), "m16": ("other-workload", 128)}


def test_ops_of_a_decorated_run_are_located_in_the_reference(reports) -> None:
    """`@torch.no_grad()` wraps `run` in a function of torch's own files: the stack-trace anchor is
    the wrapped function, so each op names its line of reference.py, not the generated file."""
    [(_, r)] = reports["linear_backward"]
    ref = str((DATA / "linear_backward" / "reference.py").resolve())
    locs = {o["label"].split("[")[0]: o["loc"] for o in r["ops"] if o["flops"]}
    assert sorted(set(locs.values())) == [f"{ref}:6", f"{ref}:7"]  # grad_x, then grad_weight


def test_ragged_decode_is_captured_and_validated_on_its_generators_samples(reports) -> None:
    """FlashInfer-style paged decode: the generator reads values (so the inputs are generated for
    real), `run` reads 3 values per request (72 at B = 24: captured), and B = 1 is validated on fresh
    samples of its own generator: `kv_indptr = [0, 6]` on each (drawn in its observed range, the
    layout was invalid and every fresh sample traced another program)."""
    got = {u: r["validation"] for u, r in reports["paged_decode"]}
    assert set(got) == {"b1", "b24"}
    assert got["b1"]["validated"] and got["b1"]["samples"] == 3, got["b1"]
    assert "captured again" in got["b1"]["reason"]
    assert got["b24"]["frontend"] == "torch-dispatch" and got["b24"]["value_dependent"]


def test_precision_policy_follows_the_tolerance() -> None:
    """An f32 contraction may run in a format of unit roundoff u when max_rtol >= 2u (bf16: u = 2^-8,
    TF32: u = 2^-11): the harness's default 1e-2 admits bf16."""
    policy, why = precision_policy({})
    assert policy == "bf16" and why.startswith("the default tolerance max_rtol 0.01 ")
    for rtol, policy in [(2.0 ** -7, "bf16"), (0.0078, "tf32"), (1e-3, "tf32"), (2.0 ** -10, "tf32"),
                         (9e-4, "fp32"), (0.0, "fp32")]:
        got, why = precision_policy({"tolerance": {"max_rtol": rtol}})
        assert got == policy, (rtol, got)
        assert why.startswith(f"the workload's tolerance max_rtol {rtol:g} ")


def _json_reports(capsys, *args: str) -> dict[str, dict]:
    assert main([str(DATA / "softmax_pv"), *args, "--roofline", "fused", "--hw", "B200", "--format", "json",
                 "--quiet"]) == 0
    text = capsys.readouterr().out
    if not text.startswith("# workload"):
        return {"": json.loads(text)}
    parts = [p.split("\n", 1) for p in text.split("# workload ") if p.strip()]
    return {label: json.loads(body) for label, body in parts}


def test_precision_from_the_workloads_tolerance(tmp_path: Path, monkeypatch, capsys) -> None:
    """softmax(s.float()) @ v.float(): an f32 P @ V. Under the default tolerance a kernel may run it in
    bf16 (it passes), so the bound prices it at BF16; a tighter tolerance gives TF32, then fp32; a
    --precision given wins (auto: TF32, and no reason)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    got = _json_reports(capsys, "--workload", "all")
    rate = {u: (r["precision"], r["hw"]["B200"]["matrix"]["f32"]["label"]) for u, r in got.items()}
    assert rate == {"default-tol": ("bf16", "BF16 tensor"), "tight-tol": ("tf32", "TF32 tensor"),
                    "exact-tol": ("fp32", "fp16x3 emulation (3 FP16 tensor products each)")}
    why = "the default tolerance max_rtol 0.01 >= 2 x bf16 unit roundoff 2^-8"
    assert got["default-tol"]["precision_reason"] == f"{why}: f32 contractions may run in bf16"
    terms = {u: r["bounds"]["B200"]["fused_terms_s"]["matrix"] for u, r in got.items()}
    assert terms["default-tol"] == pytest.approx(terms["tight-tol"] / 2)  # BF16 at twice the TF32 rate
    [auto] = _json_reports(capsys, "--precision", "auto").values()
    assert auto["precision"] == "auto" and auto["precision_reason"] is None
    assert auto["hw"]["B200"]["matrix"]["f32"]["label"] == "TF32 tensor"
    assert main([str(DATA / "softmax_pv"), "--roofline", "fused", "--hw", "B200", "--width", "200",
                 "--quiet"]) == 0
    text = capsys.readouterr().out
    assert f"precision:  policy bf16 ({why}" in text
    assert "policy:   bf16: f32 contractions at BF16 tensor rate" in text
