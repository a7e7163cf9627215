"""Histogram-like scatter_add: every sample adds its feature row into the bucket its label names
(aten.scatter_add; repeated labels accumulate into one row, an indirect write)."""
import torch
import torch.nn as nn

SAMPLES = 4096
BUCKETS = 64
DIM = 128


class Model(nn.Module):
    def __init__(self, buckets):
        super().__init__()
        self.buckets = buckets

    def forward(self, x, labels):
        index = labels.unsqueeze(1).expand(-1, x.shape[1])
        sums = torch.zeros(self.buckets, x.shape[1], dtype=x.dtype).scatter_add(0, index, x)
        counts = torch.zeros(self.buckets, dtype=x.dtype).scatter_add(0, labels, torch.ones_like(labels,
                                                                                                 dtype=x.dtype))
        return sums / counts.clamp(min=1.0).unsqueeze(1)


def get_inputs():
    return [torch.randn(SAMPLES, DIM), torch.randint(0, BUCKETS, (SAMPLES,))]


def get_init_inputs():
    return [BUCKETS]
