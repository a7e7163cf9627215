"""2-D average pooling, kernel 2, stride 2 (aten.avg_pool2d)."""
import torch
import torch.nn as nn

BATCH = 8
CHANNELS = 16
HEIGHT = 32
WIDTH = 32


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.pool = nn.AvgPool2d(2)

    def forward(self, x):
        return self.pool(x)


def get_inputs():
    return [torch.randn(BATCH, CHANNELS, HEIGHT, WIDTH)]


def get_init_inputs():
    return []
