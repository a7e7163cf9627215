"""Process lifetime: child processes that never outlive the command that started them.

Three mechanisms, used together by the torch sandbox and by `solar-bench`:

* `die_with_parent()`, called first thing in a child: the kernel sends it SIGKILL when its parent
  dies (PR_SET_PDEATHSIG), even when the parent was killed by SIGKILL and ran no clean-up;
* each child leads its own process group, so `kill_group()` also reaches what the child started;
* `cancel_on_signals()` in the command itself turns SIGTERM and SIGINT into `Cancelled` (a
  KeyboardInterrupt), so that the `finally` blocks waiting on children run and kill them at once.

`call_with_cpu_limit()` runs a function in a forked child that the kernel stops after a CPU budget
(RLIMIT_CPU), for analyses whose one library call (an isl operation) can run for minutes: such a call
holds the GIL, so no check in Python, timer thread or signal handler can interrupt it.

The limits of a process that runs models: its address space (`limit_address_space`), the
environment it starts with (`limited_env`: malloc arenas, huge pages for torch's tensors) and
numpy's BLAS threads (`limit_blas_threads`, beside torch's own count).

This module imports nothing heavy (ctypes, signal, os, pickle only).
"""

from __future__ import annotations

import contextlib
import ctypes
import math
import os
import pickle
import resource
import signal
from collections.abc import Callable, Iterator
from typing import TypeVar

__all__ = ["Cancelled", "call_with_cpu_limit", "cancel_on_signals", "die_with_parent", "kill_group",
           "limit_address_space", "limit_blas_threads"]

_PR_SET_PDEATHSIG = 1


class Cancelled(KeyboardInterrupt):
    """The command received SIGTERM or SIGINT. A KeyboardInterrupt, so that `except Exception`
    in model code or libraries never swallows it."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


def _raise_cancelled(signum: int, frame) -> None:
    # a second signal while the first is being handled must not interrupt the clean-up
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    raise Cancelled(signum)


@contextlib.contextmanager
def cancel_on_signals() -> Iterator[None]:
    """SIGTERM and SIGINT raise `Cancelled` in the main thread while the block runs (only there can
    Python handle signals; elsewhere this does nothing). The previous handlers are restored after."""
    try:
        old = {s: signal.signal(s, _raise_cancelled) for s in (signal.SIGTERM, signal.SIGINT)}
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def die_with_parent(parent_pid: int) -> None:
    """Ask the kernel for SIGKILL when the parent dies (Linux; elsewhere a no-op), then exit at once if
    the parent is already gone (it may have died before the request was made)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent_pid:
        os._exit(1)


def kill_group(pid: int) -> None:
    """SIGKILL the process group led by `pid` (the child and whatever it started), or the process
    alone when it leads none; a process already gone is no error."""
    try:
        os.killpg(pid, signal.SIGKILL)
        return
    except (ProcessLookupError, PermissionError):
        pass
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signal.SIGKILL)


def _address_space_bytes() -> int:
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


# glibc gives each new thread that allocates an arena of its own (up to 8 per core) and reserves
# 64 MiB of address space for each, whatever it holds. Under RLIMIT_AS those reservations, not the
# memory used, decided whether a framework's thread pool fit: the same JAX job (XLA's CPU client
# starts about 20 threads) grew its address space by 0.35 GB or 0.48 GB from run to run (0.1 GB with
# the cap; the same RSS), and failed a 0.5 GB limit now and then. glibc fixes its arena cap when it
# creates its first extra arena (a later `mallopt` is not read), so a process that will limit its
# address space is started with the cap in its environment (`limited_env`).
MALLOC_ARENA_MAX = "2"

# torch's CPU allocator maps a tensor on 4 KiB pages unless THP_MEM_ALLOC_ENABLE=1
# (c10/core/alloc_cpu.cpp: allocations of 2 MiB or more are then 2 MiB-aligned and madvise'd
# MADV_HUGEPAGE, as numpy does for its arrays by default). Validation allocates and touches GBs of
# fresh tensors (inputs, the model's activations in float32 and float64), so the page faults were a
# third of its CPU time: KernelBench L2 23_Conv3d_GroupNorm_Mean took 5.0 M minor faults and 12.0 s
# of system time with 4 KiB pages, 0.22 M and 7.1 s with huge pages (user time 23.4 -> 19.6 s). The
# allocator reads the variable once, at its first allocation, so it is set when the process starts.
TORCH_HUGE_PAGES = "1"


def limited_env(env: dict[str, str]) -> dict[str, str]:
    """`env` for a process that will call `limit_address_space` (itself or in a forked child) and
    run models: with a cap on glibc's malloc arenas and torch's tensors on huge pages, unless `env`
    sets either already."""
    return {"MALLOC_ARENA_MAX": MALLOC_ARENA_MAX, "THP_MEM_ALLOC_ENABLE": TORCH_HUGE_PAGES, **env}


