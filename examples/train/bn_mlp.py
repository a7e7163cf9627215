"""A training step through batch norm and an in-place ReLU (`nn.ReLU(inplace=True)`, as CNNs write it):
`solar-opt examples/train/bn_mlp.py --translate --roofline=all --step train --mode train --optimizer sgd`.
The in-place update is functionalised; in train mode the running statistics' update is not a result of
the step (docs/training.md). fc1's bias gradient is zero up to rounding (batch norm removes the mean):
validation compares it through the float64 second opinion."""

import torch
import torch.nn as nn

BATCH = 16
D_IN = 32
HIDDEN = 64
D_OUT = 8


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(D_IN, HIDDEN)
        self.bn = nn.BatchNorm1d(HIDDEN)
        self.act = nn.ReLU(inplace=True)
        self.fc2 = nn.Linear(HIDDEN, D_OUT)

    def forward(self, x):
        return self.fc2(self.act(self.bn(self.fc1(x))))


def get_loss(outputs, x):
    return (outputs * outputs).mean()


def get_inputs():
    return [torch.randn(BATCH, D_IN)]


def get_init_inputs():
    return []
