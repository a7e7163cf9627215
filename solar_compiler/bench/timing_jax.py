"""Measured runtimes of a JAX model file: the function the bounds are of, jitted, timed the way
`timing.measure_job` times a PyTorch model (warm-up calls, one discarded call, cache flush before each
timed call, `perf_counter` around the call).

The model is built as the JAX frontend builds it (`capture.construct`: `Model(*get_init_inputs())`,
`get_init_inputs` optional, `rngs=nnx.Rngs(0)` when `__init__` takes `rngs`), or is the file's
`def model`. An NNX model is split into graph and state and the jitted function merges them, so the
timed call is one XLA executable with the parameters as arguments (as a deployed `nnx.jit` would
run). Each call ends in `jax.block_until_ready`: JAX dispatches asynchronously, and a clock stopped
before the result exists would time the dispatch only (and could beat a bound). Compilation happens
in the warm-up calls, never in a timed one.
"""

from __future__ import annotations

import os
import time
from typing import Any

from solar_compiler.errors import SolarError

from .timing import (
    CPU_FLUSH_MIN_BYTES,
    CUDA_FLUSH_BYTES,
    TimingConfig,
    cpu_name,
    llc_bytes,
    stats,
    time_calls,
)


class JaxClock:
    """`perf_counter` around a call that blocks until its result is ready; `flush` writes a buffer
    larger than the caches (host memory on the CPU, device memory on a GPU) and waits for it."""

    def __init__(self, flush_fn):
        self.flush_fn = flush_fn
        self.t0 = 0.0

    def sync(self) -> None:
        pass  # every timed call blocks until ready itself

    def flush(self) -> None:
        self.flush_fn()

    def start(self) -> None:
        self.t0 = time.perf_counter()

    def stop(self) -> float:
        return (time.perf_counter() - self.t0) * 1e3

    def after_warmup(self) -> None:
        pass


def _device(jax, want: str):
    """The JAX device of `--device` (auto: the default backend's first device)."""
    if want == "cpu":
        return jax.devices("cpu")[0]
    dev = jax.devices()[0]
    if want == "cuda" and dev.platform != "gpu":
        raise SolarError(f"--device cuda: JAX has no GPU backend here (default backend: {dev.platform})")
    return dev


def jitted_model(path: str, mode: str, dev) -> tuple[Any, list[Any]]:
    """The jitted function of a JAX model file and its arguments, placed on `dev`."""
    import jax

    from solar_compiler.frontends.jax.capture import construct
    from solar_compiler.frontends.model_file import JAX_FORMAT, load_model_file

    spec = load_model_file(path, JAX_FORMAT)
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


def measure_jax(path: str, cfg: TimingConfig) -> dict[str, Any]:
    """Timing statistics of one JAX model file (the record `measure_job` returns for PyTorch)."""
    import jax
    import numpy as np

    dev = _device(jax, cfg.device)
    fn, args = jitted_model(path, cfg.mode, dev)

    def call(*a):
        return jax.block_until_ready(fn(*a))

    gpu = dev.platform == "gpu"
    if gpu:
        buf = jax.device_put(np.zeros(CUDA_FLUSH_BYTES // 4, dtype=np.int32), dev)
        rewrite = jax.jit(lambda b: b + 1)

        def flush() -> None:
            jax.block_until_ready(rewrite(buf))
    else:
        host = np.empty(max(CPU_FLUSH_MIN_BYTES, 4 * llc_bytes()) // 8, dtype=np.int64)

        def flush() -> None:
            host.fill(42)

    out: dict[str, Any] = {
        "framework": "jax",
        "device": "cuda" if gpu else "cpu",
        "hardware": dev.device_kind if gpu else cpu_name(),
        "clock": "perf_counter around jax.block_until_ready(jit(f)(...)), "
        + (("L2 flushed (256 MB write)" if gpu else "caches flushed (4x LLC write)") if cfg.flush
           else "warm caches (no flush)"),
        "cache_state": cfg.cache_state,
        "threads": len(os.sched_getaffinity(0)),
        "jax": jax.__version__,
        "mode": cfg.mode,
    }
    if cfg.compile:
        out["note"] = "--compile: a JAX model is timed jitted (XLA-compiled) in any case"
    kw = {"warmup": max(1, cfg.warmup), "trials": cfg.trials, "min_trials": cfg.min_trials,
          "cap_s": None if gpu else cfg.cap_s, "flush": cfg.flush}
    out["eager"] = stats(time_calls(call, args, JaxClock(flush), **kw))
    return out
