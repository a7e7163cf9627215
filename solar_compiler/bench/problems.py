"""A SOL-ExecBench problem's workloads as one bench job: one fork translates them together.

The workloads of a problem are one program at several shapes. Run as separate units, each fork
captures, translates and validates its workload on its own; run as one job (`problem_job`), the
bounds pipeline of each workload runs inside `translation_batch`, so the first translation
translates them all in this fork (`frontends/job.py`): a workload that is an already validated
workload's program with only sizes changed carries that validation over (method
"other-workload") instead of being executed again at full size, and the fork and its warm-up are
paid once. The job returns one result per workload, so the bench stores one record per unit as
before (`unit_outcomes`).

A job that fails as a whole (a crash, its time limit: the per-unit limit times its workloads, the
memory killer) says nothing about which workload caused it: its workloads then run again as units
of their own (`unit_outcomes` returns None for them), so one bad workload cannot sink the others.
So does a workload that failed for memory inside the job, since the batch holds every workload's
capture at once.
"""

from __future__ import annotations

import os
import resource
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from .forked import Outcome, failure
from .jobs import BoundsConfig, bounds_job
from .suite import Unit


def plan(units: list[Unit]) -> tuple[list[list[Unit]], list[Unit]]:
    """`units` split into problems (the workloads of one problem folder, two or more: one job
    each) and the units that run alone (model files, a problem with one workload left to do)."""
    problems: dict[tuple[str, str, str], list[Unit]] = {}
    for u in units:
        if u.workload is not None:  # its generated file's folder is the problem's own
            problems.setdefault((u.group, u.name, str(Path(u.path).parent)), []).append(u)
    batches = [us for us in problems.values() if len(us) > 1]
    batched = {u.key for us in batches for u in us}
    return batches, [u for u in units if u.key not in batched]


def problem_job(paths: list[str], cfg: BoundsConfig | list[BoundsConfig],
                logs: list[str | None] | None = None) -> list[dict[str, Any]]:
    """`bounds_job` of each path (the workloads of one problem) with their translations batched;
    per path, in order, {"ok": True, "report", "pipeline_s"} or {"ok": False, "error_class",
    "error"}, with the workload's own "seconds", "cpu_s" and "peak_rss_kb" (the batch is translated
    in the first workload's pipeline: its seconds include the others' translation). `logs`: each
    workload's log, where this fork's output goes while it runs."""
    from solar_compiler.frontends.job import translation_batch

    cfgs = cfg if isinstance(cfg, list) else [cfg] * len(paths)  # one per workload, or one for all
    out: list[dict[str, Any]] = []
    with translation_batch(paths):
        for i, (p, cfg) in enumerate(zip(paths, cfgs, strict=True)):
            if logs and logs[i]:
                _log_to(logs[i])
            t0, c0 = time.monotonic(), _cpu_s()
            try:
                r: dict[str, Any] = {"ok": True, **bounds_job(p, cfg)}
            except Exception as exc:  # noqa: BLE001 - this workload's failure, the others go on
                traceback.print_exc()
                cls, msg = failure(exc, cfg.memory_gb)
                r = {"ok": False, "error_class": cls, "error": msg}
            r.update(seconds=round(time.monotonic() - t0, 3), cpu_s=round(_cpu_s() - c0, 3),
                     peak_rss_kb=_peak_rss_kb())
            out.append(r)
    return out


def unit_outcomes(job: Outcome, units: list[Unit]) -> list[tuple[Unit, Outcome | None]]:
    """Per unit of a problem job, its Outcome, or None when it must run again alone (the job
    failed as a whole, or the workload ran out of memory in the batch)."""
    results = job.value if job.ok else None
    if not isinstance(results, list) or len(results) != len(units):
        return [(u, None) for u in units]
    batch = {"workloads": len(units), "seconds": job.seconds, "cpu_s": job.cpu_s}
    out: list[tuple[Unit, Outcome | None]] = []
    for u, r in zip(units, results, strict=True):
        if not r["ok"] and r["error_class"] == "memory":
            out.append((u, None))
            continue
        value = {"report": r["report"], "pipeline_s": r["pipeline_s"]} if r["ok"] else None
        out.append((u, Outcome(r["ok"], value, r.get("error_class"), r.get("error"), r["seconds"],
                               r["peak_rss_kb"], r["cpu_s"], {**job.extra, "problem_job": batch})))
    return out


def _log_to(path: str) -> None:
    """This fork's stdout and stderr (and faulthandler's fd 2) to `path` from now on."""
    sys.stdout.flush()
    sys.stderr.flush()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)


def _cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _peak_rss_kb() -> int:
    """The peak resident set since the last call (the kernel's high-water mark, then reset, so the
    next workload reports its own)."""
    from .worker import _rss_kb

    kb = _rss_kb()
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as f:
            f.write("5")
    except OSError:
        pass
    return kb
