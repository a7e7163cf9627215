"""Training step of a tiny CNN (conv -> ReLU -> max pool -> conv -> global average -> linear) with a
cross-entropy loss: `solar-opt examples/train/cnn.py --translate --roofline=all --step train`.
The first convolution's input needs no gradient: its backward is the weight gradient only; the
second's is two products, each with the forward convolution's FLOPs (docs/training.md)."""

import torch
import torch.nn as nn

BATCH = 4
CHANNELS = 3
SIZE = 16
CLASSES = 10


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(CHANNELS, 8, 3, padding=1)
        self.act = nn.ReLU()
        self.pool = nn.MaxPool2d(2)
        self.conv2 = nn.Conv2d(8, 16, 3, stride=2, padding=1)
        self.head = nn.Linear(16, CLASSES)

    def forward(self, x, labels):
        h = self.pool(self.act(self.conv1(x)))
        h = self.act(self.conv2(h)).mean(dim=(2, 3))
        return self.head(h)


def get_loss(outputs, x, labels):
    return nn.functional.cross_entropy(outputs, labels)


def get_inputs():
    return [torch.randn(BATCH, CHANNELS, SIZE, SIZE), torch.randint(0, CLASSES, (BATCH,))]


def get_init_inputs():
    return []
