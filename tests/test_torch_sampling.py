"""Sampling at computed positions (`templates/sampling.py`): bicubic upsampling (align_corners both
ways, output sizes and scale factors, up and down) and grid_sample (bilinear, nearest, bicubic x
zeros, border, reflection padding x align_corners), checked against torch by validation on fresh
samples whose grids reach outside [-1, 1] (so the padding modes matter) and hit source positions
exactly half-way between pixels (so nearest's round-half-to-even matters); their operation counts
and traced traffic by hand; a broken weight fails validation."""

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

GRID = """\
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def forward(self, x, g):
        return tuple(F.grid_sample(x, g, mode=mode, padding_mode=pad, align_corners=align)
                     for mode in ("bilinear", "nearest", "bicubic")
                     for pad in ("zeros", "border", "reflection") for align in (False, True))


def get_inputs():
    g = torch.rand(2, 5, 7, 2) * 3 - 1.5  # up to half a span past each border
    g[:, :2] = torch.randint(-12, 13, (2, 2, 7, 2)) / 8  # eighths: source positions exactly half-way
    g[:, 4] = torch.randn(7, 2) * 4  # several spans away: reflections that flip more than once
    return [torch.randn(2, 3, 6, 5), g]


def get_init_inputs():
    return []
"""

BICUBIC = """\
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def forward(self, x):
        return (F.interpolate(x, scale_factor=2, mode="bicubic"),
                F.interpolate(x, scale_factor=2, mode="bicubic", align_corners=True),
                F.interpolate(x, size=(5, 11), mode="bicubic"),
                F.interpolate(x, size=(5, 11), mode="bicubic", align_corners=True),
                F.interpolate(x, scale_factor=(1.5, 0.75), mode="bicubic"),
                F.interpolate(x, scale_factor=1.7, mode="bicubic", recompute_scale_factor=True),
                torch.ops.aten.upsample_bicubic2d.default(x, [9, 12], False, 1.3, 2.0))


def get_inputs():
    return [torch.randn(2, 3, 7, 6)]


def get_init_inputs():
    return []
"""

BICUBIC_COUNT = """\
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def forward(self, x):
        return F.interpolate(x, scale_factor=2, mode="bicubic")


def get_inputs():
    return [torch.randn(1, 2, 4, 4)]


def get_init_inputs():
    return []
"""

GRID_COUNT = """\
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def forward(self, x, g):
        return F.grid_sample(x, g, mode="bilinear", padding_mode="zeros", align_corners=False)


def get_inputs():
    g = torch.rand(2, 3, 4, 2) * 3 - 1.5
    # four samples at the centres of the 2 x 2 blocks of the 4 x 4 input: every element is read
    g[:, 0] = torch.tensor([[-0.5, -0.5], [0.5, -0.5], [-0.5, 0.5], [0.5, 0.5]])
    return [torch.randn(2, 3, 4, 4), g]


def get_init_inputs():
    return []
"""

GRID_GATHER = """\
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def forward(self, x, g):
        return F.grid_sample(x, g, mode="nearest", padding_mode="border", align_corners=False)


def get_inputs():
    # source positions 0 and 1 along each dim ((g + 1) * 4 - 0.5), jittered by less than a quarter
    corners = torch.tensor([-0.875, -0.625])
    g = torch.stack(torch.meshgrid(corners, corners, indexing="xy"), -1)[None]
    return [torch.randn(1, 2, 8, 8), g + torch.rand(1, 2, 2, 2) * 0.1 - 0.05]


def get_init_inputs():
    return []
"""

ANTIALIAS = BICUBIC_COUNT.replace('mode="bicubic")', 'mode="bicubic", antialias=True)')


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    programs = {"grid": GRID, "bicubic": BICUBIC, "bicubic_count": BICUBIC_COUNT, "grid_count": GRID_COUNT,
                "grid_gather": GRID_GATHER}
    with translated_programs(tmp_path_factory.mktemp("sampling"), programs) as paths:
        yield paths


def test_grid_sample_agrees_with_torch_in_every_mode_padding_and_alignment(capsys, files):
    r = roofline_json(capsys, files["grid"])
    v = r["validation"]
    assert v["validated"] and v["samples"] == 3 and v["max_rel_err"] < 1e-5, v
    assert v["elements_checked"] == 18 * 2 * 3 * 5 * 7  # every output of the 18 combinations


def test_bicubic_upsampling_agrees_with_torch_for_sizes_and_scale_factors(capsys, files):
    v = roofline_json(capsys, files["bicubic"])["validation"]
    assert v["validated"] and v["samples"] == 3 and v["max_rel_err"] < 1e-5, v
    # 14 x 12, twice; 5 x 11, twice; 10 x 4; 11 x 10; 9 x 12: every element, per batch and channel
    assert v["elements_checked"] == 6 * (2 * 168 + 2 * 55 + 40 + 110 + 108)


