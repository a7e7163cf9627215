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
from torch.utils._python_dispatch import TorchDispatchMode, _disable_current_modes

from solar_compiler.frontends.captured_program import CaptureError
from solar_compiler.frontends.model_file import (
    ModelFileError,
    ModelSpec,
    exception_summary,
    load_model_file,
    source_where,
)

#: Programs needing real execution during capture are run for real only below this size.
REAL_RUN_LIMIT_BYTES = 2 * 2**30


def load_spec(path: str | Path | ModelSpec, size_overrides: dict[str, int] | None = None) -> ModelSpec:
    """The model file `path` (or the spec itself) with its size constants overridden."""
    spec = path if isinstance(path, ModelSpec) else load_model_file(path)
    if size_overrides:
        spec = spec.with_sizes(size_overrides)
    return spec


def build_model(spec: ModelSpec, mode: str, fake_mode, after_build=None):
    """(model, sample list) built inside ``fake_mode`` (or for real when it is None); `after_build()`
    is called between the two (the reference runner saves the random state there: `ModelReuse`).

    A constructor that fake tensors cannot run (`.item()` or another value read, `self.to(dtype)`,
    `.half()`, `.bfloat16()`, whose parameter swap fake tensors refuse) is run for real, when its
    parameters and buffers stay below `REAL_RUN_LIMIT_BYTES`, and its tensors are then turned into
    fake tensors of ``fake_mode``; so is a `get_inputs()` that reads values (`_fake_sample`). Device
    moves (`.to("cuda")`, `.cuda()`) in `__init__` or `get_inputs()` stay on the CPU when no such
    device is present: the program is the same."""
    with _device_moves_kept():
        if fake_mode is None:
            model = spec.build_model()
        else:
            model = _fake_model(spec, fake_mode)
        if after_build is not None:
            after_build()
        sample = spec.sample_inputs() if fake_mode is None else _fake_sample(spec, fake_mode)
    if not isinstance(model, torch.nn.Module):
        raise ModelFileError(f"{spec.path}:1: Model(...) is not a torch.nn.Module")
    if mode == "eval":
        model.eval()
    tensor_attrs_to_buffers(model)
    return model, sample


def real_sample(spec: ModelSpec) -> list:
    """`get_inputs()` for real, as `build_model` calls it (device moves kept on the CPU)."""
    with _device_moves_kept():
        return spec.sample_inputs()


def _fake_model(spec: ModelSpec, fake_mode):
    try:
        with fake_mode:
            return spec.build_model()
    except ModelFileError as e:
        fake_error = e
    with torch.random.fork_rng():
        torch.manual_seed(0)
        try:
            model = spec.build_model()
        except ModelFileError:
            raise fake_error from None
    if not isinstance(model, torch.nn.Module):
        return model
    size = nbytes(model.parameters()) + nbytes(model.buffers())
    if size > REAL_RUN_LIMIT_BYTES:
        raise CaptureError(f"{spec.path}: Model.__init__ needs real tensors ({fake_error}) but its "
                           f"parameters take {size / 2**30:.1f} GB; capture a size-reduced instance")
    tensor_attrs_to_buffers(model)
    fakes: dict[int, torch.Tensor] = {}  # tied tensors stay tied

    def fake(t: torch.Tensor) -> torch.Tensor:
        if id(t) not in fakes:
            f = fake_mode.from_tensor(t.detach())
            fakes[id(t)] = torch.nn.Parameter(f, requires_grad=t.requires_grad) \
                if isinstance(t, torch.nn.Parameter) else f
        return fakes[id(t)]

    for mod in model.modules():
        for k, p in list(mod._parameters.items()):
            if p is not None:
                mod._parameters[k] = fake(p)
        for k, b in list(mod._buffers.items()):
            if b is not None:
                mod._buffers[k] = fake(b)
    return model


def _fake_sample(spec: ModelSpec, fake_mode) -> list:
    """`get_inputs()` inside ``fake_mode``; one that fake tensors cannot run (a value read by Python:
    `int(t)`, `.item()`, `.tolist()`, as ragged layouts build `cu_seqlens` or `kv_indptr`) is run for
    real under `torch.manual_seed(0)` (the seed a real capture and the reference runner use), and its
    tensors become fake tensors of ``fake_mode``. These are the inputs of the program as given, so a
    real run costs what the program's own inputs cost; it is refused above `REAL_RUN_LIMIT_BYTES`,
    before the run where the file says its inputs' size (`get_inputs_nbytes()`, a generated
    SOL-ExecBench file does), else after it."""
    try:
        with fake_mode:
            return spec.sample_inputs()
    except ModelFileError as e:
        fake_error = e

    def too_big(size: int) -> CaptureError:
        return CaptureError(f"{spec.path}: get_inputs() needs real tensors ({fake_error}) but its inputs "
                            f"take {size / 2**30:.1f} GB; capture a size-reduced instance")

    declared = getattr(spec.module, "get_inputs_nbytes", None)
    if callable(declared) and declared() > REAL_RUN_LIMIT_BYTES:
        raise too_big(declared())
    with torch.random.fork_rng():
        torch.manual_seed(0)
        sample = spec.sample_inputs()  # a failure for real is the error to report (its own line)
    if nbytes(sample) > REAL_RUN_LIMIT_BYTES:
        raise too_big(nbytes(sample))
    return [fake_mode.from_tensor(v) if isinstance(v, torch.Tensor) else v for v in sample]


