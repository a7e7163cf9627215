"""Embedding lookup with integer token ids (aten.embedding; an i64 input)."""
import torch
import torch.nn as nn

BATCH = 16
SEQ = 64
VOCAB = 1000
DIM = 128


class Model(nn.Module):
    def __init__(self, vocab, dim):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)

    def forward(self, ids):
        return self.emb(ids)


def get_inputs():
    return [torch.randint(0, VOCAB, (BATCH, SEQ))]


def get_init_inputs():
    return [VOCAB, DIM]
