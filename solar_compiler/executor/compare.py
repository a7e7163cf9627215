"""Does an executed kernel reproduce a reference? Dtype-aware tolerances on the relative norm error.

A float output passes when ||got - ref||_2 / ||ref||_2 <= tolerance(dtype) over the positions where
the reference is finite, and got is finite there too (a NaN from a never-written element is a
failure however small the norm error); where the reference is NaN or infinite, got must match it.
Integer and bool outputs must be equal. f8 tolerances follow from 2-3 mantissa bits.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from solar_compiler.loopir.ast import DTYPES, FLOAT_DTYPES, Kernel, LoopIRError

TOLERANCE = {"f64": 1e-10, "f32": 1e-4, "f16": 1e-2, "bf16": 1e-2, "f8e4m3": 1e-1, "f8e5m2": 1e-1}


@dataclass(frozen=True)
class Comparison:
    max_rel_err: float
    ok: bool
    first_mismatch: str | None  # `name[i, j]: got x, expected y (...)` of the first failing output


def output_dtypes(kernel: Kernel) -> dict[str, str]:
    return {t.name: t.dtype for t in kernel.by_role("output")}


def compare(reference: Mapping[str, np.ndarray], got: Mapping[str, np.ndarray],
            dtypes: Mapping[str, str], *, tolerances: Mapping[str, float] | None = None,
            positions: Mapping[str, np.ndarray] | None = None) -> Comparison:
    """Compare every output of `reference` with `got`; `dtypes` maps names to loop-IR dtypes.
    `tolerances` overrides the dtype's relative norm tolerance per output (one grown with the
    reduction length, frontends/torch/validation.py); `positions[name]` (rows of indices) says where
    each element of a 1-d sample of an output lies, for the message."""
    worst, first = 0.0, None
    for name, ref in reference.items():
        if name not in dtypes or dtypes[name] not in DTYPES:
            raise LoopIRError(f"no loop-IR dtype given for output '{name}'")
        tol = (tolerances or {}).get(name)
        pos = None if positions is None else positions.get(name)
        err, msg = _one(name, np.asarray(ref), got.get(name), dtypes[name], tol, pos)
        worst = max(worst, err)
        if msg is not None and first is None:
            first = msg
    return Comparison(worst, first is None, first)


def _at(name: str, shape: tuple[int, ...], flat: int, pos: np.ndarray | None = None) -> str:
    if pos is not None:
        return f"{name}[{', '.join(str(int(i)) for i in pos[flat])}]" if pos.shape[1] else name
    return f"{name}[{', '.join(str(int(i)) for i in np.unravel_index(flat, shape))}]" if shape else name


def _one(name: str, ref: np.ndarray, got: np.ndarray | None, dtype: str, tol: float | None = None,
         pos: np.ndarray | None = None) -> tuple[float, str | None]:
    if got is None:
        return math.inf, f"{name}: missing from the result"
    got = np.asarray(got)
    if got.shape != ref.shape:
        return math.inf, f"{name}: shape {got.shape}, expected {ref.shape}"
    if ref.size == 0:
        return 0.0, None
    r, x = ref.astype(np.float64).reshape(-1), got.astype(np.float64).reshape(-1)
    if dtype not in FLOAT_DTYPES:
        diff = np.flatnonzero(r != x)
        if not diff.size:
            return 0.0, None
        err = float(np.linalg.norm(x - r) / max(np.linalg.norm(r), 1.0))
        i = int(diff[0])
        return err, f"{_at(name, ref.shape, i, pos)}: got {got.reshape(-1)[i]}, expected {ref.reshape(-1)[i]}"
    fin = np.isfinite(r)
    same_special = (np.isnan(r) & np.isnan(x)) | (r == x)
    bad = np.flatnonzero((~fin & ~same_special) | (fin & ~np.isfinite(x)))
    if bad.size:
        i = int(bad[0])
        return math.inf, f"{_at(name, ref.shape, i, pos)}: got {x[i]}, expected {r[i]}"
    d, rf = x[fin] - r[fin], r[fin]
    ref_norm = float(np.linalg.norm(rf))
    err = float(np.linalg.norm(d)) / max(ref_norm, np.finfo(np.float64).tiny)
    tol = TOLERANCE[dtype] if tol is None else tol
    if err <= tol:
        return err, None
    finite = np.flatnonzero(fin)
    big = np.flatnonzero(np.abs(d) > tol * ref_norm / math.sqrt(rf.size))
    i = int(finite[big[0]] if big.size else finite[int(np.argmax(np.abs(d)))])
    return err, (f"{_at(name, ref.shape, i, pos)}: got {x[i]:.9g}, expected {r[i]:.9g} "
                 f"(relative norm error {err:.3g} > {tol:.3g} for {dtype})")
