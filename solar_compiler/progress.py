"""Progress lines on stderr: one status line per phase of a run (capture, translate, validate, lift,
bound), with the time since the run started, so that a 15-second run is not silent.

Off unless the driver turns it on (`enable`: stderr is a terminal and no --quiet), so tests, pipes
and library use print nothing. The torch frontend runs in a sandboxed child whose stderr goes to
/dev/null: `child_env` hands the child a duplicate of the parent's stderr (and the run's start
time) through the environment, and the child's first `phase` call picks it up, so its phases show
too. Imports nothing of solar_compiler (every layer may report progress).
"""

from __future__ import annotations

import os
import sys
import time
from typing import IO

FD_ENV = "SOLAR_PROGRESS_FD"
T0_ENV = "SOLAR_PROGRESS_T0"


class _State:
    stream: IO[str] | None = None
    t0: float = 0.0
    from_env: bool = False


def enable(stream: IO[str] | None = None) -> None:
    """Report phases on `stream` (default stderr) from now on."""
    _State.stream = stream if stream is not None else sys.stderr
    _State.t0 = time.time()


def disable() -> None:
    _State.stream = None


def enabled() -> bool:
    _from_env()
    return _State.stream is not None


def phase(name: str, detail: str = "") -> None:
    """One status line: `solar-opt: [  2.1s] validate: 3 samples at full size (estimated 0.4 s)`."""
    if not enabled():
        return
    assert _State.stream is not None
    text = f"solar-opt: [{time.time() - _State.t0:6.1f}s] {name}" + (f": {detail}" if detail else "")
    try:
        _State.stream.write(text + "\n")
        _State.stream.flush()
    except (OSError, ValueError):  # a closed terminal must not fail the run
        _State.stream = None


def child_env() -> tuple[dict[str, str], tuple[int, ...]]:
    """Environment and file descriptors for a child process that should report its phases here
    (empty when progress is off). The caller passes the fds to the child (`pass_fds`) and closes
    them after starting it."""
    if not enabled():
        return {}, ()
    assert _State.stream is not None
    try:
        fd = os.dup(_State.stream.fileno())
    except (OSError, ValueError, AttributeError):
        return {}, ()
    return {FD_ENV: str(fd), T0_ENV: repr(_State.t0)}, (fd,)


def _from_env() -> None:
    """In a child started with `child_env`: report on the inherited descriptor."""
    if _State.from_env:
        return
    _State.from_env = True
    fd = os.environ.get(FD_ENV)
    if fd is None or _State.stream is not None:
        return
    try:
        _State.stream = os.fdopen(int(fd), "w", closefd=False)
        _State.t0 = float(os.environ.get(T0_ENV, time.time()))
    except (OSError, ValueError):
        _State.stream = None
