"""Op templates: one small module per op family, each exporting `TABLE = {aten op name: fn}`.

A template is `fn(tr: Translator, node: AtenNode) -> Val | tuple[Val | None, ...]`: it emits the
statements of the op (or none, for a view) and returns one value per node output. The union of
the tables is `TEMPLATES`; an op missing from it is an explicit error naming the op.
"""

from __future__ import annotations

from collections.abc import Callable

from . import (
    attention,
    conv,
    elementwise,
    indexing,
    linalg,
    norm,
    pool,
    random,
    recurrent,
    reduce,
    scan,
    scatter,
    select,
    shape,
    softmax,
    views,
)

_MODULES = (attention, conv, elementwise, indexing, linalg, norm, pool, random, recurrent, reduce, scan,
            scatter, select, shape, softmax, views)


def _merge() -> dict[str, Callable]:
    table: dict[str, Callable] = {}
    for mod in _MODULES:
        for op, fn in mod.TABLE.items():
            if op in table:
                raise RuntimeError(f"template for {op} defined twice ({mod.__name__})")
            table[op] = fn
    return table


TEMPLATES: dict[str, Callable] = _merge()
