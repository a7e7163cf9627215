"""torch.cat of two inputs along channels, then torch.chunk into three parts, recombined."""
import torch
import torch.nn as nn

BATCH = 8
C1 = 16
C2 = 32
LENGTH = 128


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        x = torch.cat([a, b], dim=1)
        p, q, r = torch.chunk(x, 3, dim=1)
        return p * q - r


def get_inputs():
    return [torch.randn(BATCH, C1, LENGTH), torch.randn(BATCH, C2, LENGTH)]


def get_init_inputs():
    return []
