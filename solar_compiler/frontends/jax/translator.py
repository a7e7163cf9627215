"""The JAX translation state: the shared `Translator`, plus the translation of a list of nodes, which
the control-flow templates call for the bodies of `scan`, `while` and `cond` (emitted where the
loop runs). Every node's statements are recorded as one run (one eager kernel of the unfused bound)
with the node's primitive, `file:line` and module path."""

from __future__ import annotations

from collections.abc import Sequence

from solar_compiler.frontends.builder.translator import TranslateError, Translator
from solar_compiler.frontends.builder.values import Val
from solar_compiler.frontends.captured_program import AtenNode, CapturedProgram, TensorRef

from .program import Operand
from .registry import lookup


class JaxTranslator(Translator):
    framework = "jax"

    def __init__(self, program: CapturedProgram, kernel_name: str = "forward"):
        super().__init__(program, kernel_name)
        self._group_start = 0

    def translate_nodes(self, nodes: Sequence[AtenNode]) -> None:
        """Translate `nodes` in order; statements emitted by the current node so far are recorded
        first, so that a body's runs follow its control-flow node's own statements."""
        self.flush_group()
        outer, outer_loc = self.node, self.loc
        for node in nodes:
            self.node = node
            self.loc = node.loc or outer_loc or self.loc or f"{self.program.source}:1"
            fn = lookup(node.op)
            if fn is None:
                raise TranslateError(f"{self.loc}: no loop-IR template for jax primitive "
                                     f"'{node.op.removeprefix('jax.')}' ({describe(node)})",
                                     error_class="unsupported op")
            self._group_start = self.n_statements
            result = fn(self, node)
            self.flush_group()
            self.bind_results(node, result)
        self.node, self.loc = outer, outer_loc
        self._group_start = self.n_statements

    def flush_group(self) -> None:
        """Record the statements emitted since the last record as one run of the current node."""
        if self.node is not None and self.n_statements > self._group_start:
            rec = {"op": self.node.op, "loc": self.loc, "first": self._group_start,
                   "count": self.n_statements - self._group_start, "module": self.node.module_path}
            if self.node.phase is not None:  # a training step (frontends/jax/phases.py)
                rec["phase"] = self.node.phase
            self.source_ops.append(rec)
        self._group_start = self.n_statements

    def operand(self, a: Operand) -> Val | bool | int | float:
        """A node argument: the value of a tensor, or a literal as it is."""
        return self.val(a) if isinstance(a, TensorRef) else a


def describe(node: AtenNode) -> str:
    parts = [f"%{a.name}" if isinstance(a, TensorRef) else repr(a) for a in node.args]
    outs = ", ".join(f"{m.dtype}{list(m.shape)}" for m in node.outputs if m is not None)
    text = f"{', '.join(parts)} -> {outs}"
    return text if len(text) < 120 else text[:117] + "..."
