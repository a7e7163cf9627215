"""index_put with accumulate=True (`out.index_put_((rows, cols), vals, accumulate=True)`): a sparse
COO matrix densified by adding every entry into its (row, col); repeated coordinates add up."""
import torch
import torch.nn as nn

NNZ = 8192
ROWS = 256
COLS = 512


class Model(nn.Module):
    def __init__(self, rows, cols):
        super().__init__()
        self.rows = rows
        self.cols = cols

    def forward(self, rows, cols, vals):
        dense = torch.zeros(self.rows, self.cols, dtype=vals.dtype)
        dense.index_put_((rows, cols), vals, accumulate=True)
        return dense


def get_inputs():
    return [torch.randint(0, ROWS, (NNZ,)), torch.randint(0, COLS, (NNZ,)), torch.randn(NNZ)]


def get_init_inputs():
    return [ROWS, COLS]
