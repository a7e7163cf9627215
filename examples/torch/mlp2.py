"""Two-layer MLP: Linear -> ReLU -> Linear."""
import torch
import torch.nn as nn

BATCH = 64
IN_FEATURES = 256
HIDDEN = 512
OUT_FEATURES = 10


class Model(nn.Module):
    def __init__(self, fin, hidden, fout):
        super().__init__()
        self.layers = nn.Sequential(nn.Linear(fin, hidden), nn.ReLU(), nn.Linear(hidden, fout))

    def forward(self, x):
        return self.layers(x)


def get_inputs():
    return [torch.randn(BATCH, IN_FEATURES)]


def get_init_inputs():
    return [IN_FEATURES, HIDDEN, OUT_FEATURES]
