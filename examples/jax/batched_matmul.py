# Batched matmul through einsum: one dot_general with a batch dimension (contraction only).
import jax
import jax.numpy as jnp

B, M, K, N = 8, 64, 32, 48


def model(a, b):
    return jnp.einsum("bmk,bkn->bmn", a, b)


def get_inputs():
    ka, kb = jax.random.split(jax.random.key(1))
    return [jax.random.normal(ka, (B, M, K)), jax.random.normal(kb, (B, K, N))]
