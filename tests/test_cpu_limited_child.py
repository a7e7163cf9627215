"""`lifetime.call_with_cpu_limit`: a forked child under a CPU budget. A child that crashes (a fork of
a process that ran threads can die on state another thread held) is forked again; one that crashes
every time is an error naming the signal; the budget is not a crash."""

from __future__ import annotations

import faulthandler
import os
import signal
import time
from pathlib import Path

import pytest

from solar_compiler.lifetime import CpuLimitExceeded, call_with_cpu_limit


def _segfault() -> None:
    """Die of SIGSEGV, quietly: pytest's faulthandler would print every thread's stack from the child."""
    faulthandler.disable()
    os.kill(os.getpid(), signal.SIGSEGV)


def _crash_once(marker: Path):
    def fn() -> int:
        if not marker.exists():
            marker.touch()
            _segfault()
        return 42
    return fn


def test_a_child_that_crashes_once_is_forked_again(tmp_path):
    assert call_with_cpu_limit(_crash_once(tmp_path / "crashed"), 10.0) == 42
    assert (tmp_path / "crashed").exists()  # the first child did crash


def test_a_child_that_crashes_every_time_is_an_error_naming_the_signal(tmp_path):
    twice = r"the child died with signal SIGSEGV without a result \(2 fork\(s\)\)"
    with pytest.raises(RuntimeError, match=twice):
        call_with_cpu_limit(_segfault, 10.0)
    with pytest.raises(RuntimeError, match=r"died with signal SIGSEGV without a result \(1 fork\(s\)\)"):
        call_with_cpu_limit(_crash_once(tmp_path / "once"), 10.0, attempts=1)


def test_the_cpu_budget_is_not_retried(tmp_path):
    starts = tmp_path / "starts"

    def spin() -> None:
        with open(starts, "a") as f:
            f.write("x")
        t = time.process_time()
        while time.process_time() - t < 30:
            pass

    with pytest.raises(CpuLimitExceeded, match="over 1 s of CPU"):
        call_with_cpu_limit(spin, 1.0)
    assert starts.read_text() == "x"


def test_an_exception_of_the_function_comes_back():
    with pytest.raises(ZeroDivisionError):
        call_with_cpu_limit(lambda: 1 // 0, 10.0)
