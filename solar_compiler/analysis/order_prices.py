"""Prices of association orders, shared by the orders of trees of the same shape.

A 32-layer model has 32 copies of each layer's contraction trees, which differ only in their
tensors' and loops' names, and the catalogue plans a module and its trial copies (`split_parts`)
again: pricing each candidate order once per shape, not once per tree, is most of the planning
time of a large model (Llama-2-7B decode: 3,087 orders priced, 97 shapes). The key is the order's
nests with every tensor named by its position among the declarations and every loop variable by
its first appearance, the declarations' shapes, dtypes and roles kept: two orders with one key are
the same program up to names, so their exact costs are equal (the counts read names only to tell
tensors apart, which the positions keep). Source locations and origins are left out: they name
where a node came from, not what it costs.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from solar_compiler.dialects.einsum_build import ProductNest

T = TypeVar("T")
MAX_ENTRIES = 50_000  # per process; a long solar-bench worker starts over past it

_PRICES: dict[tuple, Any] = {}


def shape_key(tensors: Sequence[tuple[str, tuple[int, ...], str, str]],
              nests: Sequence[ProductNest]) -> tuple:
    """The order up to names: declarations (name dropped) and nests with names replaced."""
    names = {d[0]: f"T{i}" for i, d in enumerate(tensors)}
    loop_vars = dict.fromkeys(v for n in nests for v, _, _ in n.loops)
    renamed = {**{v: f"v{i}" for i, v in enumerate(loop_vars)}, **names}
    pattern = re.compile(r"\b(" + "|".join(map(re.escape, sorted(renamed, key=len, reverse=True))) + r")\b")

    def text(x: object) -> str:
        return pattern.sub(lambda m: renamed[m.group(1)], repr(x))

    return (tuple(d[1:] for d in tensors),
            tuple(text((n.target, n.index, n.kind, n.factors, n.loops, n.ifs, n.init)) for n in nests))


def shared_price(key: tuple, compute: Callable[[], T]) -> T:
    """`compute()`'s value for `key`, computed once per key (an exception is not kept)."""
    if key not in _PRICES:
        if len(_PRICES) >= MAX_ENTRIES:
            _PRICES.clear()
        _PRICES[key] = compute()
    return _PRICES[key]
