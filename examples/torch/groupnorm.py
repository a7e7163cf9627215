"""GroupNorm with 8 groups over 32 channels (aten.group_norm kept whole)."""
import torch
import torch.nn as nn

BATCH = 8
CHANNELS = 32
GROUPS = 8
HEIGHT = 16
WIDTH = 16


class Model(nn.Module):
    def __init__(self, groups, channels):
        super().__init__()
        self.gn = nn.GroupNorm(groups, channels)

    def forward(self, x):
        return self.gn(x)


def get_inputs():
    return [torch.randn(BATCH, CHANNELS, HEIGHT, WIDTH)]


def get_init_inputs():
    return [GROUPS, CHANNELS]
