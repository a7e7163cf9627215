"""One input reached through two different views (a reshape and a transpose) in one expression."""
import torch
import torch.nn as nn

ROWS = 64
COLS = 64


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        flat = x.reshape(ROWS * COLS // 2, 2)
        return flat.sum(dim=1).reshape(ROWS, COLS // 2) + x.t()[: ROWS, : COLS // 2]


def get_inputs():
    return [torch.randn(ROWS, COLS)]


def get_init_inputs():
    return []
