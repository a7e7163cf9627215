"""Training step of a bag-of-embeddings classifier (embedding, mean over the sequence, linear head)
with a cross-entropy loss: `solar-opt examples/train/embedding_pool.py --translate --roofline=all
--step train`. The embedding is trained, so the head's input needs a gradient (2x in backward) and the
embedding's gradient is a scatter-add of the pooled gradient (embedding_dense_backward)."""

import torch
import torch.nn as nn

BATCH = 4
SEQ = 12
VOCAB = 50
DIM = 16
CLASSES = 5


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, DIM)
        self.head = nn.Linear(DIM, CLASSES)

    def forward(self, ids, labels):
        return self.head(self.emb(ids).mean(dim=1))


def get_loss(outputs, ids, labels):
    return nn.functional.cross_entropy(outputs, labels)


def get_inputs():
    return [torch.randint(0, VOCAB, (BATCH, SEQ)), torch.randint(0, CLASSES, (BATCH,))]


def get_init_inputs():
    return []
