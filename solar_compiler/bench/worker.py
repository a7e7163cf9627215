"""The warm worker: a process that imports torch and the torch frontend once, runs the whole
pipeline once on a tiny built-in model (dynamo and torch.export initialised, every pass imported),
then runs each job in a fork of itself (`forked.run_forked`), so a model costs only its own work.

Protocol on stdin/stdout (length-prefixed pickles; the worker's own stdout and stderr go to its log):
main -> worker: the init dict, then jobs `{"id", "kind": "bounds"|"measure"|"problem", "path", "cwd",
"config", "timeout_s", "memory_gb", "threads", "log", "env"}` (a problem job also has "paths" and
"logs": its workloads, `problems.py`); worker -> main: `("ready", info)` or
`("failed", message)`, then per job `("started", id, fork_pid)` and `("done", id, Outcome)`.

The worker stays single-threaded in torch (`set_num_threads(1)`): a fork of a process whose
OpenMP/MKL thread pool has started hangs at its first parallel op. Each fork sets its own count.
"""

from __future__ import annotations

import os
import pickle
import struct
import subprocess
import sys
import tempfile
import time
from typing import Any

from solar_compiler.lifetime import Cancelled, cancel_on_signals, die_with_parent, kill_group, limited_env

WARMUP_MODEL = """\
import torch
import torch.nn as nn
N = 8
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(N, N)
    def forward(self, x):
        return torch.softmax(torch.relu(self.lin(x)) * 2.0, dim=-1).sum(0)
def get_inputs():
    return [torch.randn(N, N)]
def get_init_inputs():
    return []
"""


def write_frame(fd: int, obj: Any) -> None:
    body = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    view = memoryview(struct.pack("<Q", len(body)) + body)
    while view:
        view = view[os.write(fd, view) :]


def read_frame(fd: int) -> Any | None:
    """The next object, or None at end of stream."""
    head = _read_exact(fd, 8)
    if head is None:
        return None
    body = _read_exact(fd, struct.unpack("<Q", head)[0])
    return None if body is None else pickle.loads(body)


def _read_exact(fd: int, n: int) -> bytes | None:
    chunks, got = [], 0
    while got < n:
        data = os.read(fd, min(n - got, 1 << 20))
        if not data:
            return None
        chunks.append(data)
        got += len(data)
    return b"".join(chunks)


def _rss_kb() -> int:
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def warm_up(init: dict[str, Any]) -> dict[str, Any]:
    """Import torch and the frontend, and run the pipeline once in-process on a tiny model."""
    from .jobs import BoundsConfig, bounds_job

    t0 = time.perf_counter()
    import torch

    torch.set_num_threads(1)
    import torch._dynamo  # noqa: F401
    import torch.export  # noqa: F401

    import solar_compiler.frontends.torch.frontend  # noqa: F401

    t1 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="solar-bench-warm-") as d:
        path = os.path.join(d, "warmup_model.py")
        with open(path, "w") as f:
            f.write(WARMUP_MODEL)
        bounds_job(path, BoundsConfig(hw=init["hw"], mode=init.get("mode", "eval"), no_cache=True))
    t2 = time.perf_counter()
    return {
        "pid": os.getpid(),
        "import_s": round(t1 - t0, 3),
        "warmup_s": round(t2 - t1, 3),
        "rss_kb": _rss_kb(),
    }


def run_job(job: dict[str, Any], out_fd: int):
    from .forked import run_forked
    from .jobs import bounds_job
    from .problems import problem_job
    from .timing import measure_job

    if job["kind"] == "problem":  # a problem's workloads, translated together (bench/problems.py)
        fn, args = problem_job, (job["paths"], job["config"], job.get("logs"))
    else:
        fn, args = {"bounds": bounds_job, "measure": measure_job}[job["kind"]], (job["path"], job["config"])
    return run_forked(
        fn,
        args,
        timeout_s=job["timeout_s"],
        memory_gb=job["memory_gb"],
        threads=job.get("threads", 0),
        log_path=job.get("log"),
        env=job.get("env") or {},
        cwd=job.get("cwd"),
        on_start=lambda pid: write_frame(out_fd, ("started", job["id"], pid)),
    )


def main(argv: list[str]) -> int:
    die_with_parent(int(argv[0]))
    log = argv[1] if len(argv) > 1 else os.devnull
    in_fd, out_fd = 0, os.dup(1)
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    try:
        with cancel_on_signals():
            init = read_frame(in_fd)
            if init is None:
                return 0
            try:
                info = warm_up(init)
            except Exception as e:  # noqa: BLE001 - the main process reports it as one line
                from solar_compiler.driver import one_line

                write_frame(out_fd, ("failed", one_line(e)))
                return 1
            write_frame(out_fd, ("ready", info))
            while True:
                job = read_frame(in_fd)
                if job is None:
                    return 0
                outcome = run_job(job, out_fd)
                outcome.extra["worker_rss_kb"] = _rss_kb()
                write_frame(out_fd, ("done", job["id"], outcome))
    except (Cancelled, BrokenPipeError):
        return 1


class WorkerProcess:
    """The main process's handle of one warm worker (own session: a terminal's Ctrl-C reaches only
    the main process, which ends the workers and their forks itself)."""

    def __init__(self, init: dict[str, Any], log: str):
        env = limited_env(dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p)))
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-c",
                "import sys; from solar_compiler.bench.worker import main; sys.exit(main(sys.argv[1:]))",
                str(os.getpid()),
                log,
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            env=env,
        )
        self.ready = False
        self.info: dict[str, Any] = {}
        self.job: dict[str, Any] | None = None
        self.fork_pid: int | None = None
        self.send(init)

    def fileno(self) -> int:
        assert self.proc.stdout is not None
        return self.proc.stdout.fileno()

    def send(self, obj: Any) -> None:
        assert self.proc.stdin is not None
        write_frame(self.proc.stdin.fileno(), obj)

    def recv(self) -> Any | None:
        return read_frame(self.fileno())

    def kill(self) -> None:
        """The running fork's group, then the worker; reaped."""
        if self.fork_pid is not None:
            kill_group(self.fork_pid)
        kill_group(self.proc.pid)
        for s in (self.proc.stdin, self.proc.stdout):
            try:
                if s is not None:
                    s.close()
            except OSError:
                pass
        self.proc.wait()

    def close(self) -> None:
        """End of work: EOF on stdin lets the worker exit; killed if it does not within 5 s."""
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            self.proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            pass
        self.kill()