def test_bicubic_counts_16_taps_per_output_and_its_weights_once_per_row_and_column(capsys, files):
    # [1, 2, 4, 4] -> [1, 2, 8, 8], align_corners=False: 128 outputs, each four rows of four products
    # and three sums (28) combined by four products and three sums (7): 35 x 128 = 4480. Each of
    # the 8 output rows and 8 columns computes its taps once: src = (o + 0.5) * 0.5 - 0.5 (3),
    # floor, min with in - 1 (2), t = min(max(src - base, 0), 1) (3), the taps base - 1, base + 1,
    # base + 2 (3 additions) clamped into the input (8), the weights conv2(t + 1) (1 + 6), conv1(t)
    # (5), 1 - t (1), conv1(1 - t) (5), (1 - t) + 1 (1), conv2 of it (6): 44 x 16 = 704; 5184.
    # Bytes: every input element is a tap (scale 2), 32 x 4, and the output 128 x 4: 640.
    r = roofline_json(capsys, files["bicubic_count"])
    assert r["validation"]["validated"] and r["validation"]["samples"] == 3
    assert (r["totals"]["flops"], r["totals"]["bytes_fused"]) == (5184, 640)


def test_grid_sample_counts_weights_per_position_and_four_products_per_output(capsys, files):
    # x [2, 3, 4, 4], grid [2, 3, 4, 2]: 24 positions, 72 outputs. Per position and dim, the index
    # table: (g + 1) * 2 - 0.5 (3), floor, clamp (2) for the first tap, floor + 1 and its clamp (3)
    # for the second: 9, x2 = 18; the output statement's weights: t = s - floor (1), 1 - t (1),
    # each tap's in-bounds test (2 comparisons, 1 and) and select of its weight (4, twice): 10, x2 =
    # 20, and the four corner weights wy * wx (4): 42 x 24 = 1008. Per output, 4 products and 3
    # sums: 7 x 72 = 504; 1512. Bytes: the grid 48 x 4, the output 72 x 4, and x as the traced
    # sample read it: the four block centres read every element, 96 x 4: 192 + 288 + 384 = 864.
    r = roofline_json(capsys, files["grid_count"])
    assert r["validation"]["validated"] and r["validation"]["samples"] == 3
    assert (r["totals"]["flops"], r["totals"]["bytes_fused"]) == (1512, 864)


def test_nearest_grid_sample_traffic_is_what_the_traced_sample_read(capsys, files):
    # 4 positions whose nearest source elements are the 2 x 2 top-left block of each 8 x 8 channel:
    # x counts 2 x 4 elements read (not the 128 of x, nor the 1 per channel of the fewest-elements
    # rule): 32 bytes, + grid 32 + output 32 = 96. FLOPs: per position and dim the coordinate (3),
    # the border clip (2), the rounding (1): 6 x 2 x 4 = 48; the gather itself none.
    r = roofline_json(capsys, files["grid_gather"])
    assert r["validation"]["validated"] and r["validation"]["samples"] == 3
    assert (r["totals"]["flops"], r["totals"]["bytes_fused"]) == (48, 96)
    assert r["indirect"] == "traced"


def _with_constant(kernel, old: float, new: float):
    """`kernel` with every literal `old` in the value of each output statement made `new` (outside
    its read indices)."""
    outputs = {t.name for t in kernel.tensors if t.role == "output"}

    def expr(e):
        if isinstance(e, Const) and e.value == old:
            return Const(new, e.dtype)
        kids = e.children
        return with_children(e, [expr(k) for k in kids]) if kids and not isinstance(e, Read) else e

    def node(n):
        if isinstance(n, For | If):
            return replace(n, body=[node(b) for b in n.body])
        return replace(n, value=expr(n.value)) if isinstance(n, Assign) and n.target in outputs else n

    return replace(kernel, body=[node(n) for n in kernel.body])


@pytest.mark.parametrize(("program", "old", "new"), [
    ("bicubic_count", -0.75, -0.5),  # the cubic-convolution constant of the outer taps' weights
    ("grid_count", 0.0, 1.0),  # a tap outside the input keeps weight 1 instead of 0 (zeros padding)
])
def test_a_broken_weight_fails_validation(files, program, old, new):
    spec = load_model_file(files[program])
    prog = capture(spec, mode="eval")
    tt = translate_program(prog)
    assert run_samples(spec, prog, tt, "eval")["validated"]
    broken = replace(tt, kernel=_with_constant(tt.kernel, old, new))
    assert broken.kernel != tt.kernel
    with pytest.raises(SolarError, match="validation failed"):
        run_samples(spec, prog, broken, "eval")


def test_antialiased_bicubic_is_an_error_naming_the_op(tmp_path):
    path = tmp_path / "aa.py"
    path.write_text(ANTIALIAS)
    with pytest.raises(SolarError, match=r"aa\.py:8: no loop-IR template for aten\._upsample_bicubic2d_aa"):
        translate_program(capture(load_model_file(str(path))))
