"""Public helpers of the capture that other parts of the frontend use too (the mask recogniser
builds the model for real; the reference runner converts tensors): building a model inside a
fake-tensor mode or for real, sizes, attribute lookup, tensor -> numpy, and torch's silence."""

from __future__ import annotations

import contextlib
import io
import logging
import warnings
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch._subclasses.fake_tensor import FakeTensor, unset_fake_temporarily
from torch.utils._python_dispatch import _disable_current_modes

from solar_compiler.frontends.model_file import (
    ModelFileError,
    ModelSpec,
    exception_summary,
    load_model_file,
    user_line,
)
from solar_compiler.frontends.program import CaptureError

#: Programs needing real execution during capture are run for real only below this size.
REAL_RUN_LIMIT_BYTES = 2 * 2**30


def load_spec(path: str | Path | ModelSpec, size_overrides: dict[str, int] | None = None) -> ModelSpec:
    """The model file `path` (or the spec itself) with its size constants overridden."""
    spec = path if isinstance(path, ModelSpec) else load_model_file(path)
    if size_overrides:
        spec = spec.with_sizes(size_overrides)
    return spec


def build_model(spec: ModelSpec, mode: str, fake_mode):
    """(model, sample list) built inside ``fake_mode`` (or for real when it is None)."""
    ctx = fake_mode if fake_mode is not None else contextlib.nullcontext()
    with ctx:
        model = spec.build_model()
        sample = spec.sample_inputs()
    if not isinstance(model, torch.nn.Module):
        raise ModelFileError(f"{spec.path}:1: Model(...) is not a torch.nn.Module")
    if mode == "eval":
        model.eval()
    tensor_attrs_to_buffers(model)
    return model, sample


def tensor_attrs_to_buffers(model: torch.nn.Module) -> None:
    """Plain tensor attributes (``self.mask = torch.tril(...)``) become non-persistent buffers.

    Export lifts them as constants (and segfaults on fake ones in run_decompositions);
    as buffers they are weights named by their attribute path in both capture methods.
    """
    for mod in model.modules():
        for k, v in list(vars(mod).items()):
            if isinstance(v, torch.Tensor) and not isinstance(v, torch.nn.Parameter):
                delattr(mod, k)
                mod.register_buffer(k, v, persistent=False)


def nbytes(tensors: Iterable[Any]) -> int:
    """Bytes of the tensors among `tensors` (other entries count nothing)."""
    return sum(t.numel() * t.element_size() for t in tensors if isinstance(t, torch.Tensor))


def resolve_attr(model: torch.nn.Module, fqn: str) -> torch.Tensor | None:
    """The tensor at attribute path `fqn` (``layers.0.weight``) of `model`, or None."""
    obj: Any = model
    for part in fqn.split("."):
        if isinstance(obj, torch.nn.Module) and part in obj._modules:
            obj = obj._modules[part]
        elif hasattr(obj, part):
            obj = getattr(obj, part)
        else:
            return None
    return obj if isinstance(obj, torch.Tensor) else None


def real_value(t) -> np.ndarray | None:
    """The value of a real tensor or of a fake tensor that carries a constant, else None."""
    if t is None:
        return None
    if isinstance(t, FakeTensor):
        const = getattr(t, "constant", None)
        if const is None:
            return None
        t = const
    if t.device.type == "meta":
        return None
    return to_numpy(t)


def to_numpy(t: torch.Tensor) -> np.ndarray:
    """A copy of a real tensor as numpy (bf16/f8 widened to f32), outside any active mode."""
    with unset_fake_temporarily(), _disable_current_modes():
        t = t.detach()
        if t.dtype in (torch.bfloat16, torch.float8_e4m3fn, torch.float8_e5m2):
            t = t.float()
        return t.cpu().contiguous().numpy().copy()


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """Silence torch's warnings, logs and the partial graphs export prints on failure."""
    loggers = [
        logging.getLogger(n) for n in ("torch", "torch._export", "torch.export", "torch.fx", "torch._dynamo")
    ]
    levels = [lg.level for lg in loggers]
    with (
        warnings.catch_warnings(),
        contextlib.redirect_stderr(io.StringIO()),
        contextlib.redirect_stdout(io.StringIO()),
    ):
        warnings.simplefilter("ignore")
        for lg in loggers:
            lg.setLevel(logging.CRITICAL + 1)
        try:
            yield
        finally:
            for lg, lvl in zip(loggers, levels, strict=True):
                lg.setLevel(lvl)


def forward_error(spec: ModelSpec, exc: BaseException) -> CaptureError:
    """`<file>:<line>: forward raised <exception>`, the line being the model file's innermost."""
    line = user_line(exc, spec.abspath)
    where = f"{spec.path}:{line}" if line else spec.path
    return CaptureError(f"{where}: forward raised {exception_summary(exc)}")
