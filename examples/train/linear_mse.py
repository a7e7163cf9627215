"""A training loop as users write it: `forward` computes the loss, calls `backward()` and the
optimizer's `step()`. `--step train` recognises it and captures the same step (the loss, the
gradients, and the update of the model's own AdamW): docs/training.md."""

import torch
import torch.nn as nn

BATCH = 16
D_IN = 64
D_OUT = 32


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(D_IN, D_OUT)
        self.opt = torch.optim.AdamW(self.proj.parameters(), lr=1e-3, weight_decay=0.01)

    def forward(self, x, target):
        loss = ((self.proj(x) - target) ** 2).mean()
        loss.backward()
        self.opt.step()
        self.opt.zero_grad()
        return loss


def get_inputs():
    return [torch.randn(BATCH, D_IN), torch.randn(BATCH, D_OUT)]


def get_init_inputs():
    return []
