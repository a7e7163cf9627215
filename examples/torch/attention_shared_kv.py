"""Cross-attention whose key and value projections are shared by all heads (multi-query style):
a few decoder queries attend to a long memory. Projecting the queries back to the model width
(q W_k^T, then against the memory itself) needs fewer FLOPs than projecting every memory row."""
import math

import torch
import torch.nn as nn

QUERIES = 4
MEMORY = 1024
DIM = 512
HEADS = 8
HEAD_DIM = 64


class Model(nn.Module):
    def __init__(self, dim, heads, head_dim):
        super().__init__()
        self.heads, self.head_dim = heads, head_dim
        self.wq = nn.Linear(dim, heads * head_dim, bias=False)
        self.wk = nn.Linear(dim, head_dim, bias=False)   # one key projection for every head
        self.wv = nn.Linear(dim, head_dim, bias=False)   # one value projection for every head
        self.wo = nn.Linear(heads * head_dim, dim, bias=False)

    def forward(self, x, memory):
        q = self.wq(x).view(x.shape[0], self.heads, self.head_dim)           # [s, h, d]
        k = self.wk(memory)                                                    # [t, d]
        v = self.wv(memory)                                                    # [t, d]
        scores = torch.einsum("shd,td->sht", q, k) * (1.0 / math.sqrt(self.head_dim))
        p = torch.softmax(scores, dim=-1)
        o = torch.einsum("sht,td->shd", p, v)
        return self.wo(o.reshape(x.shape[0], self.heads * self.head_dim))


def get_inputs():
    return [torch.randn(QUERIES, DIM), torch.randn(MEMORY, DIM)]


def get_init_inputs():
    return [DIM, HEADS, HEAD_DIM]
