"""The reference runner: the model run eagerly for real, its inputs, weights, outputs and random
draws returned as numpy arrays under the captured program's names (what validation compares the
translated kernel with)."""

from __future__ import annotations

import contextlib
from pathlib import Path

import numpy as np
import torch
from torch._dispatch.python import enable_python_dispatcher
from torch.export.exported_program import _override_composite_implicit_decomp
from torch.utils._python_dispatch import TorchDispatchMode

from solar_compiler.frontends.captured_program import CapturedProgram, CaptureError
from solar_compiler.frontends.model_file import ModelSpec

from .entry import capture
from .ops import PRESERVE_CIA, aten, dropout_decomp, has_cia_kernel, is_random, mutated_arg_indices, tables
from .util import build_model, from_numpy_as, load_spec, quiet, resolve_attr, to_numpy


class RandomRecorder(TorchDispatchMode):
    """Eager execution that decomposes random ops like capture does and records the draws."""

    def __init__(self, python_table):
        super().__init__()
        self.table = python_table
        self.draws: list[torch.Tensor] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is aten.dropout.default:
            with self:
                return dropout_decomp(*args, **kwargs)
        if not is_random(func):
            if has_cia_kernel(func):
                with self:
                    r = func.decompose(*args, **kwargs)
                if r is not NotImplemented:
                    return r
            return func(*args, **kwargs)
        if func in self.table:
            with self:
                r = self.table[func](*args, **kwargs)
            if r is not NotImplemented:
                return r
        out = func(*args, **kwargs)
        mutated = mutated_arg_indices(func)
        drawn = args[mutated[0]] if mutated else (out[0] if isinstance(out, (tuple, list)) else out)
        self.draws.append(drawn.detach().clone())
        return out


