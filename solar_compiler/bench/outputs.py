"""results.csv, results.json, the stdout summary and the HTML pages, from the store."""

from __future__ import annotations

import csv
import os
from pathlib import Path
from typing import Any

from .errors import phase_class
from .results import (
    COLUMNS,
    Measured,
    fused_terms,
    group_stats,
    measured_from_file,
    measured_from_stats,
    op_breakdown,
    row_key,
    rows_for,
)
from .store import Store, write_json
from .suite import Unit
from .timing import lookup_timing


def _measured(
    unit: Unit, store: Store, mfp: dict[str, str] | None, timings: dict | None, timings_name: str | None
) -> Measured | None:
    if timings is not None:
        entry = lookup_timing(timings, unit.group, unit.name, unit.workload)
        if entry is None:
            return None
        hw = entry.get("hardware") or "unknown hardware"
        return measured_from_file(entry, f"{Path(timings_name or '').name} ({hw})")
    if mfp is not None:
        rec = store.load(unit, "measure", mfp[unit.key])
        if rec and rec.get("status") == "ok":
            t = rec["timing"]
            how = "jax.jit" if t.get("framework") == "jax" else "eager+compile" if "compile" in t else "eager"
            src = f"{t['device']} {how} ({t['hardware']})"
            return measured_from_stats(t, src)
    return None


def collect(
    units: list[Unit],
    store: Store,
    bfp: dict[str, str],
    mfp: dict[str, str] | None,
    timings: dict | None,
    timings_name: str | None,
    targets: list[str],
):
    rows: list[dict[str, Any]] = []
    reports: dict[str, dict] = {}
    measure_errors: dict[str, str] = {}
    for u in units:
        b = store.load(u, "bounds", bfp[u.key])
        rep = store.report(u) if b and b.get("status") == "ok" else None
        if rep is not None:
            reports[u.key] = rep
        m = store.load(u, "measure", mfp[u.key]) if mfp is not None else None
        if m and m.get("status") != "ok":
            measure_errors[u.key] = f"{phase_class('measure', m.get('error_class'))}: {m.get('error')}"
            m = {**m, "error_class": phase_class("measure", m.get("error_class"))}
        link = os.path.relpath(store.path(u, "html"), store.out)
        rows += rows_for(u, targets, b, rep, _measured(u, store, mfp, timings, timings_name), link, m)
    return rows, reports, measure_errors


def violation_details(rows: list[dict[str, Any]], reports: dict[str, dict]) -> list[dict[str, Any]]:
    out = []
    for r in rows:
        if not r["violation"]:
            continue
        rep = reports[row_key(r)]
        out.append(
            {
                "group": r["group"],
                "model": r["model"],
                "workload": r["workload"],
                "target": r["target"],
                "measured_min_s": min(
                    x for x in (r["measured_min_s"], r["measured_compile_min_s"]) if x is not None
                ),
                "bound": r["violation_bound"],
                "fused_s": r["fused_s"],
                "cache_aware_s": r["cache_aware_s"],
                **fused_terms(rep, r["target"]),
                "ops": op_breakdown(rep, r["target"]),
            }
        )
    return out


def workload_records(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """SOL-ExecBench workloads (rows with a uuid) -> what the benchmark uses of them: per target the
    bound in ms per fidelity and `sol_ms` = max(fused, cache-aware), and with a trace the kernel's
    and the baseline's times, the SOL score and whether the kernel beat the bound."""
    out: dict[str, dict[str, Any]] = {}
    for r in rows:
        if not r.get("workload"):
            continue
        rec = out.setdefault(row_key(r), {"schema": "solar-bench-workload/1", "group": r["group"],
                                          "problem": r["model"], "workload": r["workload"], "targets": {}})

        def ms(x: float | None) -> float | None:
            return None if x is None else x * 1e3

        t = {"status": r["status"], "validated": r["validated"]}
        if r["status"] == "ok":
            t.update({f"{f}_ms": ms(r[f"{f}_s"]) for f in ("unfused", "fused", "cache_aware")})
            t["sol_ms"] = ms(max(x for x in (r["fused_s"], r["cache_aware_s"], 0.0) if x is not None))
        else:
            t["error"] = f"[{r['error_class'] or r['status']}] {r['error'] or ''}".strip()
        if r["measured_s"] is not None:
            t.update(measured_ms=ms(r["measured_s"]), baseline_ms=ms(r["baseline_s"]),
                     sol_score=r["sol_score"], violation=r["violation"])
        rec["targets"][r["target"]] = t
    return out


def write_outputs(
    out: Path,
    units: list[Unit],
    store: Store,
    bfp: dict[str, str],
    mfp: dict[str, str] | None,
    timings: dict | None,
    args,
    meta: dict[str, Any],
) -> int:
    """Write everything; print the summary; return the number of violations."""
    from .html import write_html
    from .summary import print_summary

    targets = [t.strip() for t in args.hw.split(",") if t.strip()]
    rows, reports, measure_errors = collect(units, store, bfp, mfp, timings, args.timings, targets)
    groups = group_stats(rows)
    viol = violation_details(rows, reports)
    with open(out / "results.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS)
        w.writeheader()
        for r in rows:
            w.writerow({k: "" if r[k] is None else r[k] for k in COLUMNS})
    data = {
        "schema": "solar-bench/1",
        "meta": meta,
        "groups": [g.as_dict() for g in groups],
        "violations": viol,
        "measure_errors": measure_errors,
        "rows": rows,
    }
    write_json(out / "results.json", data)
    for key, rec in workload_records(rows).items():
        u = next(u for u in units if u.key == key)
        write_json(store.path(u, "workload.json"), rec)
    write_html(out, data, units, store, reports)
    print_summary(data)
    print(f"outputs: {out / 'results.csv'}, {out / 'results.json'}, {out / 'report.html'}")
    return len(viol)

