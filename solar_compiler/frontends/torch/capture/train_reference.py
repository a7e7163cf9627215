"""The reference of a training step: the model run eagerly for real, its gradients from
``torch.autograd`` and its update from the real ``torch.optim`` optimizer, returned under the
captured program's names (what validation compares the translated step with).

The optimizer state the step reads (AdamW's moments) is not zero, so that every term of the update
is checked: it is drawn here (`optimizer_state`), fed to the loop IR as its weights, and installed
as the torch optimizer's state before its ``step()``.
"""

from __future__ import annotations

import numpy as np
import torch

from solar_compiler.frontends.captured_program import CapturedProgram, CaptureError
from solar_compiler.frontends.model_file import ModelSpec

from .train import step_loss, trainable
from .train_ops import dropout_as_draw
from .train_optim import Optimizer, model_optimizer
from .util import WideMatrixProducts, build_model, from_numpy_as, quiet, resolve_attr, to_numpy


def optimizer_state(program: CapturedProgram, params: dict[str, torch.Tensor], seed: int) \
        -> dict[str, torch.Tensor]:
    """The optimizer state tensors by weight name: first moments N(0, 0.01), second moments
    U(0, 1e-4) (non-negative, as a running mean of squares is), deterministic in `seed`."""
    gen = torch.Generator().manual_seed(1000 + seed)
    out: dict[str, torch.Tensor] = {}
    for w in program.weights:
        src = program.weight_sources.get(w.name, "")
        if not src.startswith("optim:"):
            continue
        kind, _, param = src.removeprefix("optim:").partition(":")
        p = params[param]
        draw = torch.randn(p.shape, generator=gen) * 0.1 if kind == "exp_avg" else \
            torch.rand(p.shape, generator=gen) * 1e-4
        out[w.name] = draw.to(p.dtype)
    return out


def run_train_reference(spec: ModelSpec, mode: str, program: CapturedProgram,
                        inputs: dict[str, np.ndarray] | None, seed: int, wide: bool = False,
                        perturb: float = 0.0):
    """(inputs, weights, outputs, random) of one eager training step, like `run_reference`; with
    `wide`, the same step in float64 (model `.double()`, float inputs and optimizer state widened;
    with `perturb`, every float input, parameter, buffer and state tensor multiplied by
    ``1 + perturb * N(0, 1)`` first), as `run_reference_f64` does for a forward."""
    torch.manual_seed(seed)
    model, sample = build_model(spec, mode, None)
    if wide:
        model = model.double()
    names_in = [m.name for m in program.inputs]
    positions = [i for i, v in enumerate(sample) if isinstance(v, torch.Tensor)]
    if len(positions) != len(names_in):
        raise CaptureError(f"{spec.path}: get_inputs() gives {len(positions)} tensors, program has "
                           f"{len(names_in)}")
    if inputs is not None:
        for pos, name in zip(positions, names_in, strict=True):
            sample[pos] = from_numpy_as(inputs[name], sample[pos].dtype)
    if wide:
        sample = [t.double() if isinstance(t, torch.Tensor) and t.is_floating_point() else t for t in sample]
    in_np = {name: to_numpy(sample[pos]) for pos, name in zip(positions, names_in, strict=True)}
    params = trainable(model)
    state = optimizer_state(program, params, seed)
    if wide:
        state = {k: v.double() for k, v in state.items()}
    if perturb:
        gen = torch.Generator().manual_seed(1)
        with torch.no_grad():
            for t in [*model.parameters(), *model.buffers(), *sample, *state.values()]:
                if isinstance(t, torch.Tensor) and t.dtype == torch.float64:
                    t.mul_(1 + perturb * torch.randn(t.shape, generator=gen, dtype=torch.float64))
    weights_np: dict[str, np.ndarray] = {}
    for w in program.weights:
        src = program.weight_sources.get(w.name, w.name)
        t = state.get(w.name) if src.startswith("optim:") else resolve_attr(model, src)
        if not isinstance(t, torch.Tensor):
            raise CaptureError(f"{spec.path}: cannot find weight {src}")
        weights_np[w.name] = to_numpy(t)

    draws: list[torch.Tensor] = []
    with WideMatrixProducts(), quiet(), torch.enable_grad(), dropout_as_draw(draws):
        loss, _ = step_loss(spec, model, lambda: model(*sample), sample)
        grads = dict(zip(params, torch.autograd.grad(loss, list(params.values()), allow_unused=True),
                         strict=True))
    values: dict[str, torch.Tensor] = {"loss": loss.detach()}
    values.update({f"grad:{k}": g for k, g in grads.items() if g is not None})
    if program.optimizer is not None:
        values.update(_optimizer_step(spec, model, program, params, grads, state))
    out_np: dict[str, np.ndarray] = {}
    for name in program.outputs:
        role = program.output_roles[name]
        if role not in values:
            raise CaptureError(f"{spec.path}: the eager step has no {role}")
        out_np[name] = to_numpy(values[role].reshape(program.tensor(name).shape))
    random_np: dict[str, np.ndarray] = {}
    for meta, k in zip(program.random_tensors, program.random_draws, strict=True):
        if k >= len(draws) or tuple(draws[k].shape) != meta.shape:
            raise CaptureError(f"{spec.path}: the eager step drew {len(draws)} random tensors, not the "
                               f"captured program's")
        random_np[meta.name] = to_numpy(draws[k])
    return in_np, weights_np, out_np, random_np


def _optimizer_step(spec: ModelSpec, model, program: CapturedProgram, params: dict, grads: dict,
                    state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The real torch optimizer's step from the drawn state: the updated parameters and state."""
    own = model_optimizer(spec, model)
    opt_spec = own if own is not None and own.kind == program.optimizer else \
        Optimizer.default(program.optimizer)
    by_source = {program.weight_sources[w]: t for w, t in state.items()}
    live = {k: p for k, p in params.items() if grads.get(k) is not None}
    opt = opt_spec.torch_optimizer(list(live.values()))
    for k, p in live.items():
        p.grad = grads[k].detach().clone()
        if opt_spec.state:
            opt.state[p] = {"step": torch.tensor(0.0),
                            **{s: by_source[f"optim:{s}:{k}"].clone() for s in opt_spec.state}}
    with torch.no_grad():
        opt.step()
    out: dict[str, torch.Tensor] = {}
    for k, p in live.items():
        out[f"param:{k}"] = p.detach()
        for s in opt_spec.state:
            out[f"{s}:{k}"] = opt.state[p][s]
    return out
