"""A UNet encoder ("down") block in float16: two 3x3 conv + GroupNorm + SiLU layers with a 1x1
residual projection, then a stride-2 max-pool; parameters created in fp16 (`dtype=torch.float16`)."""
import torch
import torch.nn as nn

BATCH = 2
IN_CH = 32
OUT_CH = 64
SIZE = 32
GROUPS = 8

HALF = torch.float16


class ConvNormAct(nn.Module):
    def __init__(self, cin, cout, groups):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, 3, padding=1, dtype=HALF)
        self.norm = nn.GroupNorm(groups, cout, dtype=HALF)
        self.act = nn.SiLU()

    def forward(self, x):
        return self.act(self.norm(self.conv(x)))


class Model(nn.Module):
    def __init__(self, cin, cout, groups):
        super().__init__()
        self.block1 = ConvNormAct(cin, cout, groups)
        self.block2 = ConvNormAct(cout, cout, groups)
        self.skip = nn.Conv2d(cin, cout, 1, dtype=HALF)
        self.down = nn.MaxPool2d(2)

    def forward(self, x):
        h = self.block2(self.block1(x)) + self.skip(x)
        return self.down(h), h


def get_inputs():
    return [torch.randn(BATCH, IN_CH, SIZE, SIZE, dtype=HALF)]


def get_init_inputs():
    return [IN_CH, OUT_CH, GROUPS]
