"""Linear upsampling in 1 and 3 dims (`F.interpolate(mode="linear" / "trilinear")`: align_corners
both ways, output sizes and scale factors, up and down, `upsample_trilinear3d.default` with a scale
factor that puts the last source positions past the input) and adaptive max pooling 3-d (values and
indices, non-divisible windows; indices of 1-d and 2-d too, on inputs with ties), in
`templates/pool.py`, checked against torch by validation on fresh samples; their operation counts
and bytes by hand; a broken weight fails validation."""

from __future__ import annotations

from dataclasses import replace

import pytest
from translated import roofline_json, translated_programs

pytest.importorskip("torch")

from solar_compiler.errors import SolarError  # noqa: E402
from solar_compiler.frontends.model_file import load_model_file  # noqa: E402
from solar_compiler.frontends.torch.capture import capture  # noqa: E402
from solar_compiler.frontends.torch.translate import translate_program  # noqa: E402
from solar_compiler.frontends.torch.validation import run_samples  # noqa: E402
from solar_compiler.loopir.ast import Assign, Const, For, If, Read  # noqa: E402
from solar_compiler.loopir.simplify import with_children  # noqa: E402

LINEAR = """\
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def forward(self, x, v):
        return (tuple(F.interpolate(x, mode="linear", align_corners=align, **kw)
                      for align in (False, True)
                      for kw in ({"scale_factor": 2}, {"size": 7}, {"size": 3}, {"scale_factor": 0.6},
                                 {"scale_factor": 1.7, "recompute_scale_factor": True}))
                + tuple(F.interpolate(v, mode="trilinear", align_corners=align, **kw)
                        for align in (False, True)
                        for kw in ({"scale_factor": (2, 1.5, 2)}, {"size": (4, 5, 3)}, {"scale_factor": 0.7}))
                # scales_d 1.2: source positions up to 4.5 / 1.2 - 0.5 = 3.25 of 3 (torch clamps them)
                + (torch.ops.aten.upsample_trilinear3d.default(v, [5, 6, 7], False, 1.2, 2.0, None),
                   torch.ops.aten.upsample_trilinear3d.default(v, [2, 9, 4], True)))


def get_inputs():
    return [torch.randn(2, 3, 5), torch.randn(1, 2, 3, 4, 5)]


def get_init_inputs():
    return []
"""

LINEAR_COUNT = """\
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def forward(self, x):
        return F.interpolate(x, scale_factor=2, mode="linear")


def get_inputs():
    return [torch.randn(2, 3, 5)]


def get_init_inputs():
    return []
"""

TRILINEAR_COUNT = LINEAR_COUNT.replace('mode="linear"', 'mode="trilinear"').replace(
    "torch.randn(2, 3, 5)", "torch.randn(1, 2, 2, 2, 3)")

ADAPTIVE_MAX = """\
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def forward(self, x, t3, t2, r):
        a, b = t3.float(), t2.float()  # small integers: ties in the windows on every sample
        v, i = F.adaptive_max_pool3d(x, (2, 3, 2), return_indices=True)
        vt, it = F.adaptive_max_pool3d(a, (2, 3, 2), return_indices=True)
        w, j = F.adaptive_max_pool2d(b, (3, 2), return_indices=True)
        u, k = F.adaptive_max_pool1d(r, 4, return_indices=True)
        return v, i, vt, it, F.adaptive_max_pool3d(x, (1, 4, 5)), F.adaptive_max_pool3d(x[0], 2), w, j, u, k


def get_inputs():
    return [torch.randn(1, 2, 3, 4, 5), torch.randint(0, 3, (2, 3, 4, 5)), torch.randint(0, 3, (2, 5, 7)),
            torch.randn(3, 9)]


def get_init_inputs():
    return []
"""

ADAPTIVE_MAX_COUNT = """\
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def forward(self, x):
        return F.adaptive_max_pool3d(x, (2, 3, 2), return_indices=True)


def get_inputs():
    return [torch.randn(1, 2, 3, 4, 5)]


def get_init_inputs():
    return []
"""


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    programs = {"linear": LINEAR, "linear_count": LINEAR_COUNT, "trilinear_count": TRILINEAR_COUNT,
                "adaptive_max": ADAPTIVE_MAX, "adaptive_max_count": ADAPTIVE_MAX_COUNT}
    with translated_programs(tmp_path_factory.mktemp("interp"), programs) as paths:
        yield paths


