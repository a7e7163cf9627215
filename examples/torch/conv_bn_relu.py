"""Conv2d -> BatchNorm2d -> ReLU: batch norm uses running statistics in eval mode and
batch statistics (with running-stat updates as side effects) in train mode."""
import torch
import torch.nn as nn

BATCH = 8
CIN = 3
COUT = 16
HEIGHT = 32
WIDTH = 32


class Model(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(cout)

    def forward(self, x):
        return torch.relu(self.bn(self.conv(x)))


def get_inputs():
    return [torch.randn(BATCH, CIN, HEIGHT, WIDTH)]


def get_init_inputs():
    return [CIN, COUT]
