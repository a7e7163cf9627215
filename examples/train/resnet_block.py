"""Training step of a ResNet basic block (conv-bn-relu-conv-bn plus the identity skip, then ReLU),
global average pooling and a linear classifier, cross-entropy loss:
`solar-opt examples/train/resnet_block.py --translate --roofline=all --step train`.
A stem convolution makes the block's input need a gradient, so both block convolutions are 2x in
backward and only the stem is 1x (its input is the image)."""

import torch
import torch.nn as nn

BATCH = 2
CHANNELS = 8
SIZE = 8
CLASSES = 10


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, CHANNELS, 3, padding=1, bias=False)
        self.conv1 = nn.Conv2d(CHANNELS, CHANNELS, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(CHANNELS)
        self.conv2 = nn.Conv2d(CHANNELS, CHANNELS, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(CHANNELS)
        self.relu = nn.ReLU()
        self.head = nn.Linear(CHANNELS, CLASSES)

    def forward(self, x, labels):
        h = self.relu(self.stem(x))
        y = self.relu(self.bn1(self.conv1(h)))
        y = self.relu(self.bn2(self.conv2(y)) + h)
        return self.head(y.mean(dim=(2, 3)))


def get_loss(outputs, x, labels):
    return nn.functional.cross_entropy(outputs, labels)


def get_inputs():
    return [torch.randn(BATCH, 3, SIZE, SIZE), torch.randint(0, CLASSES, (BATCH,))]


def get_init_inputs():
    return []
