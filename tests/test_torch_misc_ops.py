"""pdist, histc, frexp, masked_scatter, unique_consecutive, tril/triu_indices and the renormalised
weight of an embedding with max_norm, checked against torch by validation on fresh samples, on
inputs with their edge cases (values on bin edges and outside the range, zeros, infinities, NaN and
subnormals, a broadcast mask, runs of equal values, offsets that cut the triangle off), and the
operation counts of pdist and frexp by hand."""

from __future__ import annotations

import pytest
from translated import roofline_json, translated_programs

PDIST = """\
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def forward(self, x):
        return F.pdist(x)


def get_inputs():
    return [torch.randn(6, 5)]


def get_init_inputs():
    return []
"""

FREXP = """\
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.frexp(x)


def get_inputs():
    x = torch.randn(4, 8)
    # zeros, infinities, NaN, f32 subnormals, the largest values, powers of two (8, 64, 4096, 2^-95:
    # where log(x) / log(2) rounds below the exponent, so the nest's correction step is needed)
    x[0, :7] = torch.tensor([0.0, -0.0, float("inf"), float("-inf"), float("nan"), 1e-40, -1e-45])
    x[1, :8] = torch.tensor([1.0, 0.5, -8.0, 64.0, -4096.0, 2.0 ** -95, 1 - 2.0 ** -24, 3.0e38])
    return [x]


def get_init_inputs():
    return []
"""

MISC = """\
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def forward(self, x, h, g, y, m, z, src, ids, w, v):
        pdists = [F.pdist(x, p=p) for p in (1.0, 3.0, float("inf"))] + [F.pdist(torch.round(x), p=0)]
        hists = [torch.histc(h, bins=8, min=-2, max=2), torch.histc(g, bins=6), torch.histc(g * 0, bins=4)]
        scattered = [y.masked_scatter(m, src), z.masked_scatter(z > 0, src)]
        t, u = torch.tril_indices(5, 7, -1), torch.triu_indices(6, 4, 1)
        e = F.embedding(ids, w, max_norm=1.5) + F.embedding(ids, v, max_norm=3.0, norm_type=1.0)
        return (*pdists, *hists, *scattered, t, u, y[t[0], t[1]], e)


def get_inputs():
    h = torch.randn(97) * 1.5
    h[:6] = torch.tensor([2.0, -2.0, 5.0, -7.0, float("nan"), 0.5])  # the range's ends, outside, NaN, an edge
    g = torch.randint(0, 10, (50,)).float()  # its own range [0, 9]: 3 and 6 on edges, 9 in the last bin
    ids = torch.randint(0, 20, (4, 6))  # rows named twice
    return [torch.randn(7, 4), h, g, torch.randn(7, 11), torch.rand(11) > 0.5, torch.randn(97),
            torch.randn(8, 10), ids, torch.randn(20, 8) * 0.6, torch.randn(20, 8)]


def get_init_inputs():
    return []
"""

UNIQUE = """\
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.unique_consecutive(x, return_inverse=True, return_counts=True)


def get_inputs():
    return [torch.randint(0, 3, (4, 9))]


def get_init_inputs():
    return []
"""


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    pytest.importorskip("torch")
    programs = {"pdist": PDIST, "frexp": FREXP, "misc": MISC, "unique": UNIQUE}
    with translated_programs(tmp_path_factory.mktemp("misc_ops"), programs) as paths:
        yield paths


@pytest.mark.parametrize("name", ["pdist", "frexp", "misc", "unique"])
def test_misc_ops_agree_with_torch_on_fresh_samples(capsys, files, name):
    v = roofline_json(capsys, files[name])["validation"]
    assert v["validated"] and v["samples"] == 3, v


def test_pdist_counts_three_operations_per_pair_and_column(capsys, files):
    # x 6 x 5 f32: 15 pairs. Per pair and column a subtraction and the square accumulated (a
    # multiply-add: 2 matrix FLOPs, 1 vector) = 15 * 5 * 3 = 225; per pair a sqrt and the index
    # addition placing it (30); per row of the 5 that start pairs, its offset i (2N - 3 - i) / 2 (a
    # product and a division: 10): 265. Bytes: x read (120), the 15 distances written (60)
    r = roofline_json(capsys, files["pdist"])
    t = r["totals"]
    assert (t["flops"], t["flops_matrix"], t["bytes_fused"]) == (265, 150, 180)


def test_frexp_is_a_stand_in_that_moves_its_operand_and_both_results(capsys, files):
    # a kernel reads the exponent bits: no compute term (the nest's logarithm and powers are not
    # priced); x 4 x 8 f32 read (128), the f32 mantissas (128) and i32 exponents (128) written
    r = roofline_json(capsys, files["frexp"])
    assert (r["totals"]["flops"], r["totals"]["bytes_fused"]) == (0, 384)
    assert [(o["op"], o["by"]) for o in r["llm_ops"]] == [("frexp", "stand-in")]
