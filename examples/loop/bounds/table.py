"""Fused vs cache-aware bounds of the programs in this folder on one target (docs/bounds.md,
"Measured on the examples"): `.venv/bin/python examples/loop/bounds/table.py [HW]`.

Runs `solar-opt --roofline=all --format=json` (narrow-needed on, the default),
`--roofline=fused --no-narrow` (the as-written fused bound) and `--roofline=cache-aware
--cache-size=1MiB` (what-if: 1 MiB of on-chip storage) per program; prints a Markdown table."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOLAR_OPT = str(Path(sys.executable).parent / "solar-opt")


def report(path: Path, hw: str, *flags: str) -> dict:
    out = subprocess.run([SOLAR_OPT, str(path), "--hw", hw, "--format=json", *flags],
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out)


def us(s: float) -> str:
    return f"{s * 1e6:,.1f}"


def main(hw: str = "H100_SXM") -> None:
    print(f"target {hw}\n")
    print("| program | GFLOP needed (as written) | fused as written, us | fused, us | cache-aware, us "
          "| cache-aware / fused | binds | sm-level bytes / compulsory | what-if 1 MiB: ratio |")
    print("|---|---|---|---|---|---|---|---|---|")
    for path in sorted(HERE.glob("*.loop")):
        r = report(path, hw, "--roofline=all")
        w = report(path, hw, "--roofline=fused", "--no-narrow")
        small = report(path, hw, "--roofline=cache-aware", "--cache-size=1MiB")["bounds"][hw]
        b, t = r["bounds"][hw], r["totals"]
        sm = next(lv for lv in b["levels"] if lv["name"] == "sm")
        print(f"| {path.stem} | {t['flops'] / 1e9:,.2f} ({t['flops_as_written'] / 1e9:,.2f}) "
              f"| {us(w['bounds'][hw]['fused_s'])} | {us(b['fused_s'])} | {us(b['cache_aware_s'])} "
              f"| {b['cache_aware_s'] / b['fused_s']:.3f} | {b['cache_aware_bottleneck']} "
              f"| {sm['bytes'] / t['bytes_fused']:.2f} | {small['cache_aware_s'] / small['fused_s']:.3f} |")


if __name__ == "__main__":
    main(*sys.argv[1:])
