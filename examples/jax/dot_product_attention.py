# jax.nn.dot_product_attention with a causal mask (layout B, T, heads, head dim).
import jax

B, T, NH, D = 2, 64, 4, 32


def model(q, k, v):
    return jax.nn.dot_product_attention(q, k, v, is_causal=True)


def get_inputs():
    k = jax.random.split(jax.random.key(8), 3)
    return [jax.random.normal(k[i], (B, T, NH, D)) for i in range(3)]
