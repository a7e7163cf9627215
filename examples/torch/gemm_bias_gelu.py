"""GEMM with an explicit bias add and exact GELU (mm + add + aten.gelu)."""
import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH = 128
IN_FEATURES = 256
OUT_FEATURES = 512


class Model(nn.Module):
    def __init__(self, fin, fout):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(fin, fout) * 0.05)
        self.bias = nn.Parameter(torch.zeros(fout))

    def forward(self, x):
        return F.gelu(x @ self.weight + self.bias)


def get_inputs():
    return [torch.randn(BATCH, IN_FEATURES)]


def get_init_inputs():
    return [IN_FEATURES, OUT_FEATURES]
