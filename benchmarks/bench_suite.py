"""solar-bench speed: the whole examples suite with 1 and 2 warm workers, and what one model costs
in a warm worker against a fresh `solar-opt` process; plus where a single `solar-opt` run's
start-up time goes.

    .venv/bin/python benchmarks/bench_suite.py [--hw H100_SXM] [--models matmul softmax ...]

Everything runs with --no-cache (every translation is real). Wall times on a shared machine vary;
CPU seconds (user + system of the child processes) are printed beside them.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
DEFAULT_MODELS = ("matmul", "softmax", "conv_bn_relu", "layernorm", "mlp2", "sdpa", "gemm_bias_gelu",
                  "resnet_block")


def timed(cmd: list[str], **kw) -> tuple[float, float, subprocess.CompletedProcess]:
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, **kw)
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime), done


def suite(hw: str, workers: int, out: Path) -> dict:
    cmd = [str(BIN / "solar-bench"), "examples/torch", "--hw", hw, "--workers", str(workers), "--no-cache",
           "--force", "--out", str(out)]
    wall, cpu, done = timed(cmd, cwd=REPO)
    if done.returncode not in (0, 1):
        raise SystemExit(f"bench_suite: {' '.join(cmd)} failed: {done.stderr.strip().splitlines()[-1:]}")
    data = json.loads((out / "results.json").read_text())
    per = {}
    for p in (out / "models" / "torch").glob("*.bounds.json"):
        rec = json.loads(p.read_text())
        per[rec["unit"]["name"].removesuffix(".py")] = rec
    ok = sum(1 for r in per.values() if r["status"] == "ok")
    return {"wall_s": wall, "cpu_s": cpu, "models": data["meta"]["models"], "ok": ok, "per_model": per,
            "workers": data["meta"]["worker_info"]}


def fresh(model: str, hw: str) -> tuple[float, float]:
    cmd = [str(BIN / "solar-opt"), f"examples/torch/{model}.py", "--translate", "--roofline=all", "--hw", hw,
           "--format=json", "--no-cache"]
    wall, cpu, done = timed(cmd, cwd=REPO)
    if done.returncode != 0:
        raise SystemExit(f"bench_suite: {' '.join(cmd)} failed: {done.stderr.strip()}")
    return wall, cpu


STARTUP_STEPS = {
    "python + solar_compiler.driver (parent)": "import solar_compiler.driver",
    "import torch": "import torch",
    "import torch + torch._dynamo + torch.export": "import torch, torch._dynamo, torch.export",
    "... + first torch.export of a tiny model": (
        "import torch, torch.export\n"
        "class M(torch.nn.Module):\n    def forward(self, x): return torch.relu(x) * 2\n"
        "torch.export.export(M(), (torch.randn(4, 4),))"),
}


def startup(runs: int) -> dict[str, tuple[float, float]]:
    """Median wall and CPU seconds of each cumulative start-up step, in fresh processes."""
    out = {}
    for name, code in STARTUP_STEPS.items():
        got = [timed([sys.executable, "-c", code])[:2] for _ in range(runs)]
        out[name] = (statistics.median(w for w, _ in got), statistics.median(c for _, c in got))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hw", default="H100_SXM")
    ap.add_argument("--models", nargs="*", default=list(DEFAULT_MODELS))
    ap.add_argument("--skip-suite", action="store_true")
    ap.add_argument("--runs", type=int, default=5, help="fresh processes per start-up step")
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-suite-"))
    runs = {}
    if not a.skip_suite:
        for w in (1, 2):
            r = runs[w] = suite(a.hw, w, tmp / f"w{w}")
            info = ", ".join(f"import {i['import_s']:.1f} s + warm-up {i['warmup_s']:.1f} s"
                             for i in r["workers"])
            print(f"solar-bench examples/torch --hw {a.hw} --workers {w}: {r['models']} models "
                  f"({r['ok']} ok) in {r['wall_s']:.1f} s wall, {r['cpu_s']:.1f} s CPU; worker start: {info}",
                  flush=True)
    print("\nper model: warm worker (fork: pipeline in-process) vs fresh solar-opt process (--no-cache)")
    print(f"{'model':<18} {'warm s':>8} {'fresh wall s':>13} {'fresh CPU s':>12}")
    warm_all, fresh_all = [], []
    for m in a.models:
        fw, fc = fresh(m, a.hw)
        rec = runs.get(1, {}).get("per_model", {}).get(m)
        ws = rec["seconds"] if rec else float("nan")
        warm_all.append(ws)
        fresh_all.append(fw)
        print(f"{m:<18} {ws:>8.2f} {fw:>13.2f} {fc:>12.2f}", flush=True)
    if a.models:
        print(f"{'median':<18} {statistics.median(warm_all):>8.2f} {statistics.median(fresh_all):>13.2f}")
    print(f"\nsingle solar-opt start-up, where it goes (median of {a.runs} fresh processes; cumulative):")
    for k, (w, c) in startup(a.runs).items():
        print(f"  {k:<48} {w:6.2f} s wall {c:6.2f} s CPU")
    return 0


if __name__ == "__main__":
    sys.exit(main())
