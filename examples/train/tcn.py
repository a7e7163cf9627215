"""Training step of a small temporal convolution network (two dilated 1-D convolutions with ReLU, a
mean over time and a linear head) with an MSE loss:
`solar-opt examples/train/tcn.py --translate --roofline=all --step train`. The first convolution
reads the input signal (1x in backward); the second and the head are 2x."""

import torch
import torch.nn as nn

BATCH = 4
CHANNELS = 6
STEPS = 20
WIDTH = 12
D_OUT = 3


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv1d(CHANNELS, WIDTH, 3, padding=1)
        self.conv2 = nn.Conv1d(WIDTH, WIDTH, 3, padding=2, dilation=2)
        self.act = nn.ReLU()
        self.head = nn.Linear(WIDTH, D_OUT)

    def forward(self, x, target):
        h = self.act(self.conv2(self.act(self.conv1(x))))
        return self.head(h.mean(dim=2))


def get_loss(outputs, x, target):
    return nn.functional.mse_loss(outputs, target)


def get_inputs():
    return [torch.randn(BATCH, CHANNELS, STEPS), torch.randn(BATCH, D_OUT)]


def get_init_inputs():
    return []
