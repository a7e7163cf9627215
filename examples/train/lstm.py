"""Training step of an LSTM classifier (the last step's hidden state through a linear head):
`solar-opt examples/train/lstm.py --translate --roofline=all --step train`. The recurrent layer is
traced through torch's portable per-step ops (docs/training.md)."""

import torch
import torch.nn as nn

BATCH = 4
STEPS = 6
FEATURES = 16
HIDDEN = 32
CLASSES = 8


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(FEATURES, HIDDEN, batch_first=True)
        self.head = nn.Linear(HIDDEN, CLASSES)

    def forward(self, x, labels):
        out, _ = self.lstm(x)
        return self.head(out[:, -1])


def get_loss(outputs, x, labels):
    return nn.functional.cross_entropy(outputs, labels)


def get_inputs():
    return [torch.randn(BATCH, STEPS, FEATURES), torch.randint(0, CLASSES, (BATCH,))]


def get_init_inputs():
    return []
