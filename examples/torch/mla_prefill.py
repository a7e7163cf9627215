"""DeepSeek multi-head latent attention (MLA), prefill of SEQ tokens, computed as DeepSeek-V2/V3
write it: keys and values are up-projected from the latent `c_kv` (k_nope = W_UK c_kv,
v = W_UV c_kv), the rotary part (q_pe, k_pe) is kept separate and added to the scores, and a causal
mask (-inf above the diagonal) is added before the softmax. Dimensions of DeepSeek-V2-Lite (hidden
2048, 16 heads, kv_lora_rank 512, nope/rope/v head dims 128/64/128, no query compression).

With as many queries as keys, materialising K and V is the cheaper order (the absorbed order would
contract every query with the 512-wide latent), so `--reorder-chains` leaves these trees as written
(docs/reorder-chains.md derives both orders; mla_decode.py is the step where absorbing wins).
"""
import math

import torch
import torch.nn as nn

BATCH = 1
SEQ = 256
DIM = 2048
HEADS = 16
KV_RANK = 512            # d_c, the latent width
NOPE = 128               # d_h, per-head query/key width without rotary embedding
ROPE = 64                # d_h^R, the decoupled rotary part (shared by all heads for the key)
V_DIM = 128


def rope(x, cos, sin):
    """DeepSeek's rotary embedding on interleaved pairs (x[2i], x[2i+1]), in real arithmetic."""
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return torch.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1).flatten(-2)


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class Model(nn.Module):
    def __init__(self, dim, heads, kv_rank, nope, rope_dim, v_dim, max_pos):
        super().__init__()
        self.heads, self.kv_rank, self.nope, self.rope_dim, self.v_dim = heads, kv_rank, nope, rope_dim, v_dim
        self.wq = nn.Linear(dim, heads * (nope + rope_dim), bias=False)
        self.wkv_a = nn.Linear(dim, kv_rank + rope_dim, bias=False)
        self.kv_norm = RMSNorm(kv_rank)
        self.wkv_b = nn.Linear(kv_rank, heads * (nope + v_dim), bias=False)   # W_UK and W_UV
        self.wo = nn.Linear(heads * v_dim, dim, bias=False)
        self.softmax_scale = 1.0 / math.sqrt(nope + rope_dim)
        inv = 1.0 / 10000 ** (torch.arange(0, rope_dim, 2).float() / rope_dim)
        ang = torch.outer(torch.arange(max_pos).float(), inv)
        self.register_buffer("cos", ang.cos())
        self.register_buffer("sin", ang.sin())

    def forward(self, x):
        b, s, _ = x.shape
        cos, sin = self.cos[:s], self.sin[:s]
        q = self.wq(x).view(b, s, self.heads, self.nope + self.rope_dim)
        q_nope, q_pe = torch.split(q, [self.nope, self.rope_dim], dim=-1)
        q_pe = rope(q_pe, cos[:, None, :], sin[:, None, :])
        kv = self.wkv_a(x)
        kv, k_pe = torch.split(kv, [self.kv_rank, self.rope_dim], dim=-1)
        c_kv = self.kv_norm(kv)                                            # [b, t, d_c]
        k_pe = rope(k_pe, cos, sin)                                        # [b, t, d_h^R]
        wkv_b = self.wkv_b.weight.view(self.heads, self.nope + self.v_dim, self.kv_rank)
        w_uk, w_uv = wkv_b[:, :self.nope], wkv_b[:, self.nope:]
        k_nope = torch.einsum("btc,hdc->bthd", c_kv, w_uk)
        v = torch.einsum("btc,hdc->bthd", c_kv, w_uv)
        scores = (torch.einsum("bshd,bthd->bsht", q_nope, k_nope)
                  + torch.einsum("bshr,btr->bsht", q_pe, k_pe)) * self.softmax_scale
        mask = torch.full((s, s), float("-inf")).triu(1)
        p = (scores + mask[None, :, None, :]).softmax(dim=-1)
        o = torch.einsum("bsht,bthd->bshd", p, v)
        return self.wo(o.flatten(2))


def get_inputs():
    return [torch.randn(BATCH, SEQ, DIM)]


def get_init_inputs():
    return [DIM, HEADS, KV_RANK, NOPE, ROPE, V_DIM, SEQ]
