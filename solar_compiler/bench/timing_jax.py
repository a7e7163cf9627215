"""Measured runtimes of a JAX model file: its jitted function (`frontends/jax/timed.py`, where the
JAX imports live) timed the way `timing.measure_job` times a PyTorch model: warm-up calls (they
compile), one discarded call, a cache flush before each timed call, `perf_counter` around a call
that blocks until its result is ready.
"""

from __future__ import annotations

import os
from typing import Any

from .timing import (
    CPU_FLUSH_MIN_BYTES,
    CUDA_FLUSH_BYTES,
    PerfCounterClock,
    TimingConfig,
    cpu_name,
    llc_bytes,
    stats,
    time_calls,
)


def measure_jax(path: str, cfg: TimingConfig) -> dict[str, Any]:
    """Timing statistics of one JAX model file (the record `measure_job` returns for PyTorch)."""
    from solar_compiler.frontends.jax.timed import timed_model

    t = timed_model(path, cfg.mode, cfg.device, max(CPU_FLUSH_MIN_BYTES, 4 * llc_bytes()), CUDA_FLUSH_BYTES,
                    cfg.step, cfg.optimizer or "")
    out: dict[str, Any] = {
        "framework": "jax",
        "device": "cuda" if t.gpu else "cpu",
        "hardware": t.hardware or cpu_name(),
        "clock": "perf_counter around jax.block_until_ready(jit(f)(...)), "
        + (("L2 flushed (256 MB write)" if t.gpu else "caches flushed (4x LLC write)") if cfg.flush
           else "warm caches (no flush)"),
        "cache_state": cfg.cache_state,
        "threads": len(os.sched_getaffinity(0)),
        "jax": t.version,
        "mode": cfg.mode,
    }
    if cfg.step == "train":  # the step solar-opt --step train bounds (frontends/jax/train.py)
        out["step"], out["optimizer"] = "train", cfg.optimizer or None
    if cfg.compile:
        out["note"] = "--compile: a JAX model is timed jitted (XLA-compiled) in any case"
    kw = {"warmup": max(1, cfg.warmup), "trials": cfg.trials, "min_trials": cfg.min_trials,
          "cap_s": None if t.gpu else cfg.cap_s, "flush": cfg.flush}
    out["eager"] = stats(time_calls(t.call, t.args, PerfCounterClock(t.flush), **kw))
    return out
