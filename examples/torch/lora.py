"""A linear layer with a merged low-rank adapter (LoRA), written x @ (A @ B): the adapter's
d x d product is formed before it meets the few tokens. (x @ A) @ B is the cheap order.

y = base(x) + (x @ (A @ B)) * scaling; x is [BATCH, SEQ, DIM], A [DIM, RANK], B [RANK, DIM].
"""
import torch
import torch.nn as nn

BATCH = 2
SEQ = 32
DIM = 1024
RANK = 16
ALPHA = 32


class Model(nn.Module):
    def __init__(self, dim, rank, alpha):
        super().__init__()
        self.base = nn.Linear(dim, dim)
        self.lora_a = nn.Parameter(torch.randn(dim, rank) / dim ** 0.5)
        self.lora_b = nn.Parameter(torch.randn(rank, dim) / rank ** 0.5)
        self.scaling = alpha / rank

    def forward(self, x):
        return self.base(x) + (x @ (self.lora_a @ self.lora_b)) * self.scaling


def get_inputs():
    return [torch.randn(BATCH, SEQ, DIM)]


def get_init_inputs():
    return [DIM, RANK, ALPHA]
