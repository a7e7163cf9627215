"""Run untrusted model code in a child process with a wall-clock and a memory limit.

:func:`run_in_child` starts ``python -c <bootstrap>`` with the parent's ``sys.path``, sends it
the pickled function and arguments on stdin and reads the pickled result from a private pipe.
The child's stdout/stderr go to ``/dev/null``, so tracebacks and warnings never leak; every
failure becomes a :class:`SandboxError` with a one-line message:

* ``<file>: timed out after 120 s``
* ``<file>: exceeded memory limit of 8 GB``
* ``<file>:<line>: forward raised ValueError: ...`` (line of the innermost user-file frame)
* ``<file>:<line>: syntax error: ...`` and other :class:`ModelFileError` / ``CaptureError``
  messages unchanged.

Its ``error_class`` says which kind of failure it was: "timeout", "memory", "crash" (a signal, no
result), a ``SolarError``'s own class, "capture" for an exception raised in the user's file, and
"internal" for any other exception (a bug). The child sends the class with the message.

The memory limit is ``RLIMIT_AS`` set in the child once it has imported the function's module
(so interpreter and framework start-up are not counted): ``limit = current address space + N GB``.

The child never outlives its parent: it leads its own process group, asks the kernel for SIGKILL when
the parent dies (``solar_compiler.lifetime``), and is killed with its group at once when the wait is
interrupted (``Cancelled`` from SIGTERM/SIGINT in ``solar-opt``, or any other exception).

:func:`run_in_process` is the same contract without the child, for a caller that already isolates
the process (``solar-bench`` forks one sandbox per model from a warm worker).

Every framework frontend runs its job through it (``frontends/job.py``); this module imports no
framework (nor numpy).
"""

from __future__ import annotations

import os
import pickle
import select
import signal
import struct
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from solar_compiler import progress
from solar_compiler.errors import SolarError, error_class_of
from solar_compiler.lifetime import die_with_parent, kill_group, limit_address_space, limited_env

__all__ = ["SandboxError", "memory_limit_message", "run_in_child", "run_in_process"]

_STARTUP_S = 120.0  # time allowed for the child to start and import the function's module


class SandboxError(SolarError):
    """The child failed; the message is one line and names the user file, `error_class` says how."""


_BOOTSTRAP = (
    "import sys, pickle\n"
    "_fd = int(sys.argv[1])\n"
    "_path = pickle.load(sys.stdin.buffer)\n"
    "sys.path[:] = _path\n"
    "from solar_compiler.frontends.sandbox import _child_main\n"
    "_child_main(_fd, int(sys.argv[2]))\n"
)


def _fmt_num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def _label(fn, args, user_file) -> str:
    if user_file is not None:
        return str(user_file)
    for a in args:
        if isinstance(a, (str, Path)) and str(a).endswith(".py"):
            return str(a)
        if hasattr(a, "path") and str(getattr(a, "path", "")).endswith(".py"):
            return str(a.path)
    return getattr(fn, "__qualname__", repr(fn))


