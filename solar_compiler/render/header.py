"""The lines of the report header that say what the bounds were priced with, per target: the rate
each dtype's matrix and vector work was priced at (and which figure that is), the DRAM bandwidth,
and the memory levels in plain words. Long lines wrap at the report's width under their label."""

from __future__ import annotations

import textwrap
from collections.abc import Iterable
from typing import Any

from solar_compiler.render.fmt import fmt_rate, fmt_time

LABEL_WIDTH = 12


def rates_line(hw: dict[str, Any]) -> str:
    """'matrix bf16 989.4 TFLOP/s dense (BF16 tensor); vector bf16 133.8 TFLOP/s (BF16 vector);
    DRAM 3.35 TB/s'."""
    parts = []
    mat = [f"{d} {fmt_rate(f['value'], 'FLOP/s')} dense{_figure(f)}" for d, f in hw["matrix"].items()]
    if mat:
        parts.append("matrix " + ", ".join(mat))
    vec = [f"{d} {fmt_rate(f['value'], 'FLOP/s')}{_figure(f)}" for d, f in hw["vector"].items()]
    if vec:
        parts.append("vector " + ", ".join(vec))
    sums = [f"{d} {fmt_rate(f['value'], 'FLOP/s')}{_figure(f)}" for d, f in (hw.get("sum") or {}).items()]
    if sums:
        parts.append("sums on the matrix unit " + ", ".join(sums))
    parts.append(f"DRAM {fmt_rate(hw['dram_bw']['value'], 'B/s')}")
    return "; ".join(parts)


def _figure(f: dict[str, Any]) -> str:
    label = f.get("label")
    est = ", estimate" if f.get("estimate") else ""
    return f" ({label}{est})" if label else (" (estimate)" if est else "")


def memory_line(hw: dict[str, Any]) -> str | None:
    """'on-chip capacity 121.6 MB, fed at 3.35 TB/s; per-SM storage 512 KiB x 132, fed at 16.7 TB/s'."""
    levels = hw.get("memory") or []
    if not levels:
        return None
    return "; ".join(f"{lv['describe']}, fed at {fmt_rate(lv['bandwidth'], 'B/s')}" for lv in levels)


def target_lines(name: str, hw: dict[str, Any]) -> list[tuple[str, str]]:
    """(label, text) pairs for one target."""
    out = [(f"{name}:", hw["description"]), ("  rates:", rates_line(hw))]
    mem = memory_line(hw)
    if mem:
        out.append(("  memory:", mem))
    lat = hw.get("latency")
    if lat:
        est = ", estimate" if lat["estimate"] else ""
        out.append(("  latency:", f"floor {fmt_time(lat['value'])}: one read's round trip from outside an SM "
                                  f"(l2.latency{est})"))
    if "f32" in hw["matrix"]:  # the policy only changes how f32 contractions are priced
        out.append(("  policy:", hw["precision"]))
    return out


def wrap(pairs: Iterable[tuple[str, str]], width: int) -> list[str]:
    """`label text` lines wrapped at `width`, continuation lines indented under the text."""
    out: list[str] = []
    for label, text in pairs:
        if not label:
            out += textwrap.wrap(text, width=max(width, 40), subsequent_indent=" " * LABEL_WIDTH,
                                 break_on_hyphens=False) or [""]
            continue
        first = f"{label:<{LABEL_WIDTH}}"
        if len(first) > LABEL_WIDTH:
            first += " "
        out += textwrap.wrap(text, width=max(width, 40), initial_indent=first,
                             subsequent_indent=" " * LABEL_WIDTH, break_on_hyphens=False,
                             break_long_words=True) or [first.rstrip()]
    return out


def split_label(line: str) -> tuple[str, str]:
    """An old-style header line 'label:     text' as (label, text), to wrap it like the others."""
    head, sep, rest = line.partition(": ")
    if sep and len(head) < LABEL_WIDTH and " " not in head.strip():
        return head + ":", rest.strip()
    return "", line
