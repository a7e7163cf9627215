"""Start-up time of `solar-opt` and the heavy imports it must not pay for.

Times `solar-opt examples/loop/matmul.loop -p loop-stats` as full processes (median of --runs) and
lists, with `python -X importtime`, the top-level packages that run imports. torch, jax and litellm
belong to frontends and tools that load them on demand; loading one for a loop-IR input is a
regression (torch alone costs seconds).

    .venv/bin/python benchmarks/startup.py [--runs 5] [--limit 1.0]
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
FORBIDDEN = ("torch", "jax", "litellm")
COMMAND = ["examples/loop/matmul.loop", "-p", "loop-stats"]


def solar_opt() -> str:
    exe = Path(sys.executable).parent / "solar-opt"
    if not exe.exists():
        raise SystemExit(f"startup: {exe} not found (run `make install`)")
    return str(exe)


def time_runs(runs: int) -> tuple[list[float], list[float]]:
    """Wall and CPU (user + system) seconds per run; CPU time is the figure to trust on a busy machine."""
    wall, cpu = [], []
    for _ in range(runs):
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        subprocess.run([solar_opt(), *COMMAND], cwd=REPO, check=True, capture_output=True)
        wall.append(time.perf_counter() - t0)
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime)
    return wall, cpu


def imported_packages() -> set[str]:
    """Top-level packages imported by the same command, in-process, from `-X importtime`."""
    code = ("import sys; from solar_compiler.driver import main; "
            f"sys.exit(main({COMMAND + ['-o', '/dev/null']!r}))")
    r = subprocess.run([sys.executable, "-X", "importtime", "-c", code], cwd=REPO, capture_output=True,
                       text=True, check=True)
    pkgs = set()
    for line in r.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            name = line.rsplit("|", 1)[1].strip()
            if name != "imported package":
                pkgs.add(name.split(".")[0])
    return pkgs


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--limit", type=float, default=1.0, help="fail above this median (seconds)")
    args = ap.parse_args(argv)
    times, cpu = time_runs(args.runs)
    med = statistics.median(times)
    pkgs = imported_packages()
    bad = sorted(p for p in FORBIDDEN if p in pkgs)
    print(f"startup: solar-opt {' '.join(COMMAND)}: median {med * 1000:.0f} ms over {args.runs} runs "
          f"(min {min(times) * 1000:.0f}, max {max(times) * 1000:.0f}); median CPU time "
          f"{statistics.median(cpu) * 1000:.0f} ms")
    print(f"startup: {len(pkgs)} top-level packages imported; forbidden ({', '.join(FORBIDDEN)}): "
          f"{', '.join(bad) or 'none'}")
    return 1 if bad or med > args.limit else 0


if __name__ == "__main__":
    sys.exit(main())
