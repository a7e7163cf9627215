"""SOL-violation check: our bounds for a GPU target against the model's measured time on that GPU.

For each `examples/torch/*.py` (or the files given): (1) the bounds from `solar-opt --translate
--roofline=all --hw HW --mode MODE --format=json` with validation off (validation runs on CPU in
CI; here it would only spend device time), one subprocess per example, several in parallel, before
any GPU work; (2) the forward timed as KernelBench times it: `Model(*get_init_inputs())` moved to
the device without `.eval()` (train mode; `--mode eval` calls `.eval()`, and the bounds follow the
same mode, since batch-norm and dropout differ), `get_inputs()` moved there, `torch.no_grad()`,
3 warm-up calls, one discarded and N timed calls, each after an L2 flush (a 256 MB write) and
bracketed by CUDA events, fp32, PyTorch's default TF32 settings untouched; (3) a table, with
VIOLATION where the fastest measured call beats the fused or the cache-aware bound (a bound that a
real run beats is a bug in the bound), and `results.json` + `results.csv` in `--out`.

Exit status: 1 if any violation, else 2 if any example could not be bounded or timed (or was skipped
by `--budget-s`), else 0. `--dry-run` runs on the CPU (perf_counter, no L2 flush) to test the script
without a GPU; its timings say nothing about any bound. See benchmarks/README.md.

    python benchmarks/gpu_sol_check.py --hw H200 --mode train --out $OUT [files...]
"""

from __future__ import annotations

import argparse
import csv
import gc
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples" / "torch"
COLUMNS = ("example", "measured_min_ms", "measured_median_ms", "trials", "fused_ms", "cache_aware_ms",
           "unfused_ms", "headroom", "status", "note")
FLUSH_ELEMENTS = 32 * 1024 * 1024  # int64: 256 MB, KernelBench's L2 thrash (the H200 has 60 MB of L2)
DRIVER = "import sys; from solar_compiler.driver import main; sys.exit(main(sys.argv[1:]))"


@dataclass
class Bounds:
    fused_s: float
    cache_aware_s: float | None
    unfused_s: float
    bottleneck: str


@dataclass
class Timing:
    min_ms: float
    median_ms: float
    trials: int
    note: str = ""


@dataclass
class Row:
    example: str
    bounds: Bounds | None = None
    timing: Timing | None = None
    error: str | None = None


# ---- bounds ---------------------------------------------------------------------------------------

def bounds_command(path: Path, json_out: Path, hw: str, mode: str, precision: str | None,
                   cache_state: str = "cold") -> list[str]:
    cmd = [sys.executable, "-c", DRIVER, str(path), "--translate", "--roofline=all", f"--hw={hw}",
           f"--mode={mode}", "--frontend-options", "validate=false", "--format=json", "-o", str(json_out),
           f"--cache-state={cache_state}"]
    return cmd + ([f"--precision={precision}"] if precision else [])


def read_bounds(report: dict[str, Any], hw: str) -> Bounds:
    """The H200 (or `hw`) entry of a `solar-report/1` dict; a report for several targets must name it."""
    table = report["bounds"]
    key = hw if hw in table else (next(iter(table)) if len(table) == 1 else None)
    if key is None:
        raise ValueError(f"report has no bounds for '{hw}' (has {', '.join(table)})")
    b = table[key]
    return Bounds(float(b["fused_s"]), None if b["cache_aware_s"] is None else float(b["cache_aware_s"]),
                  float(b["unfused_s"]), str(b["fused_bottleneck"]))


def preflight() -> str | None:
    """Why `solar-opt` cannot run in a child of this interpreter, or None. Run from outside the repo:
    the checkout's `solar_compiler/` folder is not an importable package without installation
    (pyproject maps `dialects/` and `passes/` into it), so the child must find the installed one."""
    probe = "import solar_compiler.passes, solar_compiler.dialects.loop, islpy, lark, xdsl, torch"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          cwd=tempfile.gettempdir())
    if done.returncode == 0:
        return None
    last = (done.stderr.strip().splitlines() or ["(no message)"])[-1]
    return f"solar-opt cannot run here ({last}); see benchmarks/README.md for installing it"


