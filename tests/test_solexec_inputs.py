"""The inputs of a SOL-ExecBench workload: drawn as the harness draws them (its ranges and its rules on
names and descriptions, `frontends/solexec/inputs.py`), generated for real when the custom generator
reads values (a ragged page table), fresh samples for validation from the workload's own generator,
and errors located in reference.py."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode

from solar_compiler.frontends.captured_program import CaptureError
from solar_compiler.frontends.model_file import ModelFileError, load_model_file
from solar_compiler.frontends.solexec.problem import load_problem, write_model_files
from solar_compiler.frontends.solexec.runtime import random_tensor
from solar_compiler.frontends.torch.capture import capture
from solar_compiler.frontends.torch.capture import util as capture_util
from solar_compiler.frontends.torch.capture.inputs import fresh_tensors

DATA = Path(__file__).resolve().parent / "data" / "solexec"


def _spec(tmp_path: Path, problem: str | Path, index: int = 0):
    folder = problem if isinstance(problem, Path) else DATA / problem
    [(_, path)] = write_model_files(load_problem(folder), [index], tmp_path / "gen")
    return load_model_file(path)


def test_random_integers_in_the_harness_ranges() -> None:
    torch.manual_seed(0)
    i8 = random_tensor((4096,), "int8", "x")  # was drawn from [-1024, 1024): out of bounds for int8
    assert i8.dtype == torch.int8 and int(i8.min()) == -128 and int(i8.max()) == 127
    for dtype in ("int16", "int32", "int64"):
        t = random_tensor((4096,), dtype, "x")
        assert int(t.min()) == -1024 and int(t.max()) == 1023
    f8 = random_tensor((4096,), "float8_e4m3fn", "x").float()
    assert float(f8.abs().max()) == 2.0


def _named(spec, tensors: list) -> dict[str, torch.Tensor]:
    """The tensor inputs of harness_inputs by name (its definition order, the scalar `eps` left out)."""
    inputs = json.loads((DATA / "harness_inputs" / "definition.json").read_text())["inputs"]
    names = [n for n, t in inputs.items() if t["shape"] is not None]
    return dict(zip(names, tensors, strict=True))


def _check_harness_rules(x: dict[str, torch.Tensor]) -> None:
    assert torch.allclose(x["probs"].sum(-1), torch.ones(8)) and bool((x["probs"] > 0).all())  # sampling
    assert bool((x["input_layernorm_weight"] == 1).all()) and bool((x["post_layernorm_bias"] == 0).all())
    mask = x["attention_mask"]
    assert bool((mask.tril() == 0).all()) and bool((mask.triu(1) == torch.finfo(torch.float32).min)
                                                   .logical_or(torch.ones(8, 8).triu(1) == 0).all())
    assert set(x["pad_mask"].tolist()) == {0.0, 1.0}
    assert float(x["cos"].min()) >= math.cos(math.pi) and float(x["cos"].max()) <= 1.0
    assert float(x["x_rstd"].min()) >= 0.1
    assert -5.0 <= float(x["A_log"].min()) and float(x["A_log"].max()) < -1.0
    assert bool((x["A_cumsum"].diff(dim=-1) <= 0).all()) and float(x["A_cumsum"].min()) >= -1.6
    assert torch.allclose(x["routing_weights"].sum(-1), torch.ones(8))
    assert float(x["q_proj"].abs().max()) < 5.0 / 4  # N(0, 1) / sqrt(16)
    assert x["idx"].dtype == torch.int8 and x["x"].dtype == torch.float8_e4m3fn


def test_random_inputs_follow_the_harness_rules(tmp_path: Path) -> None:
    spec = _spec(tmp_path, "harness_inputs")
    torch.manual_seed(0)
    sample = spec.sample_inputs()
    assert isinstance(spec.module._P.values["eps"], float)  # shape null: a Python scalar, bound in
    _check_harness_rules(_named(spec, sample))


def test_fresh_samples_follow_the_harness_rules(tmp_path: Path) -> None:
    """Validation's fresh samples are the workload's generator again: the same rules, other values."""
    spec = _spec(tmp_path, "harness_inputs")
    torch.manual_seed(0)
    base = _named(spec, spec.sample_inputs())
    eps = spec.module._P.values["eps"]
    fresh = fresh_tensors(spec, 1)
    assert list(fresh) == ["tensors_0", *(f"tensors_{i}" for i in range(1, 13))]
    x = dict(zip(base, fresh.values(), strict=True))
    _check_harness_rules(x)
    assert not torch.equal(x["probs"], base["probs"]) and not torch.equal(x["idx"], base["idx"])
    assert spec.module._P.values["eps"] == eps  # the bound scalar stays the traced sample's


def test_custom_generator_that_reads_values_is_run_for_real(tmp_path: Path) -> None:
    """`int(kv_indptr[-1])` in the generator: fake tensors cannot run it, so the workload's inputs are
    generated for real and turned into fake tensors of the capture's mode."""
    spec = _spec(tmp_path, "paged_decode")
    _, sample = capture_util.build_model(spec, "eval", FakeTensorMode())
    assert all(isinstance(t, FakeTensor) for t in sample) and len(sample) == 6
    prog = capture(spec)
    assert prog.method == "dispatch" and [t.shape for t in prog.inputs][3] == (2,)


