"""`roofline`: speed-of-light bounds of the module's program on one or more hardware targets.

Analysis only: the IR is unchanged except for the module attribute `solar.report` (a JSON string,
schema `solar-report/1`, see `solar_compiler.report`), which the `report` and `json` targets print.
Costs come from `solar_compiler.costs`, whether or not `lift-einsum` ran, so they are those of the
kernels in the module: the needed work when `narrow-needed` ran first; its as-written record
(`solar.as_written`) is reported beside them. `cache-size` (bytes, e.g. 64MB or 0.5MiB) overrides
the outermost (DRAM) level's capacity of cache-aware bounds, for what-if studies. The unfused
bound is priced per source op when the module records them (`solar.source_ops`, see
`solar_compiler.unfused`), else per einsum node.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.passes import ModulePass

from solar_compiler.bounds import FIDELITIES, parse_latency, parse_size
from solar_compiler.costs import GraphCosts
from solar_compiler.errors import SolarError
from solar_compiler.hw import PRECISIONS, parse_hw_list
from solar_compiler.unfused import UnfusedKernel


def module_graph_costs(module: ModuleOp) -> list[GraphCosts]:
    """Per-kernel costs (through the einsum graph where `lift-einsum` made one)."""
    from solar_compiler.costs import module_costs

    graphs = module_costs(module)
    if not graphs:
        raise SolarError(f"{_source(module)}: roofline: no kernel in the module (is the input translated?)")
    return graphs


def module_unfused_kernels(module: ModuleOp, graphs: list[GraphCosts]) -> list[list[UnfusedKernel]] | None:
    """The kernels of the unfused bound per graph from the module's source-op record, or None (one
    per node) when it has none."""
    from solar_compiler.loopir.convert import module_kernels
    from solar_compiler.unfused import SOURCE_OPS_ATTR, module_source_ops, source_kernels

    ops = module_source_ops(module)
    if ops is None:
        return None
    kernels = module_kernels(module)
    if len(kernels) != 1 or len(graphs) != 1:
        raise SolarError(f"{_source(module)}: module attribute {SOURCE_OPS_ATTR} describes one kernel, "
                         f"the module has {len(kernels)}")
    return [source_kernels(kernels[0], graphs[0], ops)]


def _source(module: ModuleOp) -> str:
    attr = module.attributes.get("solar.source")
    return attr.data if isinstance(attr, StringAttr) else "<module>"


def parse_fidelity(text: str) -> tuple[str, ...]:
    if text == "all":
        return FIDELITIES
    if text not in FIDELITIES:
        raise SolarError(f"roofline: unknown fidelity {text!r}; expected unfused, fused, cache-aware or all")
    return (text,)


def module_as_written(module: ModuleOp) -> dict[str, dict] | None:
    """The `narrow-needed` record of as-written costs per kernel, or None when narrowing did not run."""
    from solar_compiler.passes.narrow_needed import ATTR

    attr = module.attributes.get(ATTR)
    if attr is None:
        return None
    if not isinstance(attr, StringAttr):
        raise SolarError(f"module attribute {ATTR}: expected a JSON string")
    try:
        record = json.loads(attr.data)
    except json.JSONDecodeError as e:
        raise SolarError(f"module attribute {ATTR}: invalid JSON ({e.msg})") from None
    if not isinstance(record, dict) or not all(isinstance(v, dict) for v in record.values()):
        raise SolarError(f"module attribute {ATTR}: expected an object of per-kernel records")
    return record


@dataclass(frozen=True)
class RooflinePass(ModulePass):
    name = "roofline"

    fidelity: str = "all"
    hw: str | tuple[str, ...] = "H100_SXM"   # `hw=A,B` arrives as a tuple, `hw="A,B"` as a string
    precision: str = "auto"
    inverse: str | None = None
    plot: str | None = None
    cache_size: str | int | None = None

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        from solar_compiler.report import REPORT_ATTR, build_report, module_validation

        fidelity = parse_fidelity(self.fidelity)
        if self.precision not in PRECISIONS:
            raise SolarError(f"roofline: unknown precision policy {self.precision!r}; "
                             f"expected one of {', '.join(PRECISIONS)}")
        cache_size = parse_size(self.cache_size) if self.cache_size is not None else None
        if cache_size is not None and "cache-aware" not in fidelity:
            raise SolarError("roofline: --cache-size sets the on-chip capacity of cache-aware bounds; "
                             "ask for them with fidelity cache-aware or all")
        latency = parse_latency(self.inverse) if self.inverse is not None else None
        targets = parse_hw_list(self.hw if isinstance(self.hw, str) else ",".join(self.hw))
        graphs = module_graph_costs(op)
        unfused = module_unfused_kernels(op, graphs)
        kernels = None
        if "cache-aware" in fidelity:
            from solar_compiler.loopir.convert import module_kernels

            kernels = module_kernels(op)
        report = build_report(graphs, targets, source=_source(op), validation=module_validation(op),
                              precision=self.precision, fidelity=fidelity, latency_s=latency,
                              kernels=kernels, cache_size=cache_size, as_written=module_as_written(op),
                              unfused=unfused)
        op.attributes[REPORT_ATTR] = StringAttr(json.dumps(report))
        if self.plot is not None:
            from solar_compiler.plot import write_plot

            write_plot(report, self.plot)
