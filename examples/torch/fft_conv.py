"""A long convolution through the FFT, as Hyena and H3 compute theirs (`fftconv`): the input and a
filter as long as the sequence are zero-padded to twice its length, multiplied as spectra, and
transformed back. The transforms are DFT nests that stand in for cuFFT's algorithm: their traffic is
priced, their arithmetic is not (docs/torch-frontend.md, "Complex tensors and FFTs")."""

import torch
import torch.nn as nn

BATCH, CHANNELS, LENGTH = 2, 32, 256


class Model(nn.Module):
    def __init__(self, channels: int = CHANNELS, length: int = LENGTH):
        super().__init__()
        self.filter = nn.Parameter(torch.randn(channels, length) * 0.02)
        self.skip = nn.Parameter(torch.randn(channels))

    def forward(self, u: torch.Tensor) -> torch.Tensor:
        length = u.shape[-1]
        n = 2 * length
        k_f = torch.fft.rfft(self.filter, n=n) / n
        u_f = torch.fft.rfft(u, n=n)
        y = torch.fft.irfft(u_f * k_f, n=n, norm="forward")[..., :length]
        return y + u * self.skip[:, None]


def get_inputs():
    return [torch.randn(BATCH, CHANNELS, LENGTH)]


def get_init_inputs():
    return []
