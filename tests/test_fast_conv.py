"""Fast convolution (`analysis/fast_conv.py`): a stride-1 convolution in f32 or f16 is priced by the
default model at the fewest transform-domain products of the algorithms cuDNN ships for it:
Winograd F(2x2,3x3) or F(4x4,3x3) for a 3 x 3 filter, FFT (one transform of the whole padded map,
at most 256 per axis) or FFT_TILING (32 x 32 transforms) for any filter; per tile never more than the
tile's direct taps. Anything else (stride 2, bf16) keeps its direct products. Counts derived by hand
below (a MAC is 2 FLOPs)."""

from __future__ import annotations

from solar_compiler.analysis.fast_conv import fft_products, winograd_flops
from solar_compiler.analysis.graphs import node_ops
from solar_compiler.dialects.graph_convert import lift_kernel
from solar_compiler.text.parser import parse_kernel
from solar_compiler.transforms.kernels import kernel_costs

CONV = """kernel conv(X: {dt}[1, {c}, {n}, {n}] input, W: {dt}[3, {c}, {r}, {r}] weight,
            Y: {dt}[1, 3, {n}, {n}] output):
    for n in range(1):
        for o in range(3):
            for p in range({n}):
                for q in range({n}):
                    Y[n, o, p, q] = 0.0
                    for c in range({c}):
                        for r in range({r}):
                            for s in range({r}):
                                if p + r >= {pad} and p + r <= {hi} and q + s >= {pad} and q + s <= {hi}:
                                    Y[n, o, p, q] += X[n, c, p + r - {pad}, q + s - {pad}] * W[o, c, r, s]
"""


def conv(dt: str = "f32", r: int = 3, n: int = 6, c: int = 2) -> str:
    pad = r // 2
    return CONV.format(dt=dt, r=r, pad=pad, hi=n - 1 + pad, n=n, c=c)


def matrix(text: str, distinct: bool) -> tuple[int, str | None]:
    g = kernel_costs(parse_kernel(text), distinct=distinct)
    (op,) = [o for o in g.ops if o.flops_matrix]
    return op.flops_matrix, op.algorithm


def test_fft_products_per_transform_size():
    # bins of a real t1 x t2 transform: the real ones (4 when both sizes are even, 1 when both odd)
    # take one multiply, the conjugate pairs one complex product (3 real multiplies) per pair
    assert fft_products(8, 8) == 3 * (64 - 4) // 2 + 4 == 94
    assert fft_products(32, 32) == 3 * 510 + 4 == 1534
    assert fft_products(7, 7) == 3 * 48 // 2 + 1 == 73


def test_a_3x3_stride_1_conv_is_priced_at_its_fewest_fast_products():
    # 6 x 6 output, padding 1: per axis the outputs hold 2, 3, 3, 3, 3, 2 taps (16), so direct is
    # 16^2 = 256 products per (n, o, c), 6 of them. FFT of the whole padded map, 8 x 8: 94 products
    # (one tile of 36 outputs). Winograd F(4x4,3x3): axis tiles [0, 4) with 11 taps and [4, 6) with
    # 5; 2-D tiles min(11 x 11, 36) + 2 min(11 x 5, 36) + min(5 x 5, 36) = 36 + 72 + 25 = 133 (the
    # corner tile is cheaper direct); F(2x2,3x3): 9 tiles of min(>= 25, 16) = 144. FFT_TILING's
    # 32 x 32 transform (30 x 30 outputs, one tile): min(256, 1534) = 256. The fewest: FFT 8x8.
    assert matrix(conv(), False) == (2 * 6 * 256, None)
    assert matrix(conv(), True) == (2 * 6 * 94, "FFT 8x8")
    assert matrix(conv("f16"), True) == (2 * 6 * 94, "FFT 8x8")
    # Winograd's own count, as the entry prices it where FFT does not apply
    (node,) = [n for n in node_ops(lift_kernel(parse_kernel(conv()))) if n.sym_name.data == "S1"]
    assert winograd_flops(node, 2 * 6 * 256, "f32") == (2 * 6 * 133, "Winograd F(4x4,3x3)")


def test_a_flipped_filter_is_a_convolution_too():
    # cuDNN's CUDNN_CONVOLUTION mode: the window read as q - s + c; the same taps per output position
    text = conv().replace("q + s >= 1 and q + s <= 6", "q - s + 2 >= 1 and q - s + 2 <= 6").replace(
        "q + s - 1]", "q - s + 1]")
    assert matrix(text, True) == (2 * 6 * 94, "FFT 8x8")


