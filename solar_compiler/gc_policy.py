"""How often Python's cyclic garbage collector runs in solar-opt's processes.

A large network's IR and its translation are heaps of ~10^6 long-lived objects, and the analyses
allocate millions of short-lived acyclic ones (freed by reference counting). With CPython's default
thresholds (700, 10, 10) the collector rescanned the heap so often that it took ~20% of the CPU time
from a cached translation of KernelBench's DenseNet201 to its report, and as much of a translation.
Only how often cycles are looked for changes: a young generation of 2,000,000 objects bounds the
memory that cyclic garbage can hold between collections (DenseNet201's peak RSS went from 297 MB
to 349 MB when it was raised from 500,000, and its collections from 1 s of CPU to 0.02 s: the
analyses' short-lived objects die before a collection sees them). User code (a model file run by a frontend)
runs under CPython's defaults (a fresh sandbox child, or `user_code_gc` in solar-bench's forked
worker): its objects' lifetimes may rely on prompt collection
(a `torch.library` custom op defined again when the file is loaded a second time, for a reduced
instance, failed while the first definition was uncollected garbage).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

GC_GEN0_THRESHOLD = 2_000_000  # allocations between young-generation collections (CPython: 700)


def relax_gc() -> None:
    """Raise the collector's thresholds for this process (never lowers one set higher already)."""
    young, older, oldest = gc.get_threshold()
    gc.set_threshold(max(GC_GEN0_THRESHOLD, young), max(older, 50), max(oldest, 100))


@contextmanager
def user_code_gc() -> Iterator[None]:
    """CPython's default thresholds while user code runs, then the previous ones again."""
    was = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    try:
        yield
    finally:
        gc.set_threshold(*was)
