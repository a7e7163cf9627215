"""One job in a process forked from the warm worker: time and memory limits, crash containment.

The fork inherits everything the worker imported (torch, the frontend, xDSL), so a model costs only
its own work. In the fork: its own process group (so a kill reaches what the model started),
SIGKILL when the worker dies (`die_with_parent`), no core dumps, stdout/stderr to the model's log,
`RLIMIT_AS` = the worker's address space + `memory_gb`, and torch's thread count restored (the warm
worker runs single-threaded: forking a process whose OpenMP/MKL pool has started hangs the child).
The worker watches the fork with a deadline and records how it ended (`Outcome`): its error class
is the raised error's own (`errors.error_class_of`), or what the worker saw ("timeout", "memory"
for the OOM killer's SIGKILL, "crash" for another signal or no result).
"""

from __future__ import annotations

import faulthandler
import os
import pickle
import resource
import select
import signal
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from solar_compiler.errors import error_class_of
from solar_compiler.lifetime import die_with_parent, kill_group, limit_address_space, limit_blas_threads


@dataclass
class Outcome:
    ok: bool
    value: Any = None  # the job's return value when ok
    error_class: str | None = None
    error: str | None = None  # one line
    seconds: float = 0.0
    peak_rss_kb: int = 0  # the fork's peak resident set (includes pages shared with the worker)
    cpu_s: float = 0.0  # user + system CPU seconds of the fork (its cost, whatever the machine's load)
    extra: dict = field(default_factory=dict)


def _describe(exc: BaseException) -> str:
    """`solar-opt`'s one line; an exception that is not a user error also names its type."""
    from solar_compiler.driver import one_line
    from solar_compiler.errors import SolarError

    text = one_line(exc)
    return text if isinstance(exc, SolarError) else f"{type(exc).__name__}: {text}"


def failure(exc: BaseException, memory_gb: float) -> tuple[str, str]:
    """The error class and one-line message of a job's exception (a failed allocation: the limit)."""
    if isinstance(exc, MemoryError):
        return error_class_of(exc), f"exceeded memory limit of {memory_gb:g} GB (MemoryError)"
    return error_class_of(exc), _describe(exc)


def _child(
    fn: Callable,
    args: tuple,
    wfd: int,
    worker_pid: int,
    memory_gb: float,
    threads: int,
    log_path: str | None,
    env: dict[str, str],
    cwd: str | None,
) -> None:
    try:
        os.setpgid(0, 0)
        die_with_parent(worker_pid)
        for s in (signal.SIGTERM, signal.SIGINT):
            signal.signal(s, signal.SIG_DFL)
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        fd = os.open(log_path or os.devnull, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
        sys.stdout = open(1, "w", closefd=False, buffering=1)  # noqa: SIM115 - the fork's own streams
        sys.stderr = open(2, "w", closefd=False, buffering=1)  # noqa: SIM115
        faulthandler.enable(file=sys.stderr)  # a crash's Python traceback goes to the model's log
        os.environ.update(env)
        if cwd:
            os.chdir(cwd)
        if threads > 0:
            if "torch" in sys.modules:
                sys.modules["torch"].set_num_threads(threads)
            limit_blas_threads(threads)  # numpy's BLAS too: forks side by side must not oversubscribe
        limit_address_space(memory_gb)
        try:
            result: tuple = ("ok", fn(*args))
        except BaseException as exc:  # noqa: BLE001 - every failure is one line with its class
            traceback.print_exc()
            result = ("error", *failure(exc, memory_gb))
        try:
            body = pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as exc:  # noqa: BLE001
            body = pickle.dumps(
                ("error", "crash", f"result cannot be returned ({type(exc).__name__}: {exc})")
            )
        view = memoryview(body)
        while view:
            view = view[os.write(wfd, view) :]
    finally:
        os._exit(0)


def run_forked(
    fn: Callable,
    args: tuple,
    *,
    timeout_s: float,
    memory_gb: float,
    threads: int = 0,
    log_path: str | None = None,
    env: dict[str, str] | None = None,
    cwd: str | None = None,
    on_start: Callable[[int], None] | None = None,
) -> Outcome:
    """`fn(*args)` in a fork of this process; never raises for the job's failures."""
    rfd, wfd = os.pipe()
    t0 = time.monotonic()
    pid = os.fork()
    if pid == 0:
        os.close(rfd)
        _child(fn, args, wfd, os.getppid(), memory_gb, threads, log_path, env or {}, cwd)
    os.close(wfd)
    if on_start is not None:
        on_start(pid)
    chunks: list[bytes] = []
    timed_out = False
    try:
        deadline = t0 + timeout_s
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                timed_out = True
                break
            ready, _, _ = select.select([rfd], [], [], left)
            if not ready:
                continue
            data = os.read(rfd, 1 << 20)
            if not data:
                break
            chunks.append(data)
    except BaseException:
        kill_group(pid)
        os.waitpid(pid, 0)
        raise
    finally:
        os.close(rfd)
    if timed_out:
        kill_group(pid)
    _, status, usage = os.wait4(pid, 0)
    kill_group(pid)  # anything the job started and left behind in its group
    seconds = time.monotonic() - t0
    out = Outcome(False, seconds=round(seconds, 3), peak_rss_kb=int(usage.ru_maxrss),
                  cpu_s=round(usage.ru_utime + usage.ru_stime, 3))
    if timed_out:
        out.error_class, out.error = "timeout", f"timed out after {timeout_s:g} s"
        return out
    body = b"".join(chunks)
    if os.WIFSIGNALED(status):
        sig = signal.Signals(os.WTERMSIG(status))
        if sig == signal.SIGKILL:
            out.error_class, out.error = (
                "memory",
                "killed by SIGKILL (out of memory: the kernel's OOM killer)",
            )
        else:
            out.error_class, out.error = "crash", f"the interpreter died with signal {sig.name}"
        return out
    try:
        result = pickle.loads(body)
    except Exception:  # noqa: BLE001 - exited without a (complete) result
        code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else -1
        out.error_class, out.error = "crash", f"the sandbox exited (code {code}) without a result"
        return out
    if result[0] == "ok":
        out.ok, out.value = True, result[1]
    else:
        out.error_class, out.error = result[1], result[2]
    return out