def test_a_5x5_filter_is_priced_at_fft_products():
    # padding 2, 6 x 6 output: per axis 3, 4, 5, 5, 4, 3 taps (24), direct 24^2 = 576 per (n, o, c);
    # FFT of the 10 x 10 padded map: 3 * (100 - 4) / 2 + 4 = 148 (Winograd ships no 5 x 5 entry)
    assert matrix(conv(r=5), False) == (2 * 6 * 576, None)
    assert matrix(conv(r=5), True) == (2 * 6 * 148, "FFT 10x10")


def test_a_map_over_256_is_priced_at_fft_tiling():
    # 300 x 300 output, 3 x 3, padding 1: the padded map (302) is over FFT's 256, so FFT_TILING's
    # 32 x 32 transforms of 30 x 30 outputs, 10 x 10 tiles, each min(its direct taps, 1534) = 1534
    # (an interior tile has 8,100 taps; an edge tile 29 x 30 x 9 minus a row of taps, still more)
    flops, how = matrix(conv(n=300, c=1), True)
    assert (flops, how) == (2 * 3 * 100 * 1534, "FFT 32x32 tiles")


def test_bf16_keeps_its_direct_products():
    # no cuDNN configuration lists Winograd or FFT for bf16
    direct, how = matrix(conv("bf16"), False)
    assert matrix(conv("bf16"), True) == (direct, None) and how is None


def test_a_strided_conv_is_direct():
    # examples/loop/conv2d.loop: 3 x 3, stride 2: 2 * p + r is not a stride-1 window
    with open("examples/loop/conv2d.loop") as f:
        text = f.read()
    direct, _ = matrix(text, False)
    assert matrix(text, True) == (direct, None)


TRANSPOSED = """kernel convt(X: f32[1, 2, 6, 6] input, W: f32[2, 3, 3, 3] weight, Y: f32[1, 3, 6, 6] output):
    for n in range(1):
        for o in range(3):
            for p in range(6):
                for q in range(6):
                    Y[n, o, p, q] = 0.0
    for n in range(1):
        for o in range(3):
            for p in range(6):
                for q in range(6):
                    for c in range(2):
                        for r in range(3):
                            for s in range(3):
                                if p + r >= 1 and p + r <= 6 and q + s >= 1 and q + s <= 6:
                                    Y[n, o, p + r - 1, q + s - 1] += X[n, c, p, q] * W[c, o, r, s]
"""


def test_a_stride_1_transposed_conv_is_priced_like_the_conv_it_is():
    # ConvTranspose2d(2, 3, 3, padding=1) as torch's template scatters it: y[p + r - 1] += x[p] w[r].
    # With q = p + r - 1 it is the convolution y[q] += x[q - r + 1] w[r] over the same 6 x 6 output
    # (the guards: 0 <= q <= 5): per axis 2, 3, 3, 3, 3, 2 taps, and the FFT of the 8 x 8 padded map,
    # 94 products per (n, o, c): what cuDNN's backward-data FFT and Winograd algorithms compute. The
    # audit's ConvTranspose2d 256 -> 256 3 x 3, padding 1, f32 8 x 256 x 32^2 on H100: 18.73 us
    # (direct, at TF32) -> 5.71 us (memory; 3.67 us of FFT 34x34 products), as its Conv2d twin.
    assert matrix(TRANSPOSED, False) == (2 * 6 * 256, None)
    assert matrix(TRANSPOSED, True) == (2 * 6 * 94, "FFT 8x8")
    # stride 2 (y[2 p + r - 1]) stays direct
    strided = TRANSPOSED.replace("p + r", "2 * p + r").replace("Y: f32[1, 3, 6, 6]", "Y: f32[1, 3, 12, 12]") \
        .replace("p + r <= 6", "p + r <= 12")
    direct, _ = matrix(strided, False)
    assert matrix(strided, True) == (direct, None)


def test_a_conv_over_a_nearest_upsampling_is_priced_on_the_upsampled_map():
    # conv(interpolate(x, scale_factor=2)), the upsampling folded into the read: X[(p + r - 1) // 2].
    # An implementation materialises the 16 x 16 map and convolves it: FFT of the 18 x 18 padded map,
    # 3 * (324 - 4) / 2 + 4 = 484 products per (n, o, c), fewer than its 576 distinct products (64
    # input elements x 9 taps). The audit's Conv2d 256 -> 256 3 x 3 over an 8 x 256 x 32^2 f32 map
    # upsampled to 64^2, on H100: 19.53 us (distinct products at TF32) -> 13.85 us (FFT 66x66).
    text = conv(n=16).replace("X: f32[1, 2, 16, 16]", "X: f32[1, 2, 8, 8]").replace(
        "X[n, c, p + r - 1, q + s - 1]", "X[n, c, (p + r - 1) // 2, (q + s - 1) // 2]")
    assert matrix(text, True) == (2 * 6 * 484, "FFT 18x18")
    # as written: per axis 2 + 14 x 3 + 2 = 46 taps, 46^2 per (n, o, c)
    assert matrix(text, False) == (2 * 6 * 46**2, None)


