"""The gradient of a small MLP's output with respect to its input, asked of autograd inside forward
(`torch.autograd.grad` with the upstream gradient `g` as an input): a forward that calls autograd
itself, traced by make_fx (solar_compiler/frontends/torch/capture/autograd.py)."""

import torch
import torch.nn as nn

B, D, H, O = 4, 8, 16, 2


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(D, H)
        self.fc2 = nn.Linear(H, O)

    def forward(self, x, g):
        with torch.enable_grad():
            x = x.detach().requires_grad_(True)
            y = self.fc2(torch.relu(self.fc1(x)))
            (gx,) = torch.autograd.grad(y, x, g)
        return gx


def get_inputs():
    return [torch.randn(B, D), torch.randn(B, O)]


def get_init_inputs():
    return []
