"""Captured jaxpr (`CapturedProgram`, method "jaxpr") -> one loop-IR `Kernel`.

Every primitive is translated by its template (`registry.lookup`, templates in `templates/`, built
with the shared `frontends/builder/`), in program order; values live in the translator's
environment of `Val`s (a view is an index map composed into its consumers' reads, so broadcasts,
reshapes, transposes and slices cost nothing). Each primitive's statements are one run of its
origin: one eager kernel of the unfused bound, with its `file:line` and module path.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from solar_compiler.frontends.builder.constants import narrow_constants
from solar_compiler.frontends.captured_program import CapturedProgram, sanitize
from solar_compiler.loopir.ast import Kernel

from .translator import JaxTranslator


@dataclass
class JaxTranslation:
    """The kernel and how its tensors relate to the captured program (for validation)."""

    kernel: Kernel
    inputs: dict[str, str]        # capture input/weight name -> kernel tensor name
    outputs: list[str]            # kernel output tensor per program output position
    notes: list[str] = field(default_factory=list)
    source_ops: list[dict] = field(default_factory=list)


def translate_program(program: CapturedProgram, kernel_name: str = "forward") -> JaxTranslation:
    """The kernel of `program`: each primitive translated by its template, in program order."""
    tr = JaxTranslator(program, kernel_name)
    for meta in program.inputs:
        tr.bind_param(meta, "input")
    for meta in program.weights:
        tr.bind_param(meta, "weight")
    narrow_constants(tr, program)
    tr.translate_nodes(program.nodes)
    tr.node = None
    first = tr.n_statements
    outputs = tr.bind_program_outputs(program)
    if tr.n_statements > first:
        tr.source_ops.append({"op": "output copy", "loc": tr.loc, "first": first,
                              "count": tr.n_statements - first})
    kernel = Kernel(sanitize(kernel_name), tr.tensors, tr.body)
    return JaxTranslation(kernel, tr.inputs, outputs, tr.notes, tr.source_ops)
