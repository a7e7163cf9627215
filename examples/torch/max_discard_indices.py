"""torch.max(x, dim)[0]: the indices result is discarded, so the program has one output."""
import torch
import torch.nn as nn

BATCH = 32
DIM = 512


class Model(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return torch.max(x, dim=self.dim)[0]


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return [1]
