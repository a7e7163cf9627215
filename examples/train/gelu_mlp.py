"""Training step of a three-layer GELU MLP with dropout between layers and an MSE loss:
`solar-opt examples/train/gelu_mlp.py --translate --roofline=all --step train` (dropout is the
identity in eval mode; `--mode train` draws its mask once, docs/training.md). fc1 reads the input
(1x in backward); fc2 and fc3 are 2x."""

import torch
import torch.nn as nn

BATCH = 8
D_IN = 16
HIDDEN = 32
D_OUT = 8


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(D_IN, HIDDEN)
        self.fc2 = nn.Linear(HIDDEN, HIDDEN)
        self.fc3 = nn.Linear(HIDDEN, D_OUT)
        self.act = nn.GELU()
        self.drop = nn.Dropout(0.1)

    def forward(self, x, target):
        h = self.drop(self.act(self.fc1(x)))
        h = self.drop(self.act(self.fc2(h)))
        return self.fc3(h)


def get_loss(outputs, x, target):
    return nn.functional.mse_loss(outputs, target)


def get_inputs():
    return [torch.randn(BATCH, D_IN), torch.randn(BATCH, D_OUT)]


def get_init_inputs():
    return []
