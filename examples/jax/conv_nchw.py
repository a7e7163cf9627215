# 3x3 convolution, NCHW input, OIHW kernel, stride 2, no padding (contraction only).
import jax
from jax import lax

N, C, H, W, O = 2, 16, 33, 33, 32


def model(x, w):
    return lax.conv_general_dilated(x, w, window_strides=(2, 2), padding="VALID",
                                    dimension_numbers=("NCHW", "OIHW", "NCHW"))


def get_inputs():
    kx, kw = jax.random.split(jax.random.key(3))
    return [jax.random.normal(kx, (N, C, H, W)), jax.random.normal(kw, (O, C, 3, 3)) * 0.1]
