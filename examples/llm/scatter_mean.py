"""Per-bucket mean of sample features: scatter_reduce(reduce="mean") (no template for 'mean')."""
import torch
import torch.nn as nn

SAMPLES = 32
BUCKETS = 8
DIM = 4


class Model(nn.Module):
    def forward(self, x, labels):
        index = labels.unsqueeze(1).expand(-1, DIM)
        out = torch.zeros(BUCKETS, DIM, dtype=x.dtype)
        return out.scatter_reduce(0, index, x, reduce="mean", include_self=False)


def get_inputs():
    return [torch.randn(SAMPLES, DIM), torch.randint(0, BUCKETS, (SAMPLES,))]


def get_init_inputs():
    return []