def test_linear_and_trilinear_upsampling_agree_with_torch_for_sizes_and_scale_factors(capsys, files):
    v = roofline_json(capsys, files["linear"])["validation"]
    assert v["validated"] and v["samples"] == 3 and v["max_rel_err"] < 1e-5, v
    # linear [2, 3, 5] -> 10, 7, 3, 3, 8 (twice: both alignments); trilinear [1, 2, 3, 4, 5] ->
    # 6 x 6 x 10, 4 x 5 x 3, 2 x 2 x 3 (twice), then 5 x 6 x 7 and 2 x 9 x 4: every output element
    assert v["elements_checked"] == 6 * 2 * 31 + 2 * (2 * (360 + 60 + 12) + 210 + 72)


def test_linear_counts_three_operations_per_output_and_its_weights_once_per_column(capsys, files):
    # [2, 3, 5] -> [2, 3, 10], align_corners=False: 60 outputs, (1 - l) * x[i0] + l * x[i1] with
    # 1 - l computed per column: 2 products and a sum, 3 x 60 = 180. Per output column (10): src =
    # max((o + 0.5) * 0.5 - 0.5, 0) (4), i1 = min(i0 + 1, 4) (2), l = src - i0 (1), 1 - l (1): 8 x 10
    # = 80; 260. Bytes: every input element is read (scale 2), 30 x 4, and the output 60 x 4: 360.
    r = roofline_json(capsys, files["linear_count"])
    assert r["validation"]["validated"] and r["validation"]["samples"] == 3
    assert (r["totals"]["flops"], r["totals"]["bytes_fused"]) == (260, 360)


def test_trilinear_counts_seven_blends_per_output_and_weights_once_per_axis_position(capsys, files):
    # [1, 2, 2, 2, 3] -> [1, 2, 4, 4, 6]: 192 outputs, 4 + 2 + 1 blends (2 products and a sum each):
    # 21 x 192 = 4032; the 4 + 4 + 6 positions along the three axes 8 each as in 1-d: 112; 4144.
    # Bytes: x 24 x 4 (every element read) + out 192 x 4 = 864.
    r = roofline_json(capsys, files["trilinear_count"])
    assert r["validation"]["validated"] and r["validation"]["samples"] == 3
    assert (r["totals"]["flops"], r["totals"]["bytes_fused"]) == (4144, 864)


def test_adaptive_max_pooling_values_and_indices_agree_with_torch_on_ties(capsys, files):
    v = roofline_json(capsys, files["adaptive_max"])["validation"]
    assert v["validated"] and v["samples"] == 3 and v["max_rel_err"] == 0, v
    # 3-d (values, indices) 24 + 24, twice; 40; 2 x 8; 2-d 12 + 12; 1-d 12 + 12
    assert v["elements_checked"] == 4 * 24 + 40 + 16 + 24 + 24


def test_adaptive_max_pool3d_counts_one_max_per_window_element_and_three_ops_for_its_index(capsys, files):
    # [1, 2, 3, 4, 5] -> (2, 3, 2): windows [0, 2) [1, 3) along 3; [0, 2) [1, 3) [2, 4) along 4;
    # [0, 3) [2, 5) along 5: 2 x 2 x 3 = 12 elements each, 12 windows per channel, 2 channels: 288
    # max; the index: per element a compare with the max, a select of its flat index and a min: 864;
    # 1152. Bytes: x 120 x 4 (every element in some window), values 24 x 4, indices 24 x 8: 768.
    r = roofline_json(capsys, files["adaptive_max_count"])
    assert r["validation"]["validated"] and r["validation"]["samples"] == 3
    assert (r["totals"]["flops"], r["totals"]["bytes_fused"]) == (1152, 768)


def _with_float_constant(kernel, old: float, new: float):
    """`kernel` with every floating-point literal `old` in the value of each output statement made
    `new` (outside its read indices)."""
    outputs = {t.name for t in kernel.tensors if t.role == "output"}

    def expr(e):
        if isinstance(e, Const) and (e.dtype or "").startswith("f") and e.value == old:
            return Const(new, e.dtype)
        kids = e.children
        return with_children(e, [expr(k) for k in kids]) if kids and not isinstance(e, Read) else e

    def node(n):
        if isinstance(n, For | If):
            return replace(n, body=[node(b) for b in n.body])
        return replace(n, value=expr(n.value)) if isinstance(n, Assign) and n.target in outputs else n

    return replace(kernel, body=[node(n) for n in kernel.body])


@pytest.mark.parametrize("program", ["linear_count", "trilinear_count"])
def test_a_broken_weight_fails_validation(files, program):
    # 1 - l made 0.9 - l: the two taps' weights no longer sum to 1
    spec = load_model_file(files[program])
    prog = capture(spec, mode="eval")
    tt = translate_program(prog)
    assert run_samples(spec, prog, tt, "eval")["validated"]
    broken = replace(tt, kernel=_with_float_constant(tt.kernel, 1.0, 0.9))
    assert broken.kernel != tt.kernel
    with pytest.raises(SolarError, match="validation failed"):
        run_samples(spec, prog, broken, "eval")
