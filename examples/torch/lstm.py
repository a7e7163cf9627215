"""Two-layer batch-first LSTM; returns the output sequence (aten.lstm kept whole)."""
import torch
import torch.nn as nn

BATCH = 8
SEQ = 32
INPUT = 64
HIDDEN = 128
LAYERS = 2


class Model(nn.Module):
    def __init__(self, input_size, hidden, layers):
        super().__init__()
        self.lstm = nn.LSTM(input_size, hidden, num_layers=layers, batch_first=True)

    def forward(self, x):
        out, _ = self.lstm(x)
        return out


def get_inputs():
    return [torch.randn(BATCH, SEQ, INPUT)]


def get_init_inputs():
    return [INPUT, HIDDEN, LAYERS]
