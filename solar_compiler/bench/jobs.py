"""The jobs a forked sandbox runs: bounds (the `solar-opt` pipeline) and timing.

`bounds_job` builds a `solar-opt` command line and runs it with `driver.run_pipeline`, so the bench
and `solar-opt` share one pipeline; `translate{sandboxed=true}` keeps the frontend in this process
(the fork is the sandbox). The result is the JSON report only (schema `solar-report/1`).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from dataclasses import asdict, dataclass, replace
from typing import Any


@dataclass(frozen=True)
class BoundsConfig:
    hw: str = "H100_SXM"
    mode: str = "eval"
    step: str = "forward"  # forward | train (solar-opt --step, docs/training.md)
    optimizer: str | None = None  # with step train: solar-opt --optimizer
    precision: str | None = None
    precision_reason: str | None = None  # why the policy (a SOL-ExecBench workload's tolerance)
    no_narrow: bool = False
    cache_state: str = "cold"  # the timing contract of the bounds (solar-opt --cache-state)
    validate: bool = True
    no_cache: bool = False
    memory_gb: float = 8.0

    def fingerprint_fields(self) -> dict[str, Any]:
        """What the bounds depend on (not the limits or the cache, which only decide whether they come)."""
        d = asdict(self)
        for k in ("no_cache", "memory_gb"):
            d.pop(k)
        if self.step == "forward":  # forward bounds stored before --step keep their fingerprint
            d.pop("step"), d.pop("optimizer")
        if self.precision_reason is None:  # bounds stored before it keep their fingerprint
            d.pop("precision_reason")
        return d

    def for_unit(self, unit: Any) -> BoundsConfig:
        """The configuration of one unit: a SOL-ExecBench workload's own precision policy (from its
        tolerance, `Unit.precision`) unless the run names one."""
        if self.precision is not None or getattr(unit, "precision", None) is None:
            return self
        return replace(self, precision=unit.precision, precision_reason=unit.precision_reason)


def solar_opt_argv(path: str, cfg: BoundsConfig, out_json: str) -> list[str]:
    """The `solar-opt` command line of one model (sandboxed: the frontend runs in-process)."""
    fe = ["sandboxed=true", f"memory-gb={cfg.memory_gb:g}"]
    if not cfg.validate:
        fe.append("validate=false")
    argv = [
        path,
        "--translate",
        "--roofline=all",
        f"--hw={cfg.hw}",
        f"--mode={cfg.mode}",
        f"--cache-state={cfg.cache_state}",
        "--frontend-options",
        " ".join(fe),
        "--format=json",
        "-o",
        out_json,
    ]
    if cfg.step != "forward":
        argv.append(f"--step={cfg.step}")
    if cfg.optimizer:
        argv.append(f"--optimizer={cfg.optimizer}")
    if cfg.precision:
        argv.append(f"--precision={cfg.precision}")
    if cfg.precision_reason:
        argv.append(f"--precision-reason={cfg.precision_reason}")
    if cfg.no_narrow:
        argv.append("--no-narrow")
    if cfg.no_cache:
        argv.append("--no-cache")
    return argv


def bounds_job(path: str, cfg: BoundsConfig) -> dict[str, Any]:
    """The JSON report of one model, and how long the pipeline took."""
    from solar_compiler.driver import run_pipeline

    tmp = tempfile.mkdtemp(prefix="solar-bench-")
    try:
        t0 = time.perf_counter()
        report = run_pipeline(solar_opt_argv(path, cfg, os.path.join(tmp, "report.json")))
        if report is None:
            raise RuntimeError("solar-opt produced no JSON report")
        return {"report": report, "pipeline_s": round(time.perf_counter() - t0, 3)}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
