"""Measured runtimes: a model's own forward timed the way KernelBench's harness times it, or read from
a KernelBench timing file.

Conventions (KernelBench `timing.time_execution_with_cuda_event` and `measure_ref_program_time`):
`set_seed(42)` then `get_inputs()`, `set_seed(42)` then `get_init_inputs()`, `Model(*init)` moved to
the device **without `.eval()`** (train mode: batch-norm on batch statistics, dropout live; `--mode
eval` calls `.eval()` and the bounds follow the same mode), inputs moved to the device, everything
under `torch.no_grad()`; `warmup` calls, then one discarded and `trials` timed calls, each preceded
by a cache flush and bracketed by the clock. Differences, said where they apply: tensors keep the
file's dtypes (KernelBench casts to fp32; the bounds are of the file's program), and on the CPU the
number of timed calls is cut so that they take about `cap_s` (never below `min_trials`).

Clocks: CUDA (events on the current stream, `torch.cuda.synchronize` around each call, the L2
flushed by writing a 256 MB int64 buffer, KernelBench's size) and CPU (`perf_counter`; the caches
flushed by writing a buffer four times the last-level cache, at least 64 MB). Statistics in ms:
mean, std, min, max, median, num_trials (KernelBench's keys, plus median).

CUDA is initialised only inside the fork that times (never in the warm worker: CUDA does not
survive a fork).
"""

from __future__ import annotations

import importlib.util
import itertools
import json
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

from solar_compiler.errors import SolarError

CUDA_FLUSH_BYTES = 256 * 2**20  # KernelBench: torch.empty((32, 1024, 1024), dtype=torch.int64)
CPU_FLUSH_MIN_BYTES = 64 * 2**20
_COUNTER = itertools.count()


@dataclass(frozen=True)
class TimingConfig:
    device: str = "auto"  # auto (cuda when available) | cpu | cuda
    mode: str = "train"  # KernelBench: no .eval()
    step: str = "forward"  # forward | train: time one training step (timing_train)
    optimizer: str | None = None  # with step train: sgd | adamw (None: the model's own, if any)
    compile: bool = False  # also time torch.compile(model) (inductor, mode "default")
    warmup: int = 3
    trials: int = 100
    min_trials: int = 5
    cap_s: float = 2.0  # CPU only: cut the timed calls to about this long
    seed: int = 42
    flush: bool = True  # flush caches before each call (cold caches); False times warm calls

    @property
    def cache_state(self) -> str:
        return "cold" if self.flush else "warm"

    def fingerprint_fields(self) -> dict[str, Any]:
        d = asdict(self)
        if self.step == "forward":  # forward timings stored before --step keep their fingerprint
            d.pop("step"), d.pop("optimizer")
        return d


class Clock(Protocol):
    def sync(self) -> None: ...
    def flush(self) -> None: ...
    def start(self) -> None: ...
    def stop(self) -> float: ...  # ms since start()
    def after_warmup(self) -> None: ...


class PerfCounterClock:
    """`perf_counter` around a call that is done when it returns (CPU work, or a call that blocks until
    its result is ready); `flush` runs `flush_fn`, a write that evicts the caches."""

    def __init__(self, flush_fn: Callable[[], object]):
        self.flush_fn = flush_fn
        self.t0 = 0.0

    def sync(self) -> None:
        pass

    def flush(self) -> None:
        self.flush_fn()

    def start(self) -> None:
        self.t0 = time.perf_counter()

    def stop(self) -> float:
        return (time.perf_counter() - self.t0) * 1e3

    def after_warmup(self) -> None:
        pass


