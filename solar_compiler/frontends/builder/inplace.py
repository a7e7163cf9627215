"""In-place updates of program inputs: an op whose result is an input's final version, which no later
op reads, writes into the caller's buffer, so only the elements it writes move. The copy of the
rest exists in the validation kernel only (`Translator.validation_prologue`), run first there, so
the output is still checked whole (docs/bounds.md section 0.5)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from solar_compiler.frontends.builder.translator import Translator
from solar_compiler.frontends.captured_program import AtenNode, TensorRef, tensor_refs


def updated_input(tr: Translator, node: AtenNode) -> str | None:
    """The input whose final version `node` writes, when forward updates it in place and no later op
    reads that version; else None."""
    ref = node.args[0]
    if not isinstance(ref, TensorRef):
        return None
    base = tr.val(ref).stored
    mine = tr.out_meta().name
    name = next((i for i, final in tr.program.mutated_inputs.items()
                 if tr.inputs.get(i) == base and final == mine), None)
    here = next(i for i, n in enumerate(tr.program.nodes) if n is node)
    if name is None or any(mine in tensor_refs((n.args, n.kwargs)) for n in tr.program.nodes[here + 1:]):
        return None
    return name


@contextmanager
def validation_only(tr: Translator, node: AtenNode, updated: str) -> Iterator[None]:
    """The statements emitted inside go to the validation kernel only, run first there: the copy of
    what an in-place update of input `updated` leaves unchanged, which eager never moves."""
    first, count = len(tr.body), tr.n_statements
    yield
    tr.validation_prologue.extend(tr.body[first:])
    del tr.body[first:]
    tr.n_statements = count
    tr.notes.append(f"{tr.loc}: {node.op} updates input '{updated}' in place: only the written "
                    "elements move")
