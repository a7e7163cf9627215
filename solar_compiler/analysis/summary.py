"""The roofline report as data (schema `solar-report/1`): the costs and bounds of a module's programs on
every target, assembled for the output targets (`solar_compiler/report.py` renders it; the driver
prints it as text or JSON). Nothing here prices anything: bounds come from `bounds.py`, costs from
`costs.py`, the kernels of the unfused bound from `unfused.py`.

Units everywhere: FLOPs, bytes, seconds. Several kernels in one module are reported as one program
(ops named `<kernel>.<op>`, bounds as in `bounds.py`); `kernels` lists their names. Unfused and
fused bounds are always computed (cheap) and stored under their fixed JSON keys; the cache-aware ones
(polyhedral analysis) only when asked for, else `null`. `fidelity` lists the fidelities asked for,
which the text report shows.

Vector FLOPs (`flops_vector`) are the fewest a legal implementation needs (`vector_work.py`:
loop-invariant terms once, common subexpressions once, products reassociated);
`flops_vector_literal` beside them counts every scalar op at every point as the statements write it.
`flops_sum` (per op and in `totals`) is the part of `flops_vector` that is a sum's additions, which a
matrix unit may do instead (one MAC with a ones operand each, priced at `hw.<target>.sum[sum_dtype]`);
`bounds.<target>.sum_adds_on_matrix` is how many of them the fused terms run there (`bounds.balance`),
and `fused_terms_s` are the terms after that split.
Counts are those of the programs as costed: the needed work when `narrow-needed` ran. `narrowed` says
whether it did; `totals.*_as_written` are the counts before narrowing (equal to the others when it
did not run). `cache_size` is the DRAM-level capacity override (bytes) or `null`. `cache_state`
is the timing contract the bounds assume: `cold` (caches flushed before each timed call) or `warm`
(docs/bounds.md, "What a bound assumes"). Every byte count is an integer: a real-valued traffic
bound is rounded up (the true traffic is a whole number at least that large). `indirect` says how
gathers and scatters are counted: `traced` (the distinct elements the frontend's traced sample
touched, where it recorded them) or `min` (the fewest any index values touch); `value_dependent`
lists the ops with such accesses, their tensors, and those counted from the traced sample.

`aliases` lists the program outputs that alias an input, a weight or another output (a view, or
the same tensor returned twice): eager frameworks run no kernel for them, so no statement prices
them. `ops` are the einsum nodes, each with its own bound; `kernels_unfused` are the kernels the unfused
bound sums (`unfused.py`: one per source op when the statements carry origins, else one per node),
each with its statements, external traffic and bound; `totals.bytes_unfused` is their traffic. Each
op and kernel row has `module`, the `nn.Module` path its source op ran in (the statements'
`Origin.module`; null at the top level or without origins); `modules` are the module tree's rows
(`modules.py`: path, parent, depth, kernel indices, FLOPs, bytes, per-target bound, share of the
unfused bound and bottleneck, `same_as` for identical indexed blocks). `measured` is null, or the
measured times against the bounds (`measured.py`: per target and fidelity `bound_s`,
`percent_of_sol`, `headroom_x`, `headroom_s`, `below_bound`; per measured module the same against its
part of the unfused bound). `hw.<target>.memory` lists the target's memory levels as its figures give
them (`describe` in words), and each `matrix`/`vector` figure has its `label` ("BF16 tensor"). The
validation record is the frontend's (`ProgramInfo.validation`), plus `value_dependent`, the
frontend's list of value-dependent ops, and `notes`.

`chains` lists the contraction trees (`chain_order.ChainPlan.row`: figures as written and in the best
order) and `reorder_chains` says whether the costs are those of the best orders (the pass ran);
`validation.reorder_chains` is the pass's execution check of the rewritten graph.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

from xdsl.dialects.builtin import ModuleOp

from solar_compiler.analysis.bounds import GraphBounds, graph_bounds, inverse_roofline
from solar_compiler.analysis.costs import GraphCosts, OpCost, program_costs
from solar_compiler.analysis.graphs import graph_of
from solar_compiler.analysis.manager import register_result, registered_result
from solar_compiler.analysis.measured import Measured, measured_record
from solar_compiler.analysis.modules import module_rows
from solar_compiler.analysis.unfused import UnfusedKernel, node_kernels, unfused_kernels
from solar_compiler.dialects.einsum import GraphOp
from solar_compiler.dialects.solar import AsWrittenOp
from solar_compiler.errors import SolarError
from solar_compiler.hw import HwTarget, Priced
from solar_compiler.records import Alias, program_info

SCHEMA = "solar-report/1"
# the key the `roofline` pass registers its report under with the analysis manager (a result, not IR)
REPORT_RESULT = "roofline.report"


def register_report(module: ModuleOp, report: dict[str, Any]) -> None:
    """Keep `report` as the module's roofline report (`manager.register_result`) until the IR changes."""
    register_result(module, REPORT_RESULT, report)


