"""Capture a KernelBench-style PyTorch model file as a flat ATen graph.

The result, :class:`CapturedProgram`, is what the loop-IR translator consumes.  Two capture
methods exist:

``export``
    ``torch.export.export(model, inputs, strict=False)`` followed by
    ``run_decompositions`` with the Core ATen table minus :data:`KEEP_UNDECOMPOSED` (ops the
    translator has one template for) plus a decomposition of ``native_dropout`` into a plain
    ``rand_like`` draw.

``dispatch``
    The fallback when export fails or forward mutates module state (``self.h = ...``): the
    executed ATen ops are recorded by a ``TorchDispatchMode`` on the sample inputs, tracking
    tensors by identity.  The mode functionalizes what it records: an in-place op becomes its
    functional counterpart producing a new version of the tensor, a view is a node of its own
    op, a write through a view is scattered back into its base (``slice_scatter`` ...), and
    views of an updated base are regenerated.  The same op-preservation (the Python
    dispatcher with export's composite-op overrides) and decomposition tables as the export
    path are applied, so both methods produce the same op vocabulary.

With ``fake=True`` (the default) both methods run on ``FakeTensorMode`` tensors, so full-size
programs (several GB of inputs) are captured without allocating them.  Only when the program
needs real values (Python control flow on tensor values, data-dependent shapes) is it run for
real, and only when its inputs and weights are small (:data:`REAL_RUN_LIMIT_BYTES`).

See ``docs/torch-capture.md`` for the naming rules and the ops that survive decomposition.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import itertools
import operator
import re
import sys
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from .model_file import ModelFileError, ModelSpec, exception_summary, load_model_file, user_line

__all__ = [
    "AtenNode",
    "CaptureError",
    "CapturedProgram",
    "KEEP_UNDECOMPOSED",
    "TensorMeta",
    "TensorRef",
    "capture",
    "fresh_inputs",
    "input_names",
    "run_reference",
    "sanitize",
]

aten = torch.ops.aten

#: Programs needing real execution during capture are run for real only below this size.
REAL_RUN_LIMIT_BYTES = 2 * 2**30


class CaptureError(Exception):
    """Capture failed; the message is one line, ``<file>[:<line>]: <what>``."""


# --------------------------------------------------------------------------------------------
# Interface dataclasses
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TensorRef:
    """A reference to a named tensor (an input, weight, constant, random tensor or node output)."""

    name: str


@dataclass
class TensorMeta:
    name: str
    shape: tuple[int, ...]
    dtype: str  # loop-IR dtype name: f64 f32 bf16 f16 f8e4m3 f8e5m2 i64 i32 i8 bool (also u8 i16)


@dataclass
class AtenNode:
    op: str  # e.g. "aten.convolution.default"
    args: tuple  # TensorRef for tensors; python scalars/lists kept; dtypes as loop-IR names
    kwargs: dict
    outputs: tuple[TensorMeta | None, ...]  # one per returned tensor; None when unused/non-tensor
    loc: str | None = None  # "<user file>:<line>"
    module_path: str | None = None  # e.g. "layers.0.conv"


@dataclass
class CapturedProgram:
    source: str  # the model file path as given
    mode: str  # "eval" | "train"
    method: str  # "export" | "dispatch"
    inputs: list[TensorMeta]
    weights: list[TensorMeta]
    nodes: list[AtenNode]
    outputs: list[str]
    random_tensors: list[TensorMeta] = field(default_factory=list)
    value_dependent: list[str] = field(default_factory=list)
    #: why export was not used (first line of the exception), when method == "dispatch"
    fallback_reason: str | None = None
    #: weight name -> where its value lives in the model: a state_dict / attribute path
    #: ("layers.0.weight"), "global:NAME" for a module-level tensor, "const:NAME" for a
    #: constant created inside forward (its value is in ``constants``)
    weight_sources: dict[str, str] = field(default_factory=dict)
    #: values of the "const:" weights (small tensors created inside forward)
    constants: dict[str, np.ndarray] = field(default_factory=dict)
    #: size constants of the model file as captured (after overrides)
    size_constants: dict[str, int] = field(default_factory=dict)
    #: for each random tensor, its position among all random draws forward makes (in
    #: execution order, including draws whose values end up unused)
    random_draws: list[int] = field(default_factory=list)

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


# --------------------------------------------------------------------------------------------
# dtypes and names
# --------------------------------------------------------------------------------------------

_DTYPE_NAMES = {
    torch.float64: "f64",
    torch.float32: "f32",
    torch.bfloat16: "bf16",
    torch.float16: "f16",
    torch.float8_e4m3fn: "f8e4m3",
    torch.float8_e5m2: "f8e5m2",
    torch.int64: "i64",
    torch.int32: "i32",
    torch.int16: "i16",
    torch.int8: "i8",
    torch.uint8: "u8",
    torch.bool: "bool",
}

_NP_DTYPES = {
    "f64": np.float64,
    "f32": np.float32,
    "f16": np.float16,
    "i64": np.int64,
    "i32": np.int32,
    "i16": np.int16,
    "i8": np.int8,
    "u8": np.uint8,
    "bool": np.bool_,
}


def dtype_name(dtype: torch.dtype) -> str:
    try:
        return _DTYPE_NAMES[dtype]
    except KeyError:
        raise CaptureError(f"unsupported dtype {dtype}") from None


def torch_dtype(name: str) -> torch.dtype:
    for k, v in _DTYPE_NAMES.items():
        if v == name:
            return k
    raise KeyError(name)


_IDENT_RE = re.compile(r"[^A-Za-z0-9_]")


def sanitize(name: str) -> str:
    """``layers.0.weight`` -> ``layers_0_weight``; always a valid identifier."""
    s = _IDENT_RE.sub("_", name)
    if not s:
        s = "t"
    if s[0].isdigit():
        s = "_" + s
    return s


class _Namer:
    """Unique identifiers in one namespace."""

    def __init__(self) -> None:
        self.used: set[str] = set()

    def fresh(self, base: str) -> str:
        base = sanitize(base)
        name = base
        k = 1
        while name in self.used:
            name = f"{base}_{k}"
            k += 1
        self.used.add(name)
        return name


def _meta(name: str, t: torch.Tensor) -> TensorMeta:
    shape = []
    for s in t.shape:
        if not isinstance(s, int):
            raise _SymbolicShape(f"symbolic size {s}")
        shape.append(int(s))
    return TensorMeta(name, tuple(shape), dtype_name(t.dtype))


class _SymbolicShape(Exception):
    pass


class _NeedsFallback(Exception):
    pass


# --------------------------------------------------------------------------------------------
# Decomposition tables
# --------------------------------------------------------------------------------------------

#: High-level ops kept as one node (removed from the Core ATen decomposition table).  Ops that
#: are already Core ATen (convolution, _native_batch_norm_legit*, native_layer_norm,
#: native_group_norm, _softmax, _log_softmax, gelu, cumsum, embedding, avg_pool2d,
#: _adaptive_avg_pool2d, mm, bmm, addmm, ...) survive anyway.
KEEP_UNDECOMPOSED: tuple[str, ...] = (
    "scaled_dot_product_attention.default",
    "lstm.input",
    "lstm.data",
    "gru.input",
    "gru.data",
    "rnn_tanh.input",
    "rnn_tanh.data",
    "rnn_relu.input",
    "rnn_relu.data",
    "lstm_cell.default",
    "gru_cell.default",
    "rnn_tanh_cell.default",
    "rnn_relu_cell.default",
    "layer_norm.default",
    "group_norm.default",
    "softmax.int",
    "log_softmax.int",
    "silu.default",
    "mish.default",
    "hardswish.default",
    "hardsigmoid.default",
    "logsumexp.default",
    "max_pool1d.default",
    "max_pool2d.default",
    "max_pool3d.default",
    "avg_pool1d.default",
    "adaptive_avg_pool1d.default",
    "adaptive_avg_pool2d.default",
    "adaptive_avg_pool3d.default",
    "adaptive_max_pool1d.default",
    "upsample_nearest1d.vec",
    "upsample_nearest2d.vec",
    "upsample_nearest3d.vec",
    "upsample_linear1d.vec",
    "upsample_bilinear2d.vec",
    "upsample_bicubic2d.vec",
    "upsample_trilinear3d.vec",
    "_upsample_nearest_exact1d.vec",
    "_upsample_nearest_exact2d.vec",
    "_upsample_nearest_exact3d.vec",
    "im2col.default",
    "linear.default",
    "einsum.default",
)


def _op(qualname: str):
    packet, overload = qualname.split(".")
    return getattr(getattr(aten, packet), overload)


def _dropout_decomp(x, p, train):
    """``aten.dropout`` in terms of the ``native_dropout`` decomposition (a ``rand_like`` draw)."""
    if not train or p == 0:
        return x.clone()
    return _native_dropout_decomp()(x, p, train)[0]


@functools.cache
def _native_dropout_decomp():
    import torch._decomp as decomp

    return decomp.decomposition_table[aten.native_dropout.default]


@functools.cache
def _tables():
    """(export decomposition table, CIA ops to preserve/override, python decompositions)."""
    from torch.export.exported_program import _split_decomp_table_to_cia_and_python_decomp

    table = torch.export.default_decompositions()
    for q in KEEP_UNDECOMPOSED:
        op = _op(q)
        if op in table:
            del table[op]
    table[aten.native_dropout.default] = _native_dropout_decomp()
    cia, python = _split_decomp_table_to_cia_and_python_decomp(dict(table.items()))
    cia = dict(cia)
    # The dispatch recorder sees aten.dropout whole and decomposes it like export does.
    from torch._export.utils import _special_op_to_preserve_cia

    cia[aten.dropout.default] = _special_op_to_preserve_cia
    return table, cia, python


# --------------------------------------------------------------------------------------------
# Op classification
# --------------------------------------------------------------------------------------------

RANDOM_OPS = frozenset(
    {
        "rand",
        "randn",
        "rand_like",
        "randn_like",
        "randint",
        "randint_like",
        "randperm",
        "bernoulli",
        "bernoulli_",
        "normal",
        "normal_",
        "normal_functional",
        "uniform",
        "uniform_",
        "exponential",
        "exponential_",
        "geometric",
        "geometric_",
        "cauchy",
        "cauchy_",
        "log_normal",
        "log_normal_",
        "multinomial",
        "poisson",
        "binomial",
        "_standard_gamma",
        "native_dropout",
        "rrelu_with_noise",
        "rrelu_with_noise_functional",
    }
)

_IDENTITY_OPS = frozenset({"detach", "alias", "lift_fresh", "lift_fresh_copy", "lift"})


def _packet(op) -> str:
    name = op._schema.name
    return name.split("::", 1)[1] if "::" in name else name


def _is_random(op) -> bool:
    return _packet(op) in RANDOM_OPS


def _mutated_arg_indices(op) -> list[int]:
    return [
        i
        for i, a in enumerate(op._schema.arguments)
        if a.alias_info is not None and a.alias_info.is_write and not a.kwarg_only
    ]


_SPECIAL_FUNCTIONAL = {
    ("bernoulli_", "float"): ("bernoulli", "p"),
    ("bernoulli_", "Tensor"): ("bernoulli", "Tensor"),
    ("normal_", "default"): ("normal_functional", "default"),
    ("uniform_", "default"): ("uniform", "default"),
    ("exponential_", "default"): ("exponential", "default"),
    ("geometric_", "default"): ("geometric", "default"),
    ("cauchy_", "default"): ("cauchy", "default"),
    ("log_normal_", "default"): ("log_normal", "default"),
    ("fill_", "Scalar"): ("fill", "Scalar"),
    ("fill_", "Tensor"): ("fill", "Tensor"),
    ("zero_", "default"): ("zero", "default"),
}


def _functional_name(op) -> str:
    """The functional counterpart of a mutating op (``add_.Tensor`` -> ``aten.add.Tensor``)."""
    packet, overload = _packet(op), op._overloadname
    cands = []
    if (packet, overload) in _SPECIAL_FUNCTIONAL:
        cands.append(_SPECIAL_FUNCTIONAL[(packet, overload)])
    if packet.endswith("_") and not packet.endswith("__"):
        cands.append((packet[:-1], overload))
    cands.append((packet + "_functional", overload))
    for name, ov in cands:
        pk = getattr(aten, name, None)
        if pk is not None and ov in pk.overloads():
            return f"aten.{name}.{ov}"
    return str(op)


def _loc_from_stack_trace(stack_trace: str | None, user: _User) -> str | None:
    if not stack_trace:
        return None
    loc = None
    for m in re.finditer(r'File "([^"]+)", line (\d+)', stack_trace):
        if user.matches(m.group(1)):
            loc = f"{user.display}:{m.group(2)}"
    return loc


@dataclass
class _User:
    display: str
    abspath: str

    def matches(self, filename: str) -> bool:
        if filename == self.abspath:
            return True
        try:
            return str(Path(filename).resolve()) == self.abspath
        except (OSError, ValueError):
            return False

    def frame_loc(self) -> str | None:
        """Innermost frame of the current Python stack in the user file."""
        f = sys._getframe(1)
        while f is not None:
            if f.f_code.co_filename == self.abspath:
                return f"{self.display}:{f.f_lineno}"
            f = f.f_back
        return None


# --------------------------------------------------------------------------------------------
# Building the model
# --------------------------------------------------------------------------------------------


def input_names(spec: ModelSpec, sample: list) -> list[str]:
    """Names of the tensor entries of ``get_inputs()``: the forward parameter names."""
    try:
        sig = inspect.signature(spec.Model.forward)
        params = list(sig.parameters.values())[1:]
    except (TypeError, ValueError):
        params = []
    names: list[str] = []
    namer = _Namer()
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


def _tensor_attrs_to_buffers(model: torch.nn.Module) -> None:
    """Plain tensor attributes (``self.mask = torch.tril(...)``) become non-persistent buffers.

    Export lifts them as constants (and segfaults on fake ones in run_decompositions);
    as buffers they are weights named by their attribute path in both capture methods.
    """
    for mod in model.modules():
        for k, v in list(vars(mod).items()):
            if isinstance(v, torch.Tensor) and not isinstance(v, torch.nn.Parameter):
                delattr(mod, k)
                mod.register_buffer(k, v, persistent=False)


def _module_internal_names() -> frozenset[str]:
    return frozenset(vars(torch.nn.Module()).keys()) | {"_flat_weights", "_flat_weight_refs"}


def _ident(v: Any):
    if isinstance(v, (list, tuple)):
        return (type(v), tuple(id(x) for x in v))
    if isinstance(v, dict):
        return (dict, tuple((k, id(x)) for k, x in v.items()))
    return id(v)


def _state_snapshot(model: torch.nn.Module) -> dict:
    """Identity of every module attribute (private attributes of torch.nn's own modules excluded)."""
    internal = _module_internal_names()
    snap = {}
    for mname, mod in model.named_modules():
        torch_owned = type(mod).__module__.startswith("torch.")
        for k, v in vars(mod).items():
            if k in internal or (torch_owned and k.startswith("_")):
                continue
            snap[(mname, k)] = _ident(v)
        for k, v in mod._buffers.items():
            snap[(mname, k)] = id(v)
        for k, v in mod._parameters.items():
            snap[(mname, k)] = id(v)
        for k, v in mod._modules.items():
            snap[(mname, k)] = id(v)
    return snap


def _state_changes(before: dict, after: dict) -> list[str]:
    changed = [k for k in after if before.get(k, None) != after[k]]
    changed += [k for k in before if k not in after]
    out = []
    for mname, attr in changed:
        out.append(f"self.{mname + '.' if mname else ''}{attr}")
    return sorted(set(out))


def _nbytes(tensors) -> int:
    return sum(t.numel() * t.element_size() for t in tensors if isinstance(t, torch.Tensor))


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Silence torch's warnings, logs and the partial graphs export prints on failure."""
    import io
    import logging

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


def _build(spec: ModelSpec, mode: str, fake_mode):
    """(model, sample list) built inside ``fake_mode`` (or for real when it is None)."""
    ctx = fake_mode if fake_mode is not None else contextlib.nullcontext()
    with ctx:
        model = spec.build_model()
        sample = spec.sample_inputs()
    if not isinstance(model, torch.nn.Module):
        raise ModelFileError(f"{spec.path}:1: Model(...) is not a torch.nn.Module")
    if mode == "eval":
        model.eval()
    _tensor_attrs_to_buffers(model)
    return model, sample


# --------------------------------------------------------------------------------------------
# Argument conversion shared by both methods
# --------------------------------------------------------------------------------------------

_DROP = object()


def _convert(value: Any, tensor_name) -> Any:
    """Convert an op argument: tensors -> TensorRef, dtypes -> names, devices etc. -> dropped."""
    if isinstance(value, (list, tuple)):
        items = [_convert(v, tensor_name) for v in value]
        items = [None if v is _DROP else v for v in items]
        return tuple(items) if isinstance(value, tuple) else items
    if isinstance(value, torch.dtype):
        return dtype_name(value)
    if isinstance(value, (torch.device, torch.layout, torch.memory_format)):
        return _DROP
    if isinstance(value, torch.Size):
        return [int(s) for s in value]
    if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        raise _SymbolicShape(f"symbolic value {value}")
    if isinstance(value, torch.Generator):
        return _DROP
    name = tensor_name(value)
    if name is not None:
        return TensorRef(name)
    return value


_DROPPED_KWARGS = frozenset({"device", "layout", "memory_format", "pin_memory", "generator"})


def _convert_args(args, kwargs, tensor_name) -> tuple[tuple, dict]:
    cargs = tuple(None if (c := _convert(a, tensor_name)) is _DROP else c for a in args)
    ckw = {}
    for k, v in kwargs.items():
        if k in _DROPPED_KWARGS:
            continue
        c = _convert(v, tensor_name)
        if c is not _DROP:
            ckw[k] = c
    return cargs, ckw


def _refs(value: Any) -> Iterator[str]:
    if isinstance(value, TensorRef):
        yield value.name
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _refs(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _refs(v)


# --------------------------------------------------------------------------------------------
# Post-processing shared by both methods
# --------------------------------------------------------------------------------------------


def _finish(prog: CapturedProgram, bool_index: set[int]) -> CapturedProgram:
    """Dead-code elimination, unused outputs -> None, weights/random tensors restricted to use.

    ``bool_index`` holds the ids of index/index_put nodes indexing with a boolean mask.
    """
    draw_order = {id(n): i for i, n in enumerate(n for n in prog.nodes if _is_random_name(n.op))}
    needed = set(prog.outputs)
    kept: list[AtenNode] = []
    for node in reversed(prog.nodes):
        names = {o.name for o in node.outputs if o is not None}
        if not (names & needed):
            continue
        needed |= set(_refs(node.args)) | set(_refs(node.kwargs))
        kept.append(node)
    kept.reverse()
    consumed = set(prog.outputs)
    for node in kept:
        consumed |= set(_refs(node.args)) | set(_refs(node.kwargs))
    for node in kept:
        node.outputs = tuple(o if o is not None and o.name in consumed else None for o in node.outputs)
    prog.nodes = kept
    prog.weights = [w for w in prog.weights if w.name in consumed]
    prog.weight_sources = {w.name: prog.weight_sources[w.name] for w in prog.weights}
    prog.constants = {k: v for k, v in prog.constants.items() if k in prog.weight_sources}
    prog.random_tensors = []
    prog.random_draws = []
    for node in kept:
        if _is_random_name(node.op) and node.outputs and node.outputs[0] is not None:
            prog.random_tensors.append(node.outputs[0])
            prog.random_draws.append(draw_order[id(node)])
    # value-dependent work among live nodes
    for node in kept:
        reason = _value_dependence(node, id(node) in bool_index)
        if reason:
            prog.value_dependent.append(f"{node.op} at {node.loc or '?'}: {reason}")
    return prog


def _is_random_name(op: str) -> bool:
    parts = op.split(".")
    return len(parts) >= 2 and parts[1] in RANDOM_OPS


def _value_dependence(node: AtenNode, bool_index: bool) -> str | None:
    packet = node.op.split(".")[1] if node.op.count(".") >= 2 else node.op
    try:
        op = _op(".".join(node.op.split(".")[1:3]))
        tags = op.tags
    except (AttributeError, ValueError):
        tags = ()
    if packet in ("index", "index_put", "_index_put_impl"):
        if bool_index:
            return "boolean-mask indexing (data-dependent shape)"
        return None
    if torch.Tag.dynamic_output_shape in tags:
        return "output shape depends on values"
    if torch.Tag.data_dependent_output in tags:
        return "reads tensor values"
    if packet == "topk" and len(node.outputs) >= 2 and node.outputs[1] is not None:
        return "routing by the computed top-k indices"
    return None


# --------------------------------------------------------------------------------------------
# Export path
# --------------------------------------------------------------------------------------------


def _capture_export(spec: ModelSpec, mode: str, fake: bool, user: _User) -> CapturedProgram:
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.export.graph_signature import InputKind, OutputKind, TensorArgument

    fake_mode = FakeTensorMode() if fake else None
    model, sample = _build(spec, mode, fake_mode)
    names_in = input_names(spec, sample)
    changes: list[str] = []
    snaps: list[dict] = []
    h_pre = model.register_forward_pre_hook(lambda mod, args: snaps.append(_state_snapshot(mod)))
    h_post = model.register_forward_hook(
        lambda mod, args, out: changes.extend(_state_changes(snaps.pop(), _state_snapshot(mod)))
    )
    ctx = fake_mode if fake_mode is not None else contextlib.nullcontext()
    with ctx, torch.no_grad(), _quiet():
        try:
            ep = torch.export.export(model, tuple(sample), strict=False)
        finally:
            h_pre.remove()
            h_post.remove()
        if changes:
            raise _NeedsFallback(f"forward mutates module state ({', '.join(sorted(set(changes))[:4])})")
        table, _, _ = _tables()
        ep = ep.run_decompositions(table)

    namer = _Namer()
    bool_index: set[int] = set()
    node_name: dict[Any, str] = {}  # fx node -> our name
    prog = CapturedProgram(
        source=spec.path,
        mode=mode,
        method="export",
        inputs=[],
        weights=[],
        nodes=[],
        outputs=[],
        size_constants=dict(spec.size_constants),
    )
    sig = ep.graph_signature
    placeholders = {n.name: n for n in ep.graph.nodes if n.op == "placeholder"}
    user_iter = iter(names_in)
    for ispec in sig.input_specs:
        arg = ispec.arg
        if not isinstance(arg, TensorArgument):
            if ispec.kind == InputKind.USER_INPUT:
                continue
            raise _NeedsFallback(f"unsupported graph input {ispec.kind.name}")
        ph = placeholders[arg.name]
        val = ph.meta.get("val")
        if ispec.kind == InputKind.USER_INPUT:
            name = namer.fresh(next(user_iter, arg.name))
            prog.inputs.append(_meta(name, val))
        elif ispec.kind in (InputKind.PARAMETER, InputKind.BUFFER):
            name = namer.fresh(ispec.target)
            prog.weights.append(_meta(name, val))
            prog.weight_sources[name] = ispec.target
        elif ispec.kind == InputKind.CONSTANT_TENSOR:
            value = ep.constants.get(ispec.target)
            name = namer.fresh(ispec.target)
            prog.weights.append(_meta(name, val if val is not None else value))
            if _resolve_attr(model, ispec.target) is not None:
                prog.weight_sources[name] = ispec.target
            else:
                real = _real_value(value)
                if real is None:
                    raise _NeedsFallback(f"constant {ispec.target} has no known value")
                prog.weight_sources[name] = f"const:{name}"
                prog.constants[name] = real
        else:
            raise _NeedsFallback(f"unsupported graph input {ispec.kind.name}")
        node_name[ph] = name

    # name the results of multi-output nodes after their getitem users
    getitems: dict[Any, dict[int, Any]] = {}
    for n in ep.graph.nodes:
        if n.op == "call_function" and n.target is operator.getitem:
            getitems.setdefault(n.args[0], {})[n.args[1]] = n

    def tensor_name(v):
        if isinstance(v, torch.fx.Node):
            if v not in node_name:
                raise _NeedsFallback(f"graph value {v.name} is not a tensor")
            return node_name[v]
        if isinstance(v, torch.Tensor):
            raise _NeedsFallback("tensor literal in graph")
        return None

    for n in ep.graph.nodes:
        if n.op in ("placeholder", "output"):
            continue
        if n.op != "call_function":
            raise _NeedsFallback(f"unsupported graph node {n.op} {n.target}")
        if n.target is operator.getitem:
            continue  # named with its base node
        if not isinstance(n.target, torch._ops.OpOverload):
            raise _SymbolicShape(f"non-ATen graph node {n.target}")
        if _packet(n.target) in _IDENTITY_OPS and n.args and n.args[0] in node_name:
            node_name[n] = node_name[n.args[0]]  # aliases are the same value: no node
            continue
        val = n.meta.get("val")
        outs: list[TensorMeta | None] = []
        if isinstance(val, torch.Tensor):
            name = namer.fresh(n.name)
            node_name[n] = name
            outs.append(_meta(name, val))
        elif isinstance(val, (list, tuple)):
            users = getitems.get(n, {})
            for i, v in enumerate(val):
                if isinstance(v, torch.Tensor) and i in users:
                    name = namer.fresh(users[i].name)
                    node_name[users[i]] = name
                    outs.append(_meta(name, v))
                else:
                    outs.append(None)
        elif val is None:
            outs = []
        else:
            raise _SymbolicShape(f"{n.target} returns {type(val).__name__}")
        args, kwargs = _convert_args(n.args, n.kwargs, tensor_name)
        module_path = None
        stack = n.meta.get("nn_module_stack")
        if stack:
            module_path = list(stack.values())[-1][0] or None
        node = AtenNode(
            op=str(n.target),
            args=args,
            kwargs=kwargs,
            outputs=tuple(outs),
            loc=_loc_from_stack_trace(n.meta.get("stack_trace"), user),
            module_path=module_path,
        )
        if _packet(n.target) in ("index", "index_put", "_index_put_impl"):
            if _has_bool_index(n.args, lambda a: a.meta.get("val")):
                bool_index.add(id(node))
        prog.nodes.append(node)

    for ospec in sig.output_specs:
        if ospec.kind != OutputKind.USER_OUTPUT:
            continue  # buffer/input mutations are side outputs
        if isinstance(ospec.arg, TensorArgument):
            node = next(n for n in ep.graph.nodes if n.name == ospec.arg.name)
            prog.outputs.append(node_name[node])
    return _finish(prog, bool_index)


def _has_bool_index(args, val_of) -> bool:
    if len(args) < 2:
        return False
    for idx in args[1] or ():
        v = val_of(idx) if idx is not None else None
        if isinstance(v, torch.Tensor) and v.dtype in (torch.bool, torch.uint8):
            return True
    return False


def _resolve_attr(model: torch.nn.Module, fqn: str):
    obj: Any = model
    for part in fqn.split("."):
        if isinstance(obj, torch.nn.Module) and part in obj._modules:
            obj = obj._modules[part]
        elif hasattr(obj, part):
            obj = getattr(obj, part)
        else:
            return None
    return obj if isinstance(obj, torch.Tensor) else None


def _real_value(t) -> np.ndarray | None:
    from torch._subclasses.fake_tensor import FakeTensor

    if t is None:
        return None
    if isinstance(t, FakeTensor):
        const = getattr(t, "constant", None)
        if const is None:
            return None
        t = const
    if t.device.type == "meta":
        return None
    return _to_numpy(t)


def _to_numpy(t: torch.Tensor) -> np.ndarray:
    """A copy of a real tensor as numpy (bf16/f8 widened to f32), outside any active mode."""
    from torch._subclasses.fake_tensor import unset_fake_temporarily
    from torch.utils._python_dispatch import _disable_current_modes

    with unset_fake_temporarily(), _disable_current_modes():
        t = t.detach()
        if t.dtype in (torch.bfloat16, torch.float8_e4m3fn, torch.float8_e5m2):
            t = t.float()
        return t.cpu().contiguous().numpy().copy()


# --------------------------------------------------------------------------------------------
# Dispatch path
# --------------------------------------------------------------------------------------------


@dataclass
class _ViewStep:
    """One view op applied to a tensor: ``op(x, *args, **kwargs)[index]``."""

    op: Any
    args: tuple
    kwargs: dict
    index: int | None  # which result of a multi-result view (split, unbind, ...)
    out: TensorMeta  # shape/dtype of the result (name unused)
    n_out: int = 1  # number of results of the op


def _has_cia_kernel(op) -> bool:
    try:
        return torch._C._dispatch_has_kernel_for_dispatch_key(op.name(), "CompositeImplicitAutograd")
    except (AttributeError, RuntimeError):
        return False


def _view_results(op) -> bool:
    """True when ``op`` returns aliases of its first input without writing to it (a view op)."""
    rets = op._schema.returns
    return bool(rets) and all(r.alias_info is not None and not r.alias_info.is_write for r in rets)


def _native_batch_norm_as_legit(inp, weight, bias, running_mean, running_var, training, momentum, eps):
    """``native_batch_norm`` as the ``_native_batch_norm_legit*`` ops export produces."""
    if running_mean is None or running_var is None:
        return aten._native_batch_norm_legit.no_stats(inp, weight, bias, training, momentum, eps)
    if training:
        return aten._native_batch_norm_legit.default(
            inp, weight, bias, running_mean, running_var, training, momentum, eps
        )
    return aten._native_batch_norm_legit_no_training.default(
        inp, weight, bias, running_mean, running_var, momentum, eps
    )


_NATIVE_BN_FUNCTIONAL = {
    "aten.native_batch_norm.default": "aten._native_batch_norm_legit_functional.default",
}


def _recorder_class():
    from torch._export.utils import _special_op_to_preserve_cia
    from torch.utils._python_dispatch import TorchDispatchMode

    class Recorder(TorchDispatchMode):
        """Records executed ATen ops as functional AtenNodes.

        Tensors are tracked by identity (kept alive so ids stay unique).  Views are nodes of
        their own op and remember their chain from the base tensor; an in-place op becomes its
        functional counterpart producing a new version of the mutated tensor; a mutation
        through a view is written back to the base with ``*_scatter`` / ``view`` nodes, and
        views of a mutated base are regenerated on their next use.
        """

        def __init__(
            self, user: _User, prog: CapturedProgram, namer: _Namer, cia, python_table, module_stack
        ):
            super().__init__()
            self.user = user
            self.prog = prog
            self.namer = namer
            self.cia = cia
            self.preserve = _special_op_to_preserve_cia
            self.table = dict(python_table)
            self.table[aten.native_batch_norm.default] = _native_batch_norm_as_legit
            self.module_stack = module_stack
            self.names: dict[int, str] = {}
            self.metas: dict[int, TensorMeta] = {}
            self.keep: list[Any] = []
            self.view_of: dict[int, tuple[torch.Tensor, list[_ViewStep]]] = {}
            self.version: dict[int, int] = {}  # id(base) -> number of mutations
            self.seen: dict[int, int] = {}  # id(view) -> base version its name reflects
            self.globals_by_id: dict[int, str] = {}
            self.const_count = 0
            self.bool_index: set[int] = set()

        # ---- names -------------------------------------------------------------------------
        def register(self, t: torch.Tensor, name: str, meta: TensorMeta | None = None) -> None:
            self.names[id(t)] = name
            self.metas[id(t)] = meta or _meta(name, t)
            self.keep.append(t)

        def _new_leaf(self, v: torch.Tensor) -> str:
            gname = self.globals_by_id.get(id(v))
            if gname is not None:
                name = self.namer.fresh(gname)
                self.prog.weights.append(_meta(name, v))
                self.prog.weight_sources[name] = f"global:{gname}"
            else:
                real = _real_value(v)
                if real is None:
                    raise CaptureError(f"{self.user.display}: forward uses a tensor of unknown origin")
                name = self.namer.fresh(f"lifted_tensor_{self.const_count}")
                self.const_count += 1
                self.prog.weights.append(_meta(name, v))
                self.prog.weight_sources[name] = f"const:{name}"
                self.prog.constants[name] = real
            self.register(v, name)
            return name

        def name_of(self, v) -> str | None:
            """Current name of tensor ``v`` (regenerating a view whose base was mutated)."""
            if not isinstance(v, torch.Tensor):
                return None
            key = id(v)
            if key not in self.names:
                return self._new_leaf(v)
            if key in self.view_of:
                base, chain = self.view_of[key]
                version = self.version.get(id(base), 0)
                if self.seen.get(key) != version:
                    names = self._replay(base, chain)
                    self.names[key] = names[-1]
                    self.seen[key] = version
            return self.names[key]

        def _emit(self, op: str, args: tuple, kwargs: dict, outs: tuple) -> None:
            self.prog.nodes.append(
                AtenNode(
                    op=op,
                    args=args,
                    kwargs=kwargs,
                    outputs=outs,
                    loc=self.user.frame_loc(),
                    module_path=(self.module_stack[-1] or None) if self.module_stack else None,
                )
            )

        def _fresh_meta(self, base: str, like: TensorMeta) -> TensorMeta:
            return TensorMeta(self.namer.fresh(base), like.shape, like.dtype)

        def _replay(self, base: torch.Tensor, chain: list[_ViewStep]) -> list[str]:
            """Emit the view chain on the current version of ``base``; names of every step."""
            cur = self.name_of(base)
            names = [cur]
            for step in chain:
                if _packet(step.op) in _IDENTITY_OPS:
                    names.append(cur)
                    continue
                args, kwargs = _convert_args(step.args, step.kwargs, self.name_of)
                meta = self._fresh_meta(_packet(step.op).strip("_"), step.out)
                if step.index is not None:
                    # a multi-result view (split/unbind): only the result used here is named
                    outs = tuple(meta if i == step.index else None for i in range(step.n_out))
                else:
                    outs = (meta,)
                self._emit(str(step.op), (TensorRef(cur),) + args, kwargs, outs)
                cur = meta.name
                names.append(cur)
            return names

        # ---- mutation ----------------------------------------------------------------------
        def _write_back(self, t: torch.Tensor, new_name: str) -> None:
            """``t`` now holds the value ``new_name``: give it and its base new versions."""
            key = id(t)
            if key not in self.view_of:
                self.names[key] = new_name
                self.version[key] = self.version.get(key, 0) + 1
                return
            base, chain = self.view_of[key]
            inter = self._replay(base, chain)  # names of base, x1, ..., xk (current values)
            metas = [self.metas[id(base)]] + [s.out for s in chain]
            src = new_name
            for i in range(len(chain) - 1, -1, -1):
                src = self._scatter(chain[i], inter[i], metas[i], src)
            self.names[id(base)] = src
            self.version[id(base)] = self.version.get(id(base), 0) + 1
            self.names[key] = new_name
            self.seen[key] = self.version[id(base)]

        def _scatter(self, step: _ViewStep, x: str, x_meta: TensorMeta, src: str) -> str:
            """Name of ``x`` with the view ``step`` of it replaced by ``src``."""
            packet = _packet(step.op)
            a = list(step.args)
            if packet in _IDENTITY_OPS:
                return src
            out = self._fresh_meta(f"{packet}_scatter", x_meta)
            xs, ss = TensorRef(x), TensorRef(src)
            rank = len(x_meta.shape)
            if packet == "slice":
                dim, start, end, st = (a + [0, None, None, 1][len(a) :])[:4]
                op, args = "aten.slice_scatter.default", (xs, ss, dim, start, end, st)
            elif packet == "select":
                op, args = "aten.select_scatter.default", (xs, ss, a[0], a[1])
            elif packet == "diagonal":
                off, d1, d2 = (a + [0, 0, 1][len(a) :])[:3]
                op, args = "aten.diagonal_scatter.default", (xs, ss, off, d1, d2)
            elif packet == "as_strided":
                op, args = (
                    "aten.as_strided_scatter.default",
                    (xs, ss, *[_convert(v, self.name_of) for v in a]),
                )
            elif packet in ("split", "split_with_sizes", "unbind") and step.index is not None:
                dim = a[1] if len(a) > 1 else 0
                if packet == "unbind":
                    dim = a[0] if a else 0
                    op, args = "aten.select_scatter.default", (xs, ss, dim, step.index)
                else:
                    d = dim % rank
                    size = x_meta.shape[d]
                    if packet == "split":
                        sizes = [min(a[0], size - k) for k in range(0, size, a[0])]
                    else:
                        sizes = list(a[0])
                    start = sum(sizes[: step.index])
                    op, args = (
                        "aten.slice_scatter.default",
                        (xs, ss, dim, start, start + sizes[step.index], 1),
                    )
            elif packet == "permute":
                dims = [d % rank for d in a[0]]
                inv = [dims.index(i) for i in range(rank)]
                op, args = "aten.permute.default", (ss, inv)
            elif packet in ("transpose", "t"):
                d0, d1 = (a[0], a[1]) if packet == "transpose" else (0, 1)
                op, args = "aten.transpose.int", (ss, d0, d1)
            elif packet in (
                "view",
                "_unsafe_view",
                "reshape",
                "_reshape_alias",
                "squeeze",
                "unsqueeze",
                "flatten",
                "unflatten",
                "view_as",
            ):
                op, args = "aten.view.default", (ss, list(x_meta.shape))
            else:
                raise CaptureError(
                    f"{self.user.display}: in-place update through a {packet} view is not supported"
                )
            self._emit(op, args, {}, (out,))
            return out.name

        # ---- dispatch ----------------------------------------------------------------------
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if func is aten.dropout.default:
                with self:
                    return _dropout_decomp(*args, **kwargs)
            if func in self.table:
                with self:
                    r = self.table[func](*args, **kwargs)
                if r is not NotImplemented:
                    return r
            if self.cia.get(func) is not self.preserve and _has_cia_kernel(func):
                # a composite op reaching the mode (inside a decomposition): decompose it as
                # autograd would have
                with self:
                    r = func.decompose(*args, **kwargs)
                if r is not NotImplemented:
                    return r
            out = func(*args, **kwargs)
            flat_out = list(out) if isinstance(out, (tuple, list)) else [out]
            if not any(isinstance(o, torch.Tensor) for o in flat_out):
                if torch.Tag.data_dependent_output in func.tags:
                    loc = self.user.frame_loc()
                    self.prog.value_dependent.append(
                        f"{func} at {loc or '?'}: a tensor value read by Python (control flow or sizes)"
                    )
                return out
            packet = _packet(func)
            if _view_results(func) and args and isinstance(args[0], torch.Tensor):
                return self._record_view(func, args, kwargs, out, flat_out)
            mutated = [j for j in _mutated_arg_indices(func) if isinstance(args[j], torch.Tensor)]
            cargs, ckw = _convert_args(args, kwargs, self.name_of)
            op_name = str(func)
            if mutated:
                op_name = _NATIVE_BN_FUNCTIONAL.get(op_name) or _functional_name(func)
            base = op_name.split(".")[1].strip("_") or "t"
            results = [
                o for o in flat_out if isinstance(o, torch.Tensor) and not any(o is args[j] for j in mutated)
            ]
            multi = len(results) + len(mutated) > 1
            outs: list[TensorMeta | None] = []
            pairs: list[tuple[torch.Tensor, TensorMeta]] = []
            for o in flat_out:
                if not isinstance(o, torch.Tensor):
                    outs.append(None)
                elif not any(o is args[j] for j in mutated):
                    meta = _meta(self.namer.fresh(f"{base}_out{len(outs)}" if multi else base), o)
                    outs.append(meta)
                    pairs.append((o, meta))
            new_versions = []
            for j in mutated:
                meta = _meta(self.namer.fresh(f"{base}_out{len(outs)}" if multi else base), args[j])
                outs.append(meta)
                new_versions.append((args[j], meta))
            node = AtenNode(
                op=op_name,
                args=cargs,
                kwargs=ckw,
                outputs=tuple(outs),
                loc=self.user.frame_loc(),
                module_path=(self.module_stack[-1] or None) if self.module_stack else None,
            )
            if packet in ("index", "index_put", "index_put_", "_index_put_impl_"):
                if _has_bool_index(args, lambda a: a):
                    self.bool_index.add(id(node))
            self.prog.nodes.append(node)
            for t, meta in pairs:
                self.register(t, meta.name, meta)
            for t, meta in new_versions:
                self._write_back(t, meta.name)
            return out

        def _record_view(self, func, args, kwargs, out, flat_out):
            src = args[0]
            src_name = self.name_of(src)
            packet = _packet(func)
            if packet in _IDENTITY_OPS:
                for o in flat_out:
                    if isinstance(o, torch.Tensor):
                        self._register_view(
                            o, src, _ViewStep(func, (), {}, None, self.metas[id(src)]), src_name
                        )
                return out
            cargs, ckw = _convert_args(args, kwargs, self.name_of)
            base = packet.strip("_") or "view"
            multi = isinstance(out, (tuple, list))
            outs = []
            for i, o in enumerate(flat_out):
                if isinstance(o, torch.Tensor):
                    outs.append(_meta(self.namer.fresh(f"{base}_out{i}" if multi else base), o))
                else:
                    outs.append(None)
            self._emit(str(func), cargs, ckw, tuple(outs))
            rest = tuple(args[1:])
            for i, (o, meta) in enumerate(zip(flat_out, outs, strict=True)):
                if meta is not None:
                    step = _ViewStep(func, rest, dict(kwargs), i if multi else None, meta, len(flat_out))
                    self._register_view(o, src, step, meta.name)
            return out

        def _register_view(self, o: torch.Tensor, src: torch.Tensor, step: _ViewStep, name: str) -> None:
            if id(src) in self.view_of:
                base, chain = self.view_of[id(src)]
                chain = chain + [step]
            else:
                base, chain = src, [step]
            self.register(o, name, TensorMeta(name, step.out.shape, step.out.dtype))
            self.view_of[id(o)] = (base, chain)
            self.seen[id(o)] = self.version.get(id(base), 0)

    return Recorder


@contextlib.contextmanager
def _module_tracker(model: torch.nn.Module, stack: list[str]) -> Iterator[None]:
    from torch.nn.modules.module import register_module_forward_hook, register_module_forward_pre_hook

    names = {id(m): n for n, m in model.named_modules()}

    def pre(mod, args):
        n = names.get(id(mod))
        if n is not None:
            stack.append(n or "")

    def post(mod, args, out):
        if id(mod) in names and stack:
            stack.pop()

    h1 = register_module_forward_pre_hook(pre)
    h2 = register_module_forward_hook(post)
    try:
        yield
    finally:
        h1.remove()
        h2.remove()


def _capture_dispatch(
    spec: ModelSpec, mode: str, fake: bool, user: _User, reason: str | None
) -> CapturedProgram:
    from torch._subclasses.fake_tensor import FakeTensorMode

    if fake:
        try:
            return _dispatch_once(spec, mode, FakeTensorMode(allow_non_fake_inputs=True), user, reason)
        except (CaptureError, ModelFileError):
            raise
        except Exception as exc:  # noqa: BLE001 - fake tensors cannot run value-dependent code
            fake_exc = exc
        # estimate the real size before running for real
        model, sample = _build(spec, mode, FakeTensorMode())
        size = _nbytes(sample) + _nbytes(model.parameters()) + _nbytes(model.buffers())
        del model, sample
        if size > REAL_RUN_LIMIT_BYTES:
            if not _needs_values(fake_exc):
                raise _forward_error(spec, fake_exc) from fake_exc
            raise CaptureError(
                f"{spec.path}: needs real tensor values to capture ({exception_summary(fake_exc)}) but "
                f"its inputs and weights take {size / 2**30:.1f} GB; capture a size-reduced instance"
            )
        reason = reason or exception_summary(fake_exc)
    torch.manual_seed(0)
    return _dispatch_once(spec, mode, None, user, reason)


def _needs_values(exc: BaseException) -> bool:
    """Whether a failure on fake tensors is one real values would avoid."""
    from torch._subclasses.fake_tensor import (
        DataDependentOutputException,
        DynamicOutputShapeException,
        UnsupportedOperatorException,
    )

    names = {"GuardOnDataDependentSymNode", "UnsupportedFakeTensorException"}
    return isinstance(
        exc, (DataDependentOutputException, DynamicOutputShapeException, UnsupportedOperatorException)
    ) or any(t.__name__ in names for t in type(exc).__mro__)


def _forward_error(spec: ModelSpec, exc: BaseException) -> CaptureError:
    line = user_line(exc, spec.abspath)
    where = f"{spec.path}:{line}" if line else spec.path
    return CaptureError(f"{where}: forward raised {exception_summary(exc)}")


def _dispatch_once(spec: ModelSpec, mode: str, fake_mode, user: _User, reason: str | None) -> CapturedProgram:
    from torch._dispatch.python import enable_python_dispatcher
    from torch.export.exported_program import _override_composite_implicit_decomp

    model, sample = _build(spec, mode, fake_mode)
    names_in = input_names(spec, sample)
    prog = CapturedProgram(
        source=spec.path,
        mode=mode,
        method="dispatch",
        inputs=[],
        weights=[],
        nodes=[],
        outputs=[],
        fallback_reason=reason,
        size_constants=dict(spec.size_constants),
    )
    namer = _Namer()
    _, cia, python = _tables()
    stack: list[str] = []
    rec = _recorder_class()(user, prog, namer, cia, python, stack)
    tensors = [t for t in sample if isinstance(t, torch.Tensor)]
    for name, t in zip(names_in, tensors, strict=True):
        if id(t) in rec.names:
            continue  # the same tensor passed twice
        n = namer.fresh(name)
        prog.inputs.append(_meta(n, t))
        rec.register(t, n)
    for fqn, t in itertools.chain(model.named_parameters(), model.named_buffers()):
        if id(t) in rec.names:
            continue
        n = namer.fresh(fqn)
        prog.weights.append(_meta(n, t))
        prog.weight_sources[n] = fqn
        rec.register(t, n)
    for gname, gval in vars(spec.module).items():
        if isinstance(gval, torch.Tensor):
            rec.globals_by_id[id(gval)] = gname

    ctx = fake_mode if fake_mode is not None else contextlib.nullcontext()
    with (
        ctx,
        torch.no_grad(),
        _quiet(),
        enable_python_dispatcher(),
        _override_composite_implicit_decomp(cia),
        _module_tracker(model, stack),
    ):
        with rec:
            out = model(*sample)
        flat, _ = torch.utils._pytree.tree_flatten(out)
        for o in flat:
            if isinstance(o, torch.Tensor):
                prog.outputs.append(rec.name_of(o))
    return _finish(prog, rec.bool_index)


# --------------------------------------------------------------------------------------------
# Public entry points
# --------------------------------------------------------------------------------------------


def _as_spec(path, size_overrides) -> ModelSpec:
    spec = path if isinstance(path, ModelSpec) else load_model_file(path)
    if size_overrides:
        spec = spec.with_sizes(size_overrides)
    return spec


def capture(
    path: str | Path | ModelSpec,
    mode: str = "eval",
    fake: bool = True,
    size_overrides: dict[str, int] | None = None,
    method: str = "auto",
) -> CapturedProgram:
    """Capture the model file as an ATen graph (see the module docstring).

    ``method`` is "auto" (export, falling back to dispatch recording), "export" (no fallback)
    or "dispatch" (skip export).  Raises :class:`ModelFileError` or :class:`CaptureError`.
    """
    if mode not in ("eval", "train"):
        raise ValueError(f"mode must be 'eval' or 'train', not {mode!r}")
    if method not in ("auto", "export", "dispatch"):
        raise ValueError(f"method must be 'auto', 'export' or 'dispatch', not {method!r}")
    spec = _as_spec(path, size_overrides)
    user = _User(spec.path, spec.abspath)
    reason = None
    if method in ("auto", "export"):
        try:
            return _capture_export(spec, mode, fake, user)
        except (ModelFileError, CaptureError):
            raise
        except Exception as exc:  # noqa: BLE001 - any export failure triggers the fallback
            reason = (
                exc.args[0] if isinstance(exc, (_NeedsFallback, _SymbolicShape)) else exception_summary(exc)
            )
            if isinstance(exc, _SymbolicShape):
                reason = f"data-dependent shapes in the exported graph ({reason})"
            if method == "export":
                raise CaptureError(f"{spec.path}: torch.export failed: {reason}") from exc
    try:
        return _capture_dispatch(spec, mode, fake, user, reason)
    except (ModelFileError, CaptureError):
        raise
    except Exception as exc:  # noqa: BLE001
        raise _forward_error(spec, exc) from exc


def _random_recorder_class():
    from torch.utils._python_dispatch import TorchDispatchMode

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
                    return _dropout_decomp(*args, **kwargs)
            if not _is_random(func):
                if _has_cia_kernel(func):
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
            mutated = _mutated_arg_indices(func)
            drawn = args[mutated[0]] if mutated else (out[0] if isinstance(out, (tuple, list)) else out)
            self.draws.append(drawn.detach().clone())
            return out

    return RandomRecorder


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
    spec = _as_spec(path, size_overrides)
    if program is None:
        program = capture(spec, mode=mode, fake=True)
    torch.manual_seed(seed)
    model, sample = _build(spec, mode, None)
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
            sample[pos] = torch.from_numpy(np.ascontiguousarray(inputs[name])).to(sample[pos].dtype)
    in_np = {name: _to_numpy(sample[pos]) for pos, name in zip(positions, names_in, strict=True)}

    weights_np: dict[str, np.ndarray] = {}
    for w in program.weights:
        src = program.weight_sources.get(w.name, w.name)
        if src.startswith("const:"):
            weights_np[w.name] = program.constants[w.name]
            continue
        if src.startswith("global:"):
            t = getattr(spec.module, src[len("global:") :], None)
        else:
            t = _resolve_attr(model, src)
        if not isinstance(t, torch.Tensor):
            raise CaptureError(f"{spec.path}: cannot find weight {src}")
        weights_np[w.name] = _to_numpy(t)

    _, _, python = _tables()
    rec = _random_recorder_class()(python)
    if program.random_tensors:
        from torch._dispatch.python import enable_python_dispatcher
        from torch._export.utils import _special_op_to_preserve_cia
        from torch.export.exported_program import _override_composite_implicit_decomp

        ctx = contextlib.ExitStack()
        ctx.enter_context(enable_python_dispatcher())
        ctx.enter_context(
            _override_composite_implicit_decomp({aten.dropout.default: _special_op_to_preserve_cia})
        )
        ctx.enter_context(rec)
    else:
        ctx = contextlib.nullcontext()
    with torch.no_grad(), _quiet():
        with ctx:
            out = model(*sample)
    flat, _ = torch.utils._pytree.tree_flatten(out)
    flat = [o for o in flat if isinstance(o, torch.Tensor)]
    if len(flat) != len(program.outputs):
        raise CaptureError(
            f"{spec.path}: forward returned {len(flat)} tensors, "
            f"the captured program has {len(program.outputs)}"
        )
    out_np = {name: _to_numpy(o) for name, o in zip(program.outputs, flat, strict=True)}
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
            random_np[meta.name] = _to_numpy(t)
    return in_np, weights_np, out_np, random_np


def fresh_inputs(spec: ModelSpec | str | Path, seed: int) -> dict[str, np.ndarray]:
    """New samples of the inputs: ``get_inputs()`` under ``torch.manual_seed(seed)``, with
    integer tensors kept inside the [min, max] range observed in the seed-0 sample."""
    spec = spec if isinstance(spec, ModelSpec) else load_model_file(spec)
    torch.manual_seed(0)
    base = spec.sample_inputs()
    torch.manual_seed(seed)
    new = spec.sample_inputs()
    names = input_names(spec, base)
    gen = torch.Generator().manual_seed(seed + 7919)
    out: dict[str, np.ndarray] = {}
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
        out[name] = _to_numpy(t)
    return out