def cpu_clock(torch, flush_bytes: int) -> PerfCounterClock:  # noqa: ANN001 - torch, imported lazily
    """The CPU clock: a flush writes a buffer of `flush_bytes` (several times the last-level cache)."""
    buf = torch.empty(max(1, flush_bytes // 8), dtype=torch.int64)
    return PerfCounterClock(lambda: buf.fill_(42))


class CudaClock:
    """Per trial (KernelBench's order): synchronize, flush L2, record the start event, call, record the
    end event, synchronize, elapsed time."""

    def __init__(self, torch, device):
        self.torch, self.device = torch, device
        self.buf = torch.empty(CUDA_FLUSH_BYTES // 8, dtype=torch.int64, device=device)
        self.events: tuple[Any, Any] | None = None

    def sync(self) -> None:
        self.torch.cuda.synchronize(device=self.device)

    def flush(self) -> None:
        self.buf.fill_(42)

    def start(self) -> None:
        ev = self.torch.cuda.Event
        self.events = (ev(enable_timing=True), ev(enable_timing=True))
        self.events[0].record()

    def stop(self) -> float:
        assert self.events is not None
        self.events[1].record()
        self.sync()
        return float(self.events[0].elapsed_time(self.events[1]))

    def after_warmup(self) -> None:
        self.torch.cuda.empty_cache()


def time_calls(
    fn,
    args: list,
    clock: Clock,
    *,
    warmup: int,
    trials: int,
    min_trials: int,
    cap_s: float | None,
    discard_first: int = 1,
    flush: bool = True,
) -> list[float]:
    """ms of `trials` calls (cut to about `cap_s` of calls when given, at least `min_trials`), after
    `warmup` calls and `discard_first` discarded ones; each call is preceded by sync and (when
    `flush`, the cold-cache contract) a cache flush."""
    last = 0.0
    for _ in range(warmup):
        t0 = time.perf_counter()
        fn(*args)
        clock.sync()
        last = time.perf_counter() - t0
    clock.after_warmup()
    n = trials
    if cap_s is not None:
        n = max(min_trials, min(trials, int(cap_s / max(last, 1e-6))))
    times: list[float] = []
    for i in range(n + discard_first):
        clock.sync()
        if flush:
            clock.flush()
        clock.start()
        fn(*args)
        ms = clock.stop()
        if i >= discard_first:
            times.append(ms)
    return times


def stats(times_ms: list[float]) -> dict[str, Any]:
    return {
        "mean": statistics.fmean(times_ms),
        "std": statistics.pstdev(times_ms),
        "min": min(times_ms),
        "max": max(times_ms),
        "median": statistics.median(times_ms),
        "num_trials": len(times_ms),
    }


def llc_bytes() -> int:
    """The largest CPU cache (sysfs), or 0 when unknown."""
    best = 0
    for size in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*/size"):
        try:
            text = size.read_text().strip().upper()
            mult = {"K": 2**10, "M": 2**20, "G": 2**30}.get(text[-1:], 1)
            best = max(best, int(text.rstrip("KMG")) * mult)
        except (OSError, ValueError):
            continue
    return best


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "cpu"


def _load(path: str):
    spec = importlib.util.spec_from_file_location(f"solar_bench_model_{next(_COUNTER)}", path)
    if spec is None or spec.loader is None:
        raise SolarError(f"{path}: not a Python file", error_class="input")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    for name in ("Model", "get_inputs", "get_init_inputs"):
        if not hasattr(mod, name):
            raise SolarError(f"{path}: defines no {name}", error_class="input")
    return mod


def _seed(torch, seed: int) -> None:
    torch.manual_seed(seed)
    if torch.cuda.is_initialized():
        torch.cuda.manual_seed(seed)


def measure_job(path: str, cfg: TimingConfig) -> dict[str, Any]:
    """Eager (and with `cfg.compile`, torch.compile) timing statistics of one model file; a JAX file
    (by its imports, as `solar-opt` chooses its frontend) is timed jitted (`timing_jax`)."""
    from solar_compiler.frontends import source_frontend

    if source_frontend(path) == "jax":
        from .timing_jax import measure_jax

        return measure_jax(path, cfg)
    import torch

    cuda = cfg.device == "cuda" or (cfg.device == "auto" and torch.cuda.is_available())
    if cfg.device == "cuda" and not torch.cuda.is_available():
        raise SolarError("--device cuda: CUDA is not available", error_class="hw")
    dev = torch.device("cuda:0" if cuda else "cpu")
    if cuda:
        torch.cuda.set_device(dev)
    mod = _load(path)
    with torch.no_grad():
        _seed(torch, cfg.seed)
        inputs = [x.to(dev) if isinstance(x, torch.Tensor) else x for x in mod.get_inputs()]
        _seed(torch, cfg.seed)
        init = [x.to(dev) if isinstance(x, torch.Tensor) else x for x in mod.get_init_inputs()]
        model = mod.Model(*init).to(dev)
        if cfg.mode == "eval":
            model.eval()
        clock: Clock = (
            CudaClock(torch, dev) if cuda else cpu_clock(torch, max(CPU_FLUSH_MIN_BYTES, 4 * llc_bytes()))
        )
        out: dict[str, Any] = {
            "device": "cuda" if cuda else "cpu",
            "hardware": torch.cuda.get_device_name(dev) if cuda else cpu_name(),
            "clock": ("cuda-events, L2 flushed (256 MB write)" if cuda
                      else "perf_counter, caches flushed (4x LLC write)") if cfg.flush
            else ("cuda-events" if cuda else "perf_counter") + ", warm caches (no flush)",
            "cache_state": cfg.cache_state,
            "threads": torch.get_num_threads(),
            "torch": torch.__version__,
            "mode": cfg.mode,
        }
        cap = None if cuda else cfg.cap_s
        kw = {"warmup": cfg.warmup, "trials": cfg.trials, "min_trials": cfg.min_trials, "cap_s": cap,
              "flush": cfg.flush}
        out["eager"] = _timed(torch, _callee(torch, path, mod, model, cfg, out), inputs, dev, clock, kw, out)
        if cfg.compile:
            import torch._inductor.config as inductor_config

            inductor_config.compile_threads = 1  # no compile-worker pool inside the sandbox
            torch._dynamo.reset()
            compiled = torch.compile(model, backend="inductor", mode="default")
            out["compile"] = _timed(torch, _callee(torch, path, mod, compiled, cfg, out), inputs, dev, clock,
                                    kw, out)
    return out


def _callee(torch, path: str, mod, model, cfg: TimingConfig, out: dict):  # noqa: ANN001
    """What one timed call runs: the forward, or with `cfg.step == "train"` the whole training step
    (forward, loss, backward, update: `timing_train`), and the record says which."""
    if cfg.step != "train":
        return model
    from .timing_train import train_step_fn

    fn, kind = train_step_fn(torch, path, mod, model, cfg.optimizer)
    out["step"], out["optimizer"] = "train", kind
    return fn


def _timed(torch, fn, inputs, dev, clock: Clock, kw: dict, out: dict) -> dict[str, Any]:
    """A forward that makes tensors without a device (torch.rand(...) in forward) fails against
    device inputs; it is rerun with the device as default device (Python overhead per op can only
    raise the time, never fake a violation) and the record says so."""
    try:
        return stats(time_calls(fn, inputs, clock, **kw))
    except RuntimeError as e:
        if dev.type != "cuda" or "same device" not in str(e):
            raise
    torch.set_default_device(dev)
    try:
        out["note"] = "forward creates tensors: default device set"
        return stats(time_calls(fn, inputs, clock, **kw))
    finally:
        torch.set_default_device(None)


# ---- timing files ---------------------------------------------------------------------------------


TRACE_GROUP = "@workloads"  # load_timings' group of a SOL-ExecBench trace file: workload uuid -> entry


def load_timings(path: str) -> dict[str, dict[str, dict[str, Any]]]:
    """A KernelBench timing file `{"level1": {"<file>.py": {"mean": ms, "min": ms, ...}}}`, or a
    SOL-ExecBench trace file (JSONL, one `Trace` a line: `definition`, `workload.uuid`,
    `evaluation.performance.latency_ms` and `reference_latency_ms`), read as
    `{TRACE_GROUP: {uuid: {"mean": ms, "baseline": ms, ...}}}`."""
    try:
        text = Path(path).read_text()
    except OSError as e:
        raise SolarError(f"{path}: cannot read timing file: {e.strerror}") from None
    first = next((ln for ln in text.splitlines() if ln.strip()), "")
    if '"workload"' in first and '"definition"' in first:
        return {TRACE_GROUP: load_trace(path, text)}
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise SolarError(f"{path}:{e.lineno}: invalid JSON in timing file ({e.msg})") from None
    if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
        raise SolarError(f"{path}: not a timing file ({{group: {{file: {{mean: ms}}}}}})")
    for group, files in data.items():
        for name, rec in files.items():
            if not isinstance(rec, dict) or not isinstance(rec.get("mean"), (int, float)):
                raise SolarError(f"{path}: {group}/{name}: no 'mean' (ms)")
    return data


def load_trace(path: str, text: str) -> dict[str, dict[str, Any]]:
    """Workload uuid -> the kernel's mean latency (`mean`, ms) and the reference's (`baseline`, ms)
    of a SOL-ExecBench trace JSONL. Only PASSED traces have a performance record; the others are
    skipped. Several solutions of one workload: the fastest is kept (the one that could beat the
    bound; each trace carries its own reference latency)."""
    out: dict[str, dict[str, Any]] = {}
    for i, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            t = json.loads(line)
        except json.JSONDecodeError as e:
            raise SolarError(f"{path}:{i}: invalid JSON in trace file ({e.msg})") from None
        uuid = (t.get("workload") or {}).get("uuid") if isinstance(t, dict) else None
        if not isinstance(uuid, str):
            raise SolarError(f"{path}:{i}: a trace needs workload.uuid")
        ev = t.get("evaluation") or {}
        if ev.get("status") != "PASSED":
            continue
        perf = ev.get("performance") or {}
        ms, ref = perf.get("latency_ms"), perf.get("reference_latency_ms")
        if not isinstance(ms, (int, float)) or not isinstance(ref, (int, float)):
            raise SolarError(f"{path}:{i}: a PASSED trace needs performance.latency_ms and "
                             f"reference_latency_ms")
        if uuid in out and out[uuid]["mean"] <= ms:
            continue
        out[uuid] = {"mean": float(ms), "baseline": float(ref), "definition": t.get("definition"),
                     "solution": t.get("solution"),
                     "hardware": (ev.get("environment") or {}).get("hardware")}
    return out


def lookup_timing(timings: dict, group: str, name: str, workload: str | None = None) -> dict[str, Any] | None:
    """The entry of `group/name` (of a workload's uuid, for a trace file); a group absent from the
    file matches a file name found in exactly one group."""
    if workload is not None and TRACE_GROUP in timings:
        return timings[TRACE_GROUP].get(workload)
    if group in timings:
        return timings[group].get(name)
    hits = [files[name] for files in timings.values() if name in files]
    return hits[0] if len(hits) == 1 else None


def env_for_device() -> dict[str, str]:
    """The accelerator assignment of this process (Ray sets CUDA_VISIBLE_DEVICES per task), for a
    fork of a worker started before it."""
    v = os.environ.get("CUDA_VISIBLE_DEVICES")
    return {} if v is None else {"CUDA_VISIBLE_DEVICES": v}
