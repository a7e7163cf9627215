"""Rows (one per model x target), headroom, violations and per-group statistics, from the stored
records and reports only (the JSON report schema `solar-report/1` and the timing records).

Headroom = measured time / bound, per fidelity (unfused, fused, cache-aware): how far today's
implementation is from the bound. A **violation** is a measured time below the tightest bound that
must hold for any implementation: max(fused, cache-aware). The fastest timed call (`min`) is
compared, so a single call that beats the bound is found. With a baseline time T_b (a SOL-ExecBench
trace's reference latency) the row carries SOL-ExecBench's score of the kernel time T_k against our
SOL T_SOL = max(fused, cache-aware): S = 1 / (1 + (T_k - T_SOL) / (T_b - T_SOL)) (1 at the SOL,
1/2 at the baseline; undefined when T_b <= T_SOL). The unfused bound is the least time of one
kernel per source op through DRAM: compiled code may legitimately beat it, so it is reported, never
a violation.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Any

from .suite import Unit

FIDELITIES = ("unfused", "fused", "cache_aware")
COLUMNS = (
    "group",
    "model",
    "workload",
    "target",
    "status",
    "error_class",
    "error",
    "validated",
    "flops",
    "bytes_unfused",
    "bytes_fused",
    "bytes_cache_aware",
    "unfused_s",
    "fused_s",
    "cache_aware_s",
    "measured_s",
    "measured_min_s",
    "measured_compile_s",
    "measured_compile_min_s",
    "measured_source",
    "measure_status",
    "measure_error_class",
    "measure_error",
    "headroom_unfused",
    "headroom_fused",
    "headroom_cache_aware",
    "headroom_compile_fused",
    "violation",
    "violation_bound",
    "baseline_s",
    "sol_s",
    "sol_score",
    "pipeline_s",
    "peak_rss_mb",
    "report",
)


@dataclass
class Measured:
    """Seconds: `typical` (mean or median) for headroom, `fastest` (min) for violations."""

    typical: float
    fastest: float
    source: str
    compile_typical: float | None = None
    compile_fastest: float | None = None
    baseline: float | None = None  # the baseline's time (SOL-ExecBench: the reference's latency)
    #: the fastest time is eager PyTorch's (our own `--measure`), which the unfused bound (one
    #: kernel per source op) must not exceed either; a timing file's kind is not known
    eager: bool = False


def measured_from_stats(rec: dict[str, Any], source: str) -> Measured:
    """From a timing record of our own (`measure_job`): median for headroom, min for violations."""
    e = rec["eager"]
    c = rec.get("compile")
    return Measured(
        e["median"] / 1e3,
        e["min"] / 1e3,
        source,
        None if c is None else c["median"] / 1e3,
        None if c is None else c["min"] / 1e3,
        eager=True,
    )


def measured_from_file(entry: dict[str, Any], source: str) -> Measured:
    """From a timing file entry (ms): mean for headroom (the paper's), min when present (a
    SOL-ExecBench trace has the mean only), and the baseline's time when present."""
    mean = float(entry["mean"]) / 1e3
    base = entry.get("baseline")
    return Measured(mean, float(entry.get("min", entry["mean"])) / 1e3, source,
                    baseline=None if base is None else float(base) / 1e3)


def sol_score(t_k: float, t_b: float, t_sol: float) -> float | None:
    """SOL-ExecBench's score S = 1 / (1 + (T_k - T_SOL) / (T_b - T_SOL)); None when T_b <= T_SOL
    (no gap to close)."""
    if t_b <= t_sol:
        return None
    return 1.0 / (1.0 + (t_k - t_sol) / (t_b - t_sol))


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or not b else a / b