def module_report(module: ModuleOp) -> dict[str, Any] | None:
    """The roofline report a `roofline` pass registered for the module as it is now, else None."""
    return registered_result(module, REPORT_RESULT)


def module_validation(module: ModuleOp) -> dict[str, Any]:
    """The frontend's validation record, or an explicit "not validated" one."""
    info = program_info(module)
    if info.validation is None:
        return {"validated": False, "frontend": info.frontend or "unknown", "max_rel_err": None, "samples": 0}
    record = info.validation.to_json()  # its four keys checked when the record was made
    if info.value_dependent:
        record = {**record, "value_dependent": fold_repeats(info.value_dependent)}
    if info.notes:
        record = {**record, "notes": fold_repeats(info.notes)}
    return record


def fold_repeats(items: Iterable[str]) -> list[str]:
    """Each distinct item once, in first-seen order, 'item (xN)' when it repeats: a note raised once
    per loop iteration of the source (4,096 times for a `.item()` loop) is one entry, in the JSON as in
    the text report."""
    counts: dict[str, int] = {}
    for s in items:
        counts[s] = counts.get(s, 0) + 1
    return [s if n == 1 else f"{s} (x{n})" for s, n in counts.items()]


def as_written_record(module: ModuleOp, indirect: str = "traced") -> dict[str, dict] | None:
    """Costs of the programs as written (`solar.as_written`, kept by `narrow-needed`), per kernel;
    None when no transform changed the work."""
    snaps = [o for o in module.body.block.ops if isinstance(o, AsWrittenOp)]
    if not snaps:
        return None  # not narrowed; a kernel narrowing left unchanged is absent from the record
    out: dict[str, dict] = {}
    for snap in snaps:
        for kop in snap.body.block.ops:
            p = graph_of(kop)  # type: ignore[arg-type]
            g = program_costs(p, indirect)
            out[p.kernel_name] = {"flops_matrix": g.flops_matrix, "flops_vector": g.flops_vector,
                           "compulsory_bytes": g.compulsory_bytes,
                           "bytes_unfused": sum(k.bytes for k in unfused_kernels(p, g, indirect))}
    return out


def _figure(p: Priced) -> dict[str, Any]:
    """The rate a dtype was priced at and the figure it came from (`HwTarget.price_*` name it), with
    the figure in words (`label`: "BF16 tensor")."""
    return {"value": p.rate, "figure": p.key, "source": p.source, "estimate": p.estimate, "label": p.label}


