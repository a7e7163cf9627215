"""Analysis results cached per module, the role of MLIR's `getAnalysis<T>()`.

`get_analysis(module, fn)` computes `fn(module)` once and keeps it until the module changes. Every
pass that changes the IR calls `invalidate_analyses(module)` when it is done, and the driver does
it after every pass that does not declare `preserves_analyses = True` (a pass from another package
that forgets cannot leave stale results behind in a `solar-opt` run).

A pass that builds the IR from a result it already holds (`translate` and `narrow-needed` build
kernels from loop ASTs, `lift-einsum` builds graphs from them) offers that result with
`seed_analysis`, after its own invalidation, so that the next pass does not read it back from the
ops (converting a large network's IR back costs seconds). A seed is only a proposal: the `solar-opt`
driver adopts it (`renew_analyses`) right after the pass that made it, before any other pass can
change the IR; anything else (an invalidation, another pipeline) drops it unused.

Some results are not a function of the module alone: the roofline report depends on the pass's
options (targets, fidelities, cache size). The pass that computes one registers it
(`register_result(module, key, value)`) and whoever needs it afterwards (the `report` and `json`
targets, the driver's `--plot` and `--measured`) asks for it (`registered_result`). It lives with the
other results, not in the IR: it is dropped with them when a pass changes the IR, and the module
printed as MLIR carries none of it.

Results of one program (an `einsum.graph`: its node list, io_bounds' view of it) are cached per op
(`op_analysis(op, key, fn)`), so that every analysis of that graph shares them; they are dropped
with the module's results for the module's top-level ops, and with the op itself otherwise (a graph
built for a moment: a chain's candidate order, a kernel read before `lift-einsum`).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any, TypeVar
from weakref import WeakKeyDictionary

from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation

from solar_compiler.loopir.affine_map import FROM_MAP_TABLE

T = TypeVar("T")
_RESULTS: WeakKeyDictionary[ModuleOp, dict[Hashable, object]] = WeakKeyDictionary()
_SEEDS: WeakKeyDictionary[ModuleOp, dict[Callable, object]] = WeakKeyDictionary()
_OP_RESULTS: WeakKeyDictionary[Operation, dict[Hashable, object]] = WeakKeyDictionary()


def get_analysis(module: ModuleOp, fn: Callable[[ModuleOp], T]) -> T:
    cache = _RESULTS.setdefault(module, {})
    if fn not in cache:
        cache[fn] = fn(module)
    return cache[fn]  # type: ignore[return-value]


def op_analysis(op: Operation, key: Hashable, fn: Callable[[], T]) -> T:
    """`fn()`, a result about `op` alone, computed once until a pass changes the IR."""
    cache = _OP_RESULTS.setdefault(op, {})
    if key not in cache:
        cache[key] = fn()
    return cache[key]  # type: ignore[return-value]


def invalidate_op_analyses(op: Operation) -> None:
    """Drop the results about `op` after a change made outside a pass (a rewrite of a graph that no
    module holds): a pass invalidates its module instead."""
    _OP_RESULTS.pop(op, None)


def _drop_op_results(module: ModuleOp) -> None:
    for o in module.body.block.ops:
        _OP_RESULTS.pop(o, None)


def register_result(module: ModuleOp, key: Hashable, value: object) -> None:
    """Keep `value`, a result a pass computed from the module as it is now, under `key` (a name the
    producer exports), until a pass changes the IR."""
    _RESULTS.setdefault(module, {})[key] = value


def registered_result(module: ModuleOp, key: Hashable) -> Any:
    """The result registered under `key` for the module as it is now; None when no pass registered
    one since the IR last changed."""
    return _RESULTS.get(module, {}).get(key)


#: tables keyed by the identity of IR attributes (which they keep alive so the ids stay unique):
#: emptied whenever a pass changes a module, so a long-lived process (solar-bench's warm workers, a
#: benchmark's repeated runs) holds only the current program's, not every earlier one's
_IDENTITY_TABLES: list[dict] = [FROM_MAP_TABLE]


def identity_table() -> dict:
    """A new table keyed by attribute identity, emptied with the analyses (`invalidate_analyses`)."""
    table: dict = {}
    _IDENTITY_TABLES.append(table)
    return table


def invalidate_analyses(module: ModuleOp) -> None:
    for table in _IDENTITY_TABLES:
        table.clear()
    _drop_op_results(module)
    _RESULTS.pop(module, None)
    _SEEDS.pop(module, None)


def seed_analysis(module: ModuleOp, fn: Callable[[ModuleOp], T], value: T) -> None:
    """Offer `value` as `fn(module)` for the module exactly as the calling pass leaves it."""
    _SEEDS.setdefault(module, {})[fn] = value


def renew_analyses(module: ModuleOp) -> None:
    """After a pass that changed the IR: drop every result, and make the seeds that pass left
    results (the driver calls this between passes, before the next pass can change the IR)."""
    seeds = _SEEDS.pop(module, None)
    _drop_op_results(module)
    _RESULTS.pop(module, None)
    if seeds:
        _RESULTS[module] = dict(seeds)
