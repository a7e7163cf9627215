"""Analysis results cached per module, the role of MLIR's `getAnalysis<T>()`.

`get_analysis(module, fn)` computes `fn(module)` once and keeps it until the module changes. Every
pass that changes the IR calls `invalidate_analyses(module)` when it is done, and the driver does
it after every pass that does not declare `preserves_analyses = True` (a pass from another package
that forgets cannot leave stale results behind in a `solar-opt` run).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar
from weakref import WeakKeyDictionary

from xdsl.dialects.builtin import ModuleOp

T = TypeVar("T")
_RESULTS: WeakKeyDictionary[ModuleOp, dict[Callable, object]] = WeakKeyDictionary()


def get_analysis(module: ModuleOp, fn: Callable[[ModuleOp], T]) -> T:
    cache = _RESULTS.setdefault(module, {})
    if fn not in cache:
        cache[fn] = fn(module)
    return cache[fn]  # type: ignore[return-value]


def invalidate_analyses(module: ModuleOp) -> None:
    _RESULTS.pop(module, None)
