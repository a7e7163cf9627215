import torch

E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0]


def dequantize(x, scale):
    table = torch.tensor(E2M1, dtype=torch.float32, device=x.device)
    raw = x.view(torch.uint8)
    lo = (raw & 0x0F).long()
    hi = (raw >> 4).long()
    values = torch.stack([table[lo], table[hi]], dim=-1).reshape(x.shape[0], -1)
    return values * scale.to(torch.float32).repeat_interleave(16, dim=-1)


def run(a, b, a_scale, b_scale, alpha):
    c = torch.matmul(dequantize(a, a_scale), dequantize(b, b_scale).T)
    return (c * alpha).to(torch.bfloat16)
