"""Training step of a GRU classifier (the last step's hidden state through a linear head), cross-
entropy loss: `solar-opt examples/train/gru.py --translate --roofline=all --step train`. Like the
LSTM, the recurrent layer is traced through torch's portable per-step ops (docs/training.md)."""

import torch
import torch.nn as nn

BATCH = 4
STEPS = 5
FEATURES = 12
HIDDEN = 24
CLASSES = 6


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(FEATURES, HIDDEN, batch_first=True)
        self.head = nn.Linear(HIDDEN, CLASSES)

    def forward(self, x, labels):
        out, _ = self.gru(x)
        return self.head(out[:, -1])


def get_loss(outputs, x, labels):
    return nn.functional.cross_entropy(outputs, labels)


def get_inputs():
    return [torch.randn(BATCH, STEPS, FEATURES), torch.randint(0, CLASSES, (BATCH,))]


def get_init_inputs():
    return []