def rows_for(
    unit: Unit,
    targets: list[str],
    bounds: dict[str, Any] | None,
    report: dict[str, Any] | None,
    measured: Measured | None,
    report_link: str,
    measure: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """The rows of one model: one per target of its report (or of `targets` when it failed).
    `measure` is the timing record of this run (`measure_status` "ok" or "failed", with its class
    and message), so that a failed timing shows as such and not as a bounded model without a time."""
    base: dict[str, Any] = {c: None for c in COLUMNS}
    base.update(group=unit.group, model=unit.name, workload=unit.workload)
    if measure is not None:
        failed = measure.get("status") != "ok"
        base.update(
            measure_status=measure.get("status"),
            measure_error_class=measure.get("error_class") if failed else None,
            measure_error=measure.get("error") if failed else None,
        )
    if bounds is not None:
        base.update(
            pipeline_s=bounds.get("seconds"),
            peak_rss_mb=round(bounds.get("peak_rss_kb", 0) / 1024, 1) or None,
        )
    if measured is not None:
        base.update(
            measured_s=measured.typical,
            measured_min_s=measured.fastest,
            measured_source=measured.source,
            measured_compile_s=measured.compile_typical,
            measured_compile_min_s=measured.compile_fastest,
        )
    if bounds is None or bounds.get("status") != "ok" or report is None:
        status = "failed" if bounds is not None else "missing"
        return [
            {
                **base,
                "target": t,
                "status": status,
                "error_class": bounds.get("error_class") if bounds else None,
                "error": bounds.get("error") if bounds else None,
                "validated": False,
            }
            for t in targets
        ]
    totals = report.get("totals", {})
    rows = []
    for target, b in report.get("bounds", {}).items():
        r = {
            **base,
            "target": target,
            "status": "ok",
            "report": report_link,
            "validated": bool(report.get("validation", {}).get("validated")),
            "flops": totals.get("flops"),
            "bytes_unfused": totals.get("bytes_unfused"),
            "bytes_fused": totals.get("bytes_fused"),
            "bytes_cache_aware": totals.get("bytes_cache_aware"),
            "unfused_s": b.get("unfused_s"),
            "fused_s": b.get("fused_s"),
            "cache_aware_s": b.get("cache_aware_s"),
        }
        if measured is not None:
            for f in FIDELITIES:
                r[f"headroom_{f}"] = _ratio(measured.typical, r[f"{f}_s"])
            r["headroom_compile_fused"] = _ratio(measured.compile_typical, r["fused_s"])
            floor, which = tightest(r)
            fastest = min(x for x in (measured.fastest, measured.compile_fastest) if x is not None)
            r["violation"] = floor is not None and fastest < floor
            r["violation_bound"] = which if r["violation"] else None
            if measured.eager and not r["violation"] and r["unfused_s"] is not None \
                    and measured.fastest < r["unfused_s"]:
                r["violation"], r["violation_bound"] = True, "unfused"
            if measured.baseline is not None and floor is not None:
                r["baseline_s"], r["sol_s"] = measured.baseline, floor
                r["sol_score"] = sol_score(measured.typical, measured.baseline, floor)
        rows.append(r)
    return rows


def row_key(row: dict[str, Any]) -> str:
    """The unit key of a row (`Unit.key`): group/model, with @uuid for a SOL-ExecBench workload."""
    return f"{row['group']}/{row['model']}" + (f"@{row['workload']}" if row.get("workload") else "")


def tightest(row: dict[str, Any]) -> tuple[float | None, str | None]:
    """The larger of the fused and cache-aware bounds (both must hold), and its name."""
    cands = [
        (row[k], k.removesuffix("_s").replace("_", "-"))
        for k in ("fused_s", "cache_aware_s")
        if row.get(k) is not None
    ]
    return max(cands) if cands else (None, None)


def geomean(xs: list[float]) -> float | None:
    xs = [x for x in xs if x is not None and x > 0 and math.isfinite(x)]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def quantiles(xs: list[float]) -> dict[str, float] | None:
    xs = sorted(x for x in xs if x is not None)
    if not xs:
        return None
    q = statistics.quantiles(xs, n=4, method="inclusive") if len(xs) > 1 else [xs[0]] * 3
    return {"min": xs[0], "p25": q[0], "median": q[1], "p75": q[2], "max": xs[-1]}


@dataclass
class GroupStats:
    group: str
    target: str
    models: int = 0
    bounded: int = 0
    validated: int = 0
    measured: int = 0
    failed: dict[str, int] = field(default_factory=dict)
    geomean: dict[str, float | None] = field(default_factory=dict)
    distribution: dict[str, Any] = field(default_factory=dict)
    violations: int = 0

    @property
    def coverage(self) -> float:
        return self.validated / self.models if self.models else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "group": self.group,
            "target": self.target,
            "models": self.models,
            "bounded": self.bounded,
            "validated": self.validated,
            "coverage": self.coverage,
            "measured": self.measured,
            "failed": self.failed,
            "headroom_geomean": self.geomean,
            "headroom_distribution": self.distribution,
            "violations": self.violations,
        }


