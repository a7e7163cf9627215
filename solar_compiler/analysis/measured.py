"""Measured times against the bounds: "% of SOL" and headroom (the roofline pass's `measured`).

A measurement is one time for the whole program (`310us`), or a JSON file of times:
`{"total": "310us", "modules": {"h.0.attn": "80us", "mlp": 4.1e-5}}` (either key may be left out;
a number is seconds, a string a number with one of ns, us, ms, s). Per target and fidelity the record
gives, as Nsight Compute's "SOL %" does for throughput, `percent_of_sol` = 100 x bound / measured
(100% = at the speed of light), `headroom_x` = measured / bound (the most any implementation can
gain) and `headroom_s` = measured - bound. A module's bound is its part of the unfused bound (its
kernels, each through DRAM: `analysis/modules.py`), the figure comparable with an eager per-module
profile. A measured time below a bound is flagged (`below_bound`): that is a bug in the bound (or a
measurement of something else), never a success.
"""

from __future__ import annotations

import difflib
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from solar_compiler.errors import SolarError

_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0}
_TIME = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(ns|us|µs|ms|s)\s*$")
_FIDELITY_KEYS = {"unfused": "unfused_s", "fused": "fused_s", "cache-aware": "cache_aware_s"}


@dataclass(frozen=True)
class Measured:
    """What was measured: the whole program (`total_s`) and/or modules by path (seconds)."""

    source: str
    total_s: float | None = None
    modules: dict[str, float] = field(default_factory=dict)


def parse_time(text: object, what: str) -> float:
    """'310us' -> 3.1e-4; a JSON number is seconds. Must be positive."""
    if isinstance(text, bool) or not isinstance(text, int | float | str):
        raise SolarError(f"{what}: expected a time such as 310us or a number of seconds, got {text!r}")
    if isinstance(text, str):
        m = _TIME.match(text)
        if m is None:
            raise SolarError(f"{what}: bad time {text!r}: expected a number with one of ns, us, ms, s "
                             "(e.g. 310us)")
        value = float(m.group(1)) * _UNITS[m.group(2)]
    else:
        value = float(text)
    if not math.isfinite(value) or value <= 0:
        raise SolarError(f"{what}: a measured time must be positive, got {text!r}")
    return value


def parse_measured(text: str) -> Measured:
    """A time (`310us`) or the path of a JSON file of times (module docstring)."""
    if _TIME.match(text):
        return Measured(text, parse_time(text, "--measured"))
    path = Path(text)
    if not path.suffix.lower() == ".json" and not path.exists():
        raise SolarError(f"--measured {text!r}: expected a time such as 310us, or a JSON file of times")
    try:
        data = json.loads(path.read_text())
    except OSError as e:
        raise SolarError(f"{text}: cannot read the measured times: {e.strerror}") from None
    except json.JSONDecodeError as e:
        raise SolarError(f"{text}:{e.lineno}:{e.colno}: bad JSON: {e.msg}") from None
    if not isinstance(data, dict) or not data or set(data) - {"total", "modules"}:
        raise SolarError(f'{text}: expected {{"total": "310us", "modules": {{"path": "80us", ...}}}} '
                         "(either key may be left out)")
    total = parse_time(data["total"], f"{text}: total") if "total" in data else None
    mods = data.get("modules", {})
    if not isinstance(mods, dict):
        raise SolarError(f"{text}: modules: expected an object of module path -> time")
    return Measured(text, total, {str(k): parse_time(v, f"{text}: module {k!r}") for k, v in mods.items()})


def _compare(bound: float | None, measured: float) -> dict[str, Any] | None:
    if bound is None:
        return None
    return {"bound_s": bound, "percent_of_sol": 100.0 * bound / measured,
            "headroom_x": measured / bound if bound > 0 else None, "headroom_s": measured - bound,
            "below_bound": measured < bound}


def measured_record(report: dict[str, Any], m: Measured) -> dict[str, Any]:
    """The `measured` section of a report (built from the report's own bounds and module rows)."""
    targets = list(report["bounds"])
    out: dict[str, Any] = {"source": m.source, "total_s": m.total_s, "sol": None, "modules": []}
    if m.total_s is not None:
        out["sol"] = {h: {f: _compare(report["bounds"][h][_FIDELITY_KEYS[f]], m.total_s)
                          for f in report["fidelity"]} for h in targets}
    rows = {r["path"]: r for r in report.get("modules", [])}
    for path, t in m.modules.items():
        row = rows.get(path)
        if row is None:
            close = difflib.get_close_matches(path, [p for p in rows if p], n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            raise SolarError(f"{m.source}: module '{path}' is not a module of the program{hint}")
        out["modules"].append({"path": path, "measured_s": t,
                               "sol": {h: _compare(row["bound_s"][h], t) for h in targets}})
    return out


def violations(section: dict[str, Any] | None) -> list[str]:
    """Where a measured time is below a bound, as 'TARGET fidelity' or 'module PATH on TARGET': what
    `solar-opt --measured` names when it exits with SOL_VIOLATION_EXIT."""
    if not section:
        return []
    out = [f"{h} {f}" for h, fs in (section["sol"] or {}).items() for f, c in fs.items()
           if c and c["below_bound"]]
    out += [f"module {row['path']} on {h}" for row in section["modules"] for h, c in row["sol"].items()
            if c and c["below_bound"]]
    return out


# `solar-opt --measured T` exits with this when a measured time is below a bound, so CI can gate on
# it (1: user error, 2: usage, 3: the manual LLM provider waits, 70: internal error; 128+N: signals).
SOL_VIOLATION_EXIT = 4
