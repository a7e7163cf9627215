"""A JAX model file as a function to time (`solar-bench --measure`): the function the bounds are
of, jitted, with its arguments on a device, and a cache flush for that device. The timing loop is
the bench's (`bench/timing_jax.py`); everything that imports JAX lives here, in the JAX frontend.

The model is built as the capture builds it (`capture.construct`: `Model(*get_init_inputs())`,
`get_init_inputs` optional, `rngs=nnx.Rngs(0)` when `__init__` takes `rngs`), or is the file's
`def model`. An NNX model is split into graph and state and the jitted function merges them, so the
timed call is one XLA executable with the parameters as arguments (as a deployed `nnx.jit` runs).
Each call ends in `jax.block_until_ready`: JAX dispatches asynchronously, and a clock stopped before
the result exists would time the dispatch only (and could beat a bound).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jax
import numpy as np

from solar_compiler.errors import SolarError
from solar_compiler.frontends.model_file import JAX_FORMAT, load_model_file

from .capture import construct, load_model, real_params
from .train import train_model


@dataclass
class TimedJax:
    call: Callable[..., Any]    # the jitted model, blocking until its result is ready
    args: list[Any]             # its arguments, on `device`
    flush: Callable[[], None]   # writes a buffer larger than the caches of the device, and waits
    gpu: bool
    hardware: str               # the device kind on a GPU ("" on the CPU: the caller names the CPU)
    version: str


def device(want: str):
    """The JAX device of `--device` (auto: the default backend's first device)."""
    if want == "cpu":
        return jax.devices("cpu")[0]
    dev = jax.devices()[0]
    if want == "cuda" and dev.platform != "gpu":
        raise SolarError(f"--device cuda: JAX has no GPU backend here (default backend: {dev.platform})")
    return dev


def jitted_model(path: str, mode: str, dev, step: str = "forward", optimizer: str = "") \
        -> tuple[Callable[..., Any], list[Any]]:
    """The jitted function of a JAX model file and its arguments, placed on `dev`: its forward, or with
    `step="train"` the training step `solar-opt --step train` bounds (`train.py`), its parameters (and
    optimizer state) as arguments."""
    spec = load_model_file(path, JAX_FORMAT)
    if step == "train":
        model = train_model(load_model(spec, mode), optimizer)
        with jax.default_device(dev):
            args = jax.device_put([real_params(model), *jax.tree_util.tree_leaves(spec.sample_inputs())], dev)
        return jax.jit(model.fn), args
    with jax.default_device(dev):
        inputs = jax.device_put(spec.sample_inputs(), dev)
        if spec.entry == "model":
            return jax.jit(spec.Model), list(inputs)
        from flax import nnx

        model = construct(spec)
        model.eval() if mode == "eval" else model.train()
        graphdef, state = nnx.split(model)
        state = jax.device_put(state, dev)

    def forward(st, *xs):
        return nnx.merge(graphdef, st)(*xs)

    return jax.jit(forward), [state, *inputs]


def timed_model(path: str, mode: str, want: str, host_flush_bytes: int, gpu_flush_bytes: int,
                step: str = "forward", optimizer: str = "") -> TimedJax:
    dev = device(want)
    fn, args = jitted_model(path, mode, dev, step, optimizer)

    def call(*a):
        return jax.block_until_ready(fn(*a))

    gpu = dev.platform == "gpu"
    if gpu:
        buf = jax.device_put(np.zeros(gpu_flush_bytes // 4, dtype=np.int32), dev)
        rewrite = jax.jit(lambda b: b + 1)

        def flush() -> None:
            jax.block_until_ready(rewrite(buf))
    else:
        host = np.empty(host_flush_bytes // 8, dtype=np.int64)

        def flush() -> None:
            host.fill(42)

    return TimedJax(call, args, flush, gpu, dev.device_kind if gpu else "", jax.__version__)
