"""Training step of one multi-head self-attention layer written with
`F.scaled_dot_product_attention` (QKV projection, non-causal attention, output projection) and an
MSE loss: `solar-opt examples/train/sdpa_attention.py --translate --roofline=all --step train`.
The QKV projection reads the input (no gradient: 1x in backward); the output projection's input is
the attention's output (2x)."""

import torch
import torch.nn as nn

BATCH = 2
SEQ = 8
DIM = 32
HEADS = 4


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(DIM, 3 * DIM)
        self.proj = nn.Linear(DIM, DIM)

    def forward(self, x, target):
        q, k, v = self.qkv(x).view(BATCH, SEQ, 3, HEADS, DIM // HEADS).permute(2, 0, 3, 1, 4)
        a = nn.functional.scaled_dot_product_attention(q, k, v)
        return self.proj(a.transpose(1, 2).reshape(BATCH, SEQ, DIM))


def get_loss(outputs, x, target):
    return nn.functional.mse_loss(outputs, target)


def get_inputs():
    return [torch.randn(BATCH, SEQ, DIM), torch.randn(BATCH, SEQ, DIM)]


def get_init_inputs():
    return []
