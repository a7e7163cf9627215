"""A DLRM-style recommender: a bottom MLP on dense features, one `nn.EmbeddingBag` (sum) per sparse
feature with multi-hot bags given by offsets, pairwise dot-product interaction, a top MLP."""
import torch
import torch.nn as nn

BATCH = 32
DENSE = 13
TABLES = 4
ROWS = 1000
DIM = 16
HOTS = 3  # lookups per bag


class Model(nn.Module):
    def __init__(self, dense, tables, rows, dim):
        super().__init__()
        self.bottom = nn.Sequential(nn.Linear(dense, 64), nn.ReLU(), nn.Linear(64, dim), nn.ReLU())
        self.emb = nn.ModuleList([nn.EmbeddingBag(rows, dim, mode="sum") for _ in range(tables)])
        pairs = (tables + 1) * tables // 2
        self.top = nn.Sequential(nn.Linear(dim + pairs, 64), nn.ReLU(), nn.Linear(64, 1))
        self.pairs = torch.triu_indices(tables + 1, tables + 1, offset=1)

    def forward(self, dense, indices, offsets):
        x = self.bottom(dense)
        feats = [x] + [e(indices[t], offsets[t]) for t, e in enumerate(self.emb)]
        z = torch.stack(feats, dim=1)
        dots = torch.bmm(z, z.transpose(1, 2))
        inter = dots[:, self.pairs[0], self.pairs[1]]
        return torch.sigmoid(self.top(torch.cat([x, inter], dim=1)))


def get_inputs():
    indices = torch.randint(0, ROWS, (TABLES, BATCH * HOTS))
    offsets = torch.arange(0, BATCH * HOTS, HOTS).repeat(TABLES, 1)
    return [torch.randn(BATCH, DENSE), indices, offsets]


def get_init_inputs():
    return [DENSE, TABLES, ROWS, DIM]
