"""Float predicates, sign operations and sorted-boundary searches (bucketize, searchsorted), on
inputs with zeros, -0.0, NaN and infinities, checked against torch by validation: isnan (read in
its operand's dtype, never through a bool cast), isinf, isfinite, isposinf, isneginf, signbit,
copysign, xlogy, heaviside, hypot, logaddexp, deg2rad, rad2deg, sinc, nan_to_num, index_fill, an
in-place index_copy_ (a KV-cache row update), and bool products and sums (logic)."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

from solar_compiler.driver import main

MODEL = """\
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x, y, cache, pos, new):
        z = x / (x - x.round())  # 0/0 = NaN at x = 0, +-inf at integers
        cache.index_copy_(2, pos, new)
        m = (x > 0) * (y > 0) + (x < -1)
        return (torch.copysign(x, -y), torch.signbit(torch.cat([x, -x * 0.0], 0)), torch.isinf(z),
                torch.isfinite(z), torch.isposinf(z), torch.isneginf(z), torch.isnan(z),
                torch.xlogy(x.abs(), y.abs() + 1), torch.heaviside(x.round(), y), torch.hypot(x, y),
                torch.logaddexp(x, y), torch.deg2rad(x), torch.rad2deg(y), torch.sinc(x),
                torch.nan_to_num(z, nan=0.0, posinf=1.0), x.index_fill(1, pos, 2.5), torch.isinf(pos), m)


def get_inputs():
    x = (torch.randn(4, 8) * 3).round() / 2
    x[0, 0] = 0.0
    return [x, torch.randn(4, 8), torch.zeros(2, 4, 16, 8), torch.tensor([3, 5]), torch.randn(2, 4, 2, 8)]


def get_init_inputs():
    return []
"""

HYPOT = """\
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x, y):
        return torch.hypot(x, y)


def get_inputs():
    return [torch.randn(16, 8), torch.randn(16, 8)]


def get_init_inputs():
    return []
"""


def _report(src: str, tmp_path: Path, monkeypatch, name: str) -> dict:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    f = tmp_path / f"{name}.py"
    f.write_text(src)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main([str(f), "--translate", "--roofline", "fused", "--hw", "B200", "--format", "json",
                     "--quiet"]) == 0
    return json.loads(out.getvalue())


def test_predicates_and_sign_operations_validate(tmp_path: Path, monkeypatch) -> None:
    r = _report(MODEL, tmp_path, monkeypatch, "predicates")
    v = r["validation"]
    assert v["validated"] and v["samples"] == 3, v


def test_hypot_counts(tmp_path: Path, monkeypatch) -> None:
    """sqrt(x*x + y*y): 3 FLOPs and one square root per element of 16 x 8."""
    r = _report(HYPOT, tmp_path, monkeypatch, "hypot")
    assert r["validation"]["validated"]
    assert r["totals"]["flops"] == 4 * 16 * 8


BUCKETIZE = """\
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x, b, rows):
        return {ret}


def get_inputs():
    x = (torch.randn(4, 8) * 2).round() / 2  # values on the boundaries: left and right differ
    return [x, {bounds}, torch.sort(torch.randn(4, 5), -1).values]


def get_init_inputs():
    return []
"""


EVERY = ("(torch.bucketize(x, b), torch.bucketize(x, b, right=True, out_int32=True), "
         "torch.searchsorted(b, x), torch.searchsorted(b, x, side='right'), torch.searchsorted(rows, x))")
SIX = "torch.tensor([-1.0, -0.5, 0.0, 0.5, 1.0, 2.0])"


def test_bucketize_and_searchsorted_validate(tmp_path: Path, monkeypatch) -> None:
    r = _report(BUCKETIZE.format(ret=EVERY, bounds=SIX), tmp_path, monkeypatch, "bucketize")
    assert r["validation"]["validated"] and r["validation"]["samples"] == 3, r["validation"]


def test_bucketize_counts(tmp_path: Path, monkeypatch) -> None:
    """A compare and an add per boundary: 2 * 6 * 32 FLOPs; bytes x 4*32 + b 4*6 + out 8*32."""
    src = BUCKETIZE.format(ret="torch.bucketize(x, b)", bounds=SIX)
    r = _report(src, tmp_path, monkeypatch, "bucketize1")
    assert r["validation"]["validated"]
    assert r["totals"]["flops"] == 2 * 6 * 32 and r["totals"]["bytes_fused"] == 4 * 32 + 4 * 6 + 8 * 32


def test_bucketize_over_many_boundaries_stands_in_for_a_binary_search(tmp_path: Path, monkeypatch) -> None:
    """Over 16 boundaries a count needs more comparisons than a binary search: the count validates
    but is not priced (a stand-in: no compute term); bytes x 4*32 + b 4*17 + out 8*32."""
    src = BUCKETIZE.format(ret="torch.bucketize(x, b)", bounds="torch.arange(17.0)")
    r = _report(src, tmp_path, monkeypatch, "many")
    assert r["validation"]["validated"]
    assert r["totals"]["flops"] == 0 and r["totals"]["bytes_fused"] == 4 * 32 + 4 * 17 + 8 * 32
    assert [(o["by"], o["flops_written"]) for o in r["llm_ops"]] == [("stand-in", 2 * 17 * 32)]


TRIG = """\
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x, y):
        u = torch.tanh(x) * 0.9
        return (torch.atan(x), torch.asin(u), torch.acos(u), torch.sinh(x), torch.cosh(x), torch.asinh(x),
                torch.acosh(x.abs() + 1), torch.atanh(u), torch.atan2(x, y), torch.arctan2(y, x))


def get_inputs():
    return [torch.randn(8, 16), torch.randn(8, 16)]


def get_init_inputs():
    return []
"""


def test_inverse_trigonometric_and_hyperbolic_functions(tmp_path: Path, monkeypatch) -> None:
    """Ten special functions of 128 elements (one libm evaluation each), the tanh and its scale, the
    abs and the add: 10 * 128 + 2 * 128 + 2 * 128 FLOPs, values checked against torch."""
    r = _report(TRIG, tmp_path, monkeypatch, "trig")
    assert r["validation"]["validated"] and r["validation"]["samples"] == 3, r["validation"]
    assert r["totals"]["flops"] == 14 * 128
