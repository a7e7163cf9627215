"""Constant Hadamard buffers (`frontends/torch/hadamard.py`, docs/bounds.md section 0.0): a Sylvester
Hadamard matrix registered as a buffer is computed from its indices' bits, never read, and a product
with it is a fast Walsh-Hadamard transform, priced as a stand-in (no compute term, its traffic
counted). The audit's `x @ H`, H the 4096 x 4096 Hadamard matrix / 64 in bf16, x 4096 x 4096, printed
138.91 us on H100 (the dense product at BF16); a fast transform moves x and the output: 20.03 us."""

from __future__ import annotations

import numpy as np
import pytest
from translated import roofline_json, translated_programs

from solar_compiler.frontends.torch.hadamard import recognise_hadamard

BW = 3.35e12


def _sylvester(n: int) -> np.ndarray:
    h = np.ones((1, 1))
    while h.shape[0] < n:
        h = np.block([[h, h], [h, -h]])
    return h


def test_recognise_hadamard_by_hand():
    assert recognise_hadamard(_sylvester(16)) == 1.0
    assert recognise_hadamard((_sylvester(64) / 8).astype(np.float32)) == 0.125
    assert recognise_hadamard(-_sylvester(8)) == -1.0
    assert recognise_hadamard(_sylvester(4)) is None                     # under MIN_ORDER
    flipped = _sylvester(16)
    flipped[3, 5] *= -1
    assert recognise_hadamard(flipped) is None                           # one sign off
    assert recognise_hadamard(_sylvester(16)[:, ::-1].copy()) is None    # another ordering
    assert recognise_hadamard(np.ones((16, 16))) is None


HADAMARD = """import torch
class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        h = torch.ones(1, 1)
        for _ in range(8):
            h = torch.cat([torch.cat([h, h], 1), torch.cat([h, -h], 1)], 0)
        self.register_buffer("h", h / 16)
    def forward(self, x):
        return EXPR
def get_inputs():
    return [torch.randn(512, 256)]
def get_init_inputs():
    return []
"""


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    pytest.importorskip("torch")
    programs = {"right": HADAMARD.replace("EXPR", "x @ self.h"),
                "left_t": HADAMARD.replace("EXPR", "(self.h.t() @ x.t()).t()")}
    with translated_programs(tmp_path_factory.mktemp("hadamard"), programs) as paths:
        yield paths


@pytest.mark.parametrize("name", ["right", "left_t"])
def test_a_hadamard_product_is_a_fast_transform(capsys, files, name):
    # x 512 x 256 f32 read (524,288 B) and the output written (524,288 B); the 256 x 256 buffer is not
    # read (as written: 2 x 512 x 256^2 = 67,108,864 FLOPs and 262,144 B more)
    r = roofline_json(capsys, files[name])
    assert r["validation"]["validated"]
    assert any("0.0625 x the Hadamard matrix of order 256" in n for n in r["validation"]["notes"])
    assert r["totals"]["flops"] == 0 and r["totals"]["bytes_fused"] == 2 * 524_288
    assert [(o["by"], o["flops_priced"]) for o in r["llm_ops"]] == [("stand-in", 0)]
    assert r["bounds"]["H100_SXM"]["fused_s"] == pytest.approx(max(2 * 524_288 / BW, 141e-9), rel=1e-9)
