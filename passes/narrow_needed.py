"""`narrow-needed`: restrict every statement of every `loop.kernel` to the points whose result can
reach an output (`solar_compiler.narrowing`): masked scores of causal attention, the upper triangle
of `tril(A @ B)`, the unused rows of a sliced result, taps on a zero padding. Run it before
`lift-einsum`, so that costs and bounds count needed work only.

The as-written counts stay available for the report: the module attribute `solar.as_written` is a
JSON object `{kernel: {"flops", "flops_matrix", "flops_vector", "flops_transcendental",
"compulsory_bytes", "bytes_unfused", "iterations", "loop"}}` (`loop`: the kernel as written, in
the text form). A second run keeps the first as-written record.

Narrowing may split a statement into guarded pieces and constant stores, or remove it: the
`solar.source_ops` record (which statements each source op became, the kernels of the unfused
bound) is rewritten to the narrowed statements (`NarrowResult.origin`), so the grouping survives.
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
        from solar_compiler.unfused import SOURCE_OPS_ATTR, module_source_ops, remap_source_ops

        old = op.attributes.get(ATTR)
        record: dict[str, dict] = json.loads(old.data) if isinstance(old, StringAttr) else {}
        kops = [o for o in op.walk() if isinstance(o, KernelOp)]
        source_ops = module_source_ops(op)
        if source_ops is not None and len(kops) != 1:
            raise SolarError(f"module attribute {SOURCE_OPS_ATTR}: describes one kernel, the module has "
                             f"{len(kops)}")
        for kop in kops:
            k = op_to_kernel(kop)
            record.setdefault(k.name, as_written(k, source_ops))
            res = narrow(k)
            Rewriter.replace_op(kop, kernel_to_op(res.kernel))
            if source_ops is not None:
                remapped = remap_source_ops(source_ops, res.origin)
                op.attributes[SOURCE_OPS_ATTR] = StringAttr(json.dumps(remapped))
        op.attributes[ATTR] = StringAttr(json.dumps(record, sort_keys=True))


def as_written(k: Kernel, source_ops: list[dict] | None = None) -> dict[str, object]:
    """The costs of a kernel before narrowing (what the report shows beside the needed work);
    `bytes_unfused` is the traffic of the unfused bound's kernels (per source op when recorded)."""
    from solar_compiler.costs import kernel_costs
    from solar_compiler.text.printer import print_kernel
    from solar_compiler.unfused import node_kernels, source_kernels

    g = kernel_costs(k)
    groups = node_kernels(g) if source_ops is None else source_kernels(k, g, source_ops)
    return {
        "flops": g.flops_matrix + g.flops_vector,
        "flops_matrix": g.flops_matrix,
        "flops_vector": g.flops_vector,
        "flops_transcendental": sum(o.flops_transcendental for o in g.ops),
        "compulsory_bytes": g.compulsory_bytes,
        "bytes_unfused": sum(x.bytes for x in groups),
        "iterations": sum(o.iterations for o in g.ops),
        "loop": print_kernel(k),
    }
