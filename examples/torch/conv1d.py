"""1-D convolution over a sequence, no bias (aten.convolution with a 1-D window)."""
import torch
import torch.nn as nn

BATCH = 8
CHANNELS_IN = 32
CHANNELS_OUT = 64
LENGTH = 256
KERNEL = 5


class Model(nn.Module):
    def __init__(self, cin, cout, k):
        super().__init__()
        self.conv = nn.Conv1d(cin, cout, k, padding=2, bias=False)

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.randn(BATCH, CHANNELS_IN, LENGTH)]


def get_init_inputs():
    return [CHANNELS_IN, CHANNELS_OUT, KERNEL]