def report_path(cache: Path, path: Path, hw: str, mode: str, precision: str | None,
                cache_state: str = "cold") -> Path:
    warm = ".warm" if cache_state == "warm" else ""
    return cache / f"{path.stem}.{hw}.{mode}{'.' + precision if precision else ''}{warm}.json"


def compute_bounds(path: Path, cache: Path, hw: str, mode: str, precision: str | None,
                   timeout_s: float, cache_state: str = "cold") -> Bounds | str:
    """Bounds of one example, or the one-line reason there are none. `cache/<stem>.<hw>.<mode>.json`
    is reused when present (bounds computed earlier, e.g. on a CPU machine: no device time)."""
    json_out = report_path(cache, path, hw, mode, precision, cache_state)
    if not json_out.exists():
        cmd = bounds_command(path, json_out, hw, mode, precision, cache_state)
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, cwd=cache)
        except subprocess.TimeoutExpired:
            return f"bounds: solar-opt ran past {timeout_s:.0f} s"
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or ["(no message)"])[-1]
            return f"bounds: {last}"
    try:
        return read_bounds(json.loads(json_out.read_text()), hw)
    except (OSError, ValueError, KeyError, TypeError) as e:
        return f"bounds: unreadable report {json_out.name}: {e}"


# ---- timing ---------------------------------------------------------------------------------------

