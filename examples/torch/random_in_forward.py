"""Random values drawn inside forward (torch.randn_like noise and torch.rand): two random
tensors exposed as extra inputs."""
import torch
import torch.nn as nn

BATCH = 32
DIM = 128


class Model(nn.Module):
    def __init__(self, sigma):
        super().__init__()
        self.sigma = sigma

    def forward(self, x):
        noisy = x + self.sigma * torch.randn_like(x)
        gate = torch.rand(BATCH, 1)
        return noisy * gate


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return [0.1]
