"""Activation functions kept as single ops: SiLU, Mish, Hardswish, Hardsigmoid, GELU(tanh)."""
import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH = 32
DIM = 512


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return F.silu(x) + F.mish(x) + F.hardswish(x) + F.hardsigmoid(x) + F.gelu(x, approximate="tanh")


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return []