def group_stats(rows: list[dict[str, Any]]) -> list[GroupStats]:
    """Per (group, target): coverage = validated bounds / models; headroom over validated and
    measured rows; violations over every bounded and measured row."""
    out: dict[tuple[str, str], GroupStats] = {}
    for r in rows:
        g = out.setdefault((r["group"], r["target"]), GroupStats(r["group"], r["target"]))
        g.models += 1
        if r["status"] != "ok":
            cls = r["error_class"] or r["status"]
            g.failed[cls] = g.failed.get(cls, 0) + 1
            continue
        if r.get("measure_status") == "failed":
            cls = r["measure_error_class"] or "measure"
            cls = cls if cls == "measure" else f"measure {cls}"
            g.failed[cls] = g.failed.get(cls, 0) + 1
        g.bounded += 1
        g.validated += bool(r["validated"])
        g.measured += r["measured_s"] is not None
        g.violations += bool(r["violation"])
    for g in out.values():
        sel = [
            r
            for r in rows
            if (r["group"], r["target"]) == (g.group, g.target)
            and r["status"] == "ok"
            and r["validated"]
            and r["measured_s"] is not None
        ]
        g.geomean = {f: geomean([r[f"headroom_{f}"] for r in sel]) for f in FIDELITIES}
        g.distribution = {f: quantiles([r[f"headroom_{f}"] for r in sel]) for f in FIDELITIES}
    return list(out.values())


def op_breakdown(report: dict[str, Any], target: str, limit: int = 12) -> list[dict[str, Any]]:
    """The source ops (one eager kernel each: `kernels_unfused`) of a report by their bound on
    `target`, largest first, with their share of the sum."""
    ks = report.get("kernels_unfused") or []
    total = sum((k.get("bound_s") or {}).get(target) or 0.0 for k in ks) or 1.0
    rows = []
    for k in ks:
        b = (k.get("bound_s") or {}).get(target) or 0.0
        rows.append(
            {
                "op": k.get("op") or k.get("name"),
                "module": k.get("module"),
                "loc": k.get("loc"),
                "flops": (k.get("flops_matrix") or 0) + (k.get("flops_vector") or 0),
                "bytes": k.get("bytes"),
                "bound_s": b,
                "share": b / total,
                "bottleneck": (k.get("bottleneck") or {}).get(target),
            }
        )
    rows.sort(key=lambda r: -r["bound_s"])
    return rows[:limit]


def fused_terms(report: dict[str, Any], target: str) -> dict[str, Any]:
    b = report.get("bounds", {}).get(target, {})
    return {
        "fused_bottleneck": b.get("fused_bottleneck"),
        "fused_terms_s": b.get("fused_terms_s"),
        "cache_aware_bottleneck": b.get("cache_aware_bottleneck"),
        "cache_aware_terms_s": b.get("cache_aware_terms_s"),
    }
