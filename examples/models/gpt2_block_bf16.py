"""Two GPT-2 blocks in bfloat16, written as a user would: modules, then `self.to(torch.bfloat16)`
in `__init__` (pre-norm attention with a causal SDPA, GELU MLP, residuals, final LayerNorm)."""
import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH = 2
SEQ = 64
EMBED = 128
HEADS = 4
LAYERS = 2


class CausalSelfAttention(nn.Module):
    def __init__(self, embed, heads):
        super().__init__()
        self.heads = heads
        self.c_attn = nn.Linear(embed, 3 * embed)
        self.c_proj = nn.Linear(embed, embed)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.c_attn(x).split(c, dim=2)
        q = q.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        k = k.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        v = v.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.c_proj(y.transpose(1, 2).reshape(b, t, c))


class MLP(nn.Module):
    def __init__(self, embed):
        super().__init__()
        self.c_fc = nn.Linear(embed, 4 * embed)
        self.gelu = nn.GELU(approximate="tanh")
        self.c_proj = nn.Linear(4 * embed, embed)

    def forward(self, x):
        return self.c_proj(self.gelu(self.c_fc(x)))


class Block(nn.Module):
    def __init__(self, embed, heads):
        super().__init__()
        self.ln_1 = nn.LayerNorm(embed)
        self.attn = CausalSelfAttention(embed, heads)
        self.ln_2 = nn.LayerNorm(embed)
        self.mlp = MLP(embed)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class Model(nn.Module):
    def __init__(self, embed, heads, layers):
        super().__init__()
        self.h = nn.ModuleList([Block(embed, heads) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(embed)
        self.to(torch.bfloat16)

    def forward(self, x):
        for block in self.h:
            x = block(x)
        return self.ln_f(x)


def get_inputs():
    return [torch.randn(BATCH, SEQ, EMBED, dtype=torch.bfloat16)]


def get_init_inputs():
    return [EMBED, HEADS, LAYERS]
