"""BIG-INPUT BENCHMARK: a 4096 x 393216 float32 input (about 6.4 GB) through ReLU and a scale.
Capture must use fake tensors here; never run it eagerly in tests."""
import torch
import torch.nn as nn

ROWS = 4096
COLS = 393216


class Model(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        return torch.relu(x) * self.scale


def get_inputs():
    return [torch.rand(ROWS, COLS)]


def get_init_inputs():
    return [2.0]
