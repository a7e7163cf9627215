"""A torch.library custom op with a CPU implementation: an opaque call to the translator."""
import torch
import torch.nn as nn

BATCH = 4
DIM = 32


@torch.library.custom_op("solar_examples::softsign", mutates_args=())
def softsign(x: torch.Tensor) -> torch.Tensor:
    return x / (1 + x.abs())


@softsign.register_fake
def _(x):
    return torch.empty_like(x)


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(DIM, DIM)

    def forward(self, x):
        return softsign(self.proj(x)) * 3.0


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return []
