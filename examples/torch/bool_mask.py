"""A boolean mask input used with masked_fill (a bool tensor input)."""
import torch
import torch.nn as nn

BATCH = 32
DIM = 256


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, mask):
        return torch.softmax(x.masked_fill(mask, -1e9), dim=-1)


def get_inputs():
    return [torch.randn(BATCH, DIM), torch.rand(BATCH, DIM) < 0.2]


def get_init_inputs():
    return []
