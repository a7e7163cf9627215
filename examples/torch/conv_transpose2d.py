"""Transposed 2-D convolution that upsamples by 2 (aten.convolution, transposed=True)."""
import torch
import torch.nn as nn

BATCH = 4
CIN = 16
COUT = 8
HEIGHT = 16
WIDTH = 16


class Model(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.deconv = nn.ConvTranspose2d(cin, cout, kernel_size=4, stride=2, padding=1)

    def forward(self, x):
        return self.deconv(x)


def get_inputs():
    return [torch.randn(BATCH, CIN, HEIGHT, WIDTH)]


def get_init_inputs():
    return [CIN, COUT]
