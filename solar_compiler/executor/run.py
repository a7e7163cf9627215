"""Running a kernel: input checks, storage, and the walk over loops in program order.

Non-scan loops become grid axes of the statements inside them (see `legality` for why that is
exact); a scan loop runs in Python, binding its variable to one value per step, with everything
inside it vectorised. A scan whose bounds depend on an enclosing non-scan loop runs over the hull
of its bounds, with the exact bounds as guards.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

from solar_compiler.executor.grid import build_grid
from solar_compiler.executor.legality import check_distributable
from solar_compiler.executor.numeric import STORAGE, USER, fill_value, quantize
from solar_compiler.executor.statement import State, run_on_grid
from solar_compiler.executor.trace import IndirectTrace
from solar_compiler.loopir.affine import AffCond, AffExpr
from solar_compiler.loopir.ast import Assign, For, Kernel, LoopIRError, Node, statements, typecheck

if TYPE_CHECKING:
    from solar_compiler.executor.pieces import Piece

DEFAULT_BUDGET = 512 * 2**20


def execute(kernel: Kernel, inputs: Mapping[str, np.ndarray], *, budget: int = DEFAULT_BUDGET,
            pieces: Mapping[int, Sequence[Piece]] | None = None,
            trace: IndirectTrace | None = None) -> dict[str, np.ndarray]:
    """Run `kernel` on `inputs` (every input and weight tensor, by name) and return every output.

    Outputs and locals start as NaN (floats) or the most negative integer, so a missing
    initialisation shows in the result. bf16/f8 tensors are passed and returned as float32 arrays
    holding values of that format (inputs are rounded to it); f16 ones as float16 arrays. `trace`
    records the distinct elements each statement's indirect accesses touch, by the statement's
    position in program order (`executor/trace.py`).

    `pieces` (statement index in program order -> pieces, from `executor.slicing.backward_slice`)
    runs each statement only on its pieces (a statement without any is skipped): the backward slice
    of sampled output elements, which are then the only meaningful ones of the outputs."""
    kernel = typecheck(kernel)
    check_distributable(kernel)
    order = {id(c.stmt): c.index for c in statements(kernel)}
    with np.errstate(all="ignore"):
        state = State(_storage(kernel, inputs), {t.name: t for t in kernel.tensors}, budget)
        state.pieces = pieces
        state.order = None if pieces is None else order
        state.trace, state.index_of = trace, order
        _run(kernel.body, (), {}, (), state)
        return {t.name: state.tensors[t.name].astype(USER[t.dtype], copy=False)
                for t in kernel.by_role("output")}


def _storage(kernel: Kernel, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    wanted = {t.name: t for t in kernel.by_role("input", "weight")}
    for name in inputs:
        if name not in wanted:
            raise LoopIRError(f"'{name}' is not an input of kernel '{kernel.name}' "
                              f"(inputs: {', '.join(wanted) or 'none'})")
    out: dict[str, np.ndarray] = {}
    for t in kernel.tensors:
        if t.name not in wanted:
            out[t.name] = np.full(t.shape, fill_value(t.dtype), dtype=STORAGE[t.dtype])
            continue
        if t.name not in inputs:
            raise LoopIRError(f"missing input '{t.name}' of kernel '{kernel.name}'")
        a = inputs[t.name]
        if not isinstance(a, np.ndarray):
            raise LoopIRError(f"input '{t.name}' is a {type(a).__name__}, expected a numpy array")
        if a.shape != t.shape:
            raise LoopIRError(f"input '{t.name}' has shape {a.shape}, expected {t.shape}")
        if a.dtype != USER[t.dtype]:
            raise LoopIRError(f"input '{t.name}' has dtype {a.dtype}, expected {USER[t.dtype]} ({t.dtype})")
        out[t.name] = quantize(np.ascontiguousarray(a, dtype=STORAGE[t.dtype]), t.dtype)
    return out


def _run(nodes: Sequence[Node], loops: tuple[For, ...], scalars: dict[str, int],
         guards: tuple[AffCond, ...], state: State) -> None:
    for n in nodes:
        if isinstance(n, Assign) and state.pieces is not None:
            for p in state.pieces.get(state.order[id(n)], ()):
                box = {v: (lo, hi) for v, lo, hi in p.box}
                if any(not box[v][0] <= x <= box[v][1] for v, x in scalars.items() if v in box):
                    continue
                grid = build_grid(loops, scalars, guards + p.conds, box)
                if not grid.empty:
                    run_on_grid(n, grid, state)
        elif isinstance(n, Assign):
            grid = build_grid(loops, scalars, guards)
            if not grid.empty:
                run_on_grid(n, grid, state)
        elif isinstance(n, For) and not n.sequential:
            _run(n.body, loops + (n,), scalars, guards, state)
        elif isinstance(n, For):
            _scan(n, loops, scalars, guards, state)
        else:
            _run(n.body, loops, scalars, guards + n.conds, state)


def _scan(f: For, loops: tuple[For, ...], scalars: dict[str, int], guards: tuple[AffCond, ...],
          state: State) -> None:
    if not (f.lb.vars() | f.ub.vars()) - set(scalars):
        values = range(f.lb.evaluate(scalars), f.ub.evaluate(scalars), f.step)
        extra: tuple[AffCond, ...] = ()
    else:
        grid = build_grid(loops, scalars, guards)
        if grid.empty:
            return
        values = range(f.lb.bounds(grid.ranges)[0], f.ub.bounds(grid.ranges)[1])
        v = AffExpr.var(f.iv)
        extra = (AffCond.compare(v, ">=", f.lb), AffCond.compare(v, "<", f.ub))
        if f.step != 1:
            extra += (AffCond((v - f.lb) % f.step, "=="),)
    for x in values:
        _run(f.body, loops, {**scalars, f.iv: x}, guards + extra, state)
