"""The reference runner: the model's inputs (the file's own `get_inputs()`, or fresh samples), its
parameters built for real, and its outputs as the JAX function computes them (jitted), all as numpy
arrays under the captured program's names (what validation compares the translated kernel with)."""

from __future__ import annotations

import jax
import numpy as np

from solar_compiler.frontends.captured_program import CapturedProgram

from .capture import JaxModel, real_params


def file_inputs(model: JaxModel) -> list[np.ndarray]:
    """`get_inputs()`, jitted: one compile for all its random draws."""
    return [np.asarray(a) for a in jax.tree_util.tree_leaves(jax.jit(model.spec.sample_inputs)())]


def fresh_inputs(base: list[np.ndarray], seed: int) -> list[np.ndarray]:
    """A fresh sample like `base` (the file's own): float inputs are a random permutation of it
    (same values, so the same domain: a model taking logs stays valid), integer inputs uniform in the
    observed [min, max] (indices stay in range), booleans fair coin flips."""
    rng = np.random.default_rng(seed)
    out = []
    for b in base:
        if b.dtype == np.bool_:
            out.append(rng.random(b.shape) < 0.5)
        elif np.issubdtype(b.dtype, np.integer):
            lo, hi = (int(b.min()), int(b.max())) if b.size else (0, 0)
            out.append(rng.integers(lo, hi + 1, size=b.shape).astype(b.dtype))
        elif b.size > 1 and np.unique(b).size > 1:
            out.append(rng.permutation(b.reshape(-1)).reshape(b.shape))
        else:
            out.append(rng.standard_normal(b.shape).astype(b.dtype))
    return out


def reference(model: JaxModel):
    """The function computing the outputs, jitted once for all samples: `f(params, inputs)` gives
    the outputs as numpy arrays, flattened in the jaxpr's output order."""
    jitted = jax.jit(model.fn)

    def run(params: list[np.ndarray], inputs: list[np.ndarray]) -> list[np.ndarray]:
        return [np.asarray(o) for o in jax.tree_util.tree_leaves(jitted(params, *inputs))]

    return run


def feed(prog: CapturedProgram, params: list[np.ndarray], inputs: list[np.ndarray]) -> dict[str, np.ndarray]:
    """The value of every input and weight of the program, by capture name."""
    values: dict[str, np.ndarray] = {}
    for meta in [*prog.inputs, *prog.weights]:
        kind, _, key = prog.weight_sources[meta.name].partition(":")
        values[meta.name] = inputs[int(key)] if kind == "input" else params[int(key)] if kind == "param" \
            else prog.constants[key]
    return values


__all__ = ["feed", "file_inputs", "fresh_inputs", "real_params", "reference"]
