"""The reference runner: the model run eagerly for real, its inputs, weights, outputs and random
draws returned as numpy arrays under the captured program's names (what validation compares the
translated kernel with)."""

from __future__ import annotations

import contextlib
from collections import Counter
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
from .util import (
    WideMatrixProducts,
    build_model,
    from_numpy_as,
    load_spec,
    quiet,
    real_sample,
    resolve_attr,
    to_numpy,
)


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
        if not is_random(func, args, kwargs):
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


class TieRecorder(TorchDispatchMode):
    """Eager execution that keeps the input and the index result of the calls `wanted` (op name,
    call number among that op's calls): the ops whose tie order is unspecified whose indices
    validation checks (`frontends/torch/ties.py`). It only watches: every op runs as without it."""

    def __init__(self, wanted: set[tuple[str, int]]):
        super().__init__()
        self.wanted = wanted
        self.ops = {op for op, _ in wanted}
        self.calls: Counter[str] = Counter()
        self.got: dict[tuple[str, int], tuple[np.ndarray, np.ndarray]] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        name = str(func)
        if name in self.ops:
            key = (name, self.calls[name])
            self.calls[name] += 1
            if key in self.wanted and isinstance(args[0], torch.Tensor) and isinstance(out, (tuple, list)):
                self.got[key] = (to_numpy(args[0]), to_numpy(out[1]))
        return out

    def matched(self, program: CapturedProgram) -> dict[tuple[str, int], tuple[np.ndarray, np.ndarray]]:
        """What was kept, for the ops eager called as many times as the program has nodes of them
        (else the n-th call need not be the n-th node: nothing of that op is returned)."""
        nodes = Counter(n.op for n in program.nodes)
        return {k: v for k, v in self.got.items() if self.calls[k[0]] == nodes[k[0]]}


