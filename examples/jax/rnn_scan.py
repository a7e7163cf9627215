# An Elman RNN cell over a sequence with lax.scan: h_t = tanh(x_t @ Wx + h_{t-1} @ Wh + b); returns all h_t.
import jax
import jax.numpy as jnp
from jax import lax

T, B, I, H = 32, 8, 16, 64


def model(xs, wx, wh, b):
    def cell(h, x):
        h = jnp.tanh(x @ wx + h @ wh + b)
        return h, h

    _, hs = lax.scan(cell, jnp.zeros((B, H), xs.dtype), xs)
    return hs


def get_inputs():
    k = jax.random.split(jax.random.key(9), 4)
    return [jax.random.normal(k[0], (T, B, I)), jax.random.normal(k[1], (I, H)) * 0.2,
            jax.random.normal(k[2], (H, H)) * 0.1, jax.random.normal(k[3], (H,))]
