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
each with its statements, external traffic and bound; `totals.bytes_unfused` is their traffic. The
validation record is the frontend's (`ProgramInfo.validation`), plus `value_dependent`, the
frontend's list of value-dependent ops, and `notes`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from xdsl.dialects.builtin import ModuleOp

from solar_compiler.analysis.bounds import GraphBounds, graph_bounds, inverse_roofline
from solar_compiler.analysis.costs import GraphCosts, program_costs
from solar_compiler.analysis.program import Program, program_of
from solar_compiler.analysis.unfused import UnfusedKernel, node_kernels, unfused_kernels
from solar_compiler.dialects.solar import AsWrittenOp
from solar_compiler.errors import SolarError
from solar_compiler.hw import HwTarget, Priced
from solar_compiler.records import program_info

SCHEMA = "solar-report/1"
VALIDATION_KEYS = ("validated", "frontend", "max_rel_err", "samples")


def module_validation(module: ModuleOp) -> dict[str, Any]:
    """The frontend's validation record, or an explicit "not validated" one."""
    info = program_info(module)
    record = info.validation
    if record is None:
        return {"validated": False, "frontend": info.frontend or "unknown", "max_rel_err": None, "samples": 0}
    missing = [k for k in VALIDATION_KEYS if k not in record]
    if missing:
        raise SolarError(f"module attribute solar.program: validation record misses {', '.join(missing)}")
    if info.value_dependent:
        record = {**record, "value_dependent": list(info.value_dependent)}
    if info.notes:
        record = {**record, "notes": list(info.notes)}
    return record


def as_written_record(module: ModuleOp, indirect: str = "traced") -> dict[str, dict] | None:
    """Costs of the programs as written (`solar.as_written`, kept by `narrow-needed`), per kernel;
    None when no transform changed the work."""
    snaps = [o for o in module.body.block.ops if isinstance(o, AsWrittenOp)]
    if not snaps:
        return None  # not narrowed; a kernel narrowing left unchanged is absent from the record
    out: dict[str, dict] = {}
    for snap in snaps:
        for kop in snap.body.block.ops:
            p = program_of(kop)  # type: ignore[arg-type]
            g = program_costs(p, indirect)
            out[p.name] = {"flops_matrix": g.flops_matrix, "flops_vector": g.flops_vector,
                           "compulsory_bytes": g.compulsory_bytes,
                           "bytes_unfused": sum(k.bytes for k in unfused_kernels(p, g, indirect))}
    return out


def _figure(p: Priced) -> dict[str, Any]:
    """The rate a dtype was priced at and the figure it came from (`HwTarget.price_*` name it)."""
    return {"value": p.rate, "figure": p.key, "source": p.source, "estimate": p.estimate}


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


def _hw_record(hw: HwTarget, graphs: Sequence[GraphCosts], precision: str) -> dict[str, Any]:
    ops = [o for g in graphs for o in g.ops]
    mdt = sorted({o.matrix_dtype for o in ops if o.flops_matrix and o.matrix_dtype})
    vdt = sorted({o.vector_dtype for o in ops if o.flops_vector})
    bw = hw.dram_bw
    return {
        "description": hw.description, "path": hw.path,
        "precision": hw.describe_precision(precision),
        "dram_bw": {"value": bw.value, "figure": "dram.bandwidth", "source": bw.source,
                    "estimate": bw.estimate},
        "matrix": {d: _figure(hw.price_matrix(d, precision)) for d in mdt},
        "vector": {d: _figure(hw.price_vector(d)) for d in vdt},
    }


def build_report(graphs: Sequence[GraphCosts], targets: Sequence[HwTarget], *, source: str,
                 validation: dict[str, Any], precision: str = "auto",
                 fidelity: Sequence[str] = ("unfused", "fused", "cache-aware"),
                 latency_s: float | None = None, kernels: Sequence[Program] | None = None,
                 cache_size: int | None = None, as_written: dict[str, dict] | None = None,
                 unfused: Sequence[Sequence[UnfusedKernel]] | None = None,
                 aliases: Sequence[dict[str, Any]] = (), cache_state: str = "cold",
                 indirect: str = "traced") -> dict[str, Any]:
    """The report dict (schema `solar-report/1`) for the given costs on every target. Cache-aware
    bounds need `kernels` (those the costs came from, same order); `as_written` is `narrow-needed`'s
    record (None: not narrowed); `unfused` the kernels of the unfused bound per graph (None: one per
    node); `aliases` the outputs that alias another tensor (`ProgramInfo.aliases`): a program whose
    every output is one has no work, and its bounds are 0; `cache_state` the timing contract
    (`bounds.CACHE_STATES`)."""
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
            "flops_transcendental": o.flops_transcendental, "bytes": o.bytes, "unit": o.unit,
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
            "bytes_unfused": sum(k["bytes"] for k in kernel_rows),
            "bytes_fused": sum(g.compulsory_bytes for g in graphs),
            "bytes_cache_aware": first.bytes_dram if first else None,
            **_as_written(graphs, groups, as_written),
        },
        "bounds": {h: {"unfused_s": b.unfused_s, "fused_s": b.fused_s,
                       "fused_bottleneck": b.fused_bottleneck,
                       "fused_terms_s": {"matrix": b.fused_matrix_s, "vector": b.fused_vector_s,
                                         "memory": b.fused_memory_s},
                       **_cache_aware_record(b)}
                   for h, b in bounds.items()},
        "ops": op_rows,
        "kernels_unfused": kernel_rows,
        "hw": {t.name: _hw_record(t, graphs, precision) for t in targets},
        "aliases": [dict(a) for a in aliases],
        "value_dependent": [{"op": r["name"], "loc": r["loc"],
                             "tensors": [a.tensor for a in (*o.reads, *o.writes) if a.indirect],
                             "traced": [a.tensor for a in (*o.reads, *o.writes) if a.traced]}
                            for r, (_, o) in zip(op_rows, ops, strict=True) if o.indirect],
        "inverse": None,
    }
    if latency_s is not None:
        inv: dict[str, Any] = {"latency_s": latency_s}
        for h, b in bounds.items():
            inv[h] = inverse_roofline(b, graphs, latency_s)
        report["inverse"] = inv
    return report


def _kernel_rows(graphs: Sequence[GraphCosts], groups: Sequence[Sequence[UnfusedKernel]],
                 op_rows: Sequence[dict[str, Any]], bounds: dict[str, GraphBounds]) -> list[dict[str, Any]]:
    """One row per kernel of the unfused bound (bounds' `kernels`, in the same order)."""
    multi = len(graphs) > 1
    rows = []
    base = 0
    for g, u in zip(graphs, groups, strict=True):
        for k in u:
            rows.append({"name": f"{g.kernel}.{k.name}" if multi else k.name, "kernel": g.kernel,
                         "op": k.op, "loc": k.loc, "stmts": list(k.stmts),
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


