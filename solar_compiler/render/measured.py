"""Measured times beside the bounds (`--measured`): per target and fidelity the bound, "% of SOL"
(100 x bound / measured, as Nsight Compute's SOL %) and the headroom (measured / bound: the most any
implementation could gain); per measured module the same against its part of the unfused bound. A
measured time below a bound is shown as a violation: a bug in the bound or a measurement of
something else, never a success."""

from __future__ import annotations

from typing import Any

from solar_compiler.render.fit import Col, Fit
from solar_compiler.render.fmt import fmt_time

VIOLATION = ("measured below a bound: a bound is never beaten by a correct measurement of this program; "
             "check what was timed, else report it as a bug in the bound")


def _cells(c: dict[str, Any] | None) -> list[str]:
    if c is None:
        return ["n/a", "", ""]
    x = "inf" if c["headroom_x"] is None else f"{c['headroom_x']:.3g}x"
    flag = " BELOW" if c["below_bound"] else ""
    return [fmt_time(c["bound_s"]), f"{c['percent_of_sol']:.1f}%{flag}", x]


def measured_tables(r: dict[str, Any]) -> tuple[list[Any], list[str]]:
    """The tables and notes of the `measured` section (nothing when no time was given)."""
    m = r.get("measured")
    if not m:
        return [], []
    hws = list(r["bounds"])
    tables, notes = [], []
    violated = False
    if m["sol"] is not None:
        cols = [Col("fidelity", key=True)]
        for h in hws:
            cols += [Col(f"{h}\nbound", right=True, group=h), Col("% of SOL", right=True, group=h),
                     Col("headroom", right=True, group=h)]
        t = Fit(f"measured {fmt_time(m['total_s'])} against the bounds (% of SOL = bound / measured)", cols)
        for f in r["fidelity"]:
            cells = [f]
            for h in hws:
                c = m["sol"][h][f]
                violated |= bool(c and c["below_bound"])
                cells += _cells(c)
            t.add_row(*cells)
        tables.append(t)
    if m["modules"]:
        cols = [Col("module", key=True, breaks="."), Col("measured", right=True, key=True)]
        for h in hws:
            cols += [Col(f"{h}\nbound", right=True, group=h), Col("% of SOL", right=True, group=h),
                     Col("headroom", right=True, group=h)]
        t = Fit("measured modules against their part of the unfused bound (each op one kernel)", cols)
        for row in m["modules"]:
            cells = [row["path"], fmt_time(row["measured_s"])]
            for h in hws:
                c = row["sol"][h]
                violated |= bool(c and c["below_bound"])
                cells += _cells(c)
            t.add_row(*cells)
        tables.append(t)
    if violated:
        notes.append(f"VIOLATION: {VIOLATION}")
    return tables, notes
