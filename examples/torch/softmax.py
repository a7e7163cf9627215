"""Softmax over the last dimension (aten.softmax kept whole)."""
import torch
import torch.nn as nn

BATCH = 64
DIM = 1024


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.softmax(x, dim=1)


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return []
