# Explicit Euler steps of dx/dt = tanh(x @ W) with lax.fori_loop (a static trip count: one loop, not
# STEPS copies); the step also adds row i of a forcing table (a slice at the loop counter).
import jax
import jax.numpy as jnp
from jax import lax

STEPS, B, D = 16, 32, 64
DT = 0.1


def model(x, w, forcing):
    def step(i, x):
        return x + DT * (jnp.tanh(x @ w) + forcing[i])

    return lax.fori_loop(0, STEPS, step, x)


def get_inputs():
    k = jax.random.split(jax.random.key(10), 3)
    return [jax.random.normal(k[0], (B, D)), jax.random.normal(k[1], (D, D)) * 0.1,
            jax.random.normal(k[2], (STEPS, D))]
