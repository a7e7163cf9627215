"""nn.Linear followed by ReLU (aten.linear kept whole, aten.relu)."""
import torch
import torch.nn as nn

BATCH = 64
IN_FEATURES = 256
OUT_FEATURES = 128


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)

    def forward(self, x):
        return torch.relu(self.fc(x))


def get_inputs():
    return [torch.randn(BATCH, IN_FEATURES)]


def get_init_inputs():
    return [IN_FEATURES, OUT_FEATURES]
