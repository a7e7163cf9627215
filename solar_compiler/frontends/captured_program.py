"""The captured program, the interface between a framework's capture and the shared translation
machinery (`frontends/builder/`): a flat list of source-level op nodes over named tensors
(`CapturedProgram`). Framework-free, so that its readers import neither torch nor jax. The node
class keeps the name of the first frontend (`AtenNode`); a JAX node's `op` is `jax.<primitive>`."""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from solar_compiler.errors import SolarError


class CaptureError(SolarError):
    """Capture failed; the message is one line, ``<file>[:<line>]: <what>``."""

    error_class = "capture"


@dataclass(frozen=True)
class TensorRef:
    """A reference to a named tensor (an input, weight, constant, random tensor or node output)."""

    name: str


@dataclass
class TensorMeta:
    name: str
    shape: tuple[int, ...]
    dtype: str  # loop-IR dtype name: f64 f32 bf16 f16 f8e4m3 f8e5m2 i64 i32 i8 bool (also u8 u16 i16)
    #: a complex tensor, held as (real, imaginary) pairs: `shape` ends with that pair's 2 and `dtype` is
    #: the component's (complex64: f32), the layout of `torch.view_as_real` (`complex_pairs.py`)
    complex: bool = False


@dataclass
class AtenNode:
    op: str  # e.g. "aten.convolution.default", "jax.dot_general"
    args: tuple  # TensorRef for tensors; python scalars/lists kept; dtypes as loop-IR names
    kwargs: dict
    outputs: tuple[TensorMeta | None, ...]  # one per returned tensor; None when unused/non-tensor
    loc: str | None = None  # "<user file>:<line>"
    module_path: str | None = None  # e.g. "layers.0.conv"
    # every tensor result, used or not (None for a non-tensor one): a template may need the shape or
    # dtype of a result nothing reads (an LSTM whose output sequence is unused but whose c_n is)
    all_outputs: tuple[TensorMeta | None, ...] = ()
    #: which part of a training step the node belongs to ("forward", "backward", "optimizer"); None
    #: in a forward-only program (docs/training.md)
    phase: str | None = None
    #: the op call of the traced program this node comes from, when the capture decomposed it into
    #: several nodes (`softplus` -> exp, log1p, gt, where): (that call's node name, its op). Eager
    #: PyTorch runs such a call as one kernel, so the unfused bound counts one for the group.
    called: tuple[str, str] | None = None


@dataclass
class CapturedProgram:
    source: str  # the model file path as given
    mode: str  # "eval" | "train"
    #: torch: "export" | "dispatch" | "make_fx" (a training step, a forward calling autograd); jax: "jaxpr"
    method: str
    inputs: list[TensorMeta] = field(default_factory=list)
    weights: list[TensorMeta] = field(default_factory=list)
    nodes: list[AtenNode] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    random_tensors: list[TensorMeta] = field(default_factory=list)
    value_dependent: list[str] = field(default_factory=list)
    #: why export was not used: first line of its exception (method "dispatch"), or the autograd call
    #: that forward makes (method "make_fx", step "forward": ``forward calls torch.autograd.grad at m.py:9``)
    fallback_reason: str | None = None
    #: weight name -> where its value lives in the model: a state_dict / attribute path
    #: ("layers.0.weight"), "global:NAME" for a module-level tensor, "const:NAME" for a
    #: constant created inside forward (its value is in ``constants``)
    weight_sources: dict[str, str] = field(default_factory=dict)
    #: values of the "const:" weights (small tensors created inside forward)
    constants: dict[str, np.ndarray] = field(default_factory=dict)
    #: size constants and repeat counts of the model file as captured (after overrides)
    size_constants: dict[str, int] = field(default_factory=dict)
    #: for each random tensor, its position among all random draws forward makes (in
    #: execution order, including draws whose values end up unused)
    random_draws: list[int] = field(default_factory=list)
    #: input name -> the value that is its final version, for each input forward updates in place
    #: (`key_cache[:, :, pos] = k`): eager writes only the updated elements into the caller's buffer
    mutated_inputs: dict[str, str] = field(default_factory=dict)
    #: "forward" (the model's outputs), or "train": one training step (the loss, then the parameter
    #: gradients, then, with an optimizer, the updated parameters and optimizer state; training.md)
    step: str = "forward"
    #: the optimizer whose update the train step appends ("sgd", "adamw"), None for none
    optimizer: str | None = None
    #: train step: program output name -> what it is ("loss", "grad:<param>", "param:<param>",
    #: "exp_avg:<param>", "exp_avg_sq:<param>"), the order the reference returns them in
    output_roles: dict[str, str] = field(default_factory=dict)

    def tensor(self, name: str) -> TensorMeta:
        """The TensorMeta of an input, weight or node output by name."""
        for meta in itertools.chain(self.inputs, self.weights):
            if meta.name == name:
                return meta
        for node in self.nodes:
            for meta in node.outputs:
                if meta is not None and meta.name == name:
                    return meta
        raise KeyError(name)

    def summary(self) -> str:
        lines = [f"# {self.source} ({self.mode}, {self.method})"]
        if self.fallback_reason:
            lines.append(f"# export failed: {self.fallback_reason}")
        for m in self.inputs:
            lines.append(f"input  {m.name}: {m.dtype}{list(m.shape)}")
        for m in self.weights:
            lines.append(f"weight {m.name}: {m.dtype}{list(m.shape)}")
        for n in self.nodes:
            outs = ", ".join(f"{o.name}: {o.dtype}{list(o.shape)}" if o else "_" for o in n.outputs)
            lines.append(f"{outs} = {n.op}{_fmt_args(n.args, n.kwargs)}  # {n.loc or '?'}")
        lines.append(f"return {', '.join(self.outputs)}")
        return "\n".join(lines)


def _fmt_args(args: tuple, kwargs: dict) -> str:
    def fmt(a):
        if isinstance(a, TensorRef):
            return "%" + a.name
        if isinstance(a, (list, tuple)):
            inner = ", ".join(fmt(x) for x in a)
            return f"[{inner}]"
        return repr(a)

    parts = [fmt(a) for a in args] + [f"{k}={fmt(v)}" for k, v in kwargs.items()]
    return "(" + ", ".join(parts) + ")"


def tensor_refs(value: Any) -> Iterator[str]:
    """Names of every TensorRef inside `value` (nested lists, tuples and dicts)."""
    if isinstance(value, TensorRef):
        yield value.name
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from tensor_refs(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from tensor_refs(v)


# ---- names --------------------------------------------------------------------------------------------
_IDENT_RE = re.compile(r"[^A-Za-z0-9_]")


def sanitize(name: str) -> str:
    """``layers.0.weight`` -> ``layers_0_weight``; always a valid identifier."""
    s = _IDENT_RE.sub("_", name)
    if not s:
        s = "t"
    if s[0].isdigit():
        s = "_" + s
    return s


class Namer:
    """Unique identifiers in one namespace: `fresh(base)` is `sanitize(base)`, with `_t` appended
    when that is a `reserved` word, then `_1`, `_2`, ... until unused."""

    def __init__(self, reserved: frozenset[str] = frozenset()) -> None:
        self.used: set[str] = set()
        self.reserved = reserved

    def fresh(self, base: str) -> str:
        base = sanitize(base)
        if base in self.reserved:
            base += "_t"
        name = base
        k = 1
        while name in self.used:
            name = f"{base}_{k}"
            k += 1
        self.used.add(name)
        return name
