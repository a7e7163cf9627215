import torch


def run(a, b, scale):
    c = torch.matmul(a.to(torch.float32), b.to(torch.float32).T)
    return (c * scale).to(torch.bfloat16)
