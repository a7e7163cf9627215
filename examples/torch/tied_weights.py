"""A tied embedding / output projection: one weight used by nn.Embedding and by F.linear."""
import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH = 8
SEQ = 32
VOCAB = 500
DIM = 64


class Model(nn.Module):
    def __init__(self, vocab, dim):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.norm = nn.LayerNorm(dim)

    def forward(self, ids):
        h = self.norm(self.emb(ids))
        return F.linear(h, self.emb.weight)


def get_inputs():
    return [torch.randint(0, VOCAB, (BATCH, SEQ))]


def get_init_inputs():
    return [VOCAB, DIM]
