# One optax AdamW training step of a two-layer MLP: jax.value_and_grad of an MSE loss, then
# optax.adamw's update, jitted. Both moments are inputs (their values drawn, so every term of the
# update is checked); the step count is 0 (the bias corrections of the first step).
import jax
import jax.numpy as jnp
import optax

B, D, H, O = 8, 32, 64, 16
OPT = optax.adamw(1e-3, b1=0.9, b2=0.999, eps=1e-8, weight_decay=1e-2)


def loss_fn(params, x, y):
    w1, b1, w2, b2 = params
    h = jax.nn.relu(x @ w1 + b1)
    return jnp.mean((h @ w2 + b2 - y) ** 2)


@jax.jit
def model(x, y, w1, b1, w2, b2, m_w1, m_b1, m_w2, m_b2, v_w1, v_b1, v_w2, v_b2):
    params = (w1, b1, w2, b2)
    state = OPT.init(params)
    state = (state[0]._replace(mu=(m_w1, m_b1, m_w2, m_b2), nu=(v_w1, v_b1, v_w2, v_b2)), *state[1:])
    loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
    updates, state = OPT.update(grads, state, params)
    return (loss, *optax.apply_updates(params, updates), *state[0].mu, *state[0].nu)


def get_inputs():
    shapes = [(D, H), (H,), (H, O), (O,)]
    k = jax.random.split(jax.random.key(8), 2 + 3 * len(shapes))
    params = [jax.random.normal(k[2 + i], s) * 0.1 for i, s in enumerate(shapes)]
    mu = [jax.random.normal(k[6 + i], s) * 0.01 for i, s in enumerate(shapes)]
    nu = [jax.random.uniform(k[10 + i], s) * 1e-4 for i, s in enumerate(shapes)]
    return [jax.random.normal(k[0], (B, D)), jax.random.normal(k[1], (B, O)), *params, *mu, *nu]
