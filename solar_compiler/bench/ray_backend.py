"""`--ray [ADDRESS]`: the same jobs as Ray tasks, on an existing cluster or a local Ray started here.

Each task carries its model file (bytes and sha256; a problem job, `problems.py`: one per workload);
on the node, the file is used in place when the same path holds the same content (a local cluster:
reports then match the process pool's byte for byte), else it is written under a temporary folder
at its relative path. A task hands its
job to a warm worker owned by the Ray worker process that runs it (`WorkerProcess`, started on the
first task and kept for the next ones), so models still run in forked sandboxes with their limits.
Results stream back to the driver, which stores each as it arrives: resume works across backends.
Timing tasks ask for `num_gpus=1` when timing on CUDA (`--device cuda`, or `auto` on a cluster
with GPUs), so Ray places them on a node with the accelerator, one per GPU.

`ray` is an optional extra (`pip install .[ray]`), imported only here.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path
from typing import Any

from solar_compiler.errors import SolarError

from .forked import Outcome

_WORKER = None  # the warm worker of this Ray worker process


def _materialize(job: dict[str, Any], files: list[tuple[bytes, str]]) -> dict[str, Any]:
    """`job` with its model files (a problem job: one per workload) used in place when the same
    paths hold the same content, else written under one temporary folder at their relative paths."""
    paths = [Path(p) for p in job.get("paths") or [job["path"]]]
    fulls = [p if p.is_absolute() else Path(job["cwd"]) / p for p in paths]
    try:
        if all(f.is_file() and hashlib.sha256(f.read_bytes()).hexdigest() == sha
               for f, (_, sha) in zip(fulls, files, strict=True)):
            return job
    except OSError:
        pass
    root = Path(tempfile.mkdtemp(prefix="solar-bench-ray-"))
    rels = [Path(*[q for q in p.parts if q not in ("/", "..")]) for p in paths]
    for rel, (source, _) in zip(rels, files, strict=True):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(source)
    out = {**job, "path": str(rels[0]), "cwd": str(root), "log": None}
    if "paths" in job:
        out.update(paths=[str(r) for r in rels], logs=None)
    return out


def ray_task(job: dict[str, Any], files: list[tuple[bytes, str]], init: dict[str, Any]) -> Outcome:
    """Runs on a Ray worker: the job in a fork of this process's warm worker. `files`: the content
    and sha256 of each of its model files."""
    global _WORKER
    from .timing import env_for_device
    from .worker import WorkerProcess

    job = _materialize(job, files)
    if job.get("log") and not Path(job["log"]).parent.is_dir():
        job["log"] = None
    if job.get("logs") and not all(Path(p).parent.is_dir() for p in job["logs"]):
        job["logs"] = None
    job["env"] = {**(job.get("env") or {}), **env_for_device()}
    if _WORKER is None or _WORKER.proc.poll() is not None:
        _WORKER = WorkerProcess(init, os.devnull)
        msg = _WORKER.recv()
        if msg is None or msg[0] != "ready":
            _WORKER = None
            raise SolarError(f"worker start-up failed: {msg[1] if msg else 'the worker died'}")
        _WORKER.ready, _WORKER.info = True, msg[1]
    _WORKER.send(job)
    while True:
        msg = _WORKER.recv()
        if msg is None:
            _WORKER = None
            return Outcome(False, error_class="crash", error="the worker process died")
        if msg[0] == "done":
            return msg[2]


class RayPool:
    def __init__(self, address: str | None, workers: int, init: dict[str, Any], log: str):
        try:
            import ray
        except ImportError:
            raise SolarError("--ray needs the optional extra: pip install 'solar-opt[ray]'") from None
        self.ray = ray
        self.init = init
        self.workers = workers
        kw: dict[str, Any] = {"logging_level": "ERROR", "log_to_driver": False}
        if address is None:
            kw.update(num_cpus=workers, include_dashboard=False, object_store_memory=200 * 2**20)
        else:
            kw["address"] = address
        ray.init(**kw)
        self.started_local = address is None
        self.task = ray.remote(max_retries=0)(ray_task)
        self.pending: dict[Any, dict[str, Any]] = {}
        self.infos: list[dict[str, Any]] = []  # start-up figures stay on the Ray workers

    def _gpus(self, job: dict[str, Any]) -> float:
        dev = getattr(job["config"], "device", None)
        if job["kind"] != "measure" or dev == "cpu":
            return 0
        return 1 if dev == "cuda" or self.ray.cluster_resources().get("GPU", 0) > 0 else 0

    def _submit(self, job: dict[str, Any]) -> None:
        files = []
        for u in job.get("units") or [job["unit"]]:
            full = Path(u.path) if os.path.isabs(u.path) else Path(u.cwd) / u.path
            files.append((full.read_bytes(), u.sha256))
        ref = self.task.options(num_cpus=1, num_gpus=self._gpus(job)).remote(
            {k: v for k, v in job.items() if k not in ("unit", "units")}, files, self.init
        )
        self.pending[ref] = job

    def run(self, jobs: list[dict[str, Any]], on_done, max_parallel: int | None = None) -> None:
        queue = list(jobs)
        limit = max_parallel or len(queue) or 1
        try:
            while queue or self.pending:
                while queue and len(self.pending) < limit:
                    self._submit(queue.pop(0))
                done, _ = self.ray.wait(list(self.pending), num_returns=1, timeout=1.0)
                for ref in done:
                    job = self.pending.pop(ref)
                    try:
                        outcome = self.ray.get(ref)
                    except Exception as e:  # noqa: BLE001 - the task itself failed (worker lost, ...)
                        outcome = Outcome(
                            False,
                            error_class="crash",
                            error=" ".join(f"ray task failed: {type(e).__name__}: {e}".split())[:300],
                        )
                    on_done(job, outcome)
        except BaseException:
            self.kill()
            raise

    def kill(self) -> None:
        for ref in list(self.pending):
            try:
                self.ray.cancel(ref, force=True)
            except Exception:  # noqa: BLE001 - already finished
                pass
        self.pending.clear()
        self.close()

    def close(self) -> None:
        if self.ray.is_initialized():
            self.ray.shutdown()
