# Two-layer MLP with biases and GELU (tanh form, jax.nn.gelu's default).
import jax

B, D, H = 64, 128, 256


def model(x, w1, b1, w2, b2):
    h = jax.nn.gelu(x @ w1 + b1)
    return h @ w2 + b2


def get_inputs():
    k = jax.random.split(jax.random.key(4), 5)
    return [jax.random.normal(k[0], (B, D)), jax.random.normal(k[1], (D, H)) * 0.05,
            jax.random.normal(k[2], (H,)), jax.random.normal(k[3], (H, D)) * 0.05, jax.random.normal(k[4], (D,))]