def load_example(path: Path):
    spec = importlib.util.spec_from_file_location(f"solcheck_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise ValueError(f"{path}: not a Python file")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    for name in ("Model", "get_inputs", "get_init_inputs"):
        if not hasattr(mod, name):
            raise ValueError(f"{path}: defines no {name}")
    return mod


def time_model(path: Path, *, dry_run: bool, mode: str, trials: int, min_trials: int, cap_s: float,
               compile_model: bool, seed: int = 42, flush: bool = True) -> Timing:
    """min and median ms of the forward, KernelBench style (module docstring). The number of timed
    calls is cut so that they take about `cap_s` (at least `min_trials`). A forward that creates
    tensors without a device (torch.rand(...) inside forward) fails against device inputs; it is then
    rerun with the device as default device, which adds Python overhead per op (so it can only raise
    the time, i.e. hide a violation, never fake one) and the row's note says so."""
    import torch

    dev = torch.device("cpu" if dry_run else "cuda")
    mod = load_example(path)
    torch.manual_seed(seed)
    model = mod.Model(*mod.get_init_inputs()).to(dev)
    if mode == "eval":
        model.eval()
    torch.manual_seed(seed)
    inputs = [x.to(dev) if isinstance(x, torch.Tensor) else x for x in mod.get_inputs()]
    fn = torch.compile(model) if compile_model else model
    try:
        return _timed(fn, inputs, dev, trials, min_trials, cap_s, "", flush)
    except RuntimeError as e:
        if "same device" not in str(e):
            raise
    torch.set_default_device(dev)
    try:
        note = "forward creates tensors: default device set"
        return _timed(fn, inputs, dev, trials, min_trials, cap_s, note, flush)
    finally:
        torch.set_default_device(None)


def _timed(fn, inputs: list, dev, trials: int, min_trials: int, cap_s: float, note: str,
           flush: bool = True) -> Timing:
    import torch

    cuda = dev.type == "cuda"
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    flush_buf = torch.empty(FLUSH_ELEMENTS, dtype=torch.int64, device=dev) if cuda else None
    with torch.no_grad():
        for _ in range(3):
            t0 = time.perf_counter()
            fn(*inputs)
            sync()
            last = time.perf_counter() - t0
        n = max(min_trials, min(trials, int(cap_s / max(last, 1e-6))))
        times: list[float] = []
        for i in range(n + 1):  # the first timed call is discarded, as KernelBench does
            if cuda:
                if flush:
                    flush_buf.fill_(42)
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                sync()
                start.record()
                fn(*inputs)
                end.record()
                sync()
                ms = start.elapsed_time(end)
            else:
                t0 = time.perf_counter()
                fn(*inputs)
                ms = (time.perf_counter() - t0) * 1e3
            if i:
                times.append(ms)
    note = note if cuda else (note or "dry run: CPU, no flush")
    return Timing(min(times), statistics.median(times), n, note)


# ---- verdict and output ---------------------------------------------------------------------------

def status(row: Row) -> str:
    """VIOLATION when the fastest call beats the fused or cache-aware bound; ERROR when a half failed;
    "bounded" when nothing was timed (--bounds-only)."""
    if row.error is not None:
        return "SKIPPED" if row.error.startswith("SKIPPED") else "ERROR"
    assert row.bounds is not None
    if row.timing is None:
        return "bounded"  # --bounds-only
    measured_s = row.timing.min_ms * 1e-3
    floor = max(row.bounds.fused_s, row.bounds.cache_aware_s or 0.0)
    return "VIOLATION" if measured_s < floor else "ok"


def record(row: Row) -> dict[str, Any]:
    b, t = row.bounds, row.timing

    def ms(s: float | None) -> float | None:
        return None if s is None else s * 1e3

    return {
        "example": row.example,
        "measured_min_ms": t.min_ms if t else None, "measured_median_ms": t.median_ms if t else None,
        "trials": t.trials if t else None,
        "fused_ms": ms(b.fused_s) if b else None, "cache_aware_ms": ms(b.cache_aware_s) if b else None,
        "unfused_ms": ms(b.unfused_s) if b else None,
        "headroom": t.min_ms / (b.fused_s * 1e3) if b and t and b.fused_s > 0 else None,
        "status": status(row), "note": row.error or (t.note if t else ""),
    }


def table(records: list[dict[str, Any]]) -> str:
    def cell(v: Any) -> str:
        if v is None:
            return "-"
        if isinstance(v, float):
            return f"{v:.4g}"
        return str(v)

    head = ("example", "min ms", "median ms", "n", "fused ms", "cache-aware ms", "unfused ms", "headroom",
            "status", "note")
    rows = [head] + [tuple(cell(r[c]) for c in COLUMNS) for r in records]
    widths = [max(len(r[i]) for r in rows) for i in range(len(head) - 1)]
    lines = ["  ".join(r[i].ljust(widths[i]) for i in range(len(widths))) + "  " + r[-1] for r in rows]
    return "\n".join([lines[0], "-" * len(lines[0]), *lines[1:]])


def write_outputs(out: Path, records: list[dict[str, Any]], meta: dict[str, Any]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps({**meta, "rows": records}, indent=1))
    with open(out / "results.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS)
        w.writeheader()
        w.writerows(records)


def exit_code(records: list[dict[str, Any]]) -> int:
    if any(r["status"] == "VIOLATION" for r in records):
        return 1
    return 2 if any(r["status"] in ("ERROR", "SKIPPED") for r in records) else 0


# ---- main -----------------------------------------------------------------------------------------

def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("files", nargs="*", type=Path, help="model files (default: examples/torch/*.py)")
    p.add_argument("--hw", default="H200", help="hardware target of the bounds (default H200)")
    p.add_argument("--mode", choices=("train", "eval"), default="train",
                   help="train: no .eval(), as KernelBench (default); bounds use the same mode")
    p.add_argument("--precision", default=None, help="precision policy of the bounds (default: auto)")
    p.add_argument("--cache-state", choices=("cold", "warm"), default="cold",
                   help="timing contract: cold flushes L2 before each timed call and uses cold-cache bounds; "
                        "warm flushes nothing and uses warm-cache bounds")
    p.add_argument("--out", type=Path, required=True, help="folder for results.json and results.csv")
    p.add_argument("--bounds-dir", type=Path, default=None,
                   help="reuse/keep the bound reports here (default: a temporary folder)")
    p.add_argument("--bounds-only", action="store_true", help="compute the bounds, time nothing")
    p.add_argument("--dry-run", action="store_true", help="time on the CPU (no CUDA needed)")
    p.add_argument("--compile", action="store_true", help="time torch.compile(model) (inductor default)")
    p.add_argument("--trials", type=int, default=None, help="timed calls per example (100; dry run 5)")
    p.add_argument("--min-trials", type=int, default=5)
    p.add_argument("--cap-s", type=float, default=2.0, help="timed calls per example take about this long")
    p.add_argument("--budget-s", type=float, default=360.0, help="whole timing phase; later ones SKIPPED")
    p.add_argument("--workers", type=int, default=min(8, os.cpu_count() or 1), help="parallel bound jobs")
    p.add_argument("--bounds-timeout-s", type=float, default=300.0)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    files = sorted(a.files or EXAMPLES.glob("*.py"))
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        print(f"gpu_sol_check: error: no such file: {missing[0]}", file=sys.stderr)
        return 2
    files = [f.resolve() for f in files]
    if not (a.bounds_only or a.dry_run or cuda_available()):
        print("gpu_sol_check: error: CUDA is not available (use --dry-run on a CPU machine)", file=sys.stderr)
        return 2
    cache = (a.bounds_dir or Path(tempfile.mkdtemp(prefix="solbounds-"))).resolve()
    cache.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    todo = [f for f in files if not report_path(cache, f, a.hw, a.mode, a.precision, a.cache_state).exists()]
    why = preflight() if todo else None
    if why is not None:
        print(f"gpu_sol_check: error: {why}", file=sys.stderr)
        return 2
    with ThreadPoolExecutor(max(1, a.workers)) as pool:
        got = list(pool.map(lambda f: compute_bounds(f, cache, a.hw, a.mode, a.precision,
                                                     a.bounds_timeout_s, a.cache_state), files))
    rows = [Row(f.stem, bounds=b) if isinstance(b, Bounds) else Row(f.stem, error=b)
            for f, b in zip(files, got, strict=True)]
    print(f"bounds: {len(files)} examples in {time.perf_counter() - t0:.1f} s", flush=True)
    meta = {"hw": a.hw, "mode": a.mode, "precision": a.precision or "auto", "cache_state": a.cache_state,
            "dry_run": a.dry_run,
            "compile": a.compile, "bounds_only": a.bounds_only}
    if not a.bounds_only:
        meta.update(time_all(a, files, rows))
    records = [record(r) for r in rows]
    print(table(records))
    write_outputs(a.out, records, meta)
    kinds = ("ok", "bounded", "VIOLATION", "ERROR", "SKIPPED")
    counts = {s: sum(r["status"] == s for r in records) for s in kinds}
    print(" ".join(f"{k}={v}" for k, v in counts.items() if v) + f"  -> {a.out / 'results.json'}")
    return exit_code(records)


def cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


def time_all(a: argparse.Namespace, files: list[Path], rows: list[Row]) -> dict[str, Any]:
    """Time every bounded example in place (rows updated); the run's device facts for the JSON."""
    import torch

    trials = a.trials or (5 if a.dry_run else 100)
    start = time.perf_counter()
    for f, row in zip(files, rows, strict=True):
        if row.error is not None:
            continue
        if time.perf_counter() - start > a.budget_s:
            row.error = f"SKIPPED: timing budget of {a.budget_s:.0f} s spent"
            continue
        try:
            row.timing = time_model(f, dry_run=a.dry_run, mode=a.mode, trials=trials,
                                    min_trials=a.min_trials, cap_s=a.cap_s, compile_model=a.compile,
                                    flush=a.cache_state == "cold")
        except Exception as e:  # any failure of the user's model is that row's error, not the run's
            row.error = "timing: " + (" ".join(f"{type(e).__name__}: {e}".split())[:300])
        finally:
            gc.collect()
            if not a.dry_run:
                torch.cuda.empty_cache()
            if a.compile:
                torch._dynamo.reset()
        print(f"  {row.example}: {record(row)['status']}", flush=True)
    dev = "cpu" if a.dry_run else torch.cuda.get_device_name()
    return {"device": dev, "torch": torch.__version__, "trials": trials, "cap_s": a.cap_s,
            "clock": "perf_counter" if a.dry_run else
                     "cuda-events, " + ("L2 flushed" if a.cache_state == "cold" else "no flush (warm)"),
            "tf32_matmul": torch.backends.cuda.matmul.allow_tf32,
            "tf32_cudnn": torch.backends.cudnn.allow_tf32,
            "timing_s": round(time.perf_counter() - start, 1)}


if __name__ == "__main__":
    sys.exit(main())
