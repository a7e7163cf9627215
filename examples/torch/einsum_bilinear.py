"""A bilinear form written with torch.einsum ("bi,oij,bj->bo"; einsum kept as one op)."""
import torch
import torch.nn as nn

BATCH = 32
IN1 = 32
IN2 = 48
OUT = 16


class Model(nn.Module):
    def __init__(self, in1, in2, out):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(out, in1, in2) * 0.05)

    def forward(self, a, b):
        return torch.einsum("bi,oij,bj->bo", a, self.weight, b)


def get_inputs():
    return [torch.randn(BATCH, IN1), torch.randn(BATCH, IN2)]


def get_init_inputs():
    return [IN1, IN2, OUT]
