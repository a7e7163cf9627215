"""A dot product computed by Python through `.item()` in a loop, returned as `torch.tensor([acc])`:
the traced result is a constant the capture would bake in. It must never be reported validated
(issue 21): the capture stops at the first value read by Python with one line naming it."""
import torch
import torch.nn as nn

N = 4096


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        acc = 0.0
        for i in range(N):
            acc += a[i].item() * b[i].item()
        return torch.tensor([acc])


def get_inputs():
    return [torch.randn(N), torch.randn(N)]


def get_init_inputs():
    return []
