"""Matrix multiplication in float16 (inputs declared as torch.float16)."""
import torch
import torch.nn as nn

M = 128
K = 256
N = 128


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.matmul(a, b)


def get_inputs():
    return [torch.randn(M, K, dtype=torch.float16), torch.randn(K, N, dtype=torch.float16)]


def get_init_inputs():
    return []
