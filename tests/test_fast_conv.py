"""Fast convolution (`analysis/fast_conv.py`): a 3 x 3 stride-1 convolution in f32 or f16 is priced
by the default model at Winograd F(2x2,3x3) or F(4x4,3x3) products, the fewer, per tile never more
than the tile's direct taps; anything else (stride 2, a 5 x 5 filter, bf16) keeps its direct
products. Counts derived by hand below (a MAC is 2 FLOPs)."""

from __future__ import annotations

import pytest

from solar_compiler.text.parser import parse_kernel
from solar_compiler.transforms.kernels import kernel_costs

CONV = """kernel conv(X: {dt}[1, 2, 6, 6] input, W: {dt}[3, 2, {r}, {r}] weight, Y: {dt}[1, 3, 6, 6] output):
    for n in range(1):
        for o in range(3):
            for p in range(6):
                for q in range(6):
                    Y[n, o, p, q] = 0.0
                    for c in range(2):
                        for r in range({r}):
                            for s in range({r}):
                                if p + r >= {pad} and p + r <= {hi} and q + s >= {pad} and q + s <= {hi}:
                                    Y[n, o, p, q] += X[n, c, p + r - {pad}, q + s - {pad}] * W[o, c, r, s]
"""


def conv(dt: str = "f32", r: int = 3) -> str:
    pad = r // 2
    return CONV.format(dt=dt, r=r, pad=pad, hi=5 + pad)


def matrix(text: str, distinct: bool) -> tuple[int, str | None]:
    g = kernel_costs(parse_kernel(text), distinct=distinct)
    (op,) = [o for o in g.ops if o.flops_matrix]
    return op.flops_matrix, op.algorithm


def test_a_3x3_stride_1_conv_is_priced_at_winograd_products():
    # 6 x 6 output, padding 1: per axis the outputs hold 2, 3, 3, 3, 3, 2 taps (16), so direct is
    # 16^2 = 256 products per (n, o, c), 6 of them. F(4x4,3x3): axis tiles [0, 4) with 11 taps and
    # [4, 6) with 5; 2-D tiles min(11 x 11, 36) + 2 min(11 x 5, 36) + min(5 x 5, 36) = 36 + 72 + 25
    # = 133 (the corner tile is cheaper direct). F(2x2,3x3): tiles of 5, 6, 5 taps, every 2-D tile
    # min(>= 25, 16) = 16, 9 tiles = 144. The fewest: F(4x4,3x3).
    assert matrix(conv(), False) == (2 * 6 * 256, None)
    assert matrix(conv(), True) == (2 * 6 * 133, "Winograd F(4x4,3x3)")
    assert matrix(conv("f16"), True) == (2 * 6 * 133, "Winograd F(4x4,3x3)")


def test_a_flipped_filter_is_a_convolution_too():
    # cuDNN's CUDNN_CONVOLUTION mode: the window read as q - s + c; the same taps per output position
    text = conv().replace("q + s >= 1 and q + s <= 6", "q - s + 2 >= 1 and q - s + 2 <= 6").replace(
        "q + s - 1]", "q - s + 1]")
    assert matrix(text, True) == (2 * 6 * 133, "Winograd F(4x4,3x3)")


@pytest.mark.parametrize("text", [conv("bf16"), conv(r=5)], ids=["bf16", "5x5"])
def test_what_cudnn_does_not_ship_keeps_its_direct_products(text):
    # bf16 (no cuDNN configuration lists Winograd for it) and a 5 x 5 filter (F(m, 3) only) are direct
    direct, how = matrix(text, False)
    assert matrix(text, True) == (direct, None) and how is None


def test_a_strided_conv_is_direct():
    # examples/loop/conv2d.loop: 3 x 3, stride 2: 2 * p + r is not a stride-1 window
    with open("examples/loop/conv2d.loop") as f:
        text = f.read()
    direct, _ = matrix(text, False)
    assert matrix(text, True) == (direct, None)