def _as_written(graphs: Sequence[GraphCosts], unfused: Sequence[Sequence[UnfusedKernel]],
                record: dict[str, dict] | None) -> dict[str, int]:
    """Totals before narrowing: from `narrow-needed`'s record where it has the kernel, else the
    kernel's own counts (it was not narrowed)."""
    out = {"flops_as_written": 0, "flops_matrix_as_written": 0, "flops_vector_as_written": 0,
           "bytes_unfused_as_written": 0, "bytes_fused_as_written": 0}
    for g, u in zip(graphs, unfused, strict=True):
        rec = (record or {}).get(g.kernel)
        if rec is None:
            rec = {"flops_matrix": g.flops_matrix, "flops_vector": g.flops_vector,
                   "bytes_unfused": sum(k.bytes for k in u), "compulsory_bytes": g.compulsory_bytes}
        try:
            out["flops_matrix_as_written"] += int(rec["flops_matrix"])
            out["flops_vector_as_written"] += int(rec["flops_vector"])
            out["bytes_unfused_as_written"] += int(rec["bytes_unfused"])
            out["bytes_fused_as_written"] += int(rec["compulsory_bytes"])
        except (KeyError, TypeError, ValueError) as e:
            raise SolarError(f"module attribute solar.as_written: kernel {g.kernel}: bad or missing "
                             f"field ({e})") from None
    out["flops_as_written"] = out["flops_matrix_as_written"] + out["flops_vector_as_written"]
    return out


def _cache_aware_record(b: GraphBounds) -> dict[str, Any]:
    ca = b.cache_aware
    if ca is None:
        return {"cache_aware_s": None, "cache_aware_bottleneck": None, "bytes_cache_aware": None,
                "cache_aware_terms_s": None, "levels": None}
    return {"cache_aware_s": ca.time_s, "cache_aware_bottleneck": ca.bottleneck,
            "bytes_cache_aware": ca.bytes_dram, "cache_aware_terms_s": dict(ca.terms_s),
            "levels": [{"name": lv.name, "capacity": math.ceil(lv.capacity), "bandwidth": lv.bandwidth,
                        "units": lv.units, "per": lv.level.per, "bytes": lv.bytes, "time_s": lv.time_s}
                       for lv in ca.levels]}


def _hw_record(hw: HwTarget, graphs: Sequence[GraphCosts], precision: str, sums: bool) -> dict[str, Any]:
    """The target's figures the bounds used; `sums`: the fused terms ran additions on the matrix unit
    (`sum` then lists the rate of each summed dtype there)."""
    ops = [o for g in graphs for o in g.ops]
    mdt = sorted({o.matrix_dtype for o in ops if o.flops_matrix and o.matrix_dtype})
    vdt = sorted({o.vector_dtype for o in ops if o.flops_vector})
    sdt = sorted({o.sum_dtype for o in ops if o.flops_sum and o.sum_dtype}) if sums else []
    on_matrix = {d: hw.price_sum(d, precision) for d in sdt}
    bw = hw.dram_bw
    return {
        "description": hw.description, "path": hw.path,
        "precision": hw.describe_precision(precision),
        "dram_bw": {"value": bw.value, "figure": "dram.bandwidth", "source": bw.source,
                    "estimate": bw.estimate},
        "matrix": {d: _figure(hw.price_matrix(d, precision)) for d in mdt},
        "vector": {d: _figure(hw.price_vector(d)) for d in vdt},
        "sum": {d: _figure(p) for d, p in on_matrix.items() if p is not None},
        "memory": _memory_record(hw),
        "latency": None if hw.l2_latency is None else {
            "value": hw.l2_latency.value, "figure": "l2.latency", "source": hw.l2_latency.source,
            "estimate": hw.l2_latency.estimate},
    }


def _memory_record(hw: HwTarget) -> list[dict[str, Any]]:
    """The target's memory levels as its figures give them (outermost first), for the report header:
    the capacities behind each boundary and the bandwidth across it (`--cache-size` is not applied
    here; the cache-aware `levels` carry what was priced)."""
    return [{"name": lv.name, "per": lv.per, "units": lv.units, "capacity": math.ceil(lv.capacity.value),
             "bandwidth": lv.bandwidth.value, "describe": lv.describe()} for lv in hw.levels]


