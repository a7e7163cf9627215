"""Sort every row, keep the sorted values (scaled) and the permutation (aten.sort: no template)."""
import torch
import torch.nn as nn

ROWS = 8
COLS = 16


class Model(nn.Module):
    def forward(self, x):
        values, order = torch.sort(x, dim=-1)
        return values * 2.0, order


def get_inputs():
    return [torch.randn(ROWS, COLS)]


def get_init_inputs():
    return []
