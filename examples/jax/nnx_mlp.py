# A Flax NNX MLP: Linear -> GELU -> Linear; its parameters are weight tensors.
import jax
from flax import nnx

B, D, H = 32, 64, 256


class Model(nnx.Module):
    def __init__(self, d, h, rngs: nnx.Rngs):
        self.up = nnx.Linear(d, h, rngs=rngs)
        self.down = nnx.Linear(h, d, rngs=rngs)

    def __call__(self, x):
        return self.down(jax.nn.gelu(self.up(x)))


def get_init_inputs():
    return [D, H]


def get_inputs():
    return [jax.random.normal(jax.random.key(12), (B, D))]
