"""LayerNorm over the last two dimensions with affine parameters."""
import torch
import torch.nn as nn

BATCH = 16
SEQ = 64
HIDDEN = 128


class Model(nn.Module):
    def __init__(self, seq, hidden):
        super().__init__()
        self.ln = nn.LayerNorm((seq, hidden))

    def forward(self, x):
        return self.ln(x)


def get_inputs():
    return [torch.randn(BATCH, SEQ, HIDDEN)]


def get_init_inputs():
    return [SEQ, HIDDEN]
