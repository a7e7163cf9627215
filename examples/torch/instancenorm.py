"""InstanceNorm2d without affine parameters (normalises each (sample, channel) plane)."""
import torch
import torch.nn as nn

BATCH = 8
CHANNELS = 16
HEIGHT = 32
WIDTH = 32


class Model(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.norm = nn.InstanceNorm2d(channels)

    def forward(self, x):
        return self.norm(x)


def get_inputs():
    return [torch.randn(BATCH, CHANNELS, HEIGHT, WIDTH)]


def get_init_inputs():
    return [CHANNELS]
