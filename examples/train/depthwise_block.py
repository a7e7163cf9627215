"""Training step of a depthwise-separable block (a 1x1 expansion, a 3x3 depthwise convolution, a 1x1
projection, ReLU6 between) with global average pooling, a linear head and a cross-entropy loss:
`solar-opt examples/train/depthwise_block.py --translate --roofline=all --step train`.
The expansion reads the image (1x in backward); the grouped depthwise and the projection are 2x."""

import torch
import torch.nn as nn

BATCH = 2
CHANNELS = 4
WIDE = 16
SIZE = 8
CLASSES = 5


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.expand = nn.Conv2d(CHANNELS, WIDE, 1)
        self.depthwise = nn.Conv2d(WIDE, WIDE, 3, padding=1, groups=WIDE)
        self.project = nn.Conv2d(WIDE, CHANNELS, 1)
        self.act = nn.ReLU6()
        self.head = nn.Linear(CHANNELS, CLASSES)

    def forward(self, x, labels):
        h = self.act(self.depthwise(self.act(self.expand(x))))
        return self.head(self.project(h).mean(dim=(2, 3)))


def get_loss(outputs, x, labels):
    return nn.functional.cross_entropy(outputs, labels)


def get_inputs():
    return [torch.randn(BATCH, CHANNELS, SIZE, SIZE), torch.randint(0, CLASSES, (BATCH,))]


def get_init_inputs():
    return []
