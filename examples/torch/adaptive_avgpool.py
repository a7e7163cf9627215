"""Adaptive average pooling to a 7x7 grid from a non-divisible 20x20 input."""
import torch
import torch.nn as nn

BATCH = 4
CHANNELS = 32
HEIGHT = 20
WIDTH = 20


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.pool = nn.AdaptiveAvgPool2d((7, 7))

    def forward(self, x):
        return self.pool(x)


def get_inputs():
    return [torch.randn(BATCH, CHANNELS, HEIGHT, WIDTH)]


def get_init_inputs():
    return []
