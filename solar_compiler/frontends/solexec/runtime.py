"""What a generated SOL-ExecBench model file runs (in the sandboxed child): the reference module,
the workload's inputs, and CUDA references run on the CPU.

Inputs follow the workload: `random` (as the harness draws them: its rules on names and descriptions
first, then plain random values; `inputs.py`), `scalar` (the value, bound into the model: it is no
tensor input), `custom` (the definition's entry point, called with every axis and scalar and
`torch.device("cpu")`) and `safetensors` (the file's tensor when the file is there, else random
values of the definition's shape and dtype). A packed fp4 input (`float4_e2m1fn_x2`) whose definition
shape is [..., K] is a tensor [..., K/2] of bytes, two values each (low nibble first), as
SOL-ExecBench stores it.

CUDA on the CPU: the reference is executed unchanged; while its functions run, `cuda_on_cpu()` is
active: a TorchFunctionMode replaces every CUDA device argument (`device="cuda"`, `.cuda()`,
`.to("cuda:0")`) by the CPU, and `torch.cuda.is_available/device_count/current_device/
get_device_capability/get_device_name/synchronize` answer as one Blackwell GPU would (capability
(10, 0)). Both are undone when the call returns.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import math
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from solar_compiler.errors import SolarError
from solar_compiler.loopir.rules import E2M1_VALUES

from .inputs import TORCH_DTYPES, encode_e2m1, pack_fp4, random_input, random_tensor
from .problem import DTYPES, resolve_axes

__all__ = ["CAPABILITY", "E2M1_VALUES", "TORCH_DTYPES", "ProblemModel", "cuda_on_cpu", "decode_fp4",
           "encode_e2m1", "pack_fp4", "random_tensor"]

CAPABILITY = (10, 0)  # what `get_device_capability` answers: a B200


# ---- packed fp4 ----------------------------------------------------------------------------------
def decode_fp4(packed: torch.Tensor) -> torch.Tensor:
    """float4_e2m1fn_x2 (or its uint8 bytes) [..., n] -> float32 [..., 2n]. torch 2.13 on the CPU
    cannot convert float4_e2m1fn_x2 to float, so the bytes are decoded through the e2m1 table."""
    raw = packed.view(torch.uint8) if packed.dtype != torch.uint8 else packed
    table = torch.tensor(E2M1_VALUES, dtype=torch.float32)
    lo, hi = table[(raw & 15).long()], table[(raw >> 4).long()]
    return torch.stack([lo, hi], dim=-1).flatten(-2)


# ---- CUDA references on the CPU ------------------------------------------------------------------
def _is_cuda(v: Any) -> bool:
    if isinstance(v, torch.device):
        return v.type == "cuda"
    return isinstance(v, str) and (v == "cuda" or v.startswith("cuda:"))


def _cpu(v: Any) -> Any:
    if _is_cuda(v):
        return torch.device("cpu")
    if isinstance(v, (list, tuple)):
        return type(v)(_cpu(x) for x in v)
    return v


class CudaToCpu(TorchFunctionMode):
    """Every CUDA device argument of a torch call becomes the CPU; `.cuda()` is the identity."""

    def __torch_function__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204 - torch's API
        kwargs = kwargs or {}
        if func in (torch.Tensor.cuda,):
            return args[0]
        args = tuple(_cpu(a) for a in args)
        kwargs = {k: _cpu(v) for k, v in kwargs.items()}
        return func(*args, **kwargs)


_CUDA_QUERIES = {
    "is_available": lambda: True,
    "device_count": lambda: 1,
    "current_device": lambda: 0,
    "get_device_capability": lambda device=None: CAPABILITY,
    "get_device_name": lambda device=None: "NVIDIA B200",
    "synchronize": lambda device=None: None,
    "is_initialized": lambda: True,
}


@contextlib.contextmanager
def cuda_on_cpu() -> Iterator[None]:
    """CUDA calls of a reference, answered on the CPU (module docstring); undone on exit."""
    saved = {name: getattr(torch.cuda, name) for name in _CUDA_QUERIES}
    try:
        for name, fn in _CUDA_QUERIES.items():
            setattr(torch.cuda, name, fn)
        with CudaToCpu():
            yield
    finally:
        for name, fn in saved.items():
            setattr(torch.cuda, name, fn)


# ---- the model -----------------------------------------------------------------------------------
class ProblemModel:
    """One workload of a problem, as a model file's `Model` and `get_inputs`."""

    def __init__(self, definition: str, workload: str, reference: str, reference_path: str,
                 problem_dir: str) -> None:
        self.definition: dict[str, Any] = json.loads(definition)
        self.workload: dict[str, Any] = json.loads(workload)
        self.dir = Path(problem_dir)
        self.module = types.ModuleType("solexec_reference")
        self.module.__file__ = reference_path
        with cuda_on_cpu():  # module-level code may ask about the GPU too
            exec(compile(reference, reference_path, "exec"), self.module.__dict__)
        _anchor_stack_traces(self.module, reference_path)
        self.names = list(self.definition["inputs"])
        self.values: dict[str, Any] = {}  # the non-tensor inputs of the last `tensor_inputs`

    def module_class(self) -> type:
        problem = self

        class _Reference(torch.nn.Module):
            def forward(self, *tensors: torch.Tensor) -> Any:
                return problem.call(tensors)

        return _Reference

    def call(self, tensors: tuple[torch.Tensor, ...]) -> Any:
        """run(...) with the tensor inputs in definition order and the scalars bound in."""
        it = iter(tensors)
        args = [self.values[n] if n in self.values else next(it) for n in self.names]
        with cuda_on_cpu():
            return self.module.run(*args)

    def tensor_inputs(self, var_axes: dict[str, int], const_axes: dict[str, int] | None = None) \
            -> list[torch.Tensor]:
        """The workload's inputs (with `var_axes` as the var axes' values, `const_axes` as the const
        ones'); returns the tensors and keeps the non-tensor ones for `call`."""
        d, w = self.definition, self.workload
        axes = resolve_axes(d["axes"], var_axes, f"{self.dir / 'workload.jsonl'}", const_axes)
        specs = w.get("inputs", {})
        scalars = {n: s["value"] for n, s in specs.items() if s["type"] == "scalar"}
        custom: dict[str, Any] = {}
        if any(s["type"] == "custom" for s in specs.values()):
            fn = getattr(self.module, d["custom_inputs_entrypoint"])
            with cuda_on_cpu():
                custom = fn({**axes, **scalars}, torch.device("cpu"))
            if not isinstance(custom, dict):
                raise SolarError(f"{d['custom_inputs_entrypoint']}(...) returned {type(custom).__name__}, "
                                 f"not a dict of inputs")
        values: dict[str, Any] = {}
        for name, t in d["inputs"].items():
            spec = specs.get(name, {"type": "random"})
            shape = None if t["shape"] is None else \
                tuple(int(s) if s.isdigit() else axes[s] for s in t["shape"])
            if spec["type"] == "scalar":
                values[name] = spec["value"]
            elif spec["type"] == "custom":
                if name not in custom:
                    raise SolarError(f"input '{name}' is custom but {d['custom_inputs_entrypoint']}(...) "
                                     f"returned no '{name}'")
                v = custom[name]
                values[name] = v.to("cpu") if isinstance(v, torch.Tensor) else v
            elif spec["type"] == "safetensors" and (found := self._safetensor(spec, name)) is not None:
                values[name] = found
            else:  # random, or a safetensors file that is not there
                values[name] = random_input(name, t, shape, d)
        self.values = {n: v for n, v in values.items() if not isinstance(v, torch.Tensor)}
        return [v for v in values.values() if isinstance(v, torch.Tensor)]

    def fresh_inputs(self, var_axes: dict[str, int], seed: int, const_axes: dict[str, int] | None = None) \
            -> list[torch.Tensor]:
        """A fresh sample for validation: the workload's own generator (custom entry point, the
        harness's rules, plain random) run again under `seed`, so an integer input it fixes (B = 1:
        `kv_indptr = [0, N]`) stays fixed and one it draws is drawn as it draws it. The non-tensor
        inputs stay those of the sample the program was captured on: they are bound into the model
        (`call`), not inputs of the captured program. The global random state is left as it was."""
        bound = self.values
        try:
            with torch.random.fork_rng():
                torch.manual_seed(seed)
                return self.tensor_inputs(var_axes, const_axes)
        finally:
            self.values = bound

    def input_nbytes(self, var_axes: dict[str, int], const_axes: dict[str, int] | None = None) -> int:
        """Bytes of the tensor inputs at `var_axes`, from the definition's shapes and dtypes (what a
        real `tensor_inputs` allocates, known before it runs)."""
        d = self.definition
        axes = resolve_axes(d["axes"], var_axes, f"{self.dir / 'workload.jsonl'}", const_axes)
        total = 0.0
        for t in d["inputs"].values():
            if t["shape"] is not None:
                count = math.prod(int(s) if s.isdigit() else axes[s] for s in t["shape"])
                total += count * DTYPES[t["dtype"]]
        return math.ceil(total)

    def _safetensor(self, spec: dict[str, Any], name: str) -> torch.Tensor | None:
        """The tensor of a safetensors input when its file exists (relative paths are looked up from
        the problem folder upwards, as a dataset checkout nests them), else None (random values)."""
        rel = Path(spec["path"])
        for base in [self.dir, *self.dir.parents]:
            path = rel if rel.is_absolute() else base / rel
            if path.is_file():
                from safetensors.torch import load_file  # optional: only for problems that ship files

                tensors = load_file(str(path))
                key = spec.get("tensor_key", name)
                if key not in tensors:
                    raise SolarError(f"{path}: no tensor '{key}' (input '{name}')")
                return tensors[key]
            if rel.is_absolute():
                break
        return None


def _anchor_stack_traces(module: types.ModuleType, path: str) -> None:
    """Make torch.export record the reference's own frames: it keeps only frames of functions named
    `forward` unless a function is registered as an anchor (what `torch.fx.traceback.annotate_fn`
    does), and `run` and its helpers are not. Statements are then located in reference.py; without
    the (private) registry they fall back to the generated file. A decorated function (`@torch.no_grad()`)
    is registered unwrapped (`inspect.unwrap`): its wrapper lives in torch's own files."""
    register = getattr(torch.fx.proxy, "_register_stack_trace_anchor", None)
    if register is None:
        return
    for value in vars(module).values():
        # `@torch.no_grad()` (every SOL-ExecBench reference's `run`) wraps the function in one of
        # torch/utils/_contextlib.py: the frames that run are the wrapped function's
        fn = inspect.unwrap(value) if callable(value) else value
        if isinstance(fn, types.FunctionType) and fn.__code__.co_filename == path:
            register(fn)
