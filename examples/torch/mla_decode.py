"""DeepSeek multi-head latent attention (MLA), one decode step, computed as DeepSeek-V2/V3 write
it: the keys and values of every cached position are up-projected from the latent cache `c_kv`
(k_nope = W_UK c_kv, v = W_UV c_kv), the rotary part (q_pe, k_pe) is kept separate and added to
the scores. Dimensions of DeepSeek-V2-Lite (hidden 2048, 16 heads, kv_lora_rank 512, nope/rope/v
head dims 128/64/128, no query compression), with CACHED positions in the latent cache.

Absorbing W_UK into the query (q_nope W_UK, then against c_kv) and W_UV into the output (P c_kv,
then W_UV) is the order DeepSeek's inference code calls "absorb"; `--reorder-chains` finds it
(docs/reorder-chains.md derives the FLOPs of both orders).
"""
import math

import torch
import torch.nn as nn

BATCH = 1
CACHED = 1023            # positions already in the cache; the new token makes 1024
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

    def forward(self, x, kv_cache, pe_cache):
        b, s, _ = x.shape
        pos = kv_cache.shape[1]                      # the new token's position
        cos, sin = self.cos[pos:pos + s], self.sin[pos:pos + s]
        q = self.wq(x).view(b, s, self.heads, self.nope + self.rope_dim)
        q_nope, q_pe = torch.split(q, [self.nope, self.rope_dim], dim=-1)
        q_pe = rope(q_pe, cos[:, None, :], sin[:, None, :])
        kv = self.wkv_a(x)
        kv, k_pe = torch.split(kv, [self.kv_rank, self.rope_dim], dim=-1)
        c_kv = torch.cat([kv_cache, self.kv_norm(kv)], dim=1)              # [b, t, d_c]
        k_pe = torch.cat([pe_cache, rope(k_pe, cos, sin)], dim=1)          # [b, t, d_h^R]
        wkv_b = self.wkv_b.weight.view(self.heads, self.nope + self.v_dim, self.kv_rank)
        w_uk, w_uv = wkv_b[:, :self.nope], wkv_b[:, self.nope:]
        k_nope = torch.einsum("btc,hdc->bthd", c_kv, w_uk)
        v = torch.einsum("btc,hdc->bthd", c_kv, w_uv)
        scores = (torch.einsum("bshd,bthd->bsht", q_nope, k_nope)
                  + torch.einsum("bshr,btr->bsht", q_pe, k_pe)) * self.softmax_scale
        p = scores.softmax(dim=-1)
        o = torch.einsum("bsht,bthd->bshd", p, v)
        return self.wo(o.flatten(2))


def get_inputs():
    return [torch.randn(BATCH, 1, DIM), torch.randn(BATCH, CACHED, KV_RANK), torch.randn(BATCH, CACHED, ROPE)]


def get_init_inputs():
    return [DIM, HEADS, KV_RANK, NOPE, ROPE, V_DIM, CACHED + 1]
