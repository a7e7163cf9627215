"""Row-wise cosine similarity between two batches of vectors, then 1 - mean."""
import torch
import torch.nn as nn

BATCH = 128
DIM = 512


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        sim = torch.nn.functional.cosine_similarity(a, b, dim=1)
        return torch.mean(1 - sim)


def get_inputs():
    return [torch.randn(BATCH, DIM), torch.randn(BATCH, DIM)]


def get_init_inputs():
    return []
