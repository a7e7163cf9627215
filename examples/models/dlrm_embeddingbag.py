"""A DLRM-style recommender: a bottom MLP on dense features, one `nn.EmbeddingBag` (sum) per sparse
feature with a fixed number of lookups per sample (multi-hot, 2-d indices: bags of `HOTS`), pairwise
dot-product interaction of the features, a top MLP."""
import torch
import torch.nn as nn

BATCH = 64
DENSE = 13
TABLES = 4
ROWS = 5000
DIM = 32
HOTS = 4  # lookups per sample and table


class Model(nn.Module):
    def __init__(self, dense, tables, rows, dim):
        super().__init__()
        self.bottom = nn.Sequential(nn.Linear(dense, 64), nn.ReLU(), nn.Linear(64, dim), nn.ReLU())
        self.emb = nn.ModuleList([nn.EmbeddingBag(rows, dim, mode="sum") for _ in range(tables)])
        pairs = (tables + 1) * tables // 2
        self.top = nn.Sequential(nn.Linear(dim + pairs, 64), nn.ReLU(), nn.Linear(64, 1))
        rows_i, cols_i = torch.triu_indices(tables + 1, tables + 1, offset=1)
        self.register_buffer("rows_i", rows_i)
        self.register_buffer("cols_i", cols_i)

    def forward(self, dense, sparse):
        x = self.bottom(dense)
        feats = [x] + [bag(sparse[:, t]) for t, bag in enumerate(self.emb)]
        z = torch.stack(feats, dim=1)
        dots = torch.bmm(z, z.transpose(1, 2))
        inter = dots[:, self.rows_i, self.cols_i]
        return torch.sigmoid(self.top(torch.cat([x, inter], dim=1)))


def get_inputs():
    return [torch.randn(BATCH, DENSE), torch.randint(0, ROWS, (BATCH, TABLES, HOTS))]


def get_init_inputs():
    return [DENSE, TABLES, ROWS, DIM]
