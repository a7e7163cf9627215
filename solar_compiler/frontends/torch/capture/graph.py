"""What both capture methods share to build a `CapturedProgram`: tensor metadata and dtype names,
the user-file location of a node, argument conversion (tensors -> `TensorRef`, dtypes -> loop-IR
names, devices dropped) and the final clean-up (dead nodes, unused outputs, value dependence)."""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from solar_compiler.frontends.captured_program import (
    AtenNode,
    CapturedProgram,
    CaptureError,
    TensorMeta,
    TensorRef,
    tensor_refs,
)

from .complex_pairs import lower_complex
from .ops import aten_op, is_random_name


class SymbolicShape(Exception):
    """The exported graph has a data-dependent (symbolic) size: the dispatch recorder must run."""


class NeedsFallback(Exception):
    """Export produced something the translation cannot take: the dispatch recorder must run."""


# ---- dtypes and metadata -----------------------------------------------------------------------------
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
    torch.uint16: "u16",  # `torch.eye(n)` for 256 < n <= 65,536 decomposes into uint16 aranges
    torch.float4_e2m1fn_x2: "u8",  # two e2m1 values per byte: the capture holds the bytes (its uint8 view)
    torch.bool: "bool",
}


#: complex dtypes: a complex tensor is held as (real, imaginary) pairs of its component dtype; as an
#: op argument (`_to_copy(dtype=complex64)`) the complex dtype keeps a name of its own, which the
#: pair lowering (`frontends/complex_pairs.py`) reads
_COMPLEX = {torch.complex64: ("c64", "f32"), torch.complex128: ("c128", "f64"),
            torch.complex32: ("c32", "f16")}


def dtype_name(dtype: torch.dtype) -> str:
    if dtype in _COMPLEX:
        return _COMPLEX[dtype][0]
    try:
        return _DTYPE_NAMES[dtype]
    except KeyError:
        raise CaptureError(f"unsupported dtype {dtype}") from None


def torch_dtype(name: str) -> torch.dtype:
    for k, v in _DTYPE_NAMES.items():
        if v == name:
            return k
    raise KeyError(name)


def tensor_meta(name: str, t: torch.Tensor) -> TensorMeta:
    shape = []
    for s in t.shape:
        if not isinstance(s, int):
            raise SymbolicShape(f"symbolic size {s}")
        shape.append(int(s))
    if t.dtype in _COMPLEX:
        return TensorMeta(name, (*shape, 2), _COMPLEX[t.dtype][1], complex=True)
    return TensorMeta(name, tuple(shape), dtype_name(t.dtype))


# ---- locations in the user's file --------------------------------------------------------------------
@dataclass
class UserFile:
    """The model file as the user named it (`display`, used in every `loc`) and its real path."""

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

    def stack_trace_loc(self, stack_trace: str | None) -> str | None:
        """Innermost frame in the user file of an export node's recorded stack trace."""
        if not stack_trace:
            return None
        loc = None
        for m in re.finditer(r'File "([^"]+)", line (\d+)', stack_trace):
            if self.matches(m.group(1)):
                loc = f"{self.display}:{m.group(2)}"
        return loc


# ---- argument conversion -----------------------------------------------------------------------------
_DROP = object()
_DROPPED_KWARGS = frozenset({"device", "layout", "memory_format", "pin_memory", "generator"})


def convert(value: Any, tensor_name) -> Any:
    """Convert an op argument: tensors -> TensorRef, dtypes -> names, devices etc. -> dropped."""
    if isinstance(value, (list, tuple)):
        items = [convert(v, tensor_name) for v in value]
        items = [None if v is _DROP else v for v in items]
        return tuple(items) if isinstance(value, tuple) else items
    if isinstance(value, torch.dtype):
        return dtype_name(value)
    if isinstance(value, (torch.device, torch.layout, torch.memory_format)):
        return _DROP
    if isinstance(value, torch.Size):
        return [int(s) for s in value]
    if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        raise SymbolicShape(f"symbolic value {value}")
    if isinstance(value, torch.Generator):
        return _DROP
    name = tensor_name(value)
    if name is not None:
        return TensorRef(name)
    return value


