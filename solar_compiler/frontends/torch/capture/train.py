"""Capture of one training step: ``loss = loss_fn(model(*inputs))``, the parameter gradients of
the loss, and optionally an optimizer's update (docs/training.md).

The step is traced by `make_fx` over a function that calls the model functionally
(`torch.func.functional_call`, so parameters are graph inputs), computes the loss and asks
``torch.autograd.grad`` for the gradients: torch's own autograd formulas produce the backward
ops, and the capture's decomposition table applies to both halves, except that a backward op
the translator has a template for (`registry.lookup`) is kept whole. Each node is tagged with its
phase: autograd marks the nodes it records while running a backward function
(``autograd_backward``, with the ``seq_nr`` of the forward op whose backward it is), and the
optimizer's nodes are traced under a ``custom`` phase tag. A backward node takes the module path
and source line of the forward op with its ``seq_nr``, so the module tree attributes backward
work to the module whose forward produced it.

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
import torch.fx.traceback as fxt
from torch._functorch._aot_autograd.logging_utils import setup_stacktrace_preservation_hooks_from_tensors
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.proxy_tensor import make_fx
from torch.nn.modules.module import register_module_forward_hook, register_module_forward_pre_hook

from solar_compiler.frontends.captured_program import CapturedProgram, CaptureError, Namer
from solar_compiler.frontends.model_file import ModelFileError, ModelSpec, exception_summary, user_line

from .export import convert_nodes
from .graph import UserFile, finish, tensor_meta
from .inputs import input_names
from .ops import is_random, packet, tables
from .train_ops import (
    BACKWARD_DECOMPOSITIONS,
    attention_backend,
    backward_table,
    dropout_as_draw,
    kept_backward,
)
from .train_optim import OPTIMIZERS, Optimizer, model_optimizer
from .util import build_model, quiet


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
    paths = {id(m): name for name, m in model.named_modules()}
    grad_names: list[str] = []

    def step(p_in: dict, b_in: dict, s_in: dict, xs: list):
        def call():
            return torch.func.functional_call(model, {**p_in, **b_in}, tuple(xs))

        with torch.enable_grad():
            loss, _ = step_loss(spec, model, call, xs)
            # autograd then marks what its backward functions record (autograd_backward, seq_nr)
            setup_stacktrace_preservation_hooks_from_tensors([loss])
            with _phase("backward"):
                grads = torch.autograd.grad(loss, list(p_in.values()), allow_unused=True)
        used = [(k, g) for k, g in zip(p_in, grads, strict=True) if g is not None]
        grad_names[:] = [k for k, _ in used]
        new: list[torch.Tensor] = []
        if opt is not None:
            for k, g in used:
                with _phase("optimizer", k.rpartition(".")[0] or None):
                    new.extend(opt.update(p_in[k].detach(), g, [s_in[f"{s}:{k}"] for s in opt.state]))
        return [loss.detach(), *(g for _, g in used), *new]

    with fake_mode:  # the optimizer state: inputs of the step, shaped and typed like its parameter
        state = {f"{s}:{k}": torch.zeros_like(p) for k, p in params.items()
                 for s in (opt.state if opt else ())}
    _, _, python = tables()
    table = {op: fn for op, fn in {**backward_table(), **python, **BACKWARD_DECOMPOSITIONS}.items()
             if not kept_backward(op)}
    try:
        # without oneDNN, CPU recurrent layers run torch's portable per-step ops (mkldnn_rnn_layer
        # would be one opaque op with no template)
        with fake_mode, quiet(), fxt.preserve_node_meta(), _module_stack(paths), \
                torch.backends.mkldnn.flags(enabled=False), attention_backend(), dropout_as_draw():
            traced = make_fx(step, decomposition_table=table, record_stack_traces=True)
            gm = traced(params, buffers, state, sample)
            gm = _functional(gm, user, (params, buffers, state, sample), table)
    except (ModelFileError, CaptureError):
        raise
    except Exception as exc:  # noqa: BLE001 - one line naming what failed
        line = user_line(exc, spec.abspath)
        where = f"{spec.path}:{line}" if line else spec.path
        raise CaptureError(f"{where}: tracing the training step failed: {exception_summary(exc)}") from exc
    return _program(spec, mode, user, gm, sample, params, buffers, state, grad_names, opt)


def _functional(gm, user: UserFile, args: tuple, table: dict):
    """`gm` without in-place updates and views of updated tensors (`nn.ReLU(inplace=True)`,
    `x += y`, train-mode batch-norm statistics): re-traced through `torch.func.functionalize` by an
    fx interpreter, each node's (module, loc, phase) carried over in ``meta["custom"]`` (fx copies
    it to every node traced while the interpreter runs a node). The step itself cannot be traced
    under `functionalize`: parameters lose their `requires_grad` there. An update of a buffer (a
    running statistic) becomes a copy into the graph input, dropped by `_program`."""
    annotate = _annotator(gm, user)
    for n in gm.graph.nodes:
        if n.op == "call_function":
            n.meta["custom"] = {**(n.meta.get("custom") or {}), "solar": annotate(n)}
    flat = [a for a in torch.utils._pytree.tree_leaves(args)]

    def run(*xs):
        return torch.fx.Interpreter(gm).run(*xs)

    return make_fx(torch.func.functionalize(run, remove="mutations"), decomposition_table=table)(*flat)


def _optimizer(spec: ModelSpec, model: torch.nn.Module, optimizer: str | None) -> Optimizer | None:
    own = model_optimizer(spec, model)
    if optimizer is None:
        return own
    chosen = Optimizer.default(optimizer)
    return replace(own, kind=chosen.kind) if own is not None and own.kind == chosen.kind else chosen


@contextlib.contextmanager
def _phase(phase: str, module: str | None = None) -> Iterator[None]:
    """Nodes traced inside are tagged `phase` (``meta["custom"]``, which fx copies to each node),
    and, when given, run in `module` (an optimizer update: the module owning the parameter)."""
    saved = {k: fxt.current_meta.get(k) for k in ("custom", "nn_module_stack")}
    fxt.current_meta["custom"] = {**(saved["custom"] or {}), "solar_phase": phase}
    if module is not None:
        fxt.current_meta["nn_module_stack"] = {module: (module, "")}
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                fxt.current_meta.pop(k, None)
            else:
                fxt.current_meta[k] = v


@contextlib.contextmanager
def _module_stack(paths: dict[int, str]) -> Iterator[None]:
    """Forward nodes carry ``nn_module_stack`` (the path of the innermost module running), set by
    global module hooks while the step is traced."""
    stack: list[str] = []

    def pre(mod, args):
        path = paths.get(id(mod))
        if path is not None:
            stack.append(path)
            fxt.current_meta["nn_module_stack"] = {path: (path, type(mod).__name__)}

    def post(mod, args, out):
        if paths.get(id(mod)) is not None and stack:
            stack.pop()
            if stack:
                fxt.current_meta["nn_module_stack"] = {stack[-1]: (stack[-1], "")}
            else:
                fxt.current_meta.pop("nn_module_stack", None)

    h1, h2 = register_module_forward_pre_hook(pre), register_module_forward_hook(post)
    try:
        yield
    finally:
        h1.remove()
        h2.remove()


def _program(spec: ModelSpec, mode: str, user: UserFile, gm, sample: list, params: dict, buffers: dict,
             state: dict, grad_names: list[str], opt: Optimizer | None) -> CapturedProgram:
    prog = CapturedProgram(source=spec.path, mode=mode, method="make_fx",
                           size_constants={**spec.size_constants, **spec.repeat_counts}, step="train",
                           optimizer=opt.kind if opt is not None else None)
    namer = Namer()
    node_name: dict[Any, str] = {}
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    tensors_in = [t for t in sample if isinstance(t, torch.Tensor)]
    names_in = input_names(spec, sample)
    n_p, n_b, n_s = len(params), len(buffers), len(state)
    if len(placeholders) != n_p + n_b + n_s + len(tensors_in):
        raise CaptureError(f"{spec.path}: the traced step has {len(placeholders)} inputs, expected "
                           f"{n_p + n_b + n_s + len(tensors_in)}")
    sources = [*params, *buffers, *(f"optim:{k}" for k in state)]
    for ph, src in zip(placeholders, sources, strict=False):
        name = namer.fresh(src.removeprefix("optim:").replace(":", "_"))
        prog.weights.append(tensor_meta(name, ph.meta["val"]))
        prog.weight_sources[name] = src
        node_name[ph] = name
    for ph, base in zip(placeholders[len(sources):], names_in, strict=True):
        name = namer.fresh(base)
        prog.inputs.append(tensor_meta(name, ph.meta["val"]))
        node_name[ph] = name
    for n in list(gm.graph.nodes):
        if n.op == "call_function" and n.target is torch.ops.aten.copy_.default and not n.users \
                and n.args[0].op == "placeholder":
            gm.graph.erase_node(n)  # a buffer's update (running statistics): not a result of the step
            continue
        if n.op == "call_function" and isinstance(n.target, torch._ops.OpOverload):
            if is_random(n.target) and packet(n.target) != "rand_like":
                raise CaptureError(f"{user.stack_trace_loc(n.meta.get('stack_trace')) or spec.path}: "
                                   f"random op {n.target} in a training step is not supported yet")
            if packet(n.target).endswith("_") and packet(n.target) not in ("__and__", "__or__"):
                raise CaptureError(f"{user.stack_trace_loc(n.meta.get('stack_trace')) or spec.path}: the "
                                   f"training step updates a tensor in place ({n.target}); not supported yet")
    convert_nodes(gm.graph, node_name, namer, user, prog, set(),
                  lambda n: (n.meta.get("custom") or {}).get("solar", (None, None, None)))
    out_node = next(n for n in gm.graph.nodes if n.op == "output")
    outs = list(out_node.args[0])
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


def _annotator(gm, user: UserFile):
    """(module path, loc, phase) of each node: forward nodes from their own metadata, backward nodes
    from the forward node with their ``seq_nr``, optimizer nodes from their phase tag."""
    first_fwd: dict[int, Any] = {}
    for n in gm.graph.nodes:
        if n.op == "call_function" and not n.meta.get("autograd_backward") and "custom" not in n.meta:
            first_fwd.setdefault(n.meta.get("seq_nr"), n)

    def module_of(n) -> str | None:
        stack = n.meta.get("nn_module_stack")
        return (list(stack.values())[-1][0] or None) if stack else None

    def annotate(n):
        tag = (n.meta.get("custom") or {}).get("solar_phase")
        if n.meta.get("autograd_backward") or tag == "backward":
            fwd = first_fwd.get(n.meta.get("seq_nr")) if n.meta.get("autograd_backward") else None
            src = fwd if fwd is not None else n
            return module_of(src), user.stack_trace_loc(src.meta.get("stack_trace")), "backward"
        if tag == "optimizer":
            return module_of(n), None, "optimizer"
        return module_of(n), user.stack_trace_loc(n.meta.get("stack_trace")), "forward"

    return annotate


__all__ = ["OPTIMIZERS", "capture_train", "step_loss", "trainable"]
