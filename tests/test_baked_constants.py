"""Issue 21's false "validated": a forward that computes in Python from tensor values (`.item()` in a
loop) and returns the result as a new tensor would be captured with that result baked in as a
constant of the traced sample. The capture stops after `MAX_VALUE_READS` reads with one line naming
the source line (counted, not timed), and a value-dependent graph whose output no input reaches is
checked against the model on a fresh sample before it is compared on the traced sample only."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from torch.fx.experimental.symbolic_shapes import ShapeEnv  # noqa: E402

from solar_compiler.frontends import CaptureFailed, FrontendOptions  # noqa: E402
from solar_compiler.frontends.captured_program import (  # noqa: E402
    AtenNode,
    CapturedProgram,
    CaptureError,
    TensorMeta,
    TensorRef,
)
from solar_compiler.frontends.torch import frontend as fe  # noqa: E402
from solar_compiler.frontends.torch.capture import capture, value_reads  # noqa: E402
from solar_compiler.frontends.torch.capture.recorder import MAX_VALUE_READS, DispatchRecorder  # noqa: E402
from solar_compiler.frontends.torch.validation import baked_outputs  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DOT = str(ROOT / "examples/torch/item_loop_dot.py")  # the 4096-element dot product through .item()


def _count(monkeypatch, cls, name: str) -> list[int]:
    calls = [0]
    orig = getattr(cls, name)

    def counted(self, *a, **k):
        calls[0] += 1
        return orig(self, *a, **k)

    monkeypatch.setattr(cls, name, counted)
    return calls


def test_item_loop_dot_product_stops_early_with_the_line(monkeypatch):
    reads = _count(monkeypatch, DispatchRecorder, "_value_read")
    symbols = _count(monkeypatch, ShapeEnv, "create_unbacked_symfloat")
    with pytest.raises(CaptureError) as e:
        capture(DOT)
    msg = str(e.value)
    assert "\n" not in msg
    assert msg.startswith(f"{DOT}:17: forward reads tensor values into Python more than 64")
    assert "_local_scalar_dense" in msg
    # 8,192 reads in the source; export stops at its 65th symbol, the recorder at its 65th read
    assert reads[0] == MAX_VALUE_READS + 1
    assert symbols[0] <= MAX_VALUE_READS


def test_item_loop_dot_product_is_never_validated():
    with pytest.raises(CaptureFailed, match="more than 64 times"):
        fe.translate_job(DOT, FrontendOptions())


SHORT_DOT = textwrap.dedent("""\
    import torch
    import torch.nn as nn
    N = 8
    class Model(nn.Module):
        def forward(self, a, b):
            acc = 0.0
            for i in range(N):
                acc += a[i].item() * b[i].item()
            return torch.tensor([acc])
    def get_inputs():
        return [torch.randn(N), torch.randn(N)]
    def get_init_inputs():
        return []
""")


def test_a_few_reads_baked_in_fail_on_a_fresh_sample(tmp_path):
    """Below the read limit the capture succeeds, value-dependent, with the result a constant: the
    translation agrees on the traced sample by construction and must fail on a fresh one."""
    p = tmp_path / "short_dot.py"
    p.write_text(SHORT_DOT)
    prog = capture(str(p))
    assert len(prog.value_dependent) == 1 and ":8:" in prog.value_dependent[0]  # noted once, not 16 times
    assert baked_outputs(prog) == prog.outputs
    with pytest.raises(CaptureFailed) as e:
        fe.translate_job(str(p), FrontendOptions())
    assert "validation failed on fresh sample (seed" in str(e.value)
    assert "is a constant of the traced sample" in str(e.value) and "short_dot.py:8" in str(e.value)


def test_baked_outputs_follow_the_graph():
    x, c, y, z = (TensorMeta(n, (4,), "f32") for n in ("x", "c", "y", "z"))
    prog = CapturedProgram(source="m.py", mode="eval", method="dispatch", inputs=[x], weights=[c],
                           outputs=["y", "z"])
    prog.nodes = [AtenNode("aten.mul.Tensor", (TensorRef("x"), TensorRef("c")), {}, (y,)),
                  AtenNode("aten.neg.default", (TensorRef("c"),), {}, (z,))]
    assert baked_outputs(prog) == ["z"]


def test_value_dependent_examples_still_validate_on_fresh_samples():
    """No output of the branch is baked (each reads x): not rejected, and compared on the fresh
    samples, which take the traced branch too."""
    branch = fe.translate_job(str(ROOT / "examples/torch/data_dependent_branch.py"), FrontendOptions())
    assert branch.validation["validated"] is True and branch.validation["samples"] == 3


ROW_LOOP = textwrap.dedent("""\
    import torch
    import torch.nn as nn
    B = 48
    class Model(nn.Module):
        def forward(self, x, lens, w):
            out = torch.zeros(B, x.shape[1])
            for b in range(B):
                start, end = int(lens[b].item()), int(lens[b + 1].item())
                rows = torch.softmax(x[start:end] @ w, dim=-1)
                out[b] = rows.sum(0) * 2.0
            return out
    def get_inputs():
        return [torch.randn(4 * B, 16), torch.arange(B + 1) * 4, torch.randn(16, 16)]
    def get_init_inputs():
        return []
""")


def test_reads_that_choose_tensor_work_are_captured(tmp_path, monkeypatch):
    """FlashInfer-style: two reads per request choose a slice, tensor ops compute on it. 96 reads with
    a few ops each are captured (they stopped at 64 before); the loop's length is still bounded."""
    p = tmp_path / "row_loop.py"
    p.write_text(ROW_LOOP)
    prog = capture(str(p))
    assert prog.method == "dispatch" and len(prog.value_dependent) == 1 and ":8:" in prog.value_dependent[0]
    monkeypatch.setattr(value_reads, "MAX_LOOP_READS", 80)
    with pytest.raises(CaptureError, match=r"row_loop.py:8: forward reads tensor values into Python more "
                                           r"than 80 times \(aten._local_scalar_dense"):
        capture(str(p))


def test_a_read_per_element_with_one_op_each_still_stops_at_once(tmp_path, monkeypatch):
    """`(a[i] * b[i]).item()`: one multiply per read is no tensor work worth the reads."""
    p = tmp_path / "mul_loop.py"
    p.write_text(SHORT_DOT.replace("N = 8", "N = 4096")
                 .replace("a[i].item() * b[i].item()", "(a[i] * b[i]).item()"))
    reads = _count(monkeypatch, DispatchRecorder, "_value_read")
    with pytest.raises(CaptureError, match=r"mul_loop.py:8: forward reads tensor values into Python more "
                                           r"than 64 times, with 6[0-9] tensor ops over the last 64 reads"):
        capture(str(p))
    assert reads[0] == MAX_VALUE_READS + 1
