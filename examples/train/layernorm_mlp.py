"""Training step of a pre-norm MLP (layer norm, Linear, ReLU, Linear) with an MSE loss:
`solar-opt examples/train/layernorm_mlp.py --translate --roofline=all --step train`.
The layer norm's affine output depends on trained parameters, so even the first Linear's input
needs a gradient: both Linears are 2x in backward."""

import torch
import torch.nn as nn

BATCH = 8
D_IN = 24
HIDDEN = 48
D_OUT = 12


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(D_IN)
        self.fc1 = nn.Linear(D_IN, HIDDEN)
        self.act = nn.ReLU()
        self.fc2 = nn.Linear(HIDDEN, D_OUT)

    def forward(self, x, target):
        return self.fc2(self.act(self.fc1(self.norm(x))))


def get_loss(outputs, x, target):
    return nn.functional.mse_loss(outputs, target)


def get_inputs():
    return [torch.randn(BATCH, D_IN), torch.randn(BATCH, D_OUT)]


def get_init_inputs():
    return []
