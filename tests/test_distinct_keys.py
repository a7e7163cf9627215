"""Gathers keyed by top-k indices read at least k distinct rows (`analysis/distinct_keys.py`): the
fewest expert weights any routing of a mixture of experts reads. Bytes by hand."""

from __future__ import annotations

from tests.translated import forward_program, roofline_json

MOE = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.router = nn.Linear(16, 8, bias=False)
        self.w = nn.Parameter(torch.randn(8, 32, 16))

    def forward(self, x):
        idx = torch.topk(self.router(x), 2, dim=-1).indices
        w = self.w[idx.reshape(-1)]
        return torch.bmm(w, x.repeat_interleave(2, 0)[:, :, None])


def get_inputs():
    return [torch.randn(4, 16)]


def get_init_inputs():
    return []
'''


def test_top2_expert_weights_count_two_experts_at_the_fewest(tmp_path, capsys):
    """4 tokens, 8 experts of 32 x 16 f32, top-2 routing, each token's experts gathered (`batched_mm`).
    With `--indirect min` (no routing assumed) the gather `w[idx[p // 2, p % 2]]` reads, for token 0,
    two distinct experts (top-k indices of a row are distinct): 2 x 32 x 16 x 4 = 4,096 bytes, not
    one expert's 2,048. Compulsory bytes: x 256, the router 512, the experts 4,096, the output
    8 x 32 x 4 = 1,024: 5,888."""
    f = tmp_path / "moe.py"
    f.write_text(MOE)
    r = roofline_json(capsys, str(f), "--indirect", "min")
    assert r["validation"]["validated"]
    assert r["totals"]["bytes_fused"] == 5_888


def test_a_gather_keyed_by_input_indices_may_read_one_row(tmp_path, capsys):
    """The same gather keyed by indices the caller passes: nothing says they differ, so the fewest
    is one expert (2,048 bytes): x 256 + idx 8 x 8 = 64 + 2,048 + the output 1,024 = 3,392."""
    f = tmp_path / "moe_in.py"
    f.write_text(forward_program(
        "x, w, idx", "return torch.bmm(w[idx.reshape(-1)], x.repeat_interleave(2, 0)[:, :, None])",
        "torch.randn(4, 16), torch.randn(8, 32, 16), torch.randint(0, 8, (4, 2))"))
    r = roofline_json(capsys, str(f), "--indirect", "min")
    assert r["totals"]["bytes_fused"] == 3_392
