"""Issue 21 (pricing of low-precision operands and the hardware rates, and the frontend crash on
torch.any): each test uses the issue's figure and failed before its fix."""

from __future__ import annotations

import json

import numpy as np
import pytest
from translated import cached_translations, roofline_json

from solar_compiler.driver import main

ANY_ALL = """
import torch
class Model(torch.nn.Module):
    def forward(self, x, q):
        return torch.any(x > 0.5, dim=1), torch.all(x > -0.5, dim=1), torch.any(x), q.amax(1)
def get_inputs():
    return [torch.rand(64, 128), torch.randint(-100, 100, (64, 128), dtype=torch.int8)]
def get_init_inputs():
    return []
"""

BOOL_MM = """
import torch
class Model(torch.nn.Module):
    def forward(self, a, b):
        return a.float() @ b.float()
def get_inputs():
    return [torch.rand(2048, 2048) > 0.5, torch.rand(2048, 2048) > 0.5]
def get_init_inputs():
    return []
"""

PROGRAMS = {"any_all": ANY_ALL, "bool_mm": BOOL_MM}


@pytest.fixture(scope="module")
def torch_files(tmp_path_factory):
    """The programs here, translated (and validated) into a private translation cache."""
    pytest.importorskip("torch")
    tmp = tmp_path_factory.mktemp("pricing")
    paths = {}
    for name, text in PROGRAMS.items():
        (tmp / f"{name}.py").write_text(text)
        paths[name] = str(tmp / f"{name}.py")
    with cached_translations(tmp / "xdg", paths):
        yield paths


# ---- torch.any / torch.all: an i8 accumulator took the i64 extreme as its init (OverflowError) ----
def test_any_all_and_int8_amax_translate_validate_and_count(capsys, torch_files):
    r = roofline_json(capsys, torch_files["any_all"])
    assert r["validation"]["validated"] and r["validation"]["max_rel_err"] == 0.0
    t = r["totals"]
    # x f32 64x128 (32,768 B) and q i8 (8,192 B) read, outputs bool[64] x 2, bool[] and i8[64] written
    assert t["bytes_fused"] == 32_768 + 8_192 + 64 + 64 + 1 + 64 == 41_153
    # 8,192-element steps: 2 compares, 2 max= of any, 1 not of all (= not any(not)), compare + max= of
    # the full any, amax; and the final not of all over 64 rows
    assert t["flops"] == 8 * 8_192 + 64 == 65_600


def test_any_all_agree_with_torch_including_all_false_and_all_true_rows(torch_files):
    """Executed on inputs where rows are all below, all above and mixed: torch's values exactly (the
    init is 0 for any and 1 for all, not the i8 extreme, which would make any() True everywhere)."""
    import torch

    from solar_compiler.executor import execute
    from solar_compiler.frontends.model_file import load_model_file
    from solar_compiler.frontends.torch.capture import capture
    from solar_compiler.frontends.torch.translate import translate_program

    tt = translate_program(capture(load_model_file(torch_files["any_all"]), mode="eval"))
    rng = np.random.default_rng(1)
    x = rng.random((64, 128), dtype=np.float32)
    x[:8] = 0.25   # no element > 0.5; all > -0.5
    x[8:16] = -1.0  # all false for both
    x[16:24] = 0.0  # any(x) sees zeros here only
    q = rng.integers(-128, 0, (64, 128), dtype=np.int8)  # amax is negative: an init of 0 would show
    got = execute(tt.validation_kernel(), {tt.inputs["x"]: x, tt.inputs["q"]: q})
    want = _reference(torch.from_numpy(x), torch.from_numpy(q))
    for pos, w in enumerate(want):
        np.testing.assert_array_equal(np.asarray(got[tt.outputs[pos]]), w.numpy())


def _reference(x, q):  # the forward of ANY_ALL
    import torch

    return torch.any(x > 0.5, dim=1), torch.all(x > -0.5, dim=1), torch.any(x), q.amax(1)


def report(capsys, path: str, hw: str, *extra: str) -> dict:
    """The JSON report of `solar-opt PATH --translate --roofline=all --hw HW EXTRA...`."""
    rc = main([path, "--translate", "--roofline=all", "--hw", hw, "--format=json", *extra])
    out = capsys.readouterr()
    assert rc == 0, out.err
    return json.loads(out.out)


# ---- item 7: A100 INT4 and binary tensor rates; a bool matmul through .float() ----------------------------
def test_bool_matmul_through_float_runs_on_a100_binary_tensor_cores(capsys, torch_files):
    """Was 27.5 us (2 x 2048^3 at INT8 624 TOPS); the issue's lower bound is 12.3 us, the DRAM term:
    2 bool inputs (4 MiB each) read, the f32 result (16 MiB) written, at 2.039 TB/s. The products of
    {0, 1} values are exact on the binary unit (AND + popcount, 4,992 TOPS): 3.44 us of compute."""
    r = report(capsys, torch_files["bool_mm"], "A100_SXM")
    assert r["validation"]["validated"]
    t = r["totals"]
    assert t["flops"] == t["flops_matrix"] == 2 * 2048**3
    assert t["bytes_fused"] == 2 * 2048**2 + 4 * 2048**2 == 25_165_824
    (op,) = [o for o in r["ops"] if o["flops"]]
    assert op["matrix_dtype"] == "bool"
    fused = r["bounds"]["A100_SXM"]["fused_s"]
    assert fused == pytest.approx(25_165_824 / 2.039e12, rel=1e-12)
    assert round(fused * 1e6, 1) == 12.3 and fused * 1e6 < 27.5
    assert r["bounds"]["A100_SXM"]["fused_terms_s"]["matrix"] == pytest.approx(2 * 2048**3 / 4992e12,
                                                                               rel=1e-12)
    assert r["hw"]["A100_SXM"]["matrix"]["bool"]["figure"] == "matrix.binary"
