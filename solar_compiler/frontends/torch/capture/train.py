"""Capture of one training step: ``loss = loss_fn(model(*inputs))``, the parameter gradients of
the loss, and optionally an optimizer's update (docs/training.md).

The step is traced by `trace.trace` (`make_fx`) over a function that calls the model functionally
(`torch.func.functional_call`, so parameters are graph inputs), computes the loss and asks
``torch.autograd.grad`` for the gradients; `trace.py` says how backward ops are kept or decomposed
and how each node gets its phase, module path and source line. The optimizer's nodes are traced
under an ``optimizer`` phase tag.

A model file whose ``forward`` itself calls ``loss.backward()`` and ``opt.step()`` is captured
the same way: ``Tensor.backward`` is intercepted to hand over the loss (nothing after it in
forward runs), and the optimizer is found among the model's attributes.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

import torch
from torch._functorch._aot_autograd.logging_utils import setup_stacktrace_preservation_hooks_from_tensors
from torch._subclasses.fake_tensor import FakeTensorMode

from solar_compiler.frontends.captured_program import CapturedProgram, CaptureError
from solar_compiler.frontends.model_file import ModelFileError, ModelSpec, exception_summary, user_line

from .graph import UserFile, finish
from .trace import graph_program, phase, trace
from .train_optim import OPTIMIZERS, Optimizer, model_optimizer
from .util import build_model


class _LossHandedOver(Exception):
    """Raised by the intercepted ``Tensor.backward``: forward reached ``loss.backward()``."""

    def __init__(self, loss: torch.Tensor):
        super().__init__("loss.backward()")
        self.loss = loss


@contextlib.contextmanager
def _backward_intercepted() -> Iterator[None]:
    saved = torch.Tensor.backward

    def backward(self, *args, **kwargs):
        raise _LossHandedOver(self)

    torch.Tensor.backward = backward
    try:
        yield
    finally:
        torch.Tensor.backward = saved


def step_loss(spec: ModelSpec, model: torch.nn.Module, call: Callable[[], Any], sample: list) \
        -> tuple[torch.Tensor, bool]:
    """(loss, self_training): the scalar the step differentiates. A forward that calls
    ``backward()`` itself hands over the tensor it calls it on; otherwise the loss is the file's
    ``get_loss(outputs, *inputs)``, or the sum of every floating-point output."""
    try:
        with _backward_intercepted():
            out = call()
    except _LossHandedOver as h:
        return h.loss, True
    get_loss = getattr(spec.module, "get_loss", None)
    if get_loss is not None:
        try:
            loss = get_loss(out, *sample)
        except Exception as exc:  # noqa: BLE001 - reported as one line
            line = user_line(exc, spec.abspath) or 1
            raise ModelFileError(f"{spec.path}:{line}: get_loss() raised {exception_summary(exc)}") from exc
        if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
            raise ModelFileError(f"{spec.path}:1: get_loss() must return a one-element tensor")
        return loss.reshape(()), False
    flat = [o for o in torch.utils._pytree.tree_flatten(out)[0]
            if isinstance(o, torch.Tensor) and o.is_floating_point()]
    if not flat:
        raise ModelFileError(f"{spec.path}:1: forward returns no floating-point tensor to sum as the loss; "
                             "define get_loss(outputs, *inputs)")
    loss = flat[0].sum()
    for o in flat[1:]:
        loss = loss + o.sum()
    return loss, False


def trainable(model: torch.nn.Module) -> dict[str, torch.nn.Parameter]:
    """The parameters a step updates, by state-dict name (tied ones once)."""
    return {k: p for k, p in model.named_parameters() if p.requires_grad}


# ---- the capture ---------------------------------------------------------------------------------------
def capture_train(spec: ModelSpec, mode: str, user: UserFile, optimizer: str | None) -> CapturedProgram:
    """One training step of the model file as a `CapturedProgram` with `step="train"` (module doc)."""
    fake_mode = FakeTensorMode()
    model, sample = build_model(spec, mode, fake_mode)
    params = trainable(model)
    if not params:
        raise CaptureError(f"{spec.path}: the model has no trainable parameters: no training step")
    buffers = dict(model.named_buffers())
    opt = _optimizer(spec, model, optimizer)
    grad_names: list[str] = []

    def step(p_in: dict, b_in: dict, s_in: dict, xs: list):
        def call():
            return torch.func.functional_call(model, {**p_in, **b_in}, tuple(xs))

        with torch.enable_grad():
            loss, _ = step_loss(spec, model, call, xs)
            # autograd then marks what its backward functions record (autograd_backward, seq_nr)
            setup_stacktrace_preservation_hooks_from_tensors([loss])
            with phase("backward"):
                grads = torch.autograd.grad(loss, list(p_in.values()), allow_unused=True)
        used = [(k, g) for k, g in zip(p_in, grads, strict=True) if g is not None]
        grad_names[:] = [k for k, _ in used]
        new: list[torch.Tensor] = []
        if opt is not None:
            for k, g in used:
                with phase("optimizer", k.rpartition(".")[0] or None):
                    new.extend(opt.update(p_in[k].detach(), g, [s_in[f"{s}:{k}"] for s in opt.state]))
        return [loss.detach(), *(g for _, g in used), *new]

    with fake_mode:  # the optimizer state: inputs of the step, shaped and typed like its parameter
        state = {f"{s}:{k}": torch.zeros_like(p) for k, p in params.items()
                 for s in (opt.state if opt else ())}
    try:
        gm = trace(step, (params, buffers, state, sample), fake_mode, model, user)
    except (ModelFileError, CaptureError):
        raise
    except Exception as exc:  # noqa: BLE001 - one line naming what failed
        line = user_line(exc, spec.abspath)
        where = f"{spec.path}:{line}" if line else spec.path
        raise CaptureError(f"{where}: tracing the training step failed: {exception_summary(exc)}") from exc
    return _program(spec, mode, user, gm, sample, params, buffers, state, grad_names, opt)


def _optimizer(spec: ModelSpec, model: torch.nn.Module, optimizer: str | None) -> Optimizer | None:
    own = model_optimizer(spec, model)
    if optimizer is None:
        return own
    chosen = Optimizer.default(optimizer)
    return replace(own, kind=chosen.kind) if own is not None and own.kind == chosen.kind else chosen


def _program(spec: ModelSpec, mode: str, user: UserFile, gm, sample: list, params: dict, buffers: dict,
             state: dict, grad_names: list[str], opt: Optimizer | None) -> CapturedProgram:
    prog = CapturedProgram(source=spec.path, mode=mode, method="make_fx",
                           size_constants={**spec.size_constants, **spec.repeat_counts}, step="train",
                           optimizer=opt.kind if opt is not None else None)
    sources = [*params, *buffers, *(f"optim:{k}" for k in state)]
    node_name, namer, outs = graph_program(prog, spec, user, gm, sample, sources, "the training step")
    roles = ["loss", *(f"grad:{k}" for k in grad_names)]
    if opt is not None:
        for k in grad_names:
            roles += [f"param:{k}", *(f"{s}:{k}" for s in opt.state)]
    if len(outs) != len(roles):
        raise CaptureError(f"{spec.path}: the traced step returns {len(outs)} tensors, expected {len(roles)}")
    for fx_out, role in zip(outs, roles, strict=True):
        name = node_name[fx_out]
        if name in prog.outputs or name in {w.name for w in prog.weights} | {i.name for i in prog.inputs}:
            prog.nodes.append(_copy_node(prog, name, namer.fresh(f"{role.split(':')[0]}_out"), fx_out))
            name = prog.nodes[-1].outputs[0].name
        prog.outputs.append(name)
        prog.output_roles[name] = role
    return finish(prog, set())


def _copy_node(prog: CapturedProgram, src: str, name: str, fx_node):
    """A clone giving an output that repeats another value (a gradient that is the loss seed itself)
    a tensor of its own."""
    from solar_compiler.frontends.captured_program import AtenNode, TensorRef

    meta = replace(prog.tensor(src), name=name)
    return AtenNode("aten.clone.default", (TensorRef(src),), {}, (meta,), None, None, (meta,), "backward")


__all__ = ["OPTIMIZERS", "capture_train", "step_loss", "trainable"]
