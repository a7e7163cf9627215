"""2-D max pooling, kernel 3, stride 2, padding 1 (aten.max_pool2d kept whole)."""
import torch
import torch.nn as nn

BATCH = 8
CHANNELS = 16
HEIGHT = 32
WIDTH = 32


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.pool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)

    def forward(self, x):
        return self.pool(x)


def get_inputs():
    return [torch.randn(BATCH, CHANNELS, HEIGHT, WIDTH)]


def get_init_inputs():
    return []
