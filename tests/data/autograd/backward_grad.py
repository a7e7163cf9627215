"""`y.backward(g)` inside forward, then `x.grad` read and returned: the accumulated gradient of a
leaf made in forward, traced by make_fx (solar_compiler/frontends/torch/capture/autograd.py)."""

import torch

N, D = 8, 32


class Model(torch.nn.Module):
    def forward(self, x, g):
        with torch.enable_grad():
            x = x.detach().requires_grad_(True)
            y = torch.tanh(x) * x
            y.backward(g)
        return x.grad


def get_inputs():
    return [torch.randn(N, D), torch.randn(N, D)]


def get_init_inputs():
    return []
