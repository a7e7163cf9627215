"""The text summary on stdout: per-group table, failures by class, every violation with its ops."""

from __future__ import annotations

from typing import Any


def fmt_s(s: float | None) -> str:
    if s is None:
        return "-"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6), ("ns", 1e-9)):
        if abs(s) >= scale:
            return f"{s / scale:.4g} {unit}"
    return f"{s / 1e-9:.3g} ns"


def fmt_x(x: float | None) -> str:
    return "-" if x is None else f"{x:.3g}x"


def table(head: list[str], rows: list[list[str]], right: set[int] | None = None) -> str:
    right = right or set()
    widths = [max(len(str(r[i])) for r in [head, *rows]) for i in range(len(head))]

    def line(r: list[str]) -> str:
        return "  ".join(
            str(c).rjust(w) if i in right else str(c).ljust(w)
            for i, (c, w) in enumerate(zip(r, widths, strict=True))
        ).rstrip()

    return "\n".join([line(head), "-" * len(line(head)), *(line(r) for r in rows)])


def print_summary(data: dict[str, Any]) -> None:
    m = data["meta"]
    print(
        f"solar-bench: {m['models']} models ({m['computed']['bounds']} computed, {m['reused']} reused), "
        f"hw {m['hw']}, mode {m['mode']}, {m['workers']} worker(s) ({m['backend']}), wall {m['wall_s']:.1f} s"
    )
    if m.get("timings_note"):
        print(f"note: {m['timings_note']}")
    head = [
        "group",
        "target",
        "models",
        "bounded",
        "validated",
        "coverage",
        "failed",
        "measured",
        "geomean unfused",
        "geomean fused",
        "geomean cache-aware",
        "median fused",
        "violations",
    ]
    rows = []
    for g in data["groups"]:
        failed = ", ".join(f"{k} {v}" for k, v in sorted(g["failed"].items())) or "0"
        gm = g["headroom_geomean"]
        med = (g["headroom_distribution"].get("fused") or {}).get("median")
        rows.append(
            [
                g["group"],
                g["target"],
                g["models"],
                g["bounded"],
                g["validated"],
                f"{100 * g['coverage']:.0f}%",
                failed,
                g["measured"],
                fmt_x(gm["unfused"]),
                fmt_x(gm["fused"]),
                fmt_x(gm["cache_aware"]),
                fmt_x(med),
                g["violations"],
            ]
        )
    print(table(head, rows, right={2, 3, 4, 5, 7, 8, 9, 10, 11, 12}))
    print("headroom = measured / bound (geometric mean over validated, measured models)")
    failed = [r for r in data["rows"] if r["status"] != "ok"]
    seen = set()
    if failed:
        print(f"\nfailed models ({len({(r['group'], r['model']) for r in failed})}):")
        for r in failed:
            if (r["group"], r["model"]) in seen:
                continue
            seen.add((r["group"], r["model"]))
            print(
                f"  {r['group']}/{r['model']}: [{r['error_class'] or r['status']}] {(r['error'] or '')[:160]}"
            )
    if data.get("measure_errors"):
        print(f"\ntiming failed ({len(data['measure_errors'])}):")
        for k, v in data["measure_errors"].items():
            print(f"  {k}: {v[:160]}")
    v = data["violations"]
    print(f"\nviolations: {len(v)}")
    for x in v:
        bound = max(b for b in (x["fused_s"], x["cache_aware_s"]) if b is not None)
        print(
            f"  VIOLATION {x['group']}/{x['model']} on {x['target']}: measured {fmt_s(x['measured_min_s'])}"
            f" < {x['bound']} bound {fmt_s(bound)} "
            f"(fused bound by {x['fused_bottleneck']}: "
            + ", ".join(f"{k} {fmt_s(t)}" for k, t in (x["fused_terms_s"] or {}).items())
            + ")"
        )
        for op in x["ops"]:
            print(
                f"      {op['op']} @ {op['loc']}: {op['flops']:,} FLOPs, {op['bytes']:,} B, "
                f"bound {fmt_s(op['bound_s'])} ({100 * op['share']:.0f}%, {op['bottleneck']})"
            )
