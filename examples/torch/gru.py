"""Single-layer GRU with an explicit initial hidden state; returns the final hidden state."""
import torch
import torch.nn as nn

BATCH = 8
SEQ = 32
INPUT = 64
HIDDEN = 96


class Model(nn.Module):
    def __init__(self, input_size, hidden):
        super().__init__()
        self.gru = nn.GRU(input_size, hidden)

    def forward(self, x, h0):
        _, hn = self.gru(x, h0)
        return hn


def get_inputs():
    return [torch.randn(SEQ, BATCH, INPUT), torch.randn(1, BATCH, HIDDEN)]


def get_init_inputs():
    return [INPUT, HIDDEN]
