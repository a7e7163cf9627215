"""Depthwise 3x3 convolution: groups == channels."""
import torch
import torch.nn as nn

BATCH = 4
CHANNELS = 32
HEIGHT = 28
WIDTH = 28


class Model(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.dw = nn.Conv2d(channels, channels, 3, padding=1, groups=channels)

    def forward(self, x):
        return self.dw(x)


def get_inputs():
    return [torch.randn(BATCH, CHANNELS, HEIGHT, WIDTH)]


def get_init_inputs():
    return [CHANNELS]