def build_report(graphs: Sequence[GraphCosts], targets: Sequence[HwTarget], *, source: str,
                 validation: dict[str, Any], precision: str = "auto",
                 fidelity: Sequence[str] = ("unfused", "fused", "cache-aware"),
                 latency_s: float | None = None, kernels: Sequence[GraphOp] | None = None,
                 cache_size: int | None = None, as_written: dict[str, dict] | None = None,
                 unfused: Sequence[Sequence[UnfusedKernel]] | None = None,
                 aliases: Sequence[Alias] = (), cache_state: str = "cold",
                 indirect: str = "traced", measured: Measured | None = None,
                 chains: dict[str, Any] | None = None) -> dict[str, Any]:
    """The report dict (schema `solar-report/1`) for the given costs on every target. Cache-aware
    bounds need `kernels` (those the costs came from, same order); `as_written` is `narrow-needed`'s
    record (None: not narrowed); `unfused` the kernels of the unfused bound per graph (None: one per
    node); `aliases` the outputs that alias another tensor (`ProgramInfo.aliases`): a program whose
    every output is one has no work, and its bounds are 0; `cache_state` the timing contract
    (`bounds.CACHE_STATES`); `chains` is `chain_order.chains_section` (None: no trees)."""
    if not graphs:
        raise SolarError(f"{source}: no kernel to bound")
    empty_ok = bool(aliases)
    ca_kernels = kernels if "cache-aware" in fidelity else None
    groups = [node_kernels(g) for g in graphs] if unfused is None else [list(u) for u in unfused]
    bounds: dict[str, GraphBounds] = {
        t.name: graph_bounds(graphs, t, precision, ca_kernels, cache_size, groups, empty_ok=empty_ok,
                             cache_state=cache_state)
        for t in targets}
    multi = len(graphs) > 1
    ops = [(g, o) for g in graphs for o in g.ops]
    op_rows = []
    for i, (g, o) in enumerate(ops):
        op_rows.append({
            "name": f"{g.kernel}.{o.name}" if multi else o.name, "kernel": g.kernel,
            "equation": o.equation, "label": o.label, "loc": o.loc,
            "flops": o.flops, "flops_matrix": o.flops_matrix, "flops_vector": o.flops_vector,
            "flops_vector_literal": o.vector_literal,
            "flops_transcendental": o.flops_transcendental, "flops_sum": o.flops_sum,
            "sum_dtype": o.sum_dtype, "revert_matrix": o.revert_matrix, "revert_vector": o.revert_vector,
            "bytes": o.bytes, "unit": o.unit,
            "matrix_dtype": o.matrix_dtype, "vector_dtype": o.vector_dtype,
            "intensity": o.flops / o.bytes if o.bytes else None,
            "sequential": o.sequential, "indirect": o.indirect,
            "bound_s": {h: b.ops[i].bound_s for h, b in bounds.items()},
            "bottleneck": {h: b.ops[i].bottleneck for h, b in bounds.items()},
            "cache_aware_s": {h: b.cache_aware.ops[i].bound_s if b.cache_aware else None
                              for h, b in bounds.items()},
            "cache_aware_bottleneck": {h: b.cache_aware.ops[i].bottleneck if b.cache_aware else None
                                       for h, b in bounds.items()},
            "bytes_cache_aware": {h: dict(b.cache_aware.ops[i].bytes) if b.cache_aware else None
                                  for h, b in bounds.items()},
            "bytes_tiled": {h: b.cache_aware.ops[i].tiled_bytes if b.cache_aware else None
                            for h, b in bounds.items()},
        })
    first = bounds[targets[0].name].cache_aware if targets else None
    kernel_rows = _kernel_rows(graphs, groups, op_rows, bounds)
    _op_modules(op_rows, kernel_rows)
    report: dict[str, Any] = {
        "schema": SCHEMA, "source": source, "validation": validation,
        "precision": precision, "fidelity": list(fidelity),
        "kernels": [g.kernel for g in graphs],
        "narrowed": as_written is not None,
        "cache_size": cache_size,
        "cache_state": cache_state,
        "indirect": indirect,
        "totals": {
            "flops": sum(o.flops for _, o in ops),
            "flops_matrix": sum(g.flops_matrix for g in graphs),
            "flops_vector": sum(g.flops_vector for g in graphs),
            "flops_vector_literal": sum(g.flops_vector_literal for g in graphs),
            "flops_sum": sum(o.flops_sum for _, o in ops),
            "bytes_unfused": sum(k["bytes"] for k in kernel_rows),
            "bytes_fused": sum(g.compulsory_bytes for g in graphs),
            "bytes_cache_aware": first.bytes_dram if first else None,
            **_as_written(graphs, groups, as_written),
        },
        "bounds": {h: {"unfused_s": b.unfused_s, "fused_s": b.fused_s,
                       "fused_bottleneck": b.fused_bottleneck,
                       "fused_terms_s": {"matrix": b.fused_matrix_s, "vector": b.fused_vector_s,
                                         "memory": b.fused_memory_s},
                       "latency_floor_s": b.latency_floor_s,
                       "sum_adds_on_matrix": b.sum_adds_on_matrix,
                       **_cache_aware_record(b)}
                   for h, b in bounds.items()},
        "ops": op_rows,
        "kernels_unfused": kernel_rows,
        "modules": module_rows(kernel_rows, [t.name for t in targets]),
        "phases": phase_rows(kernel_rows, [t.name for t in targets]),
        "hw": {t.name: _hw_record(t, graphs, precision, bounds[t.name].sum_adds_on_matrix > 0)
               for t in targets},
        "aliases": [a.to_json() for a in aliases],
        "value_dependent": [{"op": r["name"], "loc": r["loc"],
                             "tensors": [a.tensor for a in (*o.reads, *o.writes) if a.indirect],
                             "traced": [a.tensor for a in (*o.reads, *o.writes) if a.traced]}
                            for r, (_, o) in zip(op_rows, ops, strict=True) if o.indirect],
        "llm_ops": llm_op_rows(ops),
        "inverse": None,
        "reorder_chains": bool(chains and chains["applied"]),
        "chains": list(chains["trees"]) if chains else [],
    }
    if chains and chains.get("validation"):
        report["validation"] = {**validation, "reorder_chains": chains["validation"]}
    if latency_s is not None:
        inv: dict[str, Any] = {"latency_s": latency_s}
        for h, b in bounds.items():
            inv[h] = inverse_roofline(b, graphs, latency_s)
        report["inverse"] = inv
    report["measured"] = measured_record(report, measured) if measured is not None else None
    return report


