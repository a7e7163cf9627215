"""Training step of a 2-layer MLP (Linear -> ReLU -> Linear) with a mean-squared-error loss against a
target: `solar-opt examples/train/mlp.py --translate --roofline=all --step train --optimizer adamw`.
The input needs no gradient, so the first layer's backward is one product (its weight gradient) and
the second layer's two (weight gradient and input gradient): docs/training.md."""

import torch
import torch.nn as nn

BATCH = 8
D_IN = 32
HIDDEN = 64
D_OUT = 16


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(D_IN, HIDDEN)
        self.act = nn.ReLU()
        self.fc2 = nn.Linear(HIDDEN, D_OUT)

    def forward(self, x, target):
        return self.fc2(self.act(self.fc1(x)))


def get_loss(outputs, x, target):
    return nn.functional.mse_loss(outputs, target)


def get_inputs():
    return [torch.randn(BATCH, D_IN), torch.randn(BATCH, D_OUT)]


def get_init_inputs():
    return []
