"""`nn.Bilinear` (`aten._trilinear`): `y[b, o] = sum_ij x1[b, i] W[o, i, j] x2[b, j] + bias[o]`, one
contraction of three factors, validated against the module on fresh inputs. Before its template it
was a missing-template error (found by the issue-21 audit, December 2026)."""

from __future__ import annotations

import pytest
from translated import validated_json

BILINEAR = """import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.b = nn.Bilinear(8, 6, 4)

    def forward(self, x1, x2):
        return self.b(x1, x2)


def get_inputs():
    return [torch.randn(5, 8), torch.randn(5, 6)]


def get_init_inputs():
    return []
"""


def test_bilinear_is_one_contraction_of_three_factors(tmp_path, capsys):
    # 5 x 4 outputs, each a sum over 8 x 6 (i, j) of a product of three factors: priced as one MAC
    # per point, 2 x 5 x 4 x 8 x 6 = 1,920 matrix FLOPs (the pairwise product of x1 and x2, or of x1
    # and W, before it is not counted: errs low), in both models; the bias adds 20
    pytest.importorskip("torch")
    f = tmp_path / "bilinear.py"
    f.write_text(BILINEAR)
    r = validated_json(capsys, str(f))
    assert r["validation"]["samples"] > 1
    assert r["totals"]["flops_matrix"] == r["classical"]["totals"]["flops_matrix"] == 2 * 5 * 4 * 8 * 6
    assert r["totals"]["flops_vector"] == 5 * 4
