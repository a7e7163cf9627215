# A Flax NNX MLP trained one step: solar-opt --step train builds value_and_grad + the update.
import jax
import jax.numpy as jnp
from flax import nnx

B, D, H, O = 8, 32, 64, 16


class Model(nnx.Module):
    def __init__(self, rngs: nnx.Rngs):
        self.fc1 = nnx.Linear(D, H, rngs=rngs)
        self.fc2 = nnx.Linear(H, O, rngs=rngs)

    def __call__(self, x, y):
        return self.fc2(jax.nn.relu(self.fc1(x)))


def get_loss(outputs, x, y):
    return jnp.mean((outputs - y) ** 2)


def get_inputs():
    k1, k2 = jax.random.split(jax.random.key(3))
    return [jax.random.normal(k1, (B, D)), jax.random.normal(k2, (B, O))]
