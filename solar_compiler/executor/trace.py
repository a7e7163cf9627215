"""What a program's indirect accesses touch on real data: the traced footprint of gathers and
scatters.

An indirect access (`E[ids[t], d]`, `H[idx[k], d] += ...`) touches elements that depend on input
values. Its fewest possible elements over all index values (one row of an embedding table) is a
lower bound for every input, but far below what any real input touches; the elements the traced
sample touches are what a run on that sample must move. `IndirectTrace`, passed to `execute`,
records per statement and tensor the distinct elements its in-domain points touch (reads, and
scatter writes separately). A gather under a select branch is recorded as conditional (the select
may not take it, and an implementation need not read it there), so no count is given for it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

Key = tuple[int, str, bool]  # (statement index in program order, tensor, write)


class IndirectTrace:
    """Distinct elements touched per (statement, tensor, write), and how many accesses made them."""

    def __init__(self) -> None:
        self._touched: dict[Key, np.ndarray] = {}
        self._conditional: set[Key] = set()

    def bind(self, stmt_index: int, shapes: dict[str, tuple[int, ...]]) -> StatementTrace:
        return StatementTrace(self, stmt_index, shapes)

    def record(self, key: Key, shape: tuple[int, ...], flat: np.ndarray) -> None:
        bitmap = self._touched.get(key)
        if bitmap is None:
            bitmap = self._touched[key] = np.zeros(int(np.prod(shape, dtype=np.int64)), dtype=bool)
        bitmap[flat] = True

    def mark_conditional(self, key: Key) -> None:
        self._conditional.add(key)

    def counts(self) -> dict[Key, int]:
        """Distinct elements per (statement, tensor, write), conditional accesses left out."""
        return {k: int(b.sum()) for k, b in self._touched.items() if k not in self._conditional}

    def unions(self) -> dict[tuple[int, str], tuple[int, int, int]]:
        """Per (statement, tensor) of a tensor that two statements or more gather (conditional
        accesses left out): the distinct elements they all touched together, which of them the
        statement is (in program order) and how many they are. Per-statement counts give only the
        largest of them (the pages of one KV cache that several requests read)."""
        by_tensor: dict[str, list[Key]] = {}
        for k in sorted(self._touched):
            if not k[2] and k not in self._conditional:
                by_tensor.setdefault(k[1], []).append(k)
        out = {}
        for t, keys in by_tensor.items():
            if len(keys) > 1:
                union = int(np.logical_or.reduce([self._touched[k] for k in keys]).sum())
                out.update({(k[0], t): (union, m, len(keys)) for m, k in enumerate(keys)})
        return out


class StatementTrace:
    """The trace of one statement being executed (the executor's evaluator calls it)."""

    def __init__(self, trace: IndirectTrace, stmt_index: int, shapes: dict[str, tuple[int, ...]]):
        self.trace, self.index, self.shapes = trace, stmt_index, shapes

    def gather(self, tensor: str, indices: Sequence[np.ndarray], mask: np.ndarray | None,
               conditional: bool) -> None:
        """A read of `tensor` at `indices` (arrays over the grid) on the points `mask` keeps."""
        key = (self.index, tensor, False)
        if conditional:
            self.trace.mark_conditional(key)
            return
        self._add(key, tensor, indices, mask)

    def scatter(self, tensor: str, flat: np.ndarray) -> None:
        """An indirect write of `tensor` at flat offsets (in-domain points only)."""
        self.trace.record((self.index, tensor, True), self.shapes[tensor], np.asarray(flat).reshape(-1))

    def _add(self, key: Key, tensor: str, indices: Sequence[np.ndarray], mask: np.ndarray | None) -> None:
        shape = self.shapes[tensor]
        arrays = [np.asarray(i) for i in indices]
        if mask is not None:
            arrays.append(np.asarray(mask))
        arrays = list(np.broadcast_arrays(*arrays)) if arrays else []
        if mask is not None:
            keep = arrays.pop()
            arrays = [a[keep] for a in arrays]
        if not shape:
            flat = np.zeros(1, dtype=np.int64)
        else:
            flat = np.ravel_multi_index(tuple(a.reshape(-1) for a in arrays), shape)
        self.trace.record(key, shape, flat)
