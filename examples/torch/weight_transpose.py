"""A weight parameter used through `.T`: the weight appears once, the transpose is a view node."""
import torch
import torch.nn as nn

BATCH = 64
IN_FEATURES = 128
OUT_FEATURES = 96


class Model(nn.Module):
    def __init__(self, fin, fout):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(fout, fin) * 0.05)

    def forward(self, x):
        return x @ self.weight.T


def get_inputs():
    return [torch.randn(BATCH, IN_FEATURES)]


def get_init_inputs():
    return [IN_FEATURES, OUT_FEATURES]
