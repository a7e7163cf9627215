# Token embedding lookup (a gather by token id) plus learned positions.
import jax

V, T, D = 1000, 128, 64


def model(ids, table, pos):
    return table[ids] + pos


def get_inputs():
    k = jax.random.split(jax.random.key(11), 3)
    return [jax.random.randint(k[0], (T,), 0, V), jax.random.normal(k[1], (V, D)), jax.random.normal(k[2], (T, D))]
