"""`loop-stats`: per-statement iteration counts (exact, from islpy) as a table on stderr."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from solar_compiler.loopir.ast import statements
from solar_compiler.loopir.domain import iteration_count
from solar_compiler.text.printer import print_assign
from solar_compiler.transforms.kernels import module_kernels


@dataclass(frozen=True)
class LoopStatsPass(ModulePass):
    """Analysis only: the IR is unchanged (loop kernels, or einsum graphs lowered to their
    statements). One line per statement:
    `// loop-stats: <kernel> S<n> <count> <statement>`, then the kernel total."""

    name = "loop-stats"
    preserves_analyses: ClassVar[bool] = True

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for k in module_kernels(op):
            total = 0
            for s in statements(k):
                n = iteration_count(s)
                total += n
                print(f"// loop-stats: {k.name} S{s.index} {n} {print_assign(k, s.stmt)}", file=sys.stderr)
            print(f"// loop-stats: {k.name} total {total}", file=sys.stderr)
