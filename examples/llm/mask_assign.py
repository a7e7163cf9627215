"""Boolean-mask assignment: where x is positive, take y's value (aten.index with a bool mask, then a
boolean-mask aten.index_put: their positions depend on values, no template)."""
import torch
import torch.nn as nn

N = 64


class Model(nn.Module):
    def forward(self, x, y):
        out = x.clone()
        keep = x > 0
        out[keep] = y[keep]
        return out


def get_inputs():
    return [torch.randn(N), torch.randn(N)]


def get_init_inputs():
    return []
