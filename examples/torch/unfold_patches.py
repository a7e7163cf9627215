"""F.unfold (im2col) of 4x4 patches with stride 4, followed by a patch projection (ViT-style)."""
import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH = 4
CHANNELS = 3
SIZE = 32
PATCH = 4
EMBED = 64


class Model(nn.Module):
    def __init__(self, channels, patch, embed):
        super().__init__()
        self.patch = patch
        self.proj = nn.Linear(channels * patch * patch, embed)

    def forward(self, x):
        cols = F.unfold(x, kernel_size=self.patch, stride=self.patch)
        return self.proj(cols.transpose(1, 2))


def get_inputs():
    return [torch.randn(BATCH, CHANNELS, SIZE, SIZE)]


def get_init_inputs():
    return [CHANNELS, PATCH, EMBED]
