"""Training step of a batch-norm CNN (conv-bn-relu-maxpool twice, global average, linear head) with a
cross-entropy loss: `solar-opt examples/train/bn_cnn.py --translate --roofline=all --step train`
(add `--mode train` for batch statistics). The first convolution's input is the image (1x in backward);
the second's input depends on trained parameters (2x)."""

import torch
import torch.nn as nn

BATCH = 2
SIZE = 12
CLASSES = 6


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(16)
        self.act = nn.ReLU()
        self.pool = nn.MaxPool2d(2)
        self.head = nn.Linear(16, CLASSES)

    def forward(self, x, labels):
        h = self.pool(self.act(self.bn1(self.conv1(x))))
        h = self.pool(self.act(self.bn2(self.conv2(h))))
        return self.head(h.mean(dim=(2, 3)))


def get_loss(outputs, x, labels):
    return nn.functional.cross_entropy(outputs, labels)


def get_inputs():
    return [torch.randn(BATCH, 3, SIZE, SIZE), torch.randint(0, CLASSES, (BATCH,))]


def get_init_inputs():
    return []