def run_in_child(fn, *args, timeout_s: float = 120, memory_limit_gb: float = 8, user_file=None, **kwargs):
    """Run the picklable top-level function ``fn(*args, **kwargs)`` in a child process.

    Returns its (pickled) result or raises :class:`SandboxError`.  ``user_file`` names the
    model file in messages and is used to find the line of a failure; by default it is the
    first argument that is a ``.py`` path (or a ModelSpec).
    """
    label = _label(fn, args, user_file)
    try:
        payload = pickle.dumps(
            (fn, args, kwargs, float(memory_limit_gb), label), protocol=pickle.HIGHEST_PROTOCOL
        )
    except Exception as exc:  # noqa: BLE001
        raise SandboxError(
            f"{label}: cannot send the work to a child process ({type(exc).__name__}: {exc})",
            error_class="internal",
        ) from None
    rfd, wfd = os.pipe()
    env, progress_fds = progress.child_env()  # the child's phases on our stderr, when shown
    try:
        proc = subprocess.Popen(
            [sys.executable, "-c", _BOOTSTRAP, str(wfd), str(os.getpid())],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            pass_fds=(wfd, *progress_fds),
            start_new_session=True,
            cwd=os.getcwd(),
            env=limited_env({**os.environ, **env}),
        )
    except OSError as exc:
        os.close(rfd)
        os.close(wfd)
        raise SandboxError(f"{label}: cannot start a child process ({exc.strerror})", error_class="crash") \
            from None
    finally:
        for fd in progress_fds:
            os.close(fd)
    os.close(wfd)
    try:
        try:
            assert proc.stdin is not None
            proc.stdin.write(pickle.dumps(list(sys.path)))
            proc.stdin.write(payload)
            proc.stdin.close()
        except BrokenPipeError:
            pass
        reader = _Reader(rfd)
        started = reader.read_exact(1, time.monotonic() + max(_STARTUP_S, timeout_s))
        if started is None:
            return _dead_child(proc, label, memory_limit_gb, timeout_s, startup=True)
        header = reader.read_exact(8, time.monotonic() + timeout_s)
        if header is None:
            if reader.timed_out:
                _kill(proc)
                raise SandboxError(f"{label}: timed out after {_fmt_num(timeout_s)} s", error_class="timeout")
            return _dead_child(proc, label, memory_limit_gb, timeout_s, startup=False)
        (size,) = struct.unpack("<Q", header)
        body = reader.read_exact(size, time.monotonic() + max(60.0, timeout_s))
        if body is None:
            _kill(proc)
            raise SandboxError(f"{label}: the child process sent an incomplete result", error_class="crash")
        status, value = pickle.loads(body)
    except BaseException:  # Cancelled (SIGTERM/SIGINT), or anything else: the child goes now
        _kill(proc)
        raise
    finally:
        os.close(rfd)
        _reap(proc)
    if status == "ok":
        return value
    message, error_class = value
    raise SandboxError(message, error_class=error_class)


def run_in_process(fn, *args, memory_limit_gb: float = 8, user_file=None, **kwargs):
    """``fn(*args, **kwargs)`` here, with :func:`run_in_child`'s error contract: any exception becomes a
    :class:`SandboxError` with the same one-line message the child would send. No time or memory limit
    is set: the caller's own sandbox (a forked process with rlimits) provides them."""
    label = _label(fn, args, user_file)
    try:
        return fn(*args, **kwargs)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # noqa: BLE001 - everything becomes a one-line message
        raise SandboxError(_describe(exc, label, memory_limit_gb),
                           error_class=_error_class(exc, label)) from None


class _Reader:
    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.timed_out = False

    def read_exact(self, n: int, deadline: float) -> bytes | None:
        chunks = []
        got = 0
        while got < n:
            left = deadline - time.monotonic()
            if left <= 0:
                self.timed_out = True
                return None
            ready, _, _ = select.select([self.fd], [], [], left)
            if not ready:
                self.timed_out = True
                return None
            data = os.read(self.fd, min(n - got, 1 << 20))
            if not data:
                return None  # EOF: the child exited
            chunks.append(data)
            got += len(data)
        return b"".join(chunks)


def _kill(proc: subprocess.Popen) -> None:
    kill_group(proc.pid)


def _reap(proc: subprocess.Popen) -> None:
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        _kill(proc)
        proc.wait()


def _dead_child(proc, label, memory_limit_gb, timeout_s, startup: bool):
    if startup and proc.poll() is None:
        _kill(proc)
        raise SandboxError(
            f"{label}: the child process did not start within {_fmt_num(max(_STARTUP_S, timeout_s))} s",
            error_class="timeout",
        )
    code = proc.wait()
    if code < 0:
        sig = -code
        name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else str(sig)
        if sig == signal.SIGKILL:
            raise SandboxError(f"{label}: exceeded memory limit of {_fmt_num(memory_limit_gb)} GB (killed)",
                               error_class="memory")
        raise SandboxError(f"{label}: the child process died with signal {name}", error_class="crash")
    what = "while starting" if startup else "without a result"
    raise SandboxError(f"{label}: the child process exited {what} (exit code {code})", error_class="crash")


