# A Flax NNX pre-norm transformer block: LayerNorm -> causal MultiHeadAttention -> residual,
# LayerNorm -> MLP (GELU) -> residual.
import jax
import jax.numpy as jnp
from flax import nnx

B, T, D, HEADS = 2, 32, 64, 4


class Model(nnx.Module):
    def __init__(self, d, heads, rngs: nnx.Rngs):
        self.ln1 = nnx.LayerNorm(d, rngs=rngs)
        self.attn = nnx.MultiHeadAttention(num_heads=heads, in_features=d, decode=False, rngs=rngs)
        self.ln2 = nnx.LayerNorm(d, rngs=rngs)
        self.fc1 = nnx.Linear(d, 4 * d, rngs=rngs)
        self.fc2 = nnx.Linear(4 * d, d, rngs=rngs)

    def __call__(self, x):
        mask = nnx.make_causal_mask(jnp.ones(x.shape[:2]))
        x = x + self.attn(self.ln1(x), mask=mask)
        return x + self.fc2(jax.nn.gelu(self.fc1(self.ln2(x))))


def get_init_inputs():
    return [D, HEADS]


def get_inputs():
    return [jax.random.normal(jax.random.key(13), (B, T, D))]
