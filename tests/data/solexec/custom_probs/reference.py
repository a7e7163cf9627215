import torch


def make_inputs(axes_and_scalars, device):
    T, E = axes_and_scalars["T"], axes_and_scalars["E"]
    logits = torch.randn(T, E, device=device)
    return {"probs": torch.softmax(logits, dim=-1)}


def run(probs, values):
    return probs @ values
