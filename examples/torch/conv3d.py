"""3-D convolution over a small volume (aten.convolution with a 3-D window)."""
import torch
import torch.nn as nn

BATCH = 2
CIN = 4
COUT = 8
DEPTH = 8
HEIGHT = 16
WIDTH = 16


class Model(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.conv = nn.Conv3d(cin, cout, kernel_size=3, padding=1)

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.randn(BATCH, CIN, DEPTH, HEIGHT, WIDTH)]


def get_init_inputs():
    return [CIN, COUT]
