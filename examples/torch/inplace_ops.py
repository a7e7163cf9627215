"""In-place updates inside forward (add_, mul_, a slice assignment): captured as functional
nodes producing new versions."""
import torch
import torch.nn as nn

BATCH = 16
DIM = 64


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        y = x.clone()
        y.mul_(2.0)
        y[:, : DIM // 2] += 1.0
        y.add_(x)
        return torch.relu_(y)


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return []
