"""The text summary on stdout: per-group table, failures by class, every violation with its ops."""

from __future__ import annotations

import sys
import textwrap
from typing import Any

from solar_compiler.render.fit import Col, Fit

from .results import row_key


def fmt_s(s: float | None) -> str:
    if s is None:
        return "-"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6), ("ns", 1e-9)):
        if abs(s) >= scale:
            return f"{s / scale:.4g} {unit}"
    return f"{s / 1e-9:.3g} ns"


def fmt_x(x: float | None) -> str:
    return "-" if x is None else f"{x:.3g}x"


def render(t: Fit, width: int) -> str:
    """`t` as text at `width` (rich, imported only here), trailing spaces stripped."""
    import io

    from rich.console import Console

    buf = io.StringIO()
    Console(file=buf, width=width, no_color=True, force_terminal=False, color_system=None, highlight=False,
            emoji=False, markup=False).print(t)
    return "".join(line.rstrip() + "\n" for line in buf.getvalue().splitlines())


def summary_width() -> int:
    """COLUMNS, else the terminal's width, else 200 (a file or a pipe: nothing wraps there), at
    least 80."""
    import shutil

    return max(80, shutil.get_terminal_size((200, 24)).columns)


def print_summary(data: dict[str, Any], width: int | None = None) -> None:
    """The summary at `width` columns (default: the terminal's); the per-group table fits it as
    `render/fit.py` says."""
    width = width or summary_width()

    def say(text: str) -> None:
        """A line of prose wrapped at `width`, continuation lines indented under its first word."""
        for part in text.split("\n"):
            lead = " " * (len(part) - len(part.lstrip(" ")))
            print("\n".join(textwrap.wrap(part, width, subsequent_indent=lead + "    ",
                                           break_on_hyphens=False)) if part else "")

    m = data["meta"]
    say(
        f"solar-bench: {m['models']} models ({m['computed']['bounds']} computed, {m['reused']} reused), "
        f"hw {m['hw']}, mode {m['mode']}, {m.get('cache_state', 'cold')} caches, {m['workers']} worker(s) "
        f"({m['backend']}), wall {m['wall_s']:.1f} s"
    )
    if m.get("timings_note"):
        say(f"note: {m['timings_note']}")
    # left out first when narrow: coverage and the median (rank 3), the failures by class (listed
    # below the table too), then the counts of bounded and validated models
    t = Fit(None, [Col("group", key=True, breaks="_-./"), Col("target", key=True),
                   Col("models", right=True), Col("bounded", right=True, rank=1),
                   Col("validated", right=True, rank=1), Col("coverage", right=True, rank=3),
                   Col("failed", breaks=",", rank=2), Col("measured", right=True),
                   Col("geomean\nunfused", right=True), Col("geomean\nfused", right=True),
                   Col("geomean\ncache-\naware", right=True), Col("median\nfused", right=True, rank=3),
                   Col("violations", right=True)], wider="COLUMNS={n} shows all")
    for g in data["groups"]:
        failed = ", ".join(f"{k} {v}" for k, v in sorted(g["failed"].items())) or "0"
        gm = g["headroom_geomean"]
        med = (g["headroom_distribution"].get("fused") or {}).get("median")
        t.add_row(g["group"], g["target"], g["models"], g["bounded"], g["validated"],
                  f"{100 * g['coverage']:.0f}%", failed, g["measured"], fmt_x(gm["unfused"]),
                  fmt_x(gm["fused"]), fmt_x(gm["cache_aware"]), fmt_x(med), g["violations"])
    sys.stdout.write(render(t, width))
    say("headroom = measured / bound (geometric mean over validated, measured models)")
    for target in dict.fromkeys(r.get("target") for r in data["rows"] if r.get("sol_score") is not None):
        scores = [r["sol_score"] for r in data["rows"]
                  if r.get("target") == target and r.get("sol_score") is not None]
        if scores:
            say(f"SOL score on {target} (S = 1/(1+(T_k-T_SOL)/(T_b-T_SOL)), T_SOL = max(fused, "
                f"cache-aware)): mean {sum(scores) / len(scores):.3f} over {len(scores)} workloads")
    failed = [r for r in data["rows"] if r["status"] != "ok"]
    seen = set()
    if failed:
        say(f"\nfailed models ({len({row_key(r) for r in failed})}):")
        for r in failed:
            if row_key(r) in seen:
                continue
            seen.add(row_key(r))
            say(
                f"  {row_key(r)}: [{r['error_class'] or r['status']}] {(r['error'] or '')[:160]}"
            )
    if data.get("measure_errors"):
        say(f"\ntiming failed ({len(data['measure_errors'])}):")
        for k, v in data["measure_errors"].items():
            say(f"  {k}: {v[:160]}")
    v = data["violations"]
    say(f"\nviolations: {len(v)}")
    for x in v:
        bound = max(b for b in (x["fused_s"], x["cache_aware_s"]) if b is not None)
        say(
            f"  VIOLATION {x['group']}/{x['model']} on {x['target']}: measured {fmt_s(x['measured_min_s'])}"
            f" < {x['bound']} bound {fmt_s(bound)} "
            f"(fused bound by {x['fused_bottleneck']}: "
            + ", ".join(f"{k} {fmt_s(t)}" for k, t in (x["fused_terms_s"] or {}).items())
            + ")"
        )
        for op in x["ops"]:
            say(
                f"      {op['op']} @ {op['loc']}: {op['flops']:,} FLOPs, {op['bytes']:,} B, "
                f"bound {fmt_s(op['bound_s'])} ({100 * op['share']:.0f}%, {op['bottleneck']})"
            )