@contextlib.contextmanager
def _device_moves_kept() -> Iterator[None]:
    """`Module.to/cuda` and `Tensor.to/cuda` ignore a device this machine lacks (module doc of
    `build_model`); nothing changes when CUDA is available."""
    if torch.cuda.is_available():
        yield
        return

    def strip(args, kwargs):
        def absent(d) -> bool:
            return isinstance(d, (str, torch.device)) and torch.device(d).type not in ("cpu", "meta")
        args = tuple(a for a in args if not absent(a))
        if absent(kwargs.get("device")):
            kwargs = {k: v for k, v in kwargs.items() if k != "device"}
        return args, kwargs

    saved = (torch.nn.Module.to, torch.nn.Module.cuda, torch.Tensor.to, torch.Tensor.cuda)
    m_to, _, t_to, _ = saved

    def module_to(self, *args, **kwargs):
        args, kwargs = strip(args, kwargs)
        return m_to(self, *args, **kwargs) if args or kwargs else self

    def tensor_to(self, *args, **kwargs):
        args, kwargs = strip(args, kwargs)
        return t_to(self, *args, **kwargs) if args or kwargs else self

    torch.nn.Module.to, torch.Tensor.to = module_to, tensor_to
    torch.nn.Module.cuda = lambda self, *a, **k: self
    torch.Tensor.cuda = lambda self, *a, **k: self
    try:
        yield
    finally:
        torch.nn.Module.to, torch.nn.Module.cuda, torch.Tensor.to, torch.Tensor.cuda = saved


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


@contextlib.contextmanager
def parameters_on_meta() -> Iterator[None]:
    """Modules built inside keep their parameters on the meta device (allocated for a moment, then
    dropped) and their buffers real: what a model's constant buffers hold (masks, position ids)
    without its weights (GPT-Neo 2.7B's are 10 GB, its causal and local-window masks 128 MB)."""
    register = torch.nn.Module.register_parameter

    def on_meta(module: torch.nn.Module, name: str, param: Any) -> None:
        if param is not None and param.device.type != "meta":
            param = torch.nn.Parameter(param.to("meta"), requires_grad=param.requires_grad)
        register(module, name, param)

    torch.nn.Module.register_parameter = on_meta  # type: ignore[method-assign]
    try:
        yield
    finally:
        torch.nn.Module.register_parameter = register  # type: ignore[method-assign]


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


def from_numpy_as(a: np.ndarray, dtype: torch.dtype) -> torch.Tensor:
    """`a` as a tensor of `dtype`; a packed fp4 tensor from its bytes (torch converts nothing to
    float4_e2m1fn_x2, it only views bytes as one)."""
    t = torch.from_numpy(np.array(a, order="C"))  # not ascontiguousarray: it makes a 0-d array 1-d
    if dtype == torch.float4_e2m1fn_x2:
        return t.to(torch.uint8).view(dtype)
    if dtype.is_complex:  # (real, imaginary) pairs, `to_numpy`'s layout
        return torch.view_as_complex(t.to(dtype.to_real()).contiguous())
    return t.to(dtype)


def to_numpy(t: torch.Tensor) -> np.ndarray:
    """A copy of a real tensor as numpy (bf16/f8 widened to f32, packed fp4 as its bytes, a complex one
    as its (real, imaginary) pairs: the loop IR's layout), outside any active mode."""
    with unset_fake_temporarily(), _disable_current_modes():
        t = t.detach()
        if t.dtype == torch.float4_e2m1fn_x2:
            t = t.view(torch.uint8)
        if t.is_complex():
            t = torch.view_as_real(t.resolve_conj())
        if t.dtype in (torch.bfloat16, torch.float8_e4m3fn, torch.float8_e5m2):
            t = t.float()
        return t.cpu().contiguous().numpy().copy()


class WideMatrixProducts(TorchDispatchMode):
    """Matrix products and convolutions of bfloat16/float16 CPU tensors computed on float32 copies,
    the result rounded back once: what the CPU kernels compute (oneDNN accumulates narrow-float
    GEMMs and convolutions in float32 and rounds the result), up to the order of the sums, in the
    time of a float32 kernel. Why: a CPU without native bf16/f16 arithmetic (AVX2 only) runs those
    kernels 25-80x slower than float32 (a 2,048^3 bf16 matmul: about 30 s on 2 AVX2 cores), so a
    reference run of a bf16 program would exhaust the translation's time budget. Enter it outside
    any recording mode (a recorder then sees the ops as the model called them)."""

    OPS = frozenset({
        torch.ops.aten.mm.default, torch.ops.aten.bmm.default, torch.ops.aten.addmm.default,
        torch.ops.aten.baddbmm.default, torch.ops.aten.mv.default, torch.ops.aten.dot.default,
        torch.ops.aten.convolution.default, torch.ops.aten.convolution_backward.default,
    })
    NARROW = (torch.bfloat16, torch.float16)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func not in self.OPS:
            return func(*args, **kwargs)
        leaves = torch.utils._pytree.tree_leaves((args, kwargs))
        flat = [a for a in leaves if isinstance(a, torch.Tensor)]
        narrow = {a.dtype for a in flat if a.dtype in self.NARROW}
        if len(narrow) != 1 or any(isinstance(a, FakeTensor) or a.device.type != "cpu" for a in flat):
            return func(*args, **kwargs)
        dt = narrow.pop()

        def wide(a):
            return a.float() if isinstance(a, torch.Tensor) and a.dtype == dt else a

        def back(o):
            return o.to(dt) if isinstance(o, torch.Tensor) and o.dtype == torch.float32 else o

        tree_map = torch.utils._pytree.tree_map
        return tree_map(back, func(*tree_map(wide, args), **tree_map(wide, kwargs)))


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
    """`<file>:<line>: forward raised <exception>`, the line being the innermost of the user's source
    (`source_where`: a SOL-ExecBench problem's reference.py, else the model file)."""
    return CaptureError(f"{source_where(exc, spec.module, spec.path, None)}: forward raised "
                        f"{exception_summary(exc)}")
