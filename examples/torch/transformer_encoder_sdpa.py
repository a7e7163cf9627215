"""A pre-norm transformer encoder layer using F.scaled_dot_product_attention and SiLU MLP."""
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
        self.qkv = nn.Linear(embed, 3 * embed)
        self.out = nn.Linear(embed, embed)
        self.fc1 = nn.Linear(embed, mlp)
        self.fc2 = nn.Linear(mlp, embed)

    def forward(self, x):
        b, s, e = x.shape
        qkv = self.qkv(self.ln1(x)).view(b, s, 3, self.heads, e // self.heads)
        q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)
        att = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.out(att.transpose(1, 2).reshape(b, s, e))
        return x + self.fc2(F.silu(self.fc1(self.ln2(x))))


def get_inputs():
    return [torch.randn(BATCH, SEQ, EMBED)]


def get_init_inputs():
    return [EMBED, HEADS, MLP]
