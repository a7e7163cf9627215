"""torch.gather along the last dimension with an integer index tensor."""
import torch
import torch.nn as nn

BATCH = 64
DIM = 512
PICK = 32


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, index):
        return torch.gather(x, 1, index)


def get_inputs():
    return [torch.randn(BATCH, DIM), torch.randint(0, DIM, (BATCH, PICK))]


def get_init_inputs():
    return []
