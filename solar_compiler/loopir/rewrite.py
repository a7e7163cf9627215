"""Kernel rewrites that do not depend on where the kernel came from."""

from __future__ import annotations

from collections.abc import Collection

from solar_compiler.loopir.ast import Assign, For, If, Kernel, Node, TensorDecl


def writes_as_inputs(kernel: Kernel, tensors: Collection[str]) -> Kernel:
    """`kernel` with every statement writing one of `tensors` removed and those tensors made inputs
    (loops and guards left empty are removed too). Validation uses it to feed values the kernel
    computes differently from the source program, such as random draws."""
    if not tensors:
        return kernel

    def strip(nodes: list[Node]) -> list[Node]:
        out: list[Node] = []
        for n in nodes:
            if isinstance(n, Assign):
                if n.target not in tensors:
                    out.append(n)
                continue
            body = strip(n.body)
            if body:
                out.append(For(n.iv, n.lb, n.ub, n.step, n.sequential, body) if isinstance(n, For)
                           else If(n.conds, body))
        return out

    decls = [TensorDecl(t.name, t.shape, t.dtype, "input") if t.name in tensors else t
             for t in kernel.tensors]
    return Kernel(kernel.name, decls, strip(kernel.body))
