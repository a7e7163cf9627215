"""One pre-norm transformer encoder layer written by hand: LayerNorm, multi-head attention with
explicit matmuls and softmax, residual, LayerNorm, GELU MLP, residual."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH = 4
SEQ = 64
EMBED = 128
HEADS = 4
MLP = 256


class Model(nn.Module):
    def __init__(self, embed, heads, mlp):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(embed)
        self.ln2 = nn.LayerNorm(embed)
        self.q = nn.Linear(embed, embed)
        self.k = nn.Linear(embed, embed)
        self.v = nn.Linear(embed, embed)
        self.o = nn.Linear(embed, embed)
        self.fc1 = nn.Linear(embed, mlp)
        self.fc2 = nn.Linear(mlp, embed)

    def split(self, t):
        b, s, e = t.shape
        return t.reshape(b, s, self.heads, e // self.heads).permute(0, 2, 1, 3)

    def forward(self, x):
        h = self.ln1(x)
        q, k, v = self.split(self.q(h)), self.split(self.k(h)), self.split(self.v(h))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
        att = torch.matmul(torch.softmax(scores, dim=-1), v)
        b, nh, s, d = att.shape
        x = x + self.o(att.permute(0, 2, 1, 3).reshape(b, s, nh * d))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


def get_inputs():
    return [torch.randn(BATCH, SEQ, EMBED)]


def get_init_inputs():
    return [EMBED, HEADS, MLP]
