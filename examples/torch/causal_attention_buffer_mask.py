"""minGPT-style causal self-attention: the causal mask is a buffer built once for the largest block
(`register_buffer("bias", tril(ones(block, block)))`), sliced to the sequence length and applied
with masked_fill before the softmax."""
import math

import torch
import torch.nn as nn

BATCH = 4
SEQ = 64
BLOCK = 128
EMBED = 128
HEADS = 4


class Model(nn.Module):
    def __init__(self, embed, heads, block_size):
        super().__init__()
        self.n_head = heads
        self.c_attn = nn.Linear(embed, 3 * embed)
        self.c_proj = nn.Linear(embed, embed)
        self.register_buffer("bias", torch.tril(torch.ones(block_size, block_size))
                             .view(1, 1, block_size, block_size))

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(C, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        att = torch.softmax(att, dim=-1)
        y = att @ v
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


def get_inputs():
    return [torch.randn(BATCH, SEQ, EMBED)]


def get_init_inputs():
    return [EMBED, HEADS, BLOCK]
