"""Plain matrix multiplication C = A @ B (one aten.mm)."""
import torch
import torch.nn as nn

M = 256
K = 128
N = 192


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.matmul(a, b)


def get_inputs():
    return [torch.randn(M, K), torch.randn(K, N)]


def get_init_inputs():
    return []
