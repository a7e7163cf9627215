"""Mixture of experts with top-2 routing: a router picks experts per token (topk), tokens are
gathered per expert with torch.where (data-dependent sizes) and scattered back. The executed
work depends on the routing values."""
import torch
import torch.nn as nn

TOKENS = 64
DIM = 32
HIDDEN = 64
EXPERTS = 4
TOP_K = 2


class Model(nn.Module):
    def __init__(self, dim, hidden, experts, top_k):
        super().__init__()
        self.top_k = top_k
        self.router = nn.Linear(dim, experts, bias=False)
        self.experts = nn.ModuleList(
            [nn.Sequential(nn.Linear(dim, hidden), nn.ReLU(), nn.Linear(hidden, dim)) for _ in range(experts)]
        )

    def forward(self, x):
        probs = torch.softmax(self.router(x), dim=-1)
        weights, chosen = torch.topk(probs, self.top_k, dim=-1)
        out = torch.zeros_like(x)
        for e, expert in enumerate(self.experts):
            token, slot = torch.where(chosen == e)
            if token.numel() == 0:
                continue
            out.index_add_(0, token, weights[token, slot].unsqueeze(-1) * expert(x[token]))
        return out


def get_inputs():
    return [torch.randn(TOKENS, DIM)]


def get_init_inputs():
    return [DIM, HIDDEN, EXPERTS, TOP_K]
