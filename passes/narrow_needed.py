"""`narrow-needed`: restrict every statement of every `loop.kernel` to the points whose result can
reach an output (`solar_compiler.narrowing`): masked scores of causal attention, the upper triangle
of `tril(A @ B)`, the unused rows of a sliced result, taps on a zero padding. Run it before
`lift-einsum`, so that costs and bounds count needed work only.

The as-written counts stay available for the report: the module attribute `solar.as_written` is a
JSON object `{kernel: {"flops", "flops_matrix", "flops_vector", "flops_transcendental",
"compulsory_bytes", "bytes_unfused", "iterations", "loop"}}` (`loop`: the kernel as written, in
the text form). A second run keeps the first as-written record.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter

from solar_compiler.dialects.loop import KernelOp
from solar_compiler.errors import SolarError
from solar_compiler.loopir.ast import Kernel
from solar_compiler.loopir.convert import kernel_to_op, op_to_kernel

ATTR = "solar.as_written"


@dataclass(frozen=True)
class NarrowNeededPass(ModulePass):
    name = "narrow-needed"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        from solar_compiler.dialects.einsum import GraphOp
        from solar_compiler.narrowing import narrow

        if any(isinstance(o, GraphOp) for o in op.walk()):
            raise SolarError("narrow-needed: the module already has an einsum graph; run narrow-needed "
                             "before lift-einsum (e.g. -p narrow-needed,lift-einsum)")
        old = op.attributes.get(ATTR)
        record: dict[str, dict] = json.loads(old.data) if isinstance(old, StringAttr) else {}
        for kop in [o for o in op.walk() if isinstance(o, KernelOp)]:
            k = op_to_kernel(kop)
            record.setdefault(k.name, as_written(k))
            Rewriter.replace_op(kop, kernel_to_op(narrow(k).kernel))
        op.attributes[ATTR] = StringAttr(json.dumps(record, sort_keys=True))


def as_written(k: Kernel) -> dict[str, object]:
    """The costs of a kernel before narrowing (what the report shows beside the needed work)."""
    from solar_compiler.costs import kernel_costs
    from solar_compiler.text.printer import print_kernel

    g = kernel_costs(k)
    return {
        "flops": g.flops_matrix + g.flops_vector,
        "flops_matrix": g.flops_matrix,
        "flops_vector": g.flops_vector,
        "flops_transcendental": sum(o.flops_transcendental for o in g.ops),
        "compulsory_bytes": g.compulsory_bytes,
        "bytes_unfused": g.bytes_unfused,
        "iterations": sum(o.iterations for o in g.ops),
        "loop": print_kernel(k),
    }
