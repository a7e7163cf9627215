"""`--step train` for a Flax NNX model file: one training step built around the file's forward, as the
torch frontend's `--step train` builds it (docs/training.md, "JAX"):

    loss, grads = jax.value_and_grad(loss_of_forward)(the model's nnx.Param leaves)
    [the update: optax.sgd or optax.adamw, `--optimizer`]

The loss is the file's `get_loss(outputs, *inputs)`, else the sum of every floating-point output
(the torch rule). The step differentiates the `nnx.Param` leaves only (batch statistics and other
state are read, never trained). Without an optimizer its outputs are the loss and the gradients;
with one, the loss, the updated parameters and (AdamW) both updated moments, which are weights of
the step (`opt.mu.<param>`, `opt.nu.<param>`), drawn small and non-zero so that validation checks
every term of the update (the step count is 0: the first step's bias corrections). The
hyperparameters are those `--step train` uses for torch models (`frontends.OPTIMIZER_DEFAULTS`,
torch's defaults). A forward that updates NNX state in place (batch norm's running statistics under
`--mode train`) has those writes dropped: the step's outputs do not hold them, so the bound counts
less traffic than a real step (it stays a lower bound).

A `def model` file names no parameters (its arrays are all inputs), so it has nothing to train here:
such a file writes its step itself (`jax.value_and_grad` + the update, examples/jax/train_mlp.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from solar_compiler.frontends import OPTIMIZER_DEFAULTS, OPTIMIZERS
from solar_compiler.frontends.captured_program import CaptureError
from solar_compiler.frontends.model_file import ModelFileError, exception_summary, user_line

from .capture import JaxModel

MOMENTS = ("mu", "nu")  # optax's AdamW state: first and second moments


def _optax(kind: str):  # noqa: ANN202 - optax is imported lazily (an optional extra)
    """The optax transformation of `--optimizer kind`, with the hyperparameters every frontend uses."""
    import optax

    d = OPTIMIZER_DEFAULTS[kind]
    if kind == "sgd":
        return optax.sgd(d["lr"])
    (b1, b2) = d["betas"]
    return optax.adamw(d["lr"], b1=b1, b2=b2, eps=d["eps"], weight_decay=d["weight_decay"])


def train_model(model: JaxModel, optimizer: str = "") -> JaxModel:
    """`model` (an NNX model file's forward) turned into one training step (module docstring)."""
    spec = model.spec
    if spec.entry == "model":
        raise CaptureError(f"{spec.path}: --step train builds a step around an NNX Model's parameters; a "
                           "`def model` file has none: write the step itself (jax.value_and_grad + the "
                           "update, examples/jax/train_mlp.py) and translate it without --step train")
    if optimizer and optimizer not in OPTIMIZERS:
        raise CaptureError(f"{spec.path}: optimizer must be one of {', '.join(OPTIMIZERS)}, "
                           f"not {optimizer!r}")
    trained = [i for i, t in enumerate(model.trainable) if t]
    if not trained:
        raise CaptureError(f"{spec.path}: --step train: the model has no nnx.Param to train")
    n = len(model.params)
    loss_of = _loss_function(model)
    moments = optimizer == "adamw"

    def step(params: Sequence[Any], *xs: Any) -> tuple:
        own = list(params[:n])

        def loss(train: list) -> Any:
            full = list(own)
            for i, v in zip(trained, train, strict=True):
                full[i] = v
            return loss_of(model.fn(full, *xs), xs)

        train = [own[i] for i in trained]
        value, grads = jax.value_and_grad(loss)(train)
        if not optimizer:
            return (value, *grads)
        import optax

        opt = _optax(optimizer)
        state = opt.init(train)
        if moments:
            k = len(trained)
            mu, nu = list(params[n:n + k]), list(params[n + k:n + 2 * k])
            state = (state[0]._replace(mu=mu, nu=nu), *state[1:])
        updates, state = opt.update(grads, state, train)
        new = optax.apply_updates(train, updates)
        return (value, *new, *state[0].mu, *state[0].nu) if moments else (value, *new)

    extra = [model.params[i] for i in trained] * 2 if moments else []
    names = [f"opt.{m}.{model.param_names[i]}" for m in MOMENTS for i in trained] if moments else []
    return replace(model, fn=step, params=[*model.params, *extra], param_names=[*model.param_names, *names],
                   trainable=[*model.trainable, *[False] * len(extra)],
                   more_params=_moment_values(model, trained) if moments else None)


def _loss_function(model: JaxModel) -> Callable[[Any, tuple], Any]:
    """The scalar a step differentiates, from the forward's outputs and the flat inputs."""
    spec = model.spec
    get_loss = getattr(spec.module, "get_loss", None)

    def loss(out: Any, xs: tuple) -> Any:
        if get_loss is not None:
            try:
                value = get_loss(out, *xs)
            except Exception as exc:  # noqa: BLE001 - reported as one line
                line = user_line(exc, spec.abspath) or 1
                raise ModelFileError(f"{spec.path}:{line}: get_loss() raised "
                                     f"{exception_summary(exc)}") from exc
            if jnp.size(value) != 1:
                raise ModelFileError(f"{spec.path}:1: get_loss() must return a one-element array")
            return value if jnp.ndim(value) == 0 else jnp.reshape(value, ())
        flat = [o for o in jax.tree_util.tree_leaves(out) if jnp.issubdtype(jnp.result_type(o), jnp.floating)]
        if not flat:
            raise ModelFileError(f"{spec.path}:1: the model returns no floating-point array to sum as the "
                                 "loss; define get_loss(outputs, *inputs)")
        return sum((jnp.sum(o) for o in flat[1:]), jnp.sum(flat[0]))

    return loss


def _moment_values(model: JaxModel, trained: list[int]) -> Callable[[], list[np.ndarray]]:
    """The AdamW moments' values: first moments N(0, 0.01^2), second U(0, 1e-4), per parameter."""

    def values() -> list[np.ndarray]:
        rng = np.random.default_rng(0)
        shapes = [(model.params[i].shape, model.params[i].dtype) for i in trained]
        mu = [(0.01 * rng.standard_normal(s)).astype(d) for s, d in shapes]
        nu = [(1e-4 * rng.random(s)).astype(d) for s, d in shapes]
        return [*mu, *nu]

    return values


__all__ = ["OPTIMIZERS", "train_model"]
