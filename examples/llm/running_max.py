"""A Python loop over tensor elements: a running maximum built with .tolist() (the capture bakes the
traced values in as a constant, so the deterministic translation fails on fresh samples)."""
import torch
import torch.nn as nn

N = 16


class Model(nn.Module):
    def forward(self, x):
        vals = []
        best = float("-inf")
        for v in x.tolist():
            best = max(best, v)
            vals.append(best)
        return torch.tensor(vals, dtype=x.dtype) + x


def get_inputs():
    return [torch.randn(N)]


def get_init_inputs():
    return []
