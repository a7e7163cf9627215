"""A sandboxed child's memory limit (RLIMIT_AS) counts what a job allocates, not glibc's per-thread
malloc arenas: each thread that allocates would otherwise reserve 64 MiB of address space, so a
framework's thread pool (XLA's CPU client starts about 20 threads) used up a 0.5 GB limit by chance.
And its torch tensors are on huge pages (`lifetime.limited_env`)."""

from __future__ import annotations

import threading

from solar_compiler.frontends.sandbox import run_in_child
from solar_compiler.lifetime import limited_env

THREADS = 8
STACK_MIB = 1  # each thread's stack, set here (glibc's default follows RLIMIT_STACK: 8 MiB, or 32)


def _vm_size_mib() -> int:
    with open("/proc/self/status", encoding="ascii") as f:
        return next(int(line.split()[1]) // 1024 for line in f if line.startswith("VmSize:"))


def threads_reserve() -> tuple[int, str | None]:
    """Address space (MiB) reserved by THREADS threads that each allocate small objects while the
    others live, and the child's MALLOC_ARENA_MAX."""
    import os

    threading.stack_size(STACK_MIB << 20)
    before = _vm_size_mib()
    release = threading.Event()
    started = threading.Barrier(THREADS + 1)

    def work() -> None:
        held = [bytearray(1000) for _ in range(100)]  # malloc'd, below the mmap threshold
        started.wait()
        release.wait()
        del held

    threads = [threading.Thread(target=work) for _ in range(THREADS)]
    for t in threads:
        t.start()
    started.wait()
    grown = _vm_size_mib() - before
    release.set()
    for t in threads:
        t.join()
    return grown, os.environ.get("MALLOC_ARENA_MAX")


def test_a_sandboxed_child_caps_malloc_arenas():
    """8 threads reserve their stacks (8 MiB) and at most two arenas (128 MiB), not one arena
    each (8 x 64 MiB): they fit a 0.5 GB limit."""
    grown, cap = run_in_child(threads_reserve, timeout_s=60, memory_limit_gb=0.5)
    assert cap == "2"
    assert grown <= THREADS * STACK_MIB + 2 * 64 + 16, grown


def test_a_setting_the_user_made_is_kept():
    mine = {"MALLOC_ARENA_MAX": "4", "THP_MEM_ALLOC_ENABLE": "0", "X": "1"}
    assert limited_env(mine) == mine
    assert limited_env({"X": "1"}) == {"MALLOC_ARENA_MAX": "2", "THP_MEM_ALLOC_ENABLE": "1", "X": "1"}


def torch_page_faults(mib: int) -> tuple[int, str | None]:
    """Minor page faults taken to fill a new torch tensor of `mib` MiB, and the child's
    THP_MEM_ALLOC_ENABLE."""
    import os
    import resource

    import torch

    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    t = torch.empty(mib << 18, dtype=torch.float32)
    t.fill_(1.0)
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before, os.environ.get("THP_MEM_ALLOC_ENABLE")


def _huge_pages_on_request() -> bool:
    try:
        with open("/sys/kernel/mm/transparent_hugepage/enabled", encoding="ascii") as f:
            mode = f.read()
    except OSError:
        return False
    return "[always]" in mode or "[madvise]" in mode


def test_a_sandboxed_child_puts_torch_tensors_on_huge_pages():
    """A 256 MiB tensor is 65,536 pages of 4 KiB and 128 of 2 MiB: where the kernel grants huge pages
    on request, the child's faults are counted in the hundreds, not the tens of thousands."""
    faults, thp = run_in_child(torch_page_faults, 256, timeout_s=120, memory_limit_gb=2)
    assert thp == "1"
    if _huge_pages_on_request():
        assert faults < 8192, faults
