"""A 3-matrix chain written (A @ B) @ C, with shapes where A @ (B @ C) needs 12x fewer FLOPs.

As written: A @ B costs 2*M*K*N and (A @ B) @ C 2*M*N*P; the other order costs 2*K*N*P + 2*M*K*P.
`--reorder-chains` finds and applies it (docs/reorder-chains.md derives both counts).
"""
import torch
import torch.nn as nn

M = 256
K = 32
N = 256
P = 16


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b, c):
        return (a @ b) @ c


def get_inputs():
    return [torch.randn(M, K), torch.randn(K, N), torch.randn(N, P)]


def get_init_inputs():
    return []
