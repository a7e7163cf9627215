# RMSNorm: x / sqrt(mean(x^2) + eps) * weight.
import jax
import jax.numpy as jnp

B, T, D = 8, 64, 256
EPS = 1e-6


def model(x, weight):
    ms = jnp.mean(jnp.square(x), axis=-1, keepdims=True)
    return x * jax.lax.rsqrt(ms + EPS) * weight


def get_inputs():
    kx, kw = jax.random.split(jax.random.key(6))
    return [jax.random.normal(kx, (B, T, D)), jax.random.normal(kw, (D,))]
