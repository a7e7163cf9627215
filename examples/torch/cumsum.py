"""Inclusive prefix sum along dimension 1 (aten.cumsum)."""
import torch
import torch.nn as nn

BATCH = 32
LENGTH = 4096


class Model(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return torch.cumsum(x, dim=self.dim)


def get_inputs():
    return [torch.randn(BATCH, LENGTH)]


def get_init_inputs():
    return [1]
