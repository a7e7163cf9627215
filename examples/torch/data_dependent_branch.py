"""Python control flow on a tensor value (if x.mean() > 0): export fails, the dispatch fallback
runs for real and records the value read as value-dependent."""
import torch
import torch.nn as nn

BATCH = 16
DIM = 64


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        if x.mean() > 0:
            return x * 2.0
        return x - 1.0


def get_inputs():
    return [torch.randn(BATCH, DIM) + 0.5]


def get_init_inputs():
    return []
