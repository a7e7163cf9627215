"""Scans beyond cumsum / cumprod (`templates/scan.py`): logcumsumexp (logaddexp of the running value
and the next element), cummax and cummin with their indices (the latest position the running extreme
was reached at, ties included, as torch's), on inputs with ties and infinities, checked against torch
by validation on fresh samples, and their operation counts by hand."""

from __future__ import annotations

import pytest
from translated import roofline_json, translated_programs

SCANS = """\
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x, q):
        v, i = torch.cummax(q, dim=1)
        w, j = torch.cummin(x, dim=0)
        return torch.logcumsumexp(x, dim=1), v, i, w, j


def get_inputs():
    x = torch.randn(6, 10)
    x[2, 3] = float("-inf")
    return [x, torch.randint(0, 4, (5, 12))]  # small integers: ties everywhere


def get_init_inputs():
    return []
"""


CUMMAX = SCANS.replace("""        v, i = torch.cummax(q, dim=1)
        w, j = torch.cummin(x, dim=0)
        return torch.logcumsumexp(x, dim=1), v, i, w, j""", """        return torch.cummax(q, dim=1)""")


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    pytest.importorskip("torch")
    with translated_programs(tmp_path_factory.mktemp("scans"), {"scans": SCANS, "cummax": CUMMAX}) as paths:
        yield paths


def test_scans_agree_with_torch_on_ties_and_infinities(capsys, files):
    v = roofline_json(capsys, files["scans"])["validation"]
    assert v["validated"] and v["samples"] == 3 and v["max_rel_err"] < 1e-6, v


def test_cummax_counts_one_max_and_an_index_compare_and_select_per_step(capsys, files):
    # q 5 x 12 i64 along dim 1: 5 x 11 steps after the first column, each a max (55) and, for the
    # indices, a compare and a select (110): 165; bytes: q read, values and indices written, 480 each
    r = roofline_json(capsys, files["cummax"])
    assert r["validation"]["validated"]
    assert (r["totals"]["flops"], r["totals"]["bytes_fused"]) == (165, 1440)