def test_a_filter_read_through_a_flat_view_is_a_convolution_too():
    # F.conv2d(x, w.view(3, 2, 3, 3)) with w an input of 3 x 18: the filter read W[o, c * 9 + r * 3 + s]
    # is still a function of the taps and channels, never of an output position: the same 94 FFT
    # products per (n, o, c). An audit's Conv2d 256 -> 256 3 x 3 written so, f32 8 x 256 x 32^2 on
    # H100: 18.73 us (direct) -> 5.71 us, as with nn.Conv2d
    text = conv().replace("W: f32[3, 2, 3, 3]", "W: f32[3, 18]").replace(
        "W[o, c, r, s]", "W[o, c * 9 + r * 3 + s]")
    assert matrix(text, True) == (2 * 6 * 94, "FFT 8x8")
    # a filter that moves with the output position is no convolution (only its distinct products)
    moving = conv().replace("W: f32[3, 2, 3, 3]", "W: f32[3, 2, 8, 3]").replace(
        "W[o, c, r, s]", "W[o, c, r + p // 4, s]")
    _, how = matrix(moving, True)
    assert how == "distinct products"


CONV3D = """kernel conv3d(X: {dt}[1, 2, 4, 4, 4] input, W: {dt}[3, 2, 3, 3, 3] weight,
            Y: {dt}[1, 3, 4, 4, 4] output):
    for o in range(3):
        for d in range(4):
            for p in range(4):
                for q in range(4):
                    Y[0, o, d, p, q] = 0.0
                    for c in range(2):
                        for t in range(3):
                            for r in range(3):
                                for s in range(3):
                                    if d + t >= 1 and d + t <= 4 and p + r >= 1 and p + r <= 4 and \
                                            q + s >= 1 and q + s <= 4:
                                        Y[0, o, d, p, q] += \
                                            X[0, c, d + t - 1, p + r - 1, q + s - 1] * W[o, c, t, r, s]
"""


def test_a_3d_conv_is_priced_at_fft_products_in_f32_only():
    # 4^3 output, 3^3 filter, padding 1: per axis the outputs hold 2, 3, 3, 2 taps (10), direct
    # 10^3 = 1000 products per (o, c), 6 of them. cuDNN's 3-D FFT_TILING (FLOAT, DOUBLE): the whole
    # padded 6^3 volume, 8 real bins (every size even): 3 * (216 - 8) / 2 + 8 = 320 products; 32^3
    # tiles: min(1000, fft_products(32, 32, 32)) = 1000. No Winograd for 3-D; bf16 and f16 stay direct.
    assert fft_products(6, 6, 6) == 320
    assert matrix(CONV3D.format(dt="f32"), False) == (2 * 6 * 1000, None)
    assert matrix(CONV3D.format(dt="f32"), True) == (2 * 6 * 320, "FFT 6x6x6")
    assert matrix(CONV3D.format(dt="f16"), True) == (2 * 6 * 1000, None)
    assert matrix(CONV3D.format(dt="bf16"), True) == (2 * 6 * 1000, None)


UNFOLDED = """kernel unfolded(x: f32[2, 8, 8, 8] input, w: f32[8, 72] weight, y: f32[72, 8] output):
    for i0 in range(72):
        for i1 in range(8):
            y[i0, i1] = 0.0
            for k0 in range(72):
                y[i0, i1] += \
                    x[i0 // 36, k0 // 9, (i0 % 36) // 6 + (k0 // 3) % 3, (i0 % 36) % 6 + k0 % 3] * w[i1, k0]
"""


def test_a_conv_written_as_unfold_and_a_product_is_a_convolution_too():
    # `w @ F.unfold(x, 3)`: the output positions (2 images x 6 x 6) and the taps (8 channels x 3 x 3)
    # are flattened, i0 = 36 b + 6 p + q and k0 = 9 c + 3 r + s; split into those digits, the read
    # is x[b, c, p + r, q + s]: a 3 x 3 convolution over the 8 x 8 map. Direct: 36 x 9 products per
    # (b, c, o), 128 of them; FFT of the 8 x 8 map: 94 (Winograd F(2x2,3x3) or F(4x4,3x3): 144)
    assert matrix(UNFOLDED, False) == (2 * 128 * 36 * 9, None)
    assert matrix(UNFOLDED, True) == (2 * 128 * 94, "FFT 8x8")
    # the same flat reads with a divisor that does not split the range (i0 // 36 over 80 rows) stay direct
    odd = UNFOLDED.replace("range(72):\n        for i1", "range(80):\n        for i1").replace(
        "y: f32[72, 8]", "y: f32[80, 8]").replace("x: f32[2, 8, 8, 8]", "x: f32[3, 8, 8, 8]")
    assert matrix(odd, True) == (2 * 80 * 8 * 72, None)
