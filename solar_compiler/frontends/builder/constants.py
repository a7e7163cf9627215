"""Constants created by the program, stored in the narrowest float dtype that holds their values.

A tensor created inside the traced function (`torch.tensor([...])`, a module-level table: the
capture's `const:` weights) has values the source fixes, so every implementation may embed them in
any encoding that reproduces them exactly. When each value is exact in a narrower float dtype the
constant is declared in it and widened where it is read: its bytes are those of the narrow encoding,
and the dtype analysis (`analysis/value_dtypes.py`) sees the narrow values through the widening cast.
The case that matters: a decode table of the sixteen e2m1 values (how a reference unpacks packed fp4
through a uint8 view) holds fp4 values, so the block-scaled GEMM it feeds is an fp4 GEMM, priced at
the FP4 tensor rate as Blackwell's NVFP4 kernels run it.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from solar_compiler.executor.numeric import quantize
from solar_compiler.loopir.ast import DTYPES, FLOAT_DTYPES, Index, Read, SExpr, TensorDecl

from ..captured_program import CapturedProgram
from .exprs import cast
from .translator import Translator
from .values import Val, fill

#: Float dtypes a constant may be stored in, narrowest first.
NARROWER = ("f4e2m1", "f8e4m3", "f8e5m2", "bf16", "f16", "f32")


def narrowest_exact(values: np.ndarray, dtype: str) -> str:
    """The narrowest float dtype (no wider than `dtype`) in which every one of `values` is exact."""
    v = np.asarray(values, dtype=np.float64)
    if dtype not in FLOAT_DTYPES or v.size == 0 or not np.isfinite(v).all():
        return dtype
    for d in NARROWER:
        if DTYPES[d] >= DTYPES[dtype]:
            break
        with np.errstate(over="ignore", invalid="ignore"):
            if np.array_equal(quantize(v.astype(np.float32), d).astype(np.float64), v):
                return d
    return dtype


def narrow_constants(tr: Translator, program: CapturedProgram) -> None:
    """Re-declare each `const:` weight of `program` (already bound by `bind_param`) in the narrowest
    dtype that holds its values, read through a widening cast (module doc); a note names each. A
    constant of one element (`torch.tensor(2.0)`, the value of `x[mask] = 3` as export lifts it) is
    read as its literal, as a kernel embeds it: the weight stays declared (validation feeds it) and
    is not read."""
    for meta in program.weights:
        values = program.constants.get(meta.name)
        if values is None:
            continue
        if values.size == 1 and np.isfinite(values).all():
            tr.env[meta.name] = fill(tuple(meta.shape), meta.dtype, values.reshape(-1)[0].item())
            continue
        narrow = narrowest_exact(values, meta.dtype)
        if narrow == meta.dtype:
            continue
        name = tr.inputs[meta.name]
        tr.tensors = [TensorDecl(t.name, t.shape, narrow, t.role) if t.name == name else t
                      for t in tr.tensors]
        tr.env[meta.name] = Val(tuple(meta.shape), meta.dtype, _widened(name, narrow, meta.dtype))
        tr.notes.append(f"constant {name} ({values.size} {meta.dtype} values) stored as {narrow}: "
                        f"every value is exact in it")


def _widened(name: str, narrow: str, wide: str) -> Callable[[tuple[Index, ...]], SExpr]:
    return lambda idx: cast(Read(name, idx, narrow), wide)
