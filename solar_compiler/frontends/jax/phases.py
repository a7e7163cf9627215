"""Training-step phases of a JAX program, read from the transforms on each equation's name stack.

A JAX training step is an ordinary function (`jax.value_and_grad` of a loss, then an update), so
there is no `--step train` capture: the jaxpr already holds the backward. JAX records the transforms
an equation was traced under in its name stack: the linearised forward of `grad` carries `jvp(...)`,
its transpose (the backward) `transpose(jvp(...))`. That is enough to tag the report's phases the
way the torch training capture does (docs/training.md): `transpose` -> backward, `jvp` -> forward,
and in a program that has a backward, an untransformed equation after the first backward one is the
optimizer's update (before it, the forward's own preprocessing). A program without a transposed
equation (a forward, or forward-mode `jax.jvp` alone) keeps no phases: its report is unchanged.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

from solar_compiler.frontends.captured_program import AtenNode


def phase_of(transforms: Iterable[str]) -> str | None:
    """`backward` under a transpose, `forward` under a jvp only, else None (set by `tag_phases`).
    `transforms`: the names of the name stack's transforms (capture.py reads them; no jax here)."""
    names = set(transforms)
    return "backward" if "transpose" in names else "forward" if "jvp" in names else None


def _walk(nodes: Sequence[AtenNode]) -> Iterator[AtenNode]:
    """`nodes` and, after each control-flow node, the nodes of its bodies (scan, while, cond)."""
    for node in nodes:
        yield node
        for body in (node.kwargs.get("bodies") or {}).values():
            for sub in body if isinstance(body, list) else [body]:
                yield from _walk(sub.nodes)


def tag_phases(nodes: Sequence[AtenNode]) -> None:
    """Complete the phases `phase_of` set: untransformed nodes are forward before the first backward
    node and optimizer after it; a body node without a phase takes its loop's. Without any backward
    node every phase is cleared (a forward program reports no phases)."""
    if not any(n.phase == "backward" for n in _walk(nodes)):
        for n in _walk(nodes):
            n.phase = None
        return
    seen_backward = False
    for node in nodes:
        seen_backward = seen_backward or node.phase == "backward"
        if node.phase is None:
            node.phase = "optimizer" if seen_backward else "forward"
        for sub in _walk([node]):
            if sub.phase is None:
                sub.phase = node.phase
