import torch

assert torch.cuda.is_available(), "this reference needs a GPU"
DEVICE = torch.device("cuda")


def run(x, weight, eps):
    major, _ = torch.cuda.get_device_capability()
    assert major >= 9
    x = x.cuda()
    weight = weight.to("cuda:0")
    variance = x.pow(2).mean(-1, keepdim=True)
    y = x * torch.rsqrt(variance + eps) * weight.to(device=DEVICE)
    torch.cuda.synchronize()
    return y
