"""A forward that calls autograd itself (`torch.autograd.grad`, `Tensor.backward` with `.grad` read
afterwards, under `torch.enable_grad()`): a SOL-ExecBench backward problem whose `run` re-runs the
forward under autograd, or a model returning an input gradient.

Export cannot capture it: the exported graph holds the backward ops autograd ran, and its
decompositions re-trace them under fake tensors, where `native_layer_norm_backward`'s decomposition
segfaults (torch 2.13), killing the process before any fallback runs. Such a forward is therefore
recognised while export traces it (`autograd_probe`), before the decompositions, and traced instead
by `make_fx` like a training step (`trace.py`): autograd runs below the trace on fake tensors, its
backward ops are kept whole where a template exists, decomposed otherwise. The program is an
ordinary forward program (`step="forward"`, method ``make_fx``) whose outputs are forward's.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch._functorch._aot_autograd.logging_utils import setup_stacktrace_preservation_hooks_from_tensors
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.autograd.variable import Variable

from solar_compiler.frontends.captured_program import CapturedProgram, CaptureError
from solar_compiler.frontends.model_file import ModelFileError, ModelSpec, exception_summary, user_line

from .graph import UserFile, finish
from .trace import graph_program, phase, trace
from .util import build_model


class UsesAutograd(BaseException):  # noqa: N818 - a signal, not an error
    """Raised by `autograd_probe` when forward enters the autograd engine; its one argument says
    how and where (``torch.autograd.grad at m.py:17``). A `BaseException`, so that neither a
    forward's own ``except Exception`` nor export's error handling swallows it."""


class _Engine:
    """Stands in for torch's autograd engine (`Variable._execution_engine`): `run_backward` goes to
    `on_run` (with the real engine and the call's arguments), everything else to the real engine."""

    def __init__(self, real: Any, on_run: Callable[..., Any]) -> None:
        self._real = real
        self._on_run = on_run

    def run_backward(self, *args: Any, **kwargs: Any) -> Any:
        return self._on_run(self._real, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


@contextlib.contextmanager
def _engine(on_run: Callable[..., Any]) -> Iterator[None]:
    real = Variable._execution_engine
    Variable._execution_engine = _Engine(real, on_run)
    try:
        yield
    finally:
        Variable._execution_engine = real


def _how(kwargs: dict) -> str:
    """Which call entered the engine: `Tensor.backward` and `torch.autograd.backward` accumulate
    into ``.grad``, `torch.autograd.grad` returns the gradients."""
    return "Tensor.backward" if kwargs.get("accumulate_grad") else "torch.autograd.grad"


@contextlib.contextmanager
def autograd_probe(user: UserFile) -> Iterator[None]:
    """Raise `UsesAutograd` when the code run inside enters the autograd engine.

    Wrapped around export (and the dispatch recorder), which run forward's Python code on the
    sample's fake tensors, so the probe costs nothing extra. It is sound: every way into autograd
    from Python (`torch.autograd.grad`, `Tensor.backward`, `torch.autograd.backward`, and what is
    built on them: `torch.func.grad`, `torch.autograd.functional`) ends in the one binding of the C++
    engine, ``Variable._execution_engine.run_backward`` (`torch.autograd.graph._engine_run_backward`),
    looked up as a class attribute at each call, so replacing that attribute sees every call however
    the forward imported the function (``from torch.autograd import grad``). The export graph is
    only decomposed (where the segfault is) after `torch.export.export` returns, which it does not:
    the probe interrupts forward at its first autograd call. A call on a path forward does not
    take for this sample (a value-dependent branch) is not traced by export either, so it cannot
    reach the decompositions."""

    def stop(real, tensors, *args, **kwargs):
        where = user.frame_loc()
        raise UsesAutograd(f"{_how(kwargs)}" + (f" at {where}" if where else ""))

    with _engine(stop):
        yield


@contextlib.contextmanager
def _backward_phase() -> Iterator[None]:
    """While tracing: each engine call marks the autograd graph it runs (so its backward nodes take
    the source line and module of their forward op) and tags what it records as backward."""

    def run(real, tensors, *args, **kwargs):
        setup_stacktrace_preservation_hooks_from_tensors(list(tensors))
        with phase("backward"):
            return real.run_backward(tensors, *args, **kwargs)

    with _engine(run):
        yield


def capture_autograd(spec: ModelSpec, mode: str, user: UserFile, why: str) -> CapturedProgram:
    """Forward, which calls autograd (`why`: how and where, from `UsesAutograd`), traced by `make_fx`
    under ``no_grad`` as the reference runs it (forward's own ``enable_grad`` turns autograd on)."""
    fake_mode = FakeTensorMode()
    model, sample = build_model(spec, mode, fake_mode)
    params = dict(model.named_parameters())
    buffers = dict(model.named_buffers())

    def forward(p_in: dict, b_in: dict, xs: list):
        with torch.no_grad(), _backward_phase():
            return torch.func.functional_call(model, {**p_in, **b_in}, tuple(xs))

    try:
        gm = trace(forward, (params, buffers, sample), fake_mode, model, user)
    except (ModelFileError, CaptureError):
        raise
    except Exception as exc:  # noqa: BLE001 - one line naming what failed
        raise _trace_error(spec, user, why, exc) from exc
    prog = CapturedProgram(source=spec.path, mode=mode, method="make_fx",
                           size_constants={**spec.size_constants, **spec.repeat_counts},
                           fallback_reason=f"forward calls {why}")
    node_name, _, outs = graph_program(prog, spec, user, gm, sample, [*params, *buffers],
                                       "forward's autograd graph")
    for node in prog.nodes:
        node.phase = None  # a forward program: no training-step phases in its report
    for fx_out in outs:
        if isinstance(fx_out, torch.fx.Node) and isinstance(fx_out.meta.get("val"), torch.Tensor):
            prog.outputs.append(node_name[fx_out])
    return finish(prog, set())


def _trace_error(spec: ModelSpec, user: UserFile, why: str, exc: Exception) -> CaptureError:
    """One line: where forward failed under the trace; a backward through a tensor that does not
    require grad says that forward runs under ``no_grad``, as its reference run does."""
    line = user_line(exc, user.abspath)
    where = f"{user.display}:{line}" if line else spec.path
    text = exception_summary(exc)
    if "does not require grad" in text:
        return CaptureError(f"{where}: forward calls {why.split(' at ')[0]} on a tensor that does not "
                            "require grad: forward runs under torch.no_grad(), as the reference does; "
                            "compute it under `with torch.enable_grad():` (or use --step train for a "
                            "training step)")
    return CaptureError(f"{where}: tracing forward, which calls {why}, failed: {text}")
