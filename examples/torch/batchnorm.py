"""BatchNorm2d alone: running statistics in eval mode, batch statistics in train mode."""
import torch
import torch.nn as nn

BATCH = 16
CHANNELS = 32
HEIGHT = 16
WIDTH = 16


class Model(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.bn = nn.BatchNorm2d(channels)

    def forward(self, x):
        return self.bn(x)


def get_inputs():
    return [torch.randn(BATCH, CHANNELS, HEIGHT, WIDTH)]


def get_init_inputs():
    return [CHANNELS]
