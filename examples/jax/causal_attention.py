# Causal self-attention written out: scores, a lower-triangular mask (jnp.tril of ones), softmax, P @ V.
import jax
import jax.numpy as jnp

B, H, T, D = 2, 4, 64, 32


def model(q, k, v):
    scores = jnp.einsum("bhqd,bhkd->bhqk", q, k) / jnp.sqrt(D).astype(q.dtype)
    mask = jnp.tril(jnp.ones((T, T), dtype=bool))
    scores = jnp.where(mask, scores, -jnp.inf)
    return jnp.einsum("bhqk,bhkd->bhqd", jax.nn.softmax(scores, axis=-1), v)


def get_inputs():
    k = jax.random.split(jax.random.key(7), 3)
    return [jax.random.normal(k[i], (B, H, T, D)) for i in range(3)]