def convert_args(args, kwargs, tensor_name) -> tuple[tuple, dict]:
    """`convert` over positional (a dropped one becomes None) and keyword arguments (dropped)."""
    cargs = tuple(None if (c := convert(a, tensor_name)) is _DROP else c for a in args)
    ckw = {}
    for k, v in kwargs.items():
        if k in _DROPPED_KWARGS:
            continue
        c = convert(v, tensor_name)
        if c is not _DROP:
            ckw[k] = c
    return cargs, ckw


def has_bool_index(args, val_of) -> bool:
    """Whether an index/index_put call indexes with a boolean (or uint8) mask whose selected
    positions shape the result: not an index_put of one value under one mask (`x[mask] = v`), which
    is the select `where(mask, v, x)` whatever the mask holds."""
    if len(args) < 2:
        return False
    given = [val_of(idx) for idx in args[1] or () if idx is not None]
    masks = [v for v in given if isinstance(v, torch.Tensor) and v.dtype in (torch.bool, torch.uint8)]
    if not masks:
        return False
    value = val_of(args[2]) if len(args) > 2 else None
    one_value = isinstance(value, torch.Tensor) and value.numel() == 1
    return not (len(given) == 1 and masks[0].dtype == torch.bool and one_value)


# ---- post-processing -----------------------------------------------------------------------------------
def finish(prog: CapturedProgram, bool_index: set[int]) -> CapturedProgram:
    """Dead-code elimination, unused outputs -> None, weights/random tensors restricted to use, ops on
    complex values rewritten on their (real, imaginary) pairs (`complex_pairs.py`).

    ``bool_index`` holds the ids of index/index_put nodes indexing with a boolean mask.
    """
    draws = (n for n in prog.nodes if is_random_name(n.op, n.args, n.kwargs))
    draw_order = {id(n): i for i, n in enumerate(draws)}
    needed = set(prog.outputs)
    kept: list[AtenNode] = []
    for node in reversed(prog.nodes):
        names = {o.name for o in node.outputs if o is not None}
        if not (names & needed):
            continue
        needed |= set(tensor_refs(node.args)) | set(tensor_refs(node.kwargs))
        kept.append(node)
    kept.reverse()
    consumed = set(prog.outputs)
    for node in kept:
        consumed |= set(tensor_refs(node.args)) | set(tensor_refs(node.kwargs))
    for node in kept:
        if not node.all_outputs:
            node.all_outputs = node.outputs
        node.outputs = tuple(o if o is not None and o.name in consumed else None for o in node.outputs)
    prog.nodes = kept
    prog.weights = [w for w in prog.weights if w.name in consumed]
    prog.weight_sources = {w.name: prog.weight_sources[w.name] for w in prog.weights}
    prog.constants = {k: v for k, v in prog.constants.items() if k in prog.weight_sources}
    prog.random_tensors = []
    prog.random_draws = []
    for node in kept:
        if is_random_name(node.op, node.args, node.kwargs) and node.outputs and node.outputs[0] is not None:
            prog.random_tensors.append(node.outputs[0])
            prog.random_draws.append(draw_order[id(node)])
    # value-dependent work among live nodes
    for node in kept:
        reason = _value_dependence(node, id(node) in bool_index)
        if reason:
            prog.value_dependent.append(f"{node.op} at {node.loc or '?'}: {reason}")
    return lower_complex(prog)


def _value_dependence(node: AtenNode, bool_index: bool) -> str | None:
    packet = node.op.split(".")[1] if node.op.count(".") >= 2 else node.op
    try:
        op = aten_op(".".join(node.op.split(".")[1:3]))
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
