import torch


def run(x):
    if x.shape[0] > 4:
        return x * 2.0
    return torch.exp(x) + 1.0
