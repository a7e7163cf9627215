"""`roofline`: speed-of-light bounds of the module's programs on one or more hardware targets.

Analysis only: the IR is unchanged. The report (schema `solar-report/1`, built by
`analysis/summary.py`) is a result, not IR: the pass registers it with the analysis manager
(`summary.register_report`) and the `report` and `json` targets, `--plot` and `--measured` ask for it;
a module printed as MLIR carries none of it (`annotate-costs` is the pass that writes figures into
the IR, per node).
Costs are those of the module's programs as the analyses read them (`analysis/graphs.py`: the einsum
graphs after `lift-einsum`, else the kernels): the needed work when `narrow-needed` ran first; the
program as written (`solar.as_written`) is priced beside it. `cache-size` (bytes, e.g. 64MB or
0.5MiB) overrides the outermost (DRAM) level's capacity of cache-aware bounds, for what-if studies.
`cache-state` (`cold`, the default, or `warm`) is the timing contract: whether a timed call may find
its working set in on-chip storage that persists between calls (docs/bounds.md). `indirect`
(`traced`, the default, or `min`) counts gathers and scatters by what the traced sample touched
(value-dependent, said in the report) or by the fewest elements any index values touch.
The unfused bound is priced per source op where the statements carry origins, else per einsum node.
`measured` (a time such as 310us, or a JSON file of per-module times) adds "% of SOL" and headroom
per fidelity (`analysis/measured.py`).
The contraction trees are listed with their best orders (`reorder-chains` applies them when it ran).
`algorithms` is the model of computation (docs/bounds.md, section 0): `default` prices the program
after the catalogue of rewrites (`transforms/catalogue.py`: on a copy, the IR is unchanged) and says
which it used (`rewrites`); `classical` prices the products as written (SOLAR's model). The report
carries both figures: `classical` holds the bounds and totals as written. The unfused fidelity is
eager execution under both: one kernel per source op as written, taking only the rewrites inside
one source op (docs/bounds.md, section 0.0).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from solar_compiler.analysis.bounds import CACHE_STATES, FIDELITIES
from solar_compiler.analysis.chain_order import chains_section
from solar_compiler.analysis.costs import INDIRECT, GraphCosts, distinct_costs, module_costs
from solar_compiler.analysis.graphs import module_graphs
from solar_compiler.analysis.measured import parse_measured
from solar_compiler.analysis.summary import (
    as_written_record,
    build_report,
    module_validation,
    register_report,
    with_eager_unfused,
)
from solar_compiler.analysis.unfused import UnfusedKernel, has_origins, unfused_kernels
from solar_compiler.dialects.einsum import GraphOp
from solar_compiler.errors import PassError
from solar_compiler.hw import PRECISIONS, parse_hw_list
from solar_compiler.options import parse_latency, parse_size
from solar_compiler.records import program_info
from solar_compiler.transforms.catalogue import (
    Rewrite,
    catalogue_module,
    catalogue_plans,
    check_algorithms,
    deduplicated,
)
from solar_compiler.transforms.gather_hoist import HOISTED
from solar_compiler.transforms.indicator_gather import GATHERED
from solar_compiler.transforms.split_parts import SPLIT


def parse_fidelity(text: str) -> tuple[str, ...]:
    if text == "all":
        return FIDELITIES
    if text not in FIDELITIES:
        raise PassError(f"roofline: unknown fidelity {text!r}; expected unfused, fused, cache-aware or all")
    return (text,)


@dataclass(frozen=True)
class RooflinePass(ModulePass):
    name = "roofline"
    preserves_analyses: ClassVar[bool] = True

    fidelity: str = "all"
    hw: str | tuple[str, ...] = "H100_SXM"   # `hw=A,B` arrives as a tuple, `hw="A,B"` as a string
    precision: str = "auto"
    precision_reason: str | None = None  # why the policy (a problem's tolerance): the report says it
    inverse: str | None = None
    cache_size: str | int | None = None
    cache_state: str = "cold"
    indirect: str = "traced"
    measured: str | None = None   # a time (310us) or a JSON file of times: "% of SOL" in the report
    algorithms: str = "default"   # the model of computation: default (the catalogue) or classical

    def check_options(self) -> tuple:
        """Every option parsed and checked (targets loaded), without the module: the driver calls it
        before any work starts, so a typo in --hw fails before a translation, not after it."""
        fidelity = parse_fidelity(self.fidelity)
        if self.precision not in PRECISIONS:
            raise PassError(f"roofline: unknown precision policy {self.precision!r}; "
                            f"expected one of {', '.join(PRECISIONS)}")
        cache_size = parse_size(self.cache_size) if self.cache_size is not None else None
        if cache_size is not None and "cache-aware" not in fidelity:
            raise PassError("roofline: --cache-size sets the on-chip capacity of cache-aware bounds; "
                            "ask for them with fidelity cache-aware or all")
        if self.indirect not in INDIRECT:
            raise PassError(f"roofline: unknown indirect counting {self.indirect!r}; expected traced or min")
        if self.cache_state not in CACHE_STATES:
            raise PassError(f"roofline: unknown cache state {self.cache_state!r}; expected cold or warm")
        latency = parse_latency(self.inverse) if self.inverse is not None else None
        measured = parse_measured(self.measured) if self.measured is not None else None
        targets = parse_hw_list(self.hw if isinstance(self.hw, str) else ",".join(self.hw))
        algorithms = check_algorithms(self.algorithms)
        return fidelity, cache_size, latency, measured, targets, algorithms

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        fidelity, cache_size, latency, measured, targets, algorithms = self.check_options()
        source = program_info(op).source
        if not module_graphs(op):
            raise PassError(f"{source}: roofline: no kernel in the module (is the input translated?)")
        args = dict(targets=targets, fidelity=fidelity, latency=latency, cache_size=cache_size,
                    measured=measured, chains=chains_section(op),
                    as_written=as_written_record(op, self.indirect))  # both models: the module's own
        programs = module_graphs(op)
        unfused = [unfused_kernels(p, g, self.indirect)
                   for p, g in zip(programs, module_costs(op, self.indirect), strict=True)]
        classical = self._report(op, op, False, unfused, **args)
        priced, rewrites = catalogue_module(op) if algorithms == "default" else (op, [])
        if algorithms == "default":
            rewrites += deduplicated(module_costs(priced, self.indirect, True))
        # sums a matrix unit may take (`costs._sums_on_matrix`) are priced by the default model only
        sums = algorithms == "default" and any(o.flops_sum for g in module_costs(priced, self.indirect, True)
                                                for o in g.ops)
        if rewrites or sums:
            # the unfused kernels' traffic is the same in both models when no reassociation applies
            pairs = zip(module_graphs(priced), module_costs(priced, self.indirect, True), strict=True)
            priced_unfused = unfused if priced is op else \
                [unfused_kernels(p, g, self.indirect) for p, g in pairs]
            report = self._report(op, priced, algorithms == "default", priced_unfused, **args)
            if rewrites:  # sums alone split inside each node, so inside each eager kernel: nothing to redo
                report = self._eager_unfused(op, priced, rewrites, report, args, priced_unfused)
        else:
            report = classical
        report["algorithms"] = algorithms
        report["precision_reason"] = self.precision_reason
        report["rewrites"] = [r.row() for r in rewrites]
        report["classical"] = {"bounds": classical["bounds"], "totals": classical["totals"]}
        register_report(op, report)

    def _eager_unfused(self, op: ModuleOp, priced: ModuleOp, rewrites: list[Rewrite], report: dict,
                       args: dict, priced_unfused: list[list[UnfusedKernel]]) -> dict:
        """The default model's report with the unfused fidelity of eager execution: one kernel per
        source op as written, each free to compute its own output by any entry of the catalogue
        (an order of its own products, its repeated or symmetric products once, a duplicate inside
        it), but no rewrite across kernels (a reassociation that merges source ops, the CSE of
        another op's work): eager runs every op it is given (docs/bounds.md, section 0.0).
        `priced_unfused`: the unfused kernels of `priced`'s programs (a program with origins has
        kernels that do not depend on the costs they are read with: reused when eager is priced)."""
        inside = catalogue_plans(op, within_source_ops=True)
        gathered = any(r.kind in (GATHERED, HOISTED, SPLIT) for r in rewrites)  # chains planned after them
        if not gathered and len(inside) == sum(r.kind == "reassociated" for r in rewrites):
            eager = priced  # every reassociation is inside one source op: the same program, counted
        else:
            eager, _ = catalogue_module(op, within_source_ops=True)
        programs = module_graphs(eager)
        graphs = module_costs(eager, self.indirect)
        unfused = [u if eager is priced and has_origins(p) else unfused_kernels(p, g, self.indirect)
                   for p, g, u in zip(programs, graphs, priced_unfused, strict=True)]
        kernel_of = [[next(i for i, k in enumerate(u) if n in k.ops) for n in range(len(g.ops))]
                     for g, u in zip(graphs, unfused, strict=True)]
        graphs = [distinct_costs(p, g, ko) for p, g, ko in zip(programs, graphs, kernel_of, strict=True)]
        if eager is priced and graphs == module_costs(priced, self.indirect, True):
            return report  # no rewrite crosses a kernel: the report's unfused fidelity is eager's
        unfused_only = {**args, "fidelity": ("unfused", "fused"), "measured": None}
        return with_eager_unfused(report, self._build(op, programs, graphs, unfused, **unfused_only),
                                  args["measured"])

    def _report(self, op: ModuleOp, priced: ModuleOp, distinct: bool,
                unfused: list[list[UnfusedKernel]] | None, **args: Any) -> dict:
        """The report of `priced` (the module, or its copy after the catalogue's rewrites); the
        records (source, validation, narrowing, aliases) are the module's own. `distinct`: the
        default model's costs (repeated, symmetric and duplicated products once); `unfused`: the
        kernels of the unfused bound when known (None: from `priced`'s programs and costs)."""
        programs = module_graphs(priced)
        graphs = module_costs(priced, self.indirect, distinct)
        if unfused is None:
            unfused = [unfused_kernels(p, g, self.indirect) for p, g in zip(programs, graphs, strict=True)]
        return self._build(op, programs, graphs, unfused, **args)

    def _build(self, op: ModuleOp, programs: list[GraphOp], graphs: list[GraphCosts],  # noqa: ANN001
               unfused: list[list[UnfusedKernel]], *, targets, fidelity, latency, cache_size, measured,
               chains, as_written) -> dict:
        return build_report(graphs, targets, source=program_info(op).source, validation=module_validation(op),
                            precision=self.precision, fidelity=fidelity, latency_s=latency,
                            kernels=programs if "cache-aware" in fidelity else None,
                            cache_size=cache_size, as_written=as_written,
                            unfused=unfused, aliases=program_info(op).aliases, cache_state=self.cache_state,
                            indirect=self.indirect, measured=measured, chains=chains)