# --------------------------------------------------------------------------------------------
# Child side
# --------------------------------------------------------------------------------------------

_MEMORY_MARKERS = (
    "can't allocate memory",
    "cannot allocate memory",
    "not enough memory",
    "out of memory",
    "bad_alloc",
    "std::bad_alloc",
)


def _is_memory_error(exc: BaseException) -> bool:
    if isinstance(exc, MemoryError):
        return True
    text = str(exc).lower()
    return any(m in text for m in _MEMORY_MARKERS)


def memory_limit_message(exc: BaseException, label: str, limit_gb: float) -> str | None:
    """`<label>[:<line>]: exceeded memory limit of N GB` when `exc` or an exception it was raised
    from (its `__cause__`/`__context__` chain) is a failed allocation, else None. The line is the
    one `exc`'s own message names (`<label>:<line>: forward raised ...`), if any."""
    seen: set[int] = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if _is_memory_error(e):
            text = str(exc)
            line = text[len(label) + 1:].split(":", 1)[0] if text.startswith(f"{label}:") else ""
            where = f"{label}:{line}" if line.isdigit() else label
            return f"{where}: exceeded memory limit of {_fmt_num(limit_gb)} GB"
        e = e.__cause__ or e.__context__
    return None


def _error_class(exc: BaseException, label: str) -> str:
    """The class of an exception raised in the child (module docstring)."""
    if _is_memory_error(exc):
        return "memory"
    if not isinstance(exc, SolarError) and _user_frames(exc, label):
        return "capture"
    return error_class_of(exc)


def _user_frames(exc: BaseException, label: str) -> list[traceback.FrameSummary]:
    """The frames of `exc`'s traceback that lie in the user's file `label`."""
    frames = traceback.extract_tb(exc.__traceback__)
    target = None
    try:
        target = str(Path(label).resolve())
    except (OSError, ValueError):
        pass
    user_frames = []
    for fr in frames:
        try:
            if target is not None and str(Path(fr.filename).resolve()) == target:
                user_frames.append(fr)
        except (OSError, ValueError):
            continue
    return user_frames


def _describe(exc: BaseException, label: str, limit_gb: float) -> str:
    """One-line message for an exception raised in the child."""
    from .model_file import exception_summary

    if _is_memory_error(exc):
        return f"{label}: exceeded memory limit of {_fmt_num(limit_gb)} GB"
    if isinstance(exc, SolarError):
        return " ".join(str(exc).split())
    user_frames = _user_frames(exc, label)
    summary = exception_summary(exc)
    if not user_frames:
        return f"{label}: {summary}"
    user = user_frames[-1]
    names = [fr.name for fr in user_frames]
    func = "forward" if "forward" in names else user.name
    if func == "<module>":
        what = "executing the file raised"
    elif func == "__init__":
        what = "Model.__init__ raised"
    else:
        what = f"{func} raised"
    return f"{label}:{user.lineno}: {what} {summary}"


def _send(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _child_main(fd: int, parent_pid: int) -> None:
    die_with_parent(parent_pid)
    label = "<child>"
    limit_gb = 0.0
    try:
        fn, args, kwargs, limit_gb, label = pickle.load(sys.stdin.buffer)
        limit_address_space(limit_gb)
        _send(fd, b"R")
        try:
            result: Any = ("ok", fn(*args, **kwargs))
        except BaseException as exc:  # noqa: BLE001 - everything becomes a one-line message
            result = ("error", (_describe(exc, label, limit_gb), _error_class(exc, label)))
        try:
            body = pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as exc:  # noqa: BLE001
            body = pickle.dumps(
                ("error", (f"{label}: result cannot be returned ({type(exc).__name__}: {exc})", "internal"))
            )
    except BaseException as exc:  # noqa: BLE001 - failure while loading the work
        try:
            _send(fd, b"R")
        except OSError:
            pass
        body = pickle.dumps(("error", (_describe(exc, label, limit_gb), _error_class(exc, label))))
    try:
        _send(fd, struct.pack("<Q", len(body)) + body)
    finally:
        os.close(fd)
        os._exit(0)
