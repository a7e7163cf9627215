"""Several reductions of one tensor: variance, standard deviation, amax and argmax."""
import torch
import torch.nn as nn

BATCH = 32
DIM = 1024


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        var = torch.var(x, dim=1)
        std = torch.std(x, dim=1, keepdim=True)
        amax = torch.amax(x, dim=1)
        arg = torch.argmax(x, dim=1)
        return var, std, amax, arg


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return []