def run_reference(
    path: str | Path | ModelSpec,
    mode: str = "eval",
    inputs: dict[str, np.ndarray] | None = None,
    seed: int = 0,
    program: CapturedProgram | None = None,
    size_overrides: dict[str, int] | None = None,
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Run the model eagerly for real; return (inputs, weights, outputs, random) keyed by the
    names of ``program`` (captured here with fake tensors when not given).

    Weights are initialised under ``torch.manual_seed(seed)``; ``inputs`` (by input name)
    replace the ``get_inputs()`` sample.  Random draws inside forward are recorded in order
    and named like ``program.random_tensors``.
    """
    spec = load_spec(path, size_overrides)
    if program is None:
        program = capture(spec, mode=mode, fake=True)
    if program.step == "train":
        from .train_reference import run_train_reference

        return run_train_reference(spec, mode, program, inputs, seed)
    torch.manual_seed(seed)
    model, sample = build_model(spec, mode, None)
    names_in = [m.name for m in program.inputs]
    positions = [i for i, v in enumerate(sample) if isinstance(v, torch.Tensor)]
    if len(positions) != len(names_in):
        raise CaptureError(
            f"{spec.path}: get_inputs() gives {len(positions)} tensors, program has {len(names_in)}"
        )
    if inputs is not None:
        missing = [n for n in names_in if n not in inputs]
        if missing:
            raise CaptureError(f"{spec.path}: missing reference inputs {', '.join(missing)}")
        for pos, name in zip(positions, names_in, strict=True):
            sample[pos] = from_numpy_as(inputs[name], sample[pos].dtype)
    in_np = {name: to_numpy(sample[pos]) for pos, name in zip(positions, names_in, strict=True)}

    weights_np: dict[str, np.ndarray] = {}
    for w in program.weights:
        src = program.weight_sources.get(w.name, w.name)
        if src.startswith("const:"):
            weights_np[w.name] = program.constants[w.name]
            continue
        if src.startswith("global:"):
            t = getattr(spec.module, src[len("global:") :], None)
        else:
            t = resolve_attr(model, src)
        if not isinstance(t, torch.Tensor):
            raise CaptureError(f"{spec.path}: cannot find weight {src}")
        weights_np[w.name] = to_numpy(t)

    _, _, python = tables()
    rec = RandomRecorder(python)
    if program.random_tensors:
        ctx = contextlib.ExitStack()
        ctx.enter_context(enable_python_dispatcher())
        ctx.enter_context(_override_composite_implicit_decomp({aten.dropout.default: PRESERVE_CIA}))
        ctx.enter_context(rec)
    else:
        ctx = contextlib.nullcontext()
    with torch.no_grad(), quiet():
        with ctx:
            out = model(*sample)
    flat, _ = torch.utils._pytree.tree_flatten(out)
    flat = [o for o in flat if isinstance(o, torch.Tensor)]
    if len(flat) != len(program.outputs):
        raise CaptureError(
            f"{spec.path}: forward returned {len(flat)} tensors, "
            f"the captured program has {len(program.outputs)}"
        )
    out_np = {name: to_numpy(o) for name, o in zip(program.outputs, flat, strict=True)}
    random_np: dict[str, np.ndarray] = {}
    if program.random_tensors:
        order = program.random_draws or list(range(len(program.random_tensors)))
        if len(order) != len(program.random_tensors) or max(order) >= len(rec.draws):
            raise CaptureError(
                f"{spec.path}: forward drew {len(rec.draws)} random tensors, "
                f"the captured program expects {max(order) + 1}"
            )
        for meta, k in zip(program.random_tensors, order, strict=True):
            t = rec.draws[k]
            if tuple(t.shape) != meta.shape:
                raise CaptureError(f"{spec.path}: random draw {meta.name} has shape {tuple(t.shape)}")
            random_np[meta.name] = to_numpy(t)
    return in_np, weights_np, out_np, random_np


def eager_forward(path: str, mode: str = "eval", seed: int = 0) -> list[tuple[tuple[int, ...], str]]:
    """Load the model file, build the model and run forward once for real (no_grad); for use in a
    sandboxed child (`frontends.sandbox.run_in_child`). Returns (shape, dtype) of every output tensor."""
    from solar_compiler.frontends.model_file import load_model_file

    spec = load_model_file(path)
    torch.manual_seed(seed)
    model = spec.build_model()
    if mode == "eval":
        model.eval()
    sample = spec.sample_inputs()
    with torch.no_grad():
        out = model(*sample)
    flat, _ = torch.utils._pytree.tree_flatten(out)
    return [(tuple(t.shape), str(t.dtype).replace("torch.", "")) for t in flat if isinstance(t, torch.Tensor)]


def run_reference_f64(spec: ModelSpec, mode: str, inputs: dict[str, np.ndarray],
                      program: CapturedProgram, perturb: float = 0.0) -> dict[str, np.ndarray] | None:
    """The program's outputs evaluated in float64: the model (weights from ``torch.manual_seed(0)``,
    as `run_reference(seed=0)`) converted by ``.double()`` and run on the float inputs widened to
    float64; with `perturb`, every float input, parameter and buffer multiplied by
    ``1 + perturb * N(0, 1)`` first (a probe of how much the program amplifies rounding-sized
    changes). None when that is not the same computation in higher precision: random draws inside
    forward (they would differ), or an output that does not come out as float64 (the model fixes a
    dtype itself), or any failure."""
    if program.random_tensors:
        return None
    if program.step == "train":
        from .train_reference import run_train_reference

        try:
            with quiet():
                _, _, out, _ = run_train_reference(spec, mode, program, inputs, 0, wide=True, perturb=perturb)
        except Exception:  # noqa: BLE001 - no float64 evaluation: the caller keeps its verdict
            return None
        return out if all(o.dtype == np.float64 for o in out.values()) else None
    try:
        with quiet():
            torch.manual_seed(0)
            model, sample = build_model(spec, mode, None)
            model = model.double()
            names = [m.name for m in program.inputs]
            positions = [i for i, v in enumerate(sample) if isinstance(v, torch.Tensor)]
            if len(positions) != len(names):
                return None
            for pos, name in zip(positions, names, strict=True):
                t = from_numpy_as(inputs[name], sample[pos].dtype)
                sample[pos] = t.double() if t.is_floating_point() else t
            if perturb:
                gen = torch.Generator().manual_seed(1)
                with torch.no_grad():
                    for t in [*model.parameters(), *model.buffers(), *sample]:
                        if isinstance(t, torch.Tensor) and t.dtype == torch.float64:
                            t.mul_(1 + perturb * torch.randn(t.shape, generator=gen, dtype=torch.float64))
            with torch.no_grad():
                out = model(*sample)
    except Exception:  # noqa: BLE001 - no float64 evaluation: the caller keeps its verdict
        return None
    flat = [o for o in torch.utils._pytree.tree_flatten(out)[0] if isinstance(o, torch.Tensor)]
    if len(flat) != len(program.outputs) or any(o.dtype != torch.float64 for o in flat):
        return None
    return {name: o.numpy() for name, o in zip(program.outputs, flat, strict=True)}
