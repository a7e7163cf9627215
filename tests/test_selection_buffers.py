"""Selection buffers (docs/bounds.md section 0.0, "constant buffers"): a constant 0/1 buffer with one 1
per column (or per row), a permutation among them, is read as a comparison with a table of keys, and
the catalogue's one-hot entry prices its product as a gather (`transforms/indicator_gather.py`).

Figures on H100_SXM: TF32 494.7 TFLOP/s dense, DRAM 3.35 TB/s. A gather's rows count at their fewest
(one per loaded index: the trace never ran it), so a gathered operand contributes one element per
output row.
"""

from __future__ import annotations

import numpy as np
import pytest
from translated import roofline_json, translated_programs

from solar_compiler.frontends.torch.masks import recognise_one_hot

TF32, BW = 494.7e12, 3.35e12


def test_recognise_one_hot_columns_rows_and_permutations():
    p = np.eye(4)[[2, 0, 3, 1]]  # row i has its 1 at column perm[i]; a permutation: both ways
    axis, keys = recognise_one_hot(p, "col")
    assert axis == "col" and keys.tolist() == [1, 3, 0, 2]  # the row of each column's 1
    axis, keys = recognise_one_hot(p, "row")
    assert axis == "row" and keys.tolist() == [2, 0, 3, 1]
    s = np.zeros((6, 3))
    s[[0, 2, 4], [0, 1, 2]] = 1  # one 1 per column, rows 1, 3, 5 empty: columns only
    axis, keys = recognise_one_hot(s, "row")
    assert axis == "col" and keys.tolist() == [0, 2, 4]
    assert recognise_one_hot(s.T, "col")[0] == "row"
    assert recognise_one_hot(p.astype(bool))[0] == "col"
    assert recognise_one_hot(p * 2) is None                      # not 0/1
    two = p.copy()
    two[0, 0] = 1                                                # a column and a row with two ones
    assert recognise_one_hot(two) is None
    assert recognise_one_hot(np.ones((1, 4))) is None           # one row: a row vector, not a matrix


PERM = """import torch
N = 1024
class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        g = torch.Generator().manual_seed(7)
        self.register_buffer("P", torch.eye(N)[torch.randperm(N, generator=g)])
    def forward(self, x):
        return EXPR
def get_inputs():
    return [torch.randn(2048, N)]
def get_init_inputs():
    return []
"""

PROGRAMS = {
    "right": PERM.replace("EXPR", "x @ self.P"),
    "left": PERM.replace("EXPR", "self.P @ x.t()"),
    "transposed": PERM.replace("EXPR", "x @ self.P.t()"),
    # the permutation drawn from the global generator: a different buffer per construction seed, data
    "seeded": PERM.replace("generator=g", "").replace("EXPR", "x @ self.P"),
    "select": """import torch
N, M = 1024, 256
class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        s = torch.zeros(N, M)
        s[torch.arange(0, N, 4), torch.arange(M)] = 1.0
        self.register_buffer("S", s)
    def forward(self, x):
        return x @ self.S
def get_inputs():
    return [torch.randn(512, N)]
def get_init_inputs():
    return []
""",
}


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    pytest.importorskip("torch")
    with translated_programs(tmp_path_factory.mktemp("selection"), PROGRAMS) as paths:
        yield paths


@pytest.mark.parametrize(("name", "per"), [("right", "column"), ("left", "row"), ("transposed", "row")])
def test_a_permutation_product_is_a_gather(capsys, files, name, per):
    # x 2048 x 1024 f32 times a 1024 x 1024 permutation. As written: 2 * 2048 * 1024^2 = 4.29 G TF32
    # FLOPs, 8.682 us. As a gather: the output (8,388,608 B), the keys (1024 i64, 8,192 B) and x at its
    # fewest (one element per output row, 8,192 B): 8,404,992 B, 2.509 us; the buffer is never read
    r = roofline_json(capsys, files[name])
    assert r["validation"]["validated"]
    note = f"selection buffer 'P' [1024, 1024] has one 1 per {per}"
    assert any(note in n for n in r["validation"]["notes"])
    assert [w["kind"] for w in r["rewrites"]] == ["one-hot contraction as a gather"]
    assert r["totals"]["flops_matrix"] == 0 and r["totals"]["bytes_fused"] == 8_404_992
    h = r["bounds"]["H100_SXM"]
    assert h["fused_s"] == pytest.approx(8_404_992 / BW, rel=1e-12) and h["unfused_s"] == h["fused_s"]
    classical = r["classical"]["bounds"]["H100_SXM"]["fused_s"]
    assert classical == pytest.approx(2 * 2048 * 1024**2 / TF32, rel=1e-9)  # 8.682 us


def test_a_buffer_that_depends_on_the_seed_is_data(capsys, files):
    r = roofline_json(capsys, files["seeded"])
    assert not any("selection buffer" in n for n in r["validation"]["notes"])
    assert r["totals"]["flops_matrix"] == 2 * 2048 * 1024**2


def test_a_column_selection_reads_the_selected_columns(capsys, files):
    # x 512 x 1024 @ S 1024 x 256, S[4 m, m] = 1: y = x[:, ::4]. Output 524,288 B, keys 2,048 B, x at
    # its fewest 2,048 B: 528,384 B, 157.7 ns (as written 2 * 512 * 1024 * 256 TF32 FLOPs: 542.6 ns)
    r = roofline_json(capsys, files["select"])
    assert r["validation"]["validated"]
    assert r["totals"]["bytes_fused"] == 528_384 and r["totals"]["flops_matrix"] == 0
    assert r["bounds"]["H100_SXM"]["fused_s"] == pytest.approx(528_384 / BW, rel=1e-12)
