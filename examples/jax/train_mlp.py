# One SGD training step of a two-layer MLP: jax.value_and_grad of an MSE loss, jitted. The function is
# the step (forward, backward, update), so the JAX frontend needs no `--step train` (docs/training.md);
# the report shows its forward, backward and update phases.
import jax
import jax.numpy as jnp

B, D, H, O = 8, 32, 64, 16
LR = 1e-2


def loss_fn(params, x, y):
    w1, b1, w2, b2 = params
    h = jax.nn.relu(x @ w1 + b1)
    return jnp.mean((h @ w2 + b2 - y) ** 2)


@jax.jit
def model(x, y, w1, b1, w2, b2):
    params = (w1, b1, w2, b2)
    loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
    return (loss, *(p - LR * g for p, g in zip(params, grads, strict=True)))


def get_inputs():
    k = jax.random.split(jax.random.key(7), 6)
    return [jax.random.normal(k[0], (B, D)), jax.random.normal(k[1], (B, O)),
            jax.random.normal(k[2], (D, H)) * 0.1, jax.random.normal(k[3], (H,)) * 0.1,
            jax.random.normal(k[4], (H, O)) * 0.1, jax.random.normal(k[5], (O,)) * 0.1]
