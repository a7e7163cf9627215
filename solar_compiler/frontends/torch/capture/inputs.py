"""Inputs of the model file: the names of the `get_inputs()` tensors (forward's parameter names)
and fresh samples for validation."""

from __future__ import annotations

import copy
import inspect
from pathlib import Path

import numpy as np
import torch
from torch._subclasses.fake_tensor import FakeTensor

from solar_compiler.frontends.captured_program import Namer
from solar_compiler.frontends.model_file import ModelSpec, load_model_file

from .util import to_numpy


def input_names(spec: ModelSpec, sample: list) -> list[str]:
    """Names of the tensor entries of ``get_inputs()``: the forward parameter names."""
    try:
        sig = inspect.signature(spec.Model.forward)
        params = list(sig.parameters.values())[1:]
    except (TypeError, ValueError):
        params = []
    names: list[str] = []
    namer = Namer()
    pos = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    var = next((p for p in params if p.kind == p.VAR_POSITIONAL), None)
    for i, v in enumerate(sample):
        if i < len(pos):
            base = pos[i].name
        elif var is not None:
            base = f"{var.name}_{i - len(pos)}"
        else:
            base = f"input_{i}"
        name = namer.fresh(base)
        if isinstance(v, torch.Tensor):
            names.append(name)
    return names


def fresh_inputs(spec: ModelSpec | str | Path, seed: int) -> dict[str, np.ndarray]:
    """New samples of the inputs: the file's own (``get_fresh_inputs(seed)``) when it defines one,
    else ``get_inputs()`` under ``torch.manual_seed(seed)``, with integer tensors kept inside the
    [min, max] range observed in the seed-0 sample."""
    spec = spec if isinstance(spec, ModelSpec) else load_model_file(spec)
    return {name: to_numpy(t) for name, t in fresh_tensors(spec, seed).items()}


def fresh_tensors(spec: ModelSpec, seed: int) -> dict[str, torch.Tensor]:
    """`fresh_inputs` as tensors, in `get_inputs()` order. Without a sample of the file's own, an
    integer tensor that `get_inputs()` gives unchanged under the new seed is drawn in its observed
    range: a generator that fixes it (offsets of a ragged layout) is one only the file knows."""
    own = spec.fresh_sample_inputs(seed)
    if own is not None:
        return dict(zip(input_names(spec, own), [t for t in own if isinstance(t, torch.Tensor)], strict=True))
    torch.manual_seed(0)
    base = spec.sample_inputs()
    torch.manual_seed(seed)
    new = spec.sample_inputs()
    names = input_names(spec, base)
    gen = torch.Generator().manual_seed(seed + 7919)
    out: dict[str, torch.Tensor] = {}
    tb = [t for t in base if isinstance(t, torch.Tensor)]
    tn = [t for t in new if isinstance(t, torch.Tensor)]
    for name, b, n in zip(names, tb, tn, strict=True):
        if b.dtype == torch.bool:
            t = n if n.shape == b.shape else torch.rand(b.shape, generator=gen) < 0.5
        elif not b.dtype.is_floating_point and not b.dtype.is_complex:
            lo, hi = (int(b.min()), int(b.max())) if b.numel() else (0, 0)
            ok = n.shape == b.shape and (n.numel() == 0 or (int(n.min()) >= lo and int(n.max()) <= hi))
            if ok and not torch.equal(n, b):
                t = n
            else:
                t = torch.randint(lo, hi + 1, tuple(b.shape), generator=gen, dtype=b.dtype)
        else:
            t = n if n.shape == b.shape else torch.randn(b.shape, generator=gen, dtype=b.dtype)
        out[name] = t
    return out


def on_fresh_sample(spec: ModelSpec, seed: int) -> ModelSpec:
    """`spec` whose `get_inputs()` returns the fresh sample `seed` (`fresh_tensors`), for capturing
    it again on those values. Called in a fake-tensor mode, it returns the file's own sample: no
    value is read there, only shapes, which are the same."""
    fresh = list(fresh_tensors(spec, seed).values())
    own = spec.sample_inputs

    def sample_inputs() -> list:
        got = own()
        if any(isinstance(v, FakeTensor) for v in got):
            return got
        values = iter(fresh)
        return [next(values) if isinstance(v, torch.Tensor) else v for v in got]

    new = copy.copy(spec)
    new.sample_inputs = sample_inputs  # type: ignore[method-assign]
    return new
