"""Linear followed by dropout(p=0.25): in train mode the dropout mask is a random draw inside
forward (one random tensor); in eval mode dropout is the identity."""
import torch
import torch.nn as nn

BATCH = 64
DIM = 256


class Model(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.fc = nn.Linear(dim, dim)
        self.drop = nn.Dropout(0.25)

    def forward(self, x):
        return self.drop(self.fc(x))


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return [DIM]
