"""Training step of `nn.TransformerEncoderLayer` (post-norm, ReLU feed-forward, no dropout) over
token embeddings, with a linear head and a cross-entropy loss per token:
`solar-opt examples/train/encoder_layer.py --translate --roofline=all --step train`.
Every Linear's input depends on the trained embedding, so each is 2x in backward."""

import torch
import torch.nn as nn

BATCH = 2
SEQ = 8
DIM = 32
HEADS = 4
FF = 64
VOCAB = 40


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, DIM)
        self.layer = nn.TransformerEncoderLayer(DIM, HEADS, dim_feedforward=FF, dropout=0.0, batch_first=True)
        self.head = nn.Linear(DIM, VOCAB)

    def forward(self, ids, targets):
        return self.head(self.layer(self.emb(ids)))


def get_loss(outputs, ids, targets):
    return nn.functional.cross_entropy(outputs.reshape(-1, VOCAB), targets.reshape(-1))


def get_inputs():
    return [torch.randint(0, VOCAB, (BATCH, SEQ)), torch.randint(0, VOCAB, (BATCH, SEQ))]


def get_init_inputs():
    return []
