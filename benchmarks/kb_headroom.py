"""KernelBench headroom under both models of computation, from a finished `solar-bench` run.

`solar-bench ... --timings FILE` stores each problem's JSON report; every report carries the default
model's bounds (`bounds`) and the classical model's (`classical.bounds`: the products as written,
SOLAR's model). This reads them back with the timing file and prints, per level, the geomean of
measured time / fused bound under each model, and every violation (a measured time, the mean or the
fastest call, below an unfused, fused or cache-aware bound of either model), then the problems whose
default bound is below their classical one, with the rewrites the report names.

    nice .venv/bin/python benchmarks/kb_headroom.py build/kb_bench \
        /work/shared/data/kernelbench-timings/H100_Modal/baseline_time_torch.json --hw H100_SXM

Not a unit test: the figures depend on the KernelBench checkout and the timing file.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

FIDELITIES = ("unfused_s", "fused_s", "cache_aware_s")


def geomean(xs: list[float]) -> float:
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def load(bench: Path, timings: dict, hw: str) -> list[dict]:
    rows = []
    for rep in sorted((bench / "models").glob("level*/*.report.json")):
        level, name = rep.parent.name, rep.name.removesuffix(".report.json") + ".py"
        t = timings.get(level, {}).get(name)
        r = json.loads(rep.read_text())
        if t is None or hw not in r.get("bounds", {}):
            continue
        classical = (r.get("classical") or {}).get("bounds", {}).get(hw, r["bounds"][hw])
        rewrites = [w.get("what", w.get("kind")) for w in r.get("rewrites", [])]
        floor = any("sound floor" in n for n in r["validation"].get("notes", []))
        rows.append({"level": level, "name": name, "mean_s": t["mean"] / 1e3, "min_s": t["min"] / 1e3,
                     "validated": bool(r["validation"].get("validated")), "default": r["bounds"][hw],
                     "classical": classical, "rewrites": rewrites, "floor": floor})
    return rows


def violations(rows: list[dict]) -> list[str]:
    out = []
    for x in rows:
        for model in ("default", "classical"):
            for f in FIDELITIES:
                b = x[model].get(f)
                if b and x["min_s"] < b:
                    out.append(f"{x['level']}/{x['name']}: fastest call {x['min_s']:.4g} s "
                               f"< {model} {f} {b:.4g} s")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("bench", type=Path, help="solar-bench --out folder")
    ap.add_argument("timings", type=Path, help="KernelBench timing JSON (milliseconds)")
    ap.add_argument("--hw", default="H100_SXM")
    a = ap.parse_args()
    rows = load(a.bench, json.loads(a.timings.read_text()), a.hw)
    print("| level | bounded | validated | fused headroom geomean, default (validated) "
          "| classical (validated) | default (all bounded) | classical (all bounded) | min, default |")
    print("|---|---|---|---|---|---|---|---|")
    for level in sorted({x["level"] for x in rows}):
        lv = [x for x in rows if x["level"] == level and x["default"]["fused_s"] > 0]
        val = [x for x in lv if x["validated"]]

        def gm(xs: list[dict], model: str) -> str:
            return f"{geomean([x['mean_s'] / x[model]['fused_s'] for x in xs]):.2f}x"

        low = min(x["mean_s"] / x["default"]["fused_s"] for x in lv)
        print(f"| {level} | {len(lv)} | {len(val)} | {gm(val, 'default')} | {gm(val, 'classical')} "
              f"| {gm(lv, 'default')} | {gm(lv, 'classical')} | {low:.2f}x |")
    floors = [x for x in rows if x["floor"]]
    if floors:
        names = ", ".join(f"{x['level']}/{x['name']}" for x in floors)
        print(f"\nnarrowing ran out of its CPU budget (priced at the output floor): {names}")
        for level in sorted({x["level"] for x in floors}):
            lv = [x for x in rows if x["level"] == level and not x["floor"] and x["default"]["fused_s"] > 0]
            d = geomean([x["mean_s"] / x["default"]["fused_s"] for x in lv])
            c = geomean([x["mean_s"] / x["classical"]["fused_s"] for x in lv])
            print(f"  {level} without them: default {d:.2f}x, classical {c:.2f}x")
    bad = violations(rows)
    print(f"\nviolations: {len(bad)}")
    for line in bad:
        print("  " + line)
    moved = [x for x in rows if x["default"]["fused_s"] < x["classical"]["fused_s"] * (1 - 1e-9)]
    print(f"\nfused bound lower under the default model than classical: {len(moved)} problems")
    for x in moved:
        ratio = x["classical"]["fused_s"] / x["default"]["fused_s"]
        rw = x["rewrites"]
        named = "; ".join(rw[:4]) + (f"; ... {len(rw) - 4} more" if len(rw) > 4 else "") or "no rewrite named"
        print(f"  {x['level']}/{x['name']}: {ratio:.3f}x lower ({named})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
