"""rrelu (eval: the mean slope; training: torch's noise fed by validation), ldexp (integer exponents,
negative ones, an integer mantissa, results whose power of two alone leaves f32), dist and cdist
(`_cdist_forward`) for p = 0, 1, 2, 3, 0.5 / 1.5, inf and -inf, with broadcast operands and zero
differences, checked against torch by validation on fresh samples, and the operation counts of
dist and cdist by hand."""

from __future__ import annotations

import pytest
from translated import roofline_json, translated_programs

RRELU = """\
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.act = nn.RReLU(0.1, 0.3)

    def forward(self, x, y):
        return self.act(x), F.rrelu(y, training=False), F.rrelu(x, 0.2, 0.5, training=True) + y


def get_inputs():
    x = torch.randn(4, 6)
    x[0, :2] = 0.0
    return [x, torch.randn(4, 6)]


def get_init_inputs():
    return []
"""

LDEXP = """\
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x, e):
        return (torch.ldexp(x, e), torch.ldexp(e, e.flip(0)), torch.ldexp(x * 1e-30, e + 125),
                torch.ldexp(x, e - 140))


def get_inputs():
    return [torch.randn(4, 6), torch.randint(-6, 7, (4, 6))]


def get_init_inputs():
    return []
"""

DIST = """\
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x, y, z):
        inf = float("inf")
        return (torch.dist(x, y, 3), torch.dist(x, z, 0), torch.dist(x, y, inf), torch.dist(x, z, -inf),
                torch.dist(x, y[0], 1), torch.dist(x, y), torch.dist(x, z, 0.5))


def get_inputs():
    x = torch.randn(4, 6)
    z = x[1].clone()
    z[::2] = torch.randn(3)  # half of row 1's differences are zero: p = 0 counts, -inf gives 0
    return [x, torch.randn(4, 6), z]


def get_init_inputs():
    return []
"""

CDIST = """\
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x, y):
        inf = float("inf")
        y = torch.cat([y, x[:2]])  # rows equal to x's: zero distances
        return (torch.cdist(x, y, p=1), torch.cdist(x, y, p=0), torch.cdist(x, y, p=inf),
                torch.cdist(x, y, p=3), torch.cdist(x, y),
                torch.cdist(x[None], y.expand(2, 7, 6), p=1.5, compute_mode="donot_use_mm_for_euclid_dist"))


def get_inputs():
    x = torch.randn(4, 6)
    x[0, 0] = 0.0
    return [x, torch.randn(5, 6)]


def get_init_inputs():
    return []
"""

DIST3 = """\
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x, y):
        return torch.dist(x, y, 3)


def get_inputs():
    return [torch.randn(4, 6), torch.randn(6)]


def get_init_inputs():
    return []
"""

CDIST1 = DIST3.replace("torch.dist(x, y, 3)", "torch.cdist(x, y, p=1)").replace("torch.randn(6)",
                                                                              "torch.randn(5, 6)")

@pytest.fixture(scope="module")
def files(tmp_path_factory):
    pytest.importorskip("torch")
    programs = {"rrelu": RRELU, "ldexp": LDEXP, "dist": DIST, "cdist": CDIST, "dist3": DIST3,
                "cdist1": CDIST1}
    with translated_programs(tmp_path_factory.mktemp("misc2"), programs) as paths:
        yield paths


@pytest.mark.parametrize("name", ["rrelu", "ldexp", "dist", "cdist"])
def test_agrees_with_torch_on_fresh_samples(capsys, files, name):
    v = roofline_json(capsys, files[name])["validation"]
    assert v["validated"] and v["samples"] == 3 and v["max_rel_err"] < 1e-5, v


def test_dist_p3_counts_four_operations_per_element_and_one_root(capsys, files):
    # x 4 x 6 and y 6 (broadcast) f32, p = 3: per element a subtraction, an absolute value, a power
    # and an addition (4 x 24 = 96), then the root `s ** (1/3)`: 97 FLOPs; bytes: x read (96), y
    # read (24), the scalar written (4): 124
    r = roofline_json(capsys, files["dist3"])
    assert r["validation"]["validated"] and r["validation"]["samples"] == 3
    assert (r["totals"]["flops"], r["totals"]["bytes_fused"]) == (97, 124)


def test_cdist_p1_counts_a_subtraction_an_abs_and_an_add_per_pair_and_column(capsys, files):
    # x 4 x 6, y 5 x 6 f32, p = 1: 4 x 5 pairs x 6 columns, each a subtraction, an absolute value and
    # an addition: 360 FLOPs, no root; bytes: x (96) and y (120) read, the 4 x 5 distances written (80):
    # 296
    r = roofline_json(capsys, files["cdist1"])
    assert r["validation"]["validated"] and r["validation"]["samples"] == 3
    assert (r["totals"]["flops"], r["totals"]["bytes_fused"]) == (360, 296)

