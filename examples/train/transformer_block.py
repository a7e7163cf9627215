"""Training step of a pre-norm transformer block over token embeddings (embedding, layer norm, causal
scaled-dot-product attention, GELU MLP, a language-model head) with a next-token cross-entropy loss:
`solar-opt examples/train/transformer_block.py --translate --roofline=all --step train --optimizer adamw`."""

import torch
import torch.nn as nn

BATCH = 2
SEQ = 16
DIM = 32
HEADS = 4
VOCAB = 64


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, DIM)
        self.ln1 = nn.LayerNorm(DIM)
        self.qkv = nn.Linear(DIM, 3 * DIM)
        self.proj = nn.Linear(DIM, DIM)
        self.ln2 = nn.LayerNorm(DIM)
        self.mlp = nn.Sequential(nn.Linear(DIM, 4 * DIM), nn.GELU(), nn.Linear(4 * DIM, DIM))
        self.head = nn.Linear(DIM, VOCAB)

    def forward(self, ids, targets):
        x = self.emb(ids)
        q, k, v = self.qkv(self.ln1(x)).view(BATCH, SEQ, 3, HEADS, DIM // HEADS).permute(2, 0, 3, 1, 4)
        a = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(BATCH, SEQ, DIM))
        x = x + self.mlp(self.ln2(x))
        return self.head(x)


def get_loss(outputs, ids, targets):
    return nn.functional.cross_entropy(outputs.reshape(-1, VOCAB), targets.reshape(-1))


def get_inputs():
    return [torch.randint(0, VOCAB, (BATCH, SEQ)), torch.randint(0, VOCAB, (BATCH, SEQ))]


def get_init_inputs():
    return []