class ModelReuse:
    """The model a reference run built, kept for the next runs of the same validation (its samples).

    A run builds the model under `torch.manual_seed(seed)`, then calls `get_inputs()`. Built once,
    the model is reused with the random state it left, restored before each `get_inputs()`: the
    same weights, the same sample and the same random draws in forward as a fresh build, without
    the weights' initialisation (a 16,384 x 16,384 `nn.Linear` takes a second) and their copy to
    numpy each time; the weights come back as read-only views of the model's tensors. A forward
    that changes the model (a parameter or buffer written in place: its version counter; an
    attribute rebound) ends the reuse: that run's weights are taken again, as copies, from a fresh
    build (what the forward saw), and every later run builds its own model, as without reuse.
    """

    def __init__(self, seed: int = 0, share: bool = True) -> None:
        self.seed = seed
        self.on = share  # off: every run builds its own model and copies its weights (no reuse)
        self.model: torch.nn.Module | None = None
        self.rng: torch.Tensor | None = None
        self.weights: dict[str, np.ndarray] | None = None
        self.state: tuple | None = None

    def take(self, spec: ModelSpec, mode: str):
        """(model, sample) of a run: the kept model and a new `get_inputs()`, or both built."""
        torch.manual_seed(self.seed)
        if not self.on:
            return build_model(spec, mode, None)
        if self.model is not None:
            torch.set_rng_state(self.rng)
            return self.model, real_sample(spec)

        def keep_rng() -> None:
            self.rng = torch.get_rng_state()

        model, sample = build_model(spec, mode, None, after_build=keep_rng)
        self.model, self.state, self.weights = model, _model_state(model), None
        return model, sample

    def weights_of(self, spec: ModelSpec, program: CapturedProgram, model) -> dict[str, np.ndarray]:
        if not self.on:
            return _weights(spec, program, model, to_numpy)
        if self.weights is None:
            self.weights = _weights(spec, program, model, _weight_view)
        return self.weights

    def after_forward(self, spec: ModelSpec, program: CapturedProgram, mode: str,
                      weights: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The run's weights as the forward saw them; the reuse ends if the forward changed the model."""
        if not self.on or _model_state(self.model) == self.state:
            return weights
        self.on, self.model, self.weights = False, None, None
        torch.manual_seed(self.seed)
        return _weights(spec, program, build_model(spec, mode, None)[0], to_numpy)


def _model_state(model: torch.nn.Module) -> tuple:
    """What a forward may change: every parameter's and buffer's identity and version counter (an
    in-place write bumps it), and the identity of every other module attribute."""
    from .export import _state_snapshot

    tensors = [(n, id(t), t._version) for n, t in model.named_parameters(remove_duplicate=False)]
    tensors += [(n, id(t), t._version) for n, t in model.named_buffers(remove_duplicate=False)]
    return tensors, _state_snapshot(model)


def _weight_view(t: torch.Tensor) -> np.ndarray:
    """A read-only numpy view of a kept model's tensor when torch's memory is numpy's layout (a
    contiguous CPU tensor of a numpy dtype), else `to_numpy`'s copy."""
    d = t.detach()
    if d.device.type == "cpu" and d.is_contiguous() and not d.is_conj() and d.dtype in _NUMPY_DTYPES:
        a = d.numpy()
    else:
        a = to_numpy(t)
    a.flags.writeable = False
    return a


_NUMPY_DTYPES = (torch.float32, torch.float64, torch.float16, torch.int64, torch.int32, torch.int16,
                 torch.int8, torch.uint8, torch.bool)


def run_reference(
    path: str | Path | ModelSpec,
    mode: str = "eval",
    inputs: dict[str, np.ndarray] | None = None,
    seed: int = 0,
    program: CapturedProgram | None = None,
    size_overrides: dict[str, int] | None = None,
    reuse: ModelReuse | None = None,
    ties: dict[tuple[str, int], tuple[np.ndarray, np.ndarray]] | None = None,
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Run the model eagerly for real; return (inputs, weights, outputs, random) keyed by the
    names of ``program`` (captured here with fake tensors when not given). `ties`, keyed by the
    (op, call number) of calls whose tie order is unspecified (`frontends/torch/ties.py`), is
    filled with their (input, indices) (`TieRecorder`).

    Weights are initialised under ``torch.manual_seed(seed)``; ``inputs`` (by input name)
    replace the ``get_inputs()`` sample.  Random draws inside forward are recorded in order
    and named like ``program.random_tensors``. With `reuse` (made with the same `seed`), the model
    built by an earlier run is run again (`ModelReuse`); its weights then come back read-only.
    """
    spec = load_spec(path, size_overrides)
    if program is None:
        program = capture(spec, mode=mode, fake=True)
    if program.step == "train":
        from .train_reference import run_train_reference

        return run_train_reference(spec, mode, program, inputs, seed)
    runs = reuse if reuse is not None else ModelReuse(seed, share=False)
    model, sample = runs.take(spec, mode)
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
    weights_np = runs.weights_of(spec, program, model)
    out_np, random_np = _run_forward(spec, program, model, sample, ties)
    return in_np, runs.after_forward(spec, program, mode, weights_np), out_np, random_np


def _weights(spec: ModelSpec, program: CapturedProgram, model, as_numpy) -> dict[str, np.ndarray]:
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
        weights_np[w.name] = as_numpy(t)
    return weights_np


def _run_forward(spec: ModelSpec, program: CapturedProgram, model, sample, ties=None):
    """(outputs, random draws) of forward on `sample`, as numpy arrays under the program's names;
    `ties` filled as `run_reference` says."""
    _, _, python = tables()
    rec = RandomRecorder(python)
    watch = TieRecorder(set(ties)) if ties else None
    ctx = contextlib.ExitStack()
    ctx.enter_context(WideMatrixProducts())  # outermost: the recorders see the model's own ops
    if watch is not None:  # below the random recorder: it sees the ops that one runs
        ctx.enter_context(watch)
    if program.random_tensors:
        ctx.enter_context(enable_python_dispatcher())
        ctx.enter_context(_override_composite_implicit_decomp({aten.dropout.default: PRESERVE_CIA}))
        ctx.enter_context(rec)
    if program.method == "make_fx":  # forward calls autograd (`autograd.py`): traced with no .grad
        for p in model.parameters():  # on any parameter, so a reused model's last run leaves none
            p.grad = None
    with torch.no_grad(), quiet():
        with ctx:
            out = model(*sample)
    if watch is not None:
        ties.update(watch.matched(program))  # type: ignore[union-attr]
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
    return out_np, random_np


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
    with torch.no_grad(), WideMatrixProducts():
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
