# 3x3 convolution, NHWC input, HWIO kernel, SAME padding, then ReLU (the TensorFlow/Flax layout).
import jax
from jax import lax

N, H, W, C, O = 2, 32, 32, 16, 32


def model(x, w):
    y = lax.conv_general_dilated(x, w, window_strides=(1, 1), padding="SAME",
                                 dimension_numbers=("NHWC", "HWIO", "NHWC"))
    return jax.nn.relu(y)


def get_inputs():
    kx, kw = jax.random.split(jax.random.key(2))
    return [jax.random.normal(kx, (N, H, W, C)), jax.random.normal(kw, (3, 3, C, O)) * 0.1]
