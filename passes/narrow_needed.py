"""`narrow-needed`: restrict every statement of every `loop.kernel` to the points whose result can
reach an output (the analysis: `transforms/needed_points.py`; the rewrite, the `NarrowNeeded` pattern:
`transforms/narrow.py`): masked scores of causal attention, the upper triangle
of `tril(A @ B)`, the unused rows of a sliced result, taps on a zero padding. Run it before
`lift-einsum`, so that costs and bounds count needed work only (an einsum graph is lowered to its
kernel, narrowed, and lifted again).

The kernels as written are kept in `solar.as_written` (`dialects/solar.py`), which the roofline
prices beside the needed work; a second run keeps the first snapshot. A kernel that narrowing does
not change stays where it is and is not copied (the snapshot, empty then, still says the pass ran).
Narrowing may split a statement into guarded pieces and constant stores, or remove it; every piece
keeps its statement's origin, so the kernels of the unfused bound (one per source op) survive it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from solar_compiler.analysis.graphs import program_ops
from solar_compiler.analysis.manager import invalidate_analyses
from solar_compiler.dialects.solar import AsWrittenOp
from solar_compiler.loopir.ast import typecheck
from solar_compiler.records import program_info
from solar_compiler.transforms.kernels import module_kernels, seed_kernels
from solar_compiler.transforms.narrow import narrow_module


@dataclass(frozen=True)
class NarrowNeededPass(ModulePass):
    name = "narrow-needed"
    verifies_output: ClassVar[bool] = True

    seconds: float = 15.0  # CPU seconds narrowing may take per kernel (0: no limit); then a floor
    statement_seconds: float = 0.005  # ... or this much per statement when more (about 2x the cost)

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        top = list(op.body.block.ops)
        progs = program_ops(op)
        kernels = list(module_kernels(op))  # replaced entry by entry below: a copy
        snapshot = next((o for o in top if isinstance(o, AsWrittenOp)), None)
        if snapshot is None and progs:
            snapshot = AsWrittenOp()
            op.body.block.insert_op_before(snapshot, progs[0])
        keep = snapshot is not None and not snapshot.body.block.ops  # a second run keeps the first
        results = narrow_module(op, {k.name: k for k in kernels},
                                seconds=self.seconds if self.seconds > 0 else None,
                                snapshot=snapshot if keep else None, per_statement=self.statement_seconds)
        gave_up: list[str] = []
        for i, k in enumerate(kernels):  # each op replaced in place: the same order
            res = results[k.name]
            if res.gave_up:
                gave_up.append(res.gave_up)
            if res.changed:
                kernels[i] = typecheck(res.kernel)
        if gave_up:  # said in the report's notes: these counts include work no output may need
            info = program_info(op)
            info.notes.extend(gave_up)
            info.store(op)
        invalidate_analyses(op)
        seed_kernels(op, kernels)  # the kernels the ops were just built from
