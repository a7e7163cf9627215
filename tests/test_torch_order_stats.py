"""Order statistics (templates/sort.py): kthvalue, median and nanmedian (per dim and over the whole
tensor) as the element of a given stable rank (NaN above every number), mode as the smallest of the
most frequent values at its last position; on floats, on integers with ties, with NaNs, checked
against torch by validation on fresh samples. The rank counts stand in for a radix select and a sort,
so no compute term is priced and the traffic is derived by hand."""

from __future__ import annotations

import pytest
from translated import forward_program as _program
from translated import roofline_json, translated_programs

SELECTIONS = """\
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x, q, t):
        y = torch.where(q == 0, float("nan"), x)  # NaNs where q is 0: most rows hold one or more
        z = torch.cat([torch.full((1, 8), float("nan")), y], 0)  # and a row of NaNs only
        return (torch.kthvalue(x, 3, dim=0, keepdim=True), torch.kthvalue(t, 7).values,
                torch.kthvalue(y, 6, dim=1).values, torch.median(t, dim=1), torch.median(y, dim=1),
                torch.median(t.float(), dim=0, keepdim=True), torch.nanmedian(y, dim=1),
                torch.nanmedian(z, dim=1).values, torch.median(x), torch.median(t), torch.median(y),
                torch.nanmedian(y), torch.nanmedian(z), torch.kthvalue(x[0, 0], 1))


def get_inputs():
    # distinct floats; small integers: ties everywhere (the stable order decides median's indices)
    return [torch.randn(6, 8), torch.randint(0, 4, (6, 8)), torch.randint(0, 3, (5, 12))]


def get_init_inputs():
    return []
"""

MODES = """\
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, t, b):
        return torch.mode(t), torch.mode(t.float(), 0), torch.mode(b), torch.mode(t.view(-1, 30)).values


def get_inputs():
    return [torch.randint(0, 3, (5, 12)), torch.randint(0, 2, (3, 7)).bool()]


def get_init_inputs():
    return []
"""


SMALL = {
    "median_small": _program("x", "return torch.median(x, dim=1)", "torch.randint(0, 4, (5, 12))"),
    "kthvalue_small": _program("x", "return torch.kthvalue(x, 3, dim=0)", "torch.randn(8, 6)"),
    "mode_small": _program("x", "return torch.mode(x)", "torch.randint(0, 3, (4, 16))"),
    "median_all": _program("x", "return torch.median(x)", "torch.randn(6, 8)"),
}


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    pytest.importorskip("torch")
    with translated_programs(tmp_path_factory.mktemp("order_stats"),
                             {"selections": SELECTIONS, "modes": MODES, **SMALL}) as paths:
        yield paths


def test_kthvalue_median_and_nanmedian_agree_with_torch_on_ties_and_nans(capsys, files):
    v = roofline_json(capsys, files["selections"])["validation"]
    assert v["validated"] and v["samples"] == 3 and v["max_rel_err"] == 0.0, v
    # every output compared: 8 + 8, 5, 6, 5 + 5, 6 + 6, 12 + 12, 6 + 6, 7, five scalars, 1 + 1
    assert v["elements_checked"] == 99, v


def test_mode_agrees_with_torch_on_ties_for_ints_floats_and_bools(capsys, files):
    v = roofline_json(capsys, files["modes"])["validation"]
    assert v["validated"] and v["samples"] == 3 and v["max_rel_err"] == 0.0, v
    assert v["elements_checked"] == 5 + 5 + 12 + 12 + 3 + 3 + 2, v


@pytest.mark.parametrize(("name", "nbytes"), [
    # x 5 x 12 i64 read (480), 5 i64 values and 5 i64 indices written (40 + 40)
    ("median_small", 5 * 12 * 8 + 5 * 8 + 5 * 8),
    # x 8 x 6 f32 read (192), 6 f32 values (24) and 6 i64 indices (48) written
    ("kthvalue_small", 8 * 6 * 4 + 6 * 4 + 6 * 8),
    # x 4 x 16 i64 read (512), 4 i64 values and 4 i64 indices written (32 + 32)
    ("mode_small", 4 * 16 * 8 + 4 * 8 + 4 * 8),
    # x 6 x 8 f32 read (192), one f32 written (4)
    ("median_all", 6 * 8 * 4 + 4),
])
def test_an_order_statistic_stands_in_for_a_selection_priced_by_its_traffic(capsys, files, name, nbytes):
    # the rank and count nests (O(N^2) compares per row) have no compute term; only the operand
    # read and the outputs written are traffic (the ranks and counts are kernel locals)
    r = roofline_json(capsys, files[name])
    assert r["validation"]["validated"] and r["validation"]["samples"] == 3, r["validation"]
    assert [o["by"] for o in r["llm_ops"]] == ["stand-in"] and r["llm_ops"][0]["flops_written"] > 0
    assert (r["totals"]["flops"], r["totals"]["bytes_fused"]) == (0, nbytes)
