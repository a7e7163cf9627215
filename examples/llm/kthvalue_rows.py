"""The 4th smallest value of every row, scaled, and where it is (aten.kthvalue, sent to the LLM by --llm-ops)."""
import torch
import torch.nn as nn

ROWS = 8
COLS = 16


class Model(nn.Module):
    def forward(self, x):
        values, where = torch.kthvalue(x, 4, dim=-1)
        return values * 2.0, where


def get_inputs():
    return [torch.randn(ROWS, COLS)]


def get_init_inputs():
    return []
