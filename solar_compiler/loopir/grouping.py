"""Statements grouped into einsum nodes, and the scopes (loops and guards) around each statement.

A node is one statement, or an identity init folded into the reduction right after it:
`T[idx] = c` immediately followed, in the same loop nest (its loops are the outer loops of the
next statement and its guards enclose it), by a reduction into `T[idx]` with identical affine
indices (never an indirect write, a scatter), where `c` is the identity of that reduction (0 for
+=, 1 for *=, -inf / the integer minimum for max=, inf / the integer maximum for min=).
"""

from __future__ import annotations

from dataclasses import dataclass

from solar_compiler.loopir.ast import (
    Assign,
    Const,
    For,
    If,
    Kernel,
    Node,
    StmtContext,
    statements,
)
from solar_compiler.loopir.rules import reduction_identity


@dataclass(frozen=True)
class NodeGroup:
    """The statements of one node: `(stmt,)`, or `(init, reduction)` when the init is folded.
    `label` is the node's name where the IR gives one (an einsum node's symbol)."""

    stmts: tuple[StmtContext, ...]
    label: str | None = None

    @property
    def main(self) -> StmtContext:
        return self.stmts[-1]

    @property
    def init(self) -> StmtContext | None:
        return self.stmts[0] if len(self.stmts) == 2 else None

    @property
    def name(self) -> str:
        return self.label or f"S{self.main.index}"


def folds(kernel: Kernel, init: StmtContext, red: StmtContext) -> bool:
    """Whether `init` is an identity store that `red` (the next statement) can absorb."""
    a, b = init.stmt, red.stmt
    if a.kind != "=" or not isinstance(a.value, Const) or b.kind == "=" or a.target != b.target:
        return False
    if b.indirect:  # a scatter's element is not known to be the init's (repeated indices)
        return False
    if a.indices != b.indices or red.index != init.index + 1:
        return False
    n, g = len(init.loops), len(init.guards)
    if len(red.loops) < n or any(x is not y for x, y in zip(init.loops, red.loops[:n], strict=True)):
        return False
    if red.guards[:g] != init.guards:
        return False
    return a.value.value == reduction_identity(b.kind, kernel.tensor(b.target).dtype)


def group_statements(kernel: Kernel) -> list[NodeGroup]:
    """Statements of `kernel` (typed) grouped into nodes, in program order."""
    stmts = statements(kernel)
    out: list[NodeGroup] = []
    i = 0
    while i < len(stmts):
        if i + 1 < len(stmts) and folds(kernel, stmts[i], stmts[i + 1]):
            out.append(NodeGroup((stmts[i], stmts[i + 1])))
            i += 2
        else:
            out.append(NodeGroup((stmts[i],)))
            i += 1
    return out


Scope = For | If


def scope_paths(kernel: Kernel) -> list[tuple[Scope, ...]]:
    """The loops and `if` blocks around every statement, outermost first, in program order (the
    order of `statements`): the nest structure that `statements` flattens."""
    out: list[tuple[Scope, ...]] = []

    def go(nodes: list[Node], path: tuple[Scope, ...]) -> None:
        for n in nodes:
            if isinstance(n, Assign):
                out.append(path)
            else:
                go(n.body, path + (n,))

    go(kernel.body, ())
    return out