def test_real_inputs_are_refused_above_the_limit_before_they_are_made(tmp_path: Path, monkeypatch) -> None:
    spec = _spec(tmp_path, "paged_decode")
    calls = []
    generate = spec.module._P.module.generate_inputs
    monkeypatch.setattr(spec.module._P.module, "generate_inputs", lambda *a: calls.append(1) or generate(*a))
    monkeypatch.setattr(capture_util, "REAL_RUN_LIMIT_BYTES", 1000)  # the inputs take 4,196 bytes
    with pytest.raises(CaptureError, match=r"get_inputs\(\) needs real tensors .* capture a size-reduced"):
        capture_util.build_model(spec, "eval", FakeTensorMode())
    assert len(calls) == 1  # the fake attempt only


def test_fresh_samples_keep_what_the_generator_fixes(tmp_path: Path) -> None:
    """B = 1: the page table's offsets are [0, num_kv_indices] whatever the seed; drawing them in their
    observed range made an invalid layout, and the workload was never validated."""
    spec = _spec(tmp_path, "paged_decode")
    torch.manual_seed(0)
    base = spec.sample_inputs()
    for seed in (1, 2):
        fresh = list(fresh_tensors(spec, seed).values())
        assert fresh[3].tolist() == [0, 6]  # kv_indptr
        assert len(set(fresh[4].tolist())) == 6 and 0 <= int(fresh[4].min()) and int(fresh[4].max()) < 16
        assert not torch.equal(fresh[4], base[4]) and not torch.equal(fresh[0], base[0])


def test_an_input_generator_error_names_its_line_in_the_reference(tmp_path: Path) -> None:
    d = tmp_path / "p"
    shutil.copytree(DATA / "custom_probs", d)
    ref = d / "reference.py"
    ref.write_text(ref.read_text().replace("    return {", "    raise ValueError('no probs')\n    return {"))
    line = ref.read_text().splitlines().index("    raise ValueError('no probs')") + 1
    spec = _spec(tmp_path, d)
    with pytest.raises(ModelFileError) as e:
        spec.sample_inputs()
    assert str(e.value) == f"{ref.resolve()}:{line}: get_inputs() raised ValueError: no probs"


def _wide_problem(folder: Path, guard: str) -> Path:
    """A problem whose one big axis is const (a vocabulary): y = softmax(x) over N = 2^20 columns
    of M = 8 rows (M is below the sizes a reduction scales)."""
    folder.mkdir(parents=True)
    (folder / "definition.json").write_text(json.dumps({
        "name": "wide", "op_type": "softmax",
        "axes": {"M": {"type": "var"}, "N": {"type": "const", "value": 2 ** 20}},
        "inputs": {"x": {"shape": ["M", "N"], "dtype": "float32"}},
        "outputs": {"y": {"shape": ["M", "N"], "dtype": "float32"}}}))
    (folder / "reference.py").write_text(
        f"import torch\n\n\ndef run(x):\n{guard}    return torch.softmax(x, -1)\n")
    (folder / "workload.jsonl").write_text(json.dumps({"uuid": "w0", "axes": {"M": 8},
                                                       "inputs": {"x": {"type": "random"}}}) + "\n")
    return folder


def test_const_axes_are_scaled_for_validation_after_the_var_axes(tmp_path: Path, capsys) -> None:
    """A const axis is a size site too (`CONST_AXES`, `__solar_late_sizes__`), scaled when the var
    axes alone give no instance that fits the budget: a validation budget of 1 s makes the full-size
    softmax too costly (its 16 M input and output elements alone are estimated 1.7 s), and M = 8
    cannot shrink, so N is scaled; the bound stays the full size's (8 x 2^20 f32 read and written).
    A reference that hard-codes the const value does not build at another size: not validated, the
    reason says why."""
    from solar_compiler.driver import main

    args = ["--roofline=fused", "--hw", "B200", "--format=json", "--frontend-options", "time-budget=1",
            "--no-cache"]
    assert main([str(_wide_problem(tmp_path / "free", "")), *args]) == 0
    r = json.loads(capsys.readouterr().out)
    v = r["validation"]
    assert v["validated"] and v["method"] == "reduced"
    assert "CONST_AXES['N']=" in v["sizes"] and "(of 1048576)" in v["sizes"]
    assert r["totals"]["bytes_fused"] == 2 * 8 * 2**20 * 4
    assert main([str(_wide_problem(tmp_path / "fixed", "    assert x.shape[1] == 2 ** 20\n")), *args]) == 0
    v = json.loads(capsys.readouterr().out)["validation"]
    assert not v["validated"] and "does not build" in v["reason"]