def llm_op_rows(ops: Sequence[tuple[GraphCosts, OpCost]]) -> list[dict[str, Any]]:
    """Per source op whose loop nest an LLM wrote, or a template wrote as a stand-in for the op's
    production algorithm (a row with `"by": "stand-in"`; docs/llm-frontend.md, "Pricing"): the FLOPs of
    that nest as written, which no bound prices, and the FLOPs priced (its plain contractions' products)."""
    rows: dict[tuple[str, str | None], dict[str, Any]] = {}
    for g, o in ops:
        if o.llm_flops is None:
            continue
        key = (o.source or f"{g.kernel}.{o.name}", o.loc)
        row = rows.setdefault(key, {"op": key[0], "loc": o.loc, "nodes": 0, "flops_written": 0,
                                    "flops_priced": 0, **({"by": o.stand_in} if o.stand_in != "llm" else {})})
        row["nodes"] += 1
        row["flops_written"] += o.llm_flops
        row["flops_priced"] += o.flops
    return list(rows.values())


def _kernel_rows(graphs: Sequence[GraphCosts], groups: Sequence[Sequence[UnfusedKernel]],
                 op_rows: Sequence[dict[str, Any]], bounds: dict[str, GraphBounds]) -> list[dict[str, Any]]:
    """One row per kernel of the unfused bound (bounds' `kernels`, in the same order)."""
    multi = len(graphs) > 1
    rows = []
    base = 0
    for g, u in zip(graphs, groups, strict=True):
        for k in u:
            rows.append({"name": f"{g.kernel}.{k.name}" if multi else k.name, "kernel": g.kernel,
                         "op": k.op, "loc": k.loc, "module": k.module, "phase": k.phase,
                         "stmts": list(k.stmts),
                         "ops": [op_rows[base + i]["name"] for i in k.ops],
                         "flops_matrix": sum(g.ops[i].flops_matrix for i in k.ops),
                         "flops_vector": sum(g.ops[i].flops_vector for i in k.ops),
                         "bytes": k.bytes, "reads": {a.tensor: a.bytes for a in k.reads},
                         "writes": {a.tensor: a.bytes for a in k.writes}, "bound_s": {}, "bottleneck": {}})
        base += len(g.ops)
    for h, b in bounds.items():
        for row, kb in zip(rows, b.kernels, strict=True):
            row["bound_s"][h] = kb.bound_s
            row["bottleneck"][h] = kb.bottleneck
    return rows