# numpy's OpenBLAS starts a thread per core for a large product, whatever torch's thread count is. Two
# solar-bench forks on two cores, each set to one torch thread, then ran four busy threads, and
# OpenBLAS's spinning threads lost most of their time to each other: KernelBench L3
# 43_MinGPTCausalAttention validated in 4.4 s alone and 19.5 s beside 44_MiniGPTBlock.
# `limit_blas_threads` caps it at run time (OpenBLAS's own call, found by name in the loaded
# library: numpy's wheels rename it with a prefix and a 64-bit-integer suffix).
_BLAS_SET_THREADS = ("scipy_openblas_set_num_threads64_", "scipy_openblas_set_num_threads",
                     "openblas_set_num_threads64_", "openblas_set_num_threads")


def limit_blas_threads(n: int) -> int:
    """Cap every OpenBLAS loaded in this process at `n` threads, and one loaded later (its
    environment variable); returns how many loaded ones were capped (0 when numpy is not loaded
    yet, or uses another BLAS)."""
    os.environ["OPENBLAS_NUM_THREADS"] = str(max(1, n))
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as f:
            paths = sorted({line.split()[-1] for line in f
                            if "openblas" in line.lower() and line.rstrip().split()[-1].startswith("/")})
    except OSError:
        return 0
    capped = 0
    for path in paths:
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        fn = next((getattr(lib, name) for name in _BLAS_SET_THREADS if hasattr(lib, name)), None)
        if fn is not None:
            fn(ctypes.c_int(max(1, n)))
            capped += 1
    return capped


def limit_address_space(limit_gb: float) -> None:
    """RLIMIT_AS = the current address space + `limit_gb` GiB (so the interpreter and the libraries
    already loaded are not counted); 0 or less means no limit. Start the process with `limited_env`,
    so that malloc's per-thread arenas do not use up the limit with reservations."""
    if limit_gb <= 0:
        return
    limit = _address_space_bytes() + int(limit_gb * 2**30)
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))


T = TypeVar("T")


class CpuLimitExceeded(Exception):
    """`call_with_cpu_limit`: the child used up its CPU budget and the kernel stopped it."""


def call_with_cpu_limit(fn: Callable[[], T], seconds: float, attempts: int = 2) -> T:
    """`fn()` computed in a forked child that may use `seconds` of CPU (RLIMIT_CPU, rounded up to
    whole seconds: the kernel stops it, even inside a C call); its result comes back pickled. An
    exception raised by `fn` is raised here; CpuLimitExceeded when the budget stopped the child.
    The child's side effects (caches it filled) stay in the child.

    A child that crashes (a signal other than the budget's: SIGSEGV, SIGBUS, SIGABRT) is forked
    again, up to `attempts` forks in all: a fork of a process that has run threads (torch's, a
    BLAS's) can crash in the child on state another thread held at the fork (seen rarely, under
    pytest-xdist), and `fn` is the same computation each time. Crashing every time is an error
    naming the signal."""
    for attempt in range(1, attempts + 1):
        data, wstatus = _forked(fn, seconds)
        crashed = os.WIFSIGNALED(wstatus)
        if crashed and os.WTERMSIG(wstatus) in (signal.SIGXCPU, signal.SIGKILL):
            raise CpuLimitExceeded(f"over {seconds:g} s of CPU")
        if not crashed or attempt == attempts:
            break
    if crashed or not data:  # a crashed child's data may be cut short
        how = (f"died with signal {signal.Signals(os.WTERMSIG(wstatus)).name}" if crashed
               else f"exited with status {os.WEXITSTATUS(wstatus)}")
        raise RuntimeError(f"call_with_cpu_limit: the child {how} without a result "
                           f"({attempt} fork(s))")
    ok, value = pickle.loads(data)
    if not ok:
        raise value
    return value


def _forked(fn: Callable[[], T], seconds: float) -> tuple[bytes, int]:
    """One child computing `fn()` under the CPU budget: what it sent back and its wait status."""
    parent = os.getpid()
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: compute, send, exit without running the parent's clean-up
        status = 1
        try:
            os.close(rfd)
            die_with_parent(parent)
            limit = max(1, math.ceil(seconds))
            resource.setrlimit(resource.RLIMIT_CPU, (limit, limit + 1))
            signal.signal(signal.SIGXCPU, signal.SIG_DFL)
            try:
                payload = pickle.dumps((True, fn()))
            except Exception as e:  # noqa: BLE001 - handed to the parent, which raises it
                try:
                    payload = pickle.dumps((False, e))
                except Exception:  # noqa: BLE001 - an exception that does not pickle: its text
                    payload = pickle.dumps((False, RuntimeError(f"{type(e).__name__}: {e}")))
            with os.fdopen(wfd, "wb") as f:
                f.write(payload)
            status = 0
        finally:
            os._exit(status)
    os.close(wfd)
    try:
        with os.fdopen(rfd, "rb") as f:
            data = f.read()
    except BaseException:
        kill_group(pid)
        raise
    finally:
        _, wstatus = os.waitpid(pid, 0)
    return data, wstatus
