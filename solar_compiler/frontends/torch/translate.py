"""Captured ATen graph (`CapturedProgram`) -> one loop-IR `Kernel`.

Every ATen node is translated by its template (`registry.lookup`, templates in `templates/`, built
with the shared `frontends/builder/`). Values live in an environment of `Val`s: a stored value reads
its own kernel tensor; a view is an index map composed into its consumers' reads; constant fills and
`arange` are generators with no tensor at all. A value that is a graph output is materialised into an
`output` tensor (a copy when it is a view).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Protocol

from solar_compiler.frontends.builder.translator import NoTemplate, Translator
from solar_compiler.frontends.builder.values import Val
from solar_compiler.frontends.program import AtenNode, CapturedProgram, TensorRef, sanitize
from solar_compiler.loopir.ast import Kernel
from solar_compiler.loopir.rewrite import writes_as_inputs

from .masks import affine_masks
from .registry import Template, lookup


class OpFiller(Protocol):
    """Translates an op that has no template (the LLM frontend's per-op fill-in): emits its
    statements through the translator (`declare`, `append`, ...) and returns one value per output."""

    def fill(self, tr: Translator, node: AtenNode, why: NoTemplate) -> Val | tuple[Val | None, ...]: ...


@dataclass
class TorchTranslation:
    """The kernel and how its tensors relate to the captured program (for validation)."""

    kernel: Kernel
    inputs: dict[str, str]        # capture input/weight name -> kernel tensor name
    outputs: list[str]            # kernel output tensor per program output position
    random: dict[str, str]        # capture random-tensor name -> kernel tensor written by the draw
    notes: list[str] = field(default_factory=list)
    # the ATen op each run of statements comes from, in program order:
    # {"op": "aten.softmax.int", "loc": "m.py:12", "first": 3, "count": 5}
    source_ops: list[dict] = field(default_factory=list)

    def validation_kernel(self) -> Kernel:
        """The kernel with every random draw replaced by an input tensor of the same name, to be
        fed with the values torch drew (the drawing statements compute different values)."""
        return writes_as_inputs(self.kernel, set(self.random.values()))


# ---- the translation driver ---------------------------------------------------------------------
def translate_program(program: CapturedProgram, kernel_name: str = "forward",
                      filler: OpFiller | None = None) -> TorchTranslation:
    """The kernel of `program`: each node translated by its template, in program order; an op without
    a template goes to `filler` when one is given."""
    tr = Translator(program, kernel_name)
    for meta in program.inputs:
        tr.bind_param(meta, "input")
    for meta in program.weights:
        tr.bind_param(meta, "weight")
    _bind_masks(tr, program)
    last_loc: str | None = None
    for node in program.nodes:
        tr.node = node
        tr.loc = node.loc or last_loc or f"{program.source}:1"
        last_loc = tr.loc
        first, declared = tr.n_statements, len(tr.tensors)
        try:
            result = _template_for(tr, node)(tr, node)
        except NoTemplate as e:
            if filler is None or tr.n_statements != first:
                raise
            del tr.tensors[declared:]  # what the template declared before giving up
            result = filler.fill(tr, node, e)
        _record_group(tr, node.op, first)
        vals = result if isinstance(result, tuple) else (result,)
        for meta, v in zip(node.outputs, vals, strict=False):
            if meta is None or v is None:
                continue
            if tuple(v.shape) != tuple(meta.shape):
                raise tr.error(f"template gave shape {list(v.shape)} for '{meta.name}', "
                               f"torch says {list(meta.shape)}")
            tr.env[meta.name] = v
        for meta in node.outputs:
            if meta is not None and meta.name not in tr.env:
                raise tr.error(f"template produced no value for output '{meta.name}'")
    tr.node = None
    first = tr.n_statements
    outputs = tr.bind_program_outputs(program)
    _record_group(tr, "output copy", first)
    kernel = Kernel(sanitize(kernel_name), tr.tensors, tr.body)
    return TorchTranslation(kernel, tr.inputs, outputs, tr.random, tr.notes, tr.source_ops)


def _template_for(tr: Translator, node: AtenNode) -> Template:
    """The template of `node`'s op; an op without one is an error naming it (`file:line`), which a
    per-op filler may take over (`NoTemplate`)."""
    fn = lookup(node.op)
    if fn is None:
        raise NoTemplate(f"{tr.loc}: no loop-IR template for {node.op} ({_describe(node)})")
    return fn


def _record_group(tr: Translator, op: str, first: int) -> None:
    if tr.n_statements > first:
        tr.source_ops.append({"op": op, "loc": tr.loc, "first": first, "count": tr.n_statements - first})


def _bind_masks(tr: Translator, program: CapturedProgram) -> None:
    """Constant mask buffers that are affine regions are read as comparisons of their indices
    (masks.py); the weight stays declared (validation feeds it) but is no longer read."""
    for m in affine_masks(program):
        mask = replace(m, weight=tr.inputs[m.weight])
        tr.env[m.weight] = Val(mask.shape, mask.dtype, mask.read)
        tr.notes.append(mask.note())


def _describe(node: AtenNode) -> str:
    parts = []
    for a in node.args:
        if isinstance(a, TensorRef):
            parts.append(f"%{a.name}")
        elif isinstance(a, (list, tuple)):
            items = (f"%{x.name}" if isinstance(x, TensorRef) else repr(x) for x in a)
            parts.append("[" + ", ".join(items) + "]")
        else:
            parts.append(repr(a))
    text = ", ".join(parts)
    return text if len(text) < 120 else text[:117] + "..."
