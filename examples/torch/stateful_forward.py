"""forward assigns module attributes (self.h = ..., a call counter): torch.export cannot keep
that state, so capture falls back to dispatch recording."""
import torch
import torch.nn as nn

BATCH = 16
DIM = 64


class Model(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.fc = nn.Linear(dim, dim)
        self.h = None
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        self.h = torch.tanh(self.fc(x))
        return self.h * 2.0


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return [DIM]
