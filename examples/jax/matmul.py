# C = A @ B: contraction only (flops_matrix equals XLA's cost analysis).
import jax

M, K, N = 256, 128, 64


def model(a, b):
    return a @ b


def get_inputs():
    ka, kb = jax.random.split(jax.random.key(0))
    return [jax.random.normal(ka, (M, K)), jax.random.normal(kb, (K, N))]