def _op_modules(op_rows: list[dict[str, Any]], kernel_rows: Sequence[dict[str, Any]]) -> None:
    """Each op (einsum node) gets the module path of the kernel it runs in (None: top level), and
    in a training step that kernel's phase."""
    by_name = {name: k for k in kernel_rows for name in k["ops"]}
    for row in op_rows:
        k = by_name.get(row["name"])
        row["module"] = k.get("module") if k is not None else None
        if k is not None and k.get("phase"):
            row["phase"] = k["phase"]


def with_eager_unfused(report: dict[str, Any], eager: dict[str, Any],
                       measured: Measured | None) -> dict[str, Any]:
    """`report` (the default model's) with its unfused fidelity taken from `eager`, the report of the
    program as the unfused fidelity prices it (one kernel per source op as written: only rewrites
    inside one source op, `roofline`): the unfused bound, its kernels, the module tree and the
    unfused bytes, the phases of a training step and the inverse roofline's unfused figures (`eager`
    built with the same latency). Never below the fused bound
    (a kernel-by-kernel run is one implementation)."""
    out = {**report, "kernels_unfused": eager["kernels_unfused"], "modules": eager["modules"],
           "phases": eager["phases"]}  # a training step's phases group the unfused kernels
    out["bounds"] = {h: {**b, "unfused_s": max(eager["bounds"][h]["unfused_s"], b["fused_s"])}
                     for h, b in report["bounds"].items()}
    out["totals"] = {**report["totals"], "bytes_unfused": eager["totals"]["bytes_unfused"],
                     "bytes_unfused_as_written": eager["totals"]["bytes_unfused_as_written"]}
    by_name = {name: k.get("module") for k in eager["kernels_unfused"] for name in k["ops"]}
    out["ops"] = [{**r, "module": by_name.get(r["name"], r["module"])} for r in report["ops"]]
    if report["inverse"] is not None:
        inv = report["inverse"]
        out["inverse"] = {**inv, **{h: {**inv[h], "unfused": eager["inverse"][h]["unfused"]}
                                    for h in report["bounds"]}}
    out["measured"] = measured_record(out, measured) if measured is not None else None
    return out


PHASES = ("forward", "backward", "optimizer")


def phase_rows(kernel_rows: Sequence[dict[str, Any]], hws: Sequence[str]) -> list[dict[str, Any]]:
    """A training step's work by phase (forward, backward, optimizer: the kernels of the unfused
    bound grouped by `phase`, their FLOPs, bytes and unfused bound per target; "other" holds
    what no phase owns, the copies that materialise outputs returned as views); [] for a program
    that is not a training step. The fused and cache-aware bounds cover the whole step."""
    if not any(k.get("phase") for k in kernel_rows):
        return []
    rows = []
    other = [k for k in kernel_rows if k.get("phase") not in PHASES]
    for phase in (*PHASES, "other") if other else PHASES:
        ks = [k for k in kernel_rows if k.get("phase") == phase] if phase != "other" else other
        rows.append({"phase": phase, "kernels": len(ks),
                     "flops_matrix": sum(k["flops_matrix"] for k in ks),
                     "flops_vector": sum(k["flops_vector"] for k in ks),
                     "bytes_unfused": sum(k["bytes"] for k in ks),
                     "unfused_s": {h: sum(k["bound_s"][h] for k in ks) for h in hws}})
    return rows
